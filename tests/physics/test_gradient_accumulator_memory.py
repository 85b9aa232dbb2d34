"""Gradients added to the fp32 buffer after backward (job.gradient_accumulator: after_backward), nanotron's path.

nanotron's FP32GradientAccumulator (src/nanotron/optim/gradient_accumulator.py @ c2528430) lets ``loss.backward()``
write a 16-bit ``.grad`` for every parameter of the stage and adds them into its fp32 buffer only when the backward
ends; without ZeRO and with DP > 1 the model runs under torch DDP (trainer.py ``make_ddp``), whose Reducer keeps a
16-bit bucket copy of every gradient unless ``gradient_as_bucket_view`` (PyTorch's DDP documentation: views into the
buckets save "the total gradients size").
"""

from __future__ import annotations

import pytest

from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.layout import Layout, Recompute, RunSettings
from optimizer.physics.memory import memory_breakdown
from optimizer.physics.memory_terms import after_backward_gradient_bytes
from optimizer.physics.shapes import ModelShape, TrainingState

GIB = 2.0**30
# nanotron's 8.86B (scripts/scaling_benchmarks.py: 32 layers, hidden 4096, 32 heads, MLP 14336, vocab 131072, untied)
PARAMS = 2 * 131072 * 4096 + 32 * (4 * 4096 * 4096 + 3 * 4096 * 14336)
SHAPE = ModelShape(
    params=float(PARAMS), active_params=float(PARAMS), layers=32.0, hidden=4096.0, heads=32.0, kv_width=4096.0,
    q_width=4096.0, ffn_active=14336.0, vocab=131072.0, gated_mlp=True, has_shapes=True,
)  # fmt: skip


def _train(accumulator: str) -> TrainingState:
    return TrainingState(float(PARAMS), 2.0, 0.0, 2.0, 12.0, gradient_accumulator=accumulator)


def test_the_16_bit_gradients_show_only_above_one_micro_batch_of_activations():
    zero1 = Layout(tp=1, pp=2, dp=32, zero=1, shard=32)
    assert float(after_backward_gradient_bytes(9.0 * GIB, 13.0 * GIB, zero1)) == 0.0
    assert float(after_backward_gradient_bytes(5.0 * GIB, 3.9 * GIB, zero1)) == pytest.approx(1.1 * GIB)


def test_ddp_keeps_a_bucket_copy_without_zero_and_with_data_parallelism():
    ddp = Layout(tp=4, pp=1, dp=128, zero=0)
    assert float(after_backward_gradient_bytes(4.0 * GIB, 12.0 * GIB, ddp)) == 4.0 * GIB
    # one data-parallel rank: nanotron builds no DDP
    assert float(after_backward_gradient_bytes(4.0 * GIB, 12.0 * GIB, Layout(tp=4, pp=16, dp=1, zero=0))) == 0.0


def test_the_8_86b_at_tp_4_on_512_gpus_holds_a_bucket_of_its_gradients():
    # the cell "8.86B x 64 nodes: DP 128, TP 4, PP 1, MBS 2, ZeRO-0": 2 bytes x 8.86B / 4 = 4.1 GiB of DDP buckets
    layout = Layout(tp=4, pp=1, dp=128, zero=0, micro_batch=2, grad_accum=1, recompute=Recompute.NONE)
    settings = RunSettings(seq_len=4096.0, reduce_per_grad_byte=2.0, grad_buffer=2.0)
    in_place = memory_breakdown(SHAPE, _train("in_place"), layout, settings, 80 * GIB)
    after = memory_breakdown(SHAPE, _train("after_backward"), layout, settings, 80 * GIB)
    added = float(after.gradients - in_place.gradients)
    assert added == pytest.approx(2.0 * PARAMS / 4)
    assert added / GIB == pytest.approx(4.1, abs=0.05)
    assert float(after.activations) == float(in_place.activations)


def test_the_job_field_defaults_to_in_place():
    job = {"model": "llama-3.1-8b", "tokens": "1B", "seq_len": 4096, "global_batch": 64}
    assert Problem.model_validate(expand_models({"job": job})).job.gradient_accumulator == "in_place"
    after = {**job, "gradient_accumulator": "after_backward"}
    assert Problem.model_validate(expand_models({"job": after})).job.gradient_accumulator == "after_backward"
