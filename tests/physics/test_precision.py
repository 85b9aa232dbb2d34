"""Low precision speeds up the GEMM kernels only (physics/precision.py), checked against published figures."""

import numpy as np
import pytest

from optimizer.inputs.hf_models import model_fields, presets
from optimizer.inputs.schema import ModelSpec
from optimizer.physics.constants import GEMM_CEILING_16BIT, LOW_PRECISION_GEMM_CEILING_RATIO
from optimizer.physics.precision import Split, cast_bytes_per_token, k_rate
from optimizer.planning.model_state import model_shape


def _shape(name: str):
    return model_shape(ModelSpec(**model_fields(presets()[name]["config"])))


def test_sixteen_bits_is_the_time_the_efficiency_was_fitted_on():
    split = Split.of(_shape("llama-3.1-70b"), np.array([1.0, 8.0]), np.array([0.5, 0.6]), 1.0)
    assert np.allclose(split.dense_factor, 1.0) and not split.low_precision.any()


def test_fp8_gemms_run_at_the_published_maximum_achievable_ratio():
    # The largest FP8 GEMM over the largest BF16 one, each against its own peak (stas00/ml-engineering
    # @ 7bc7c30, compute/accelerator/README.md): H100 1,402.6 / 794.5 TFLOPS = 1.77x; B200 3,432.5 / 1,745.0
    # = 1.97x. The shipped ratio lies between, for a GEMM of long K.
    assert 1402.6 / 794.5 < 2 * LOW_PRECISION_GEMM_CEILING_RATIO < 3432.5 / 1745.0
    assert 0.72 < GEMM_CEILING_16BIT < 0.84  # the BF16 maxima: GB200 72.9 % .. GH200 83.8 %


def test_narrow_models_gain_less_from_fp8_than_wide_ones():
    # A GEMM's fixed cost per tile is time, so at twice the rate it is worth twice the K steps (DeepGEMM's K
    # sweep): a model of hidden 4,096 gains less than one of 8,192, and tensor parallelism (shorter K in the
    # row-parallel GEMMs) less again.
    small, large = _shape("mistral-7b"), _shape("llama-3.1-70b")
    assert float(k_rate(small, 1.0, 362.5)) < float(k_rate(large, 1.0, 362.5)) < 1.0
    speed = lambda shape, tp: float(Split.of(shape, tp, 0.5, 2.0).dense_speedup)  # noqa: E731
    assert speed(small, 1.0) < speed(large, 1.0) < 2.0
    assert speed(large, 8.0) < speed(large, 1.0)


@pytest.mark.parametrize("efficiency", [0.40, 0.50, 0.566])
def test_fp8_speeds_up_the_linear_layers_within_the_published_range(efficiency):
    # NVIDIA's Megatron-Bridge performance guide: FP8 "typically 1.2-1.5x" over BF16; the whole linear time
    # gains less than the GEMMs' 1.8x, as the rest of it (element-wise kernels, gaps) runs as at 16 bits.
    split = Split.of(_shape("llama-3.1-70b"), 1.0, efficiency, 2.0)
    assert 1.2 < 1.0 / float(split.dense_factor) < 1.6


def test_casts_count_every_dense_gemm_operand_twice_in_four_bytes():
    # Llama 3.1 8B: h 4,096, q 4,096, K and V 1,024 each, f 14,336 gated; per layer inputs h + q + h + f and
    # output gradients (q + 2 kv) + h + 2 f + h, 4 bytes each, 32 layers.
    elements = (4096 + 4096 + 4096 + 14336) + (6144 + 4096 + 2 * 14336 + 4096)
    assert cast_bytes_per_token(_shape("llama-3.1-8b")) == pytest.approx(32 * 4 * elements)


def test_a_named_transformer_engine_framework_runs_at_the_fitted_fused_ratio():
    # physics/efficiency.py FITTED_FUSED_RATIO: a job that names Megatron (Transformer Engine's layers) on a GPU
    # with an FP8 rate is costed at 1.25x the eager efficiency; a check pinning Megatron on a framework-auto
    # question costs the layout as that question's solve did (so a plan re-checked by its strategy is the same).
    from optimizer import CheckRequest, check
    from optimizer.inputs.files import expand_models
    from optimizer.inputs.schema import Problem
    from optimizer.physics.efficiency import FITTED_FUSED_RATIO

    def job(framework: str) -> Problem:
        data = {"name": "70b", "model": "llama-3.1-70b", "method": "full", "tokens": "20B", "seq_len": 4096}
        return Problem.model_validate(expand_models({"job": data | {"global_batch": 256, "framework": framework}}))

    layout = dict(tp=4, pp=2, zero=1, micro_batch=1, compare=False)
    named = check(job("megatron"), CheckRequest("H100-SXM", 64, **layout)).plan
    pinned = check(job("auto"), CheckRequest("H100-SXM", 64, framework="megatron", **layout)).plan
    assert named.strategy.framework == pinned.strategy.framework == "megatron"
    assert FITTED_FUSED_RATIO == 1.25 and named.mfu / pinned.mfu == pytest.approx(1.25, rel=0.10)
    assert named.tokens_per_s > 1.15 * pinned.tokens_per_s


def test_fp8_gains_less_on_a_micro_batch_of_few_tokens():
    # The weight gradient reduces over the micro-batch's tokens (K = tokens), and its tiles' fixed cost is time: at
    # twice the rate it is worth twice the K steps (DeepGEMM's K sweep, GEMM_K_HALF_FP8 = 2 x GEMM_K_HALF_16BIT). At
    # the reference's 8,192 tokens nothing changes; at 2,048 (Transformer Engine's accelerate tutorial: 8 x 256)
    # FP8's weight gradient runs further from its many-token rate than BF16's, and the speed-up shrinks.
    from optimizer.physics.constants import GEMM_K_HALF_FP8
    from optimizer.physics.gemm import rows_factor

    shape = _shape("llama-3.1-8b")
    fp8, bf16 = Split.of(shape, 1.0, 0.5, 2.0), Split.of(shape, 1.0, 0.5, 1.0)

    def speedup(tokens: float) -> float:
        rate16 = rows_factor(shape, 1.0, tokens)
        low = rows_factor(shape, 1.0, tokens, k_half=GEMM_K_HALF_FP8)
        return float(bf16.dense_factor_at(rate16, rate16) / fp8.dense_factor_at(rate16, low))

    assert float(rows_factor(shape, 1.0, 8192.0, k_half=GEMM_K_HALF_FP8)) == pytest.approx(1.0)
    assert speedup(8192.0) == pytest.approx(1.0 / float(fp8.dense_factor))
    assert float(rows_factor(shape, 1.0, 2048.0, k_half=GEMM_K_HALF_FP8)) < float(rows_factor(shape, 1.0, 2048.0))
    assert 1.0 < speedup(2048.0) < speedup(8192.0)
