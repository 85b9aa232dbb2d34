"""LoRA's branch traffic by adapter dtype and dropout (physics/adapters.py), against PyTorch's own ops: PEFT's
``lora.Linear.forward`` (huggingface/peft src/peft/tuners/lora/layer.py @ v0.14.0 and 5d602fd) run eagerly, forward
and backward, under a dispatch mode that adds up the bytes each ATen op reads and writes (views read nothing). The
branch is the difference between the adapted linear and its base layer alone. Dropout takes the op CUDA runs
(aten/src/ATen/native/Dropout.cpp: ``dropout`` calls ``at::native_dropout`` where ``is_fused_kernel_acceptable``, a
CUDA tensor in training with 0 < p < 1): one kernel writing the output and a bool mask, its backward one reading
both. The torch tests skip where torch is not installed; the rule that picks the dtype needs none."""

from __future__ import annotations

from dataclasses import replace

import pytest

from optimizer import CheckRequest
from optimizer.inputs.files import expand_models, problem_catalog
from optimizer.inputs.schema import Problem
from optimizer.physics.adapters import (
    ACTIVATION_BYTES,
    FP32_ADAPTER_BYTES,
    adapted_widths,
    branch_bytes_per_element,
    lora_bytes_per_token,
)
from optimizer.planning.check import Fixed, check_row
from optimizer.planning.context import build_context
from optimizer.planning.model_state import lora_adapter_element_bytes, model_shape, training_state

TOKENS, RANK = 4096, 1  # the rank-sized terms (r x width) vanish against tokens x width


