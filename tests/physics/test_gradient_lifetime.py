"""When the gradients are allocated (physics/memory_terms.py not_concurrent_bytes): a PyTorch loop frees them after
each optimizer step (``zero_grad()``, ``set_to_none=True`` by default since PyTorch 2.0), so a step without
accumulation reaches its forward peak (the activations and the loss's tensors) with none, and the optimizer step
holds them with its temporaries (foreach AdamW's denominator) once the activations are gone. The peak is the larger
of the two, not their sum. Megatron-Core's gradient buffer and accumulated gradients live through the forward.

The independent figure: fms-acceleration's full fine-tunes of Mistral 7B under the Hugging Face Trainer on one
A100 80GB (validation/unseen_families_5.yaml, torch.cuda.max_memory_allocated) peak at 67.46 GiB at batch 4 and at
batch 8 alike, 5 x the 16-bit parameter bytes: weights, gradients, two bf16 moments and the denominator."""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem

GIB = 2**30


def _memory(framework="fsdp", micro_batch=4, grad_accum=1, implementation="foreach", gpu="A100-80GB"):
    job = {
        "name": "lifetime",
        "model": "mistral-7b",
        "method": "full",
        "tokens": "1B",
        "seq_len": 4096,
        "global_batch": micro_batch * grad_accum,
        "framework": framework,
        "master_weights": False,
        "optimizer_implementation": implementation,
    }
    problem = Problem.model_validate(expand_models({"job": job}))
    request = CheckRequest(gpu, 1, tp=1, pp=1, zero=0, micro_batch=micro_batch, recompute="full", compare=False)
    return check(problem, request).plan


def _allocated_gib(m) -> float:
    return m.weights + m.gradients + m.optimizer + m.activations + m.optimizer_step - m.not_concurrent


def test_a_trainer_full_fine_tune_peaks_at_its_optimizer_step():
    plan = _memory()
    m = plan.memory_gib
    bf16_gib = m.weights  # the bundled Mistral 7B (v0.3, 7.25B; the published runs trained v0.1's 7.24B) in bf16
    assert m.optimizer_step == pytest.approx(bf16_gib)  # foreach's denominator, in the moments' bf16
    # the step's peak, weights + gradients + two moments + the denominator: 5 x 2 bytes a parameter
    assert _allocated_gib(m) == pytest.approx(5 * bf16_gib, rel=0.01)
    assert _allocated_gib(m) == pytest.approx(67.46, rel=0.02)  # fms-acceleration's published peak
    assert m.total == pytest.approx(_allocated_gib(m) + m.reserve)
    # batch 8: more activations, the same step: the published 67.46 GiB again, and it fits as it ran
    eight = _memory(micro_batch=8)
    assert _allocated_gib(eight.memory_gib) == pytest.approx(67.46, rel=0.02)
    assert eight.fits


def test_accumulated_or_persistent_gradients_live_through_the_forward():
    freed = _memory(implementation="fused").memory_gib
    accumulated = _memory(grad_accum=2, implementation="fused").memory_gib
    # accumulating, the gradients of the first micro-batch wait through the second's forward
    assert freed.not_concurrent > 0 and accumulated.not_concurrent == 0
    assert _allocated_gib(accumulated) == pytest.approx(
        accumulated.weights + accumulated.gradients + accumulated.optimizer + accumulated.activations
    )
    # Megatron-Core's gradient buffer is allocated once and kept: the step's temporaries beside it only
    megatron = _memory(framework="megatron", implementation="fused").memory_gib
    assert megatron.optimizer_step == 0.0 and megatron.not_concurrent == 0.0


def test_a_fused_step_allocates_nothing_beside_the_state():
    fused = _memory(implementation="fused").memory_gib
    assert fused.optimizer_step == 0.0
    # the gradients alone exceed nothing the activations free: the forward peak or the step, whichever is larger
    peak = fused.weights + fused.optimizer + max(fused.activations, fused.gradients)
    assert _allocated_gib(fused) == pytest.approx(peak)
