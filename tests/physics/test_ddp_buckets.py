"""torch DDP's gradient buckets (physics/memory_terms.py ddp_bucket_bytes): without ZeRO on more than one GPU the
PyTorch stacks replicate through DistributedDataParallel, whose Reducer keeps its buckets beside the gradients unless
gradient_as_bucket_view=True ("the saved memory size will be equal to the total gradients size", torch's
documentation): one more copy of the gradients. Megatron-Core's contiguous gradient buffer is the gradients' own
storage, and one GPU has no Reducer."""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem

GIB = 2**30


def _gradients_gib(framework: str, gpus: int, zero: int, gradient_dtype: str = "bf16") -> float:
    job = {"name": "ddp", "model": "llama-3.1-8b", "method": "full", "tokens": "1B", "framework": framework}
    data = {"job": {**job, "gradient_dtype": gradient_dtype}}
    problem = Problem.model_validate(expand_models(data))
    request = CheckRequest("H100", gpus, tp=1, pp=1, zero=zero, micro_batch=1, recompute="full", compare=False)
    return check(problem, request).plan.memory_gib.gradients


def test_ddp_holds_a_second_copy_of_the_gradients():
    one = _gradients_gib("fsdp", 1, 0)
    # Llama 3.1 8B's 8,030,261,248 bf16 gradients: 14.96 GiB, and as much again in DDP's buckets on 8 GPUs
    assert one * GIB == pytest.approx(8_030_261_248 * 2)
    assert _gradients_gib("fsdp", 8, 0) == pytest.approx(2 * one)


def test_ddp_buckets_hold_the_gradients_in_their_reduce_dtype():
    # the Reducer's buckets take the gradients' dtype (reducer.cpp initialize_buckets): fp32 under autocast over
    # fp32 parameters (job.gradient_dtype auto with fp32 master weights, accelerate's DDP): 4 bytes a parameter beside
    # the 2 counted as bf16 gradients (the parameters' fp32 gradients and AdamW's moments are mixed precision's 16)
    one = _gradients_gib("fsdp", 1, 0)
    assert _gradients_gib("fsdp", 8, 0, "auto") == pytest.approx(3 * one)
    assert _gradients_gib("fsdp", 8, 0, "fp32") == pytest.approx(3 * one)


def test_megatron_and_sharded_layouts_hold_no_bucket_copy():
    one = _gradients_gib("fsdp", 1, 0)
    assert _gradients_gib("megatron", 8, 0) == pytest.approx(one)  # the grad buffer is the storage
    assert _gradients_gib("fsdp", 8, 2) == pytest.approx(one / 8)  # sharded gradients: no DDP
