"""The loss's kernels as HBM traffic (physics/loss_time.py): each loss's bytes per logit, where they land in the step,
and why they matter for a small model with a large vocabulary (Qwen2.5-0.5B: 151,936 logits a token against a hidden
width of 896)."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.constants import CAST_HBM_EFFICIENCY
from optimizer.physics.layout import Layout, RunSettings
from optimizer.physics.loss_time import LOSS_TRAFFIC_BYTES_PER_LOGIT, loss_s
from optimizer.physics.shapes import ModelShape
from optimizer.planning.frameworks import CODES
from optimizer.planning.labels import loss_traffic_bytes_per_logit

# Qwen/Qwen2.5-0.5B config.json: hidden 896, 24 layers, 14 heads (2 KV), intermediate 4864, vocab 151,936, tied
QWEN_05B = {
    "params": 494032768,
    "layers": 24,
    "hidden": 896,
    "heads": 14,
    "kv_heads": 2,
    "ffn_hidden": 4864,
    "vocab": 151936,
    "tied_embeddings": True,
}
JOB = {"model": QWEN_05B, "tokens": "1B", "seq_len": 4096, "global_batch": 8, "framework": "fsdp"}
ONE_H100 = CheckRequest("H100-SXM", 1, tp=1, pp=1, zero=0, micro_batch=8, recompute="none", framework="fsdp")


def _plan(**job):
    problem = Problem.model_validate(expand_models({"catalog": "default", "job": {**JOB, **job}}))
    return check(problem, ONE_H100).plan


def test_the_loss_reads_and_writes_its_bytes_once_a_micro_batch_over_the_logits_a_rank_holds():
    shape = ModelShape(params=1e9, active_params=1e9, layers=16, hidden=2048, vocab=128256.0, has_shapes=True)
    hbm = 3.35e12
    layout = Layout(tp=np.array([2]), micro_batch=np.array([4]), cp=np.array([2]))
    standard = RunSettings(seq_len=4096.0, loss_traffic_bytes_per_logit=LOSS_TRAFFIC_BYTES_PER_LOGIT["standard"])
    # 4 sequences of 4,096 tokens split over CP 2, the vocabulary over TP 2 (vocabulary-parallel)
    expected = (4 * 4096 / 2) * (128256 / 2) * 48.0 / (hbm * CAST_HBM_EFFICIENCY)
    assert float(loss_s(shape, hbm, layout, standard)[0]) == pytest.approx(expected)
    # on whole-vocabulary logits (loss_parallel false) every TP rank runs the loss over all of them
    whole = RunSettings(seq_len=4096.0, loss_traffic_bytes_per_logit=48.0, loss_parallel=False)
    assert float(loss_s(shape, hbm, layout, whole)[0]) == pytest.approx(2 * expected)


def test_the_upcast_loss_moves_eight_times_a_fused_ones_bytes_and_megatron_fuses_its_chunked_loss():
    bytes_of = LOSS_TRAFFIC_BYTES_PER_LOGIT
    assert bytes_of["standard"] == bytes_of["chunked"] == 48.0  # torchtune's chunks upcast as the whole does
    assert bytes_of["standard"] > bytes_of["bf16"] > bytes_of["flash"] == bytes_of["fused"]
    codes = np.array([CODES["fsdp"], CODES["megatron"]])
    fsdp, megatron = loss_traffic_bytes_per_logit(codes, "chunked", "auto")
    assert (fsdp, megatron) == (48.0, 6.0)  # Transformer Engine's fused cross-entropy under Megatron-Core
    # under torch.compile Inductor fuses the upcast, log-softmax and gather into one pass over the bf16 logits; a
    # Megatron-Core layout runs Transformer Engine's layers and its own loss uncompiled
    assert list(loss_traffic_bytes_per_logit(codes, "standard", "auto", compiled=True)) == [6.0, 48.0]


def test_a_small_model_with_a_large_vocabulary_spends_a_visible_share_of_its_step_on_the_loss():
    standard, fused = _plan(loss="standard"), _plan(loss="fused")
    share = standard.time_breakdown_s["loss"] / standard.step_s
    assert 0.10 < share < 0.5  # 151,936 fp32 log-softmax entries a token against 0.5B parameters' matmuls
    # the fused loss moves 6 of the standard's 48 bytes a logit; the rest of the step is the same
    assert fused.time_breakdown_s["loss"] == pytest.approx(standard.time_breakdown_s["loss"] * 6.0 / 48.0)
    saved = standard.time_breakdown_s["loss"] - fused.time_breakdown_s["loss"]
    assert standard.step_s - fused.step_s == pytest.approx(saved, rel=1e-6)
    # compiled, the standard loss runs as the fused pass does
    compiled = _plan(loss="standard", compile=True)
    assert compiled.time_breakdown_s["loss"] == pytest.approx(fused.time_breakdown_s["loss"])
