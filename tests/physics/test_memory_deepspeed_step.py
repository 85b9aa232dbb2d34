"""DeepSpeed ZeRO-2's gradients over a step (physics/deepspeed_memory.py): its 16-bit gradient partition is made in
backward and dropped by the step, its fp32 partition made and dropped inside the step (deepspeedai/DeepSpeed @
v0.14.2 deepspeed/runtime/zero/stage_1_and_2.py), so neither is allocated beside a forward's activations after a
step; under accumulation the 16-bit partition is. DeepSpeed's estimators' model states (state_bytes) are unchanged:
tests/validation/test_deepspeed_estimator.py."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models, load_catalog
from optimizer.inputs.schema import Problem
from optimizer.physics.deepspeed_memory import (
    DEEPSPEED_STEP_FLAT_COPY_PER_FP32_BYTE,
    deepspeed_frees_gradients,
    deepspeed_step_fp32_grad_bytes,
    deepspeed_step_temporary_bytes,
)
from optimizer.physics.layout import Layout, Offload

GPUS = 4


def _memory(zero: int, grad_accum: int, offload: str = "none"):
    job = {
        "model": "llama-3.1-8b",
        "tokens": "10M",
        "seq_len": 2048,
        "global_batch": GPUS * 2 * grad_accum,
        "framework": "deepspeed",
        "optimizer_implementation": "fused",
        "offload": offload,
    }
    problem = Problem.model_validate(expand_models({"job": job}))
    request = CheckRequest("H100-SXM", GPUS, compare=False, zero=zero, micro_batch=2, grad_accum=grad_accum)
    result = check(problem, request, catalog=load_catalog("default"))
    return result.plan.memory_gib, result


def test_zero2_keeps_the_16_bit_partition_as_gradients_and_the_fp32_one_in_the_step():
    m, _ = _memory(zero=2, grad_accum=1)
    assert m.gradients > 0.5  # GiB: 8B parameters x 2 bytes / 4 ranks = 3.7
    # 2 bytes a parameter over 4 ranks as gradients; the step adds the fp32 partition (4) and its bf16 flat copy (2)
    assert m.optimizer_step == pytest.approx(m.gradients * (2.0 + 2.0 * DEEPSPEED_STEP_FLAT_COPY_PER_FP32_BYTE))
    # the estimators' 2 + 4 bytes of gradients a parameter are still the step's: gradients + fp32 partition
    assert m.gradients + m.optimizer_step / (1.0 + DEEPSPEED_STEP_FLAT_COPY_PER_FP32_BYTE) == pytest.approx(
        3.0 * m.gradients
    )


def test_zero2_after_a_step_holds_no_gradient_beside_the_activations():
    m, _ = _memory(zero=2, grad_accum=1)
    # the allocated peak: weights and state, then the larger of the activations and the step's gradients
    allocated = m.weights + m.gradients + m.optimizer + m.activations + m.optimizer_step - m.not_concurrent
    expected = m.weights + m.optimizer + max(m.activations, m.gradients + m.optimizer_step)
    assert allocated == pytest.approx(expected)


def test_zero2_under_accumulation_keeps_the_16_bit_partition_through_the_forward():
    m, _ = _memory(zero=2, grad_accum=2)
    allocated = m.weights + m.gradients + m.optimizer + m.activations + m.optimizer_step - m.not_concurrent
    expected = m.weights + m.optimizer + m.gradients + max(m.activations, m.optimizer_step)
    assert allocated == pytest.approx(expected)


def test_zero3_and_offload_keep_their_gradients():
    z3, _ = _memory(zero=3, grad_accum=1)
    assert z3.optimizer_step == pytest.approx(0.0, abs=1e-9)  # fused AdamW: no temporaries; stage3's buffer stays
    offloaded, _ = _memory(zero=2, grad_accum=1, offload="optimizer")
    assert offloaded.gradients == pytest.approx(0.0, abs=1e-9) and offloaded.optimizer_step == pytest.approx(
        0.0, abs=1e-9
    )


def test_the_step_partition_is_zero_off_deepspeed_zero2():
    grads, plain = np.array([6.0, 6.0, 6.0, 6.0, 6.0]), np.array([2.0, 2.0, 2.0, 2.0, 2.0])
    layout = Layout(zero=np.array([2, 2, 3, 1, 2]), offload=np.array([Offload.NONE] * 4 + [Offload.OPTIMIZER]))
    deepspeed = np.array([True, False, True, True, True])
    assert deepspeed_step_fp32_grad_bytes(grads, plain, layout, deepspeed).tolist() == [4.0, 0.0, 0.0, 0.0, 0.0]
    assert deepspeed_step_temporary_bytes(4.0) == pytest.approx(6.0)
    frees = deepspeed_frees_gradients(layout, deepspeed, np.array([False, True, False, False, False]))
    assert frees.tolist() == [True, True, False, False, True]
