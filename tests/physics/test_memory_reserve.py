"""The framework reserve as the allocator and the device hold it (issue 49): the CUDA context and NCCL's buffers
outside PyTorch's caching allocator, fixed per GPU, plus the allocator's fragmentation, about one largest transient
tensor (the loss's logits), which does not grow with the GPU's capacity and which the allocator gives back (a cache
flush and retry) before a run fails: physics/memory.py ``allocator_fragmentation_bytes``, ``framework_reserve_bytes``."""

from __future__ import annotations

import numpy as np
import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models, load_catalog
from optimizer.inputs.schema import Problem
from optimizer.physics.constants import FRAMEWORK_RESERVE_FIXED_BYTES, FRAMEWORK_RESERVE_FRACTION, GIB
from optimizer.physics.layout import Layout, RunSettings
from optimizer.physics.memory import (
    allocator_fragmentation_bytes,
    framework_reserve_bytes,
    loss_largest_tensor_bytes_per_vocab,
)
from optimizer.planning.calibration import job_context

SHAPE = job_context(
    Problem.model_validate(expand_models({"catalog": "default", "job": {"model": "llama-3.1-8b", "tokens": "1B"}})),
    load_catalog("default"),
).shape


@pytest.mark.parametrize("loss_bytes, largest", [(12.0, 4.0), (6.0, 4.0), (4.0, 2.0), (2.0, 2.0), (0.0, 0.0)])
def test_the_largest_loss_tensor_is_an_fp32_copy_where_the_loss_upcasts_else_the_bf16_logits(loss_bytes, largest):
    assert float(loss_largest_tensor_bytes_per_vocab(loss_bytes)) == largest


def test_a_cross_entropy_on_the_bf16_logits_holds_no_fp32_tensor():
    # job.loss bf16 takes 6 bytes a logit as Megatron-Core's loss does, but as three bf16 tensors (log_softmax's output,
    # nll_loss's gradient, log_softmax backward's: tests/validation/test_loss_memory.py), not an fp32 copy and the logits
    assert float(loss_largest_tensor_bytes_per_vocab(6.0, upcast=False)) == 2.0
    assert float(loss_largest_tensor_bytes_per_vocab(6.0, upcast=True)) == 4.0
    settings = RunSettings(seq_len=8192, logits_bytes_per_vocab=6.0, loss_upcast=False)
    assert float(allocator_fragmentation_bytes(SHAPE, settings, Layout(micro_batch=2))) == pytest.approx(
        2 * 2 * 8192 * 128256
    )


def test_a_bf16_loss_job_reserves_one_bf16_logits_tensor_through_check():
    def reserve_gib(loss: str) -> float:
        job = {"model": "llama-3.1-8b", "tokens": "1B", "seq_len": 8192, "global_batch": 16, "loss": loss}
        problem = Problem.model_validate(expand_models({"catalog": "default", "job": job}))
        request = CheckRequest("H100", 8, compare=False, zero=3, micro_batch=2, recompute="full")
        return check(problem, request).plan.memory_gib.reserve

    # the 6-byte loss on the bf16 logits reserves half of what the upcast one does: 3.9 GiB less at batch 2 x 8,192
    gap = reserve_gib("standard") - reserve_gib("bf16")
    assert gap == pytest.approx(2 * 2 * 8192 * 128256 / GIB, rel=0.01)


def test_fragmentation_is_one_fp32_logits_tensor_per_gpu_split_by_tp_and_cp():
    settings = RunSettings(seq_len=8192, logits_bytes_per_vocab=12.0)
    one = float(allocator_fragmentation_bytes(SHAPE, settings, Layout(micro_batch=2)))
    assert one == pytest.approx(4 * 2 * 8192 * 128256)  # 7.8 GiB: torchtitan's 8B at local batch 2
    split = allocator_fragmentation_bytes(SHAPE, settings, Layout(micro_batch=2, tp=2, cp=4))
    assert float(split) == pytest.approx(one / 8)


def test_the_reserve_does_not_grow_with_capacity():
    fragmentation = 3.0 * GIB
    small, big = (float(framework_reserve_bytes("auto", c, fragmentation, 40 * GIB)) for c in (80 * GIB, 180 * GIB))
    assert small == big == pytest.approx(FRAMEWORK_RESERVE_FIXED_BYTES + fragmentation)
    # without shapes (no transient known) the old planning margin stays
    assert float(framework_reserve_bytes("auto", 80 * GIB)) == pytest.approx(
        FRAMEWORK_RESERVE_FIXED_BYTES + FRAMEWORK_RESERVE_FRACTION * 80 * GIB
    )


def test_the_allocator_gives_its_cache_back_before_a_run_fails():
    # fragmentation takes at most what the allocated peak and the fixed part leave of the GPU
    capacity, allocated = 89.4 * GIB, 74.0 * GIB
    reserve = framework_reserve_bytes("auto", capacity, 15.7 * GIB, allocated)
    assert float(allocated + reserve) == pytest.approx(capacity)
    over = framework_reserve_bytes("auto", np.array([capacity]), 15.7 * GIB, 90.0 * GIB)
    assert float(over[0]) == pytest.approx(FRAMEWORK_RESERVE_FIXED_BYTES)


def test_a_size_or_a_share_is_taken_as_is():
    assert float(framework_reserve_bytes(4.0 * GIB, 80 * GIB, 1.0 * GIB)) == pytest.approx(4.0 * GIB)
    assert float(framework_reserve_bytes(0.1, 80 * GIB, 1.0 * GIB)) == pytest.approx(8.0 * GIB)
