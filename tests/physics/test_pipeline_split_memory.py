"""Pipeline stages divided by compute (job.pipeline_split: compute; physics/memory_terms.py), nanotron's rule.

nanotron's ``build_model`` (src/nanotron/models/base.py @ c2528430, the commit of its scaling benchmarks) walks the
pipeline blocks in order, puts each on the current rank and moves to the next rank once the cumulative cost passes
(rank + 1) / pp of the total; ``get_block_compute_costs`` (src/nanotron/models/llama.py) weighs a decoder layer
4 x heads x d_qkv x h + 3 x d_ff x h and the LM head V x h, every other block 0. The test replays that loop block by
block and checks the closed form against it on the benchmark's four shapes (scripts/scaling_benchmarks.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.layout import Layout, Recompute, RunSettings
from optimizer.physics.memory import activation_bytes, stage_layer_counts, state_bytes
from optimizer.physics.memory_terms import compute_split_stage_layers, compute_split_stage_share
from optimizer.physics.shapes import ModelShape, TrainingState

# scripts/scaling_benchmarks.py model_configs (layers, hidden, heads, intermediate), vocabulary 131072, MHA
NANOTRON = {"1b": (16, 2048, 32, 8192), "3b": (28, 3072, 32, 8192), "8b": (32, 4096, 32, 14336)}
NANOTRON |= {"80b": (80, 8192, 64, 28672)}
VOCAB = 131072


def _shape(layers: int, hidden: int, heads: int, ffn: int) -> ModelShape:
    tied = ffn < 10_000  # the script ties the embeddings below an intermediate size of 10,000
    params = (1 if tied else 2) * VOCAB * hidden + layers * (4 * hidden * hidden + 3 * hidden * ffn)
    return ModelShape(
        params=float(params), active_params=float(params), layers=float(layers), hidden=float(hidden),
        heads=float(heads), kv_width=float(hidden), q_width=float(hidden), ffn_active=float(ffn), vocab=float(VOCAB),
        gated_mlp=True, has_shapes=True, tied_embeddings=tied,
    )  # fmt: skip


def _nanotron_layers_per_rank(layers: int, hidden: int, heads: int, ffn: int, pp: int) -> list[int]:
    """nanotron's build_model loop, block by block: embedding, decoder layers, final norm, LM head, fp32 cast, loss."""
    d_qkv = hidden // heads
    layer_cost = 4 * heads * d_qkv * hidden + 3 * ffn * hidden
    blocks = [("embedding", 0)] + [("layer", layer_cost)] * layers
    blocks += [("final_norm", 0), ("lm_head", VOCAB * hidden), ("cast", 0), ("loss", 0)]
    cumulative = np.cumsum([cost for _, cost in blocks])
    thresholds = [cumulative[-1] * ((rank + 1) / pp) for rank in range(pp)]
    per_rank = [0] * pp
    rank = 0
    for (kind, _), total in zip(blocks, cumulative, strict=True):
        per_rank[rank] += kind == "layer"
        if total > thresholds[rank]:
            rank += 1
    return per_rank


@pytest.mark.parametrize(
    ("name", "pp"), [(n, pp) for n in sorted(NANOTRON) for pp in (2, 4, 8, 16, 32) if pp <= NANOTRON[n][0]]
)
def test_the_closed_form_is_nanotrons_loop(name: str, pp: int):
    config = NANOTRON[name]
    per_rank = _nanotron_layers_per_rank(*config, pp)
    first, last = compute_split_stage_layers(_shape(*config), pp)
    assert (float(first), float(last)) == (per_rank[0], per_rank[-1])
    assert per_rank[0] == max(per_rank)  # the first stage is the one that takes more than L / pp


def test_the_first_stage_of_the_small_models_takes_more_layers():
    # 1.34B at PP 2: 11 and 5 layers (the LM head weighs V h = 4 layers); 8.86B at PP 2 and 4: 18 and 9
    assert [float(x) for x in compute_split_stage_layers(_shape(*NANOTRON["1b"]), 2)] == [11.0, 5.0]
    assert float(compute_split_stage_layers(_shape(*NANOTRON["8b"]), 2)[0]) == 18.0
    assert float(compute_split_stage_layers(_shape(*NANOTRON["8b"]), 4)[0]) == 9.0
    # one stage holds everything
    assert [float(x) for x in compute_split_stage_layers(_shape(*NANOTRON["8b"]), 1)] == [32.0, 32.0]


def test_the_heaviest_stage_holds_its_blocks_and_the_embedding():
    shape = _shape(*NANOTRON["1b"])
    block = (shape.params - shape.embedding_params) / shape.layers
    share = float(compute_split_stage_share(shape, 2))
    assert share * shape.params == pytest.approx(11 * block + VOCAB * 2048)
    assert float(compute_split_stage_share(shape, 1)) == 1.0


def test_state_and_activations_follow_the_split_and_layers_is_the_default():
    shape = _shape(*NANOTRON["1b"])
    layout = Layout(pp=2, dp=8, zero=1, shard=8, micro_batch=1, grad_accum=8, recompute=Recompute.NONE)
    settings = RunSettings(seq_len=4096.0)
    even = TrainingState(shape.params, 2.0, 0.0, 2.0, 12.0)
    by_compute = TrainingState(shape.params, 2.0, 0.0, 2.0, 12.0, pipeline_split="compute")
    assert [float(x) for x in stage_layer_counts(shape, layout)] == [8.0, 8.0]
    assert [float(x) for x in stage_layer_counts(shape, layout, "compute")] == [11.0, 5.0]
    w_even, w_compute = state_bytes(shape, even, layout)[0], state_bytes(shape, by_compute, layout)[0]
    assert float(w_compute) / float(w_even) == pytest.approx(
        (11 * 67_108_864 + VOCAB * 2048) / (8 * 67_108_864 + VOCAB * 2048), rel=1e-3
    )
    # the first stage holds 11 layers for its 2 micro-batches in flight where the even split holds 8
    first_even = float(activation_bytes(shape, settings, layout))
    first_compute = float(activation_bytes(shape, settings, layout, "compute"))
    assert first_compute > first_even
    # interleaved chunks keep the even split
    interleaved = Layout(pp=2, virtual_stages=2, micro_batch=1, grad_accum=8)
    assert [float(x) for x in stage_layer_counts(shape, interleaved, "compute")] == [8.0, 8.0]


def test_the_job_field_defaults_to_layers():
    job = {"model": "llama-3.1-8b", "tokens": "1B", "seq_len": 4096, "global_batch": 64}
    assert Problem.model_validate(expand_models({"job": job})).job.pipeline_split == "layers"
    split = Problem.model_validate(expand_models({"job": {**job, "pipeline_split": "compute"}})).job.pipeline_split
    assert split == "compute"