def _traced_bytes(width_in: int, width_out: int, adapter_bytes: float, dropout: bool, branch: bool) -> int:
    """Bytes every ATen op of one adapted linear's forward and backward reads and writes, PEFT's ops as written."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    aten = torch.ops.aten
    views = {aten.view.default, aten._unsafe_view.default, aten.t.default, aten.transpose.int, aten.expand.default}
    views |= {aten.detach.default, aten.alias.default, aten.permute.default, aten.as_strided.default}

    class Traffic(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func not in views:
                tensors = [t for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
                self.total += sum(t.numel() * t.element_size() for t in tensors)
            return out

    adapter_dtype = torch.float32 if adapter_bytes == FP32_ADAPTER_BYTES else torch.bfloat16
    torch.manual_seed(0)
    weight = torch.randn(width_out, width_in, dtype=torch.bfloat16)  # frozen base weight
    lora_a = torch.randn(RANK, width_in, dtype=adapter_dtype, requires_grad=True)
    lora_b = torch.randn(width_out, RANK, dtype=adapter_dtype, requires_grad=True)
    x = torch.randn(TOKENS, width_in, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(TOKENS, width_out, dtype=torch.bfloat16)
    mode = Traffic()
    with mode:
        result = F.linear(x, weight)
        if branch:
            torch_result_dtype = result.dtype
            xa = x.to(adapter_dtype)  # self._cast_input_dtype(x, lora_A.weight.dtype)
            dropped = torch.native_dropout(xa, 0.05, True)[0] if dropout else xa
            result = result + F.linear(F.linear(dropped, lora_a), lora_b) * 2.0  # lora_B(lora_A(dropout(x))) * scaling
            result = result.to(torch_result_dtype)
        result.backward(grad)
    return mode.total


def _per_element(adapter_bytes: float, dropout: bool) -> tuple[float, float]:
    """(bytes per token and input element, per token and output element) of the branch, traced."""

    def branch(width_in: int, width_out: int) -> int:
        with_branch = _traced_bytes(width_in, width_out, adapter_bytes, dropout, True)
        return with_branch - _traced_bytes(width_in, width_out, adapter_bytes, dropout, False)

    base = branch(64, 64)
    return (branch(128, 64) - base) / (64 * TOKENS), (branch(64, 128) - base) / (64 * TOKENS)


@pytest.mark.parametrize(
    "adapter_bytes, dropout",
    [(ACTIVATION_BYTES, False), (FP32_ADAPTER_BYTES, False), (FP32_ADAPTER_BYTES, True), (ACTIVATION_BYTES, True)],
)
def test_the_branch_bytes_are_what_torch_runs_for_peft_lora(adapter_bytes, dropout):
    forward_in, forward_out, backward_in, backward_out = branch_bytes_per_element(adapter_bytes, dropout)
    traced_in, traced_out = _per_element(adapter_bytes, dropout)
    # the rank-1 adapters' own reads and writes are a few bytes in 4,096 tokens x 64 elements
    assert traced_in == pytest.approx(forward_in + backward_in, abs=0.01)
    assert traced_out == pytest.approx(forward_out + backward_out, abs=0.01)


def test_sixteen_bit_adapters_keep_the_earlier_count_and_fp32_ones_add_the_casts():
    # 16-bit, no dropout: forward in + 6 out, backward 5 in + 4 out 16-bit elements (the count before fp32 adapters)
    assert branch_bytes_per_element() == (2.0, 12.0, 10.0, 8.0)
    # fp32: the input cast (2 + 4) before lora_A's fp32 read (4); the fp32 output, scaling and promoted sum
    # (4 + 8 + 2 + 4 + 4) and the cast back (4 + 2)
    forward_in, forward_out, _, _ = branch_bytes_per_element(FP32_ADAPTER_BYTES)
    assert (forward_in, forward_out) == (6.0 + 4.0, 22.0 + 6.0)


def _job(**job) -> Problem:
    data = {"catalog": "default", "job": {"name": "j", "model": "llama-3.1-8b", "tokens": "1B", **job}}
    return Problem.model_validate(expand_models(data))


def test_a_full_recompute_runs_the_forward_twice():
    shape = model_shape(_job(method="lora").job.model)
    inputs, outputs = adapted_widths(shape, "all_linear")
    forward_in, forward_out, backward_in, backward_out = branch_bytes_per_element(FP32_ADAPTER_BYTES)
    expected = shape.layers * ((2 * forward_in + backward_in) * inputs + (2 * forward_out + backward_out) * outputs)
    assert float(lora_bytes_per_token(shape, "all_linear", 1.0, FP32_ADAPTER_BYTES)) == pytest.approx(expected)
    assert float(lora_bytes_per_token(shape, "", 1.0, FP32_ADAPTER_BYTES)) == 0.0


@pytest.mark.parametrize(
    "job, adapter_bytes",
    [
        # a bf16 model under PEFT without autocast (universal-llm-trainer, PEFT's method comparison suite)
        ({"method": "lora", "framework": "fsdp", "kernels": "eager", "master_weights": False}, FP32_ADAPTER_BYTES),
        ({"method": "qlora", "framework": "deepspeed", "kernels": "eager", "master_weights": False}, 4.0),
        ({"method": "lora", "kernels": "eager", "master_weights": False}, FP32_ADAPTER_BYTES),  # framework auto
        # torchtune's LoRALinear (kernels fused in its rows), autocast over fp32 weights, Megatron, full fine-tuning
        ({"method": "lora", "framework": "fsdp", "kernels": "fused", "master_weights": False}, ACTIVATION_BYTES),
        ({"method": "lora", "framework": "fsdp", "kernels": "eager"}, ACTIVATION_BYTES),
        ({"method": "lora", "framework": "megatron", "kernels": "eager", "master_weights": False}, ACTIVATION_BYTES),
        ({"method": "full", "framework": "fsdp", "kernels": "eager", "master_weights": False}, ACTIVATION_BYTES),
    ],
)
def test_peft_fp32_adapters_where_a_16_bit_model_trains_without_autocast(job, adapter_bytes):
    assert lora_adapter_element_bytes(_job(**job).job) == adapter_bytes


def test_a_stated_dtype_or_dropout_overrides_the_rule_and_reaches_the_step_time():
    # torchtune's shape of job (kernels fused, pure bf16): the rule gives 16-bit adapters; a user who runs PEFT's
    # fp32 ones with LoRA dropout says so (training_state's lora_adapter_dtype and lora_dropout)
    problem = _job(method="lora", framework="fsdp", kernels="fused", master_weights=False, seq_len=4096)
    ctx = build_context(problem, problem_catalog(problem))
    fixed = Fixed.of(CheckRequest("H100-SXM", 1, micro_batch=1, recompute="none", compare=False))

    def adapters_s(**stated) -> float:
        train = training_state(problem.job, ctx.shape, True, **stated)
        plan = check_row(replace(ctx, train=train), "H100-SXM", 1, None, False, fixed).plan
        return plan.time_breakdown_s["adapters"]

    assert training_state(problem.job, ctx.shape).lora_adapter_bytes == ACTIVATION_BYTES
    peft = _job(method="lora", framework="fsdp", kernels="eager", master_weights=False).job
    assert training_state(peft, ctx.shape, lora_adapter_dtype="bf16").lora_adapter_bytes == ACTIVATION_BYTES
    sixteen, fp32 = adapters_s(), adapters_s(lora_adapter_dtype="fp32")
    dropped = adapters_s(lora_adapter_dtype="fp32", lora_dropout=0.05)

    def per_token(adapter_bytes: float, dropout: bool) -> float:
        return float(lora_bytes_per_token(ctx.shape, "all_linear", 0.0, adapter_bytes, dropout))

    assert fp32 / sixteen == pytest.approx(per_token(4.0, False) / per_token(2.0, False), rel=1e-9)
    assert dropped / sixteen == pytest.approx(per_token(4.0, True) / per_token(2.0, False), rel=1e-9)
    assert adapters_s(lora_dropout=0.0) == sixteen


def test_the_job_states_its_lora_dropout_and_adapter_dtype_and_check_costs_them():
    # job.lora_dropout and job.lora_adapter_dtype, as a user writes them, reach the step's adapter kernels
    def adapters_s(**job) -> float:
        problem = _job(method="lora", framework="fsdp", kernels="fused", master_weights=False, seq_len=4096, **job)
        ctx = build_context(problem, problem_catalog(problem))
        fixed = Fixed.of(CheckRequest("H100-SXM", 1, micro_batch=1, recompute="none", compare=False))
        return check_row(ctx, "H100-SXM", 1, None, False, fixed).plan.time_breakdown_s["adapters"]

    plain = adapters_s()
    assert adapters_s(lora_dropout=0.05) > plain
    assert adapters_s(lora_adapter_dtype="fp32") > plain
    assert adapters_s(lora_adapter_dtype="bf16") == plain
    with pytest.raises(ValueError):
        _job(method="lora", lora_dropout=1.5)
