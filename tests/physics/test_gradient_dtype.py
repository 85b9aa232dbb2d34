"""job.gradient_dtype: gradients accumulated and reduced in bf16 (the plans' default, which the Megatron export
writes as --grad-reduce-in-bf16) or fp32 (Megatron-LM's own default under --bf16, nanotron's
accumulate_grad_in_fp32): the state a GPU holds, the data-parallel traffic, and the launch the export writes."""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.present.exports import export

GIB = 2**30


def _problem(gradient_dtype: str | None = None, **assumptions) -> Problem:
    job = {
        "name": "llama-8b",
        "model": "llama-3.1-8b",
        "tokens": "10B",
        "seq_len": 4096,
        "global_batch": 256,
        "framework": "megatron",
    }
    if gradient_dtype is not None:
        job["gradient_dtype"] = gradient_dtype
    return Problem.model_validate(expand_models({"job": job, "assumptions": assumptions}))


def _state_bytes_per_param(problem: Problem, zero: int) -> float:
    plan = check(problem, CheckRequest("H100-SXM", 8, tp=1, pp=1, zero=zero, micro_batch=1, compare=False)).plan
    m = plan.memory_gib
    return (m.weights + m.gradients + m.optimizer) * GIB / problem.job.model.params


@pytest.mark.parametrize(("zero", "published"), [(0, 18.0), (1, 6.0 + 12.0 / 8)])
def test_fp32_gradients_are_megatrons_published_bytes_per_parameter(zero, published):
    # Megatron-LM README, "Distributed Optimizer": bf16 param, fp32 grads: 18 bytes a parameter without the
    # distributed optimizer, 6 + 12 / d with it (d = 8 data-parallel ranks here); bf16 gradients are 2 bytes less.
    assert _state_bytes_per_param(_problem("fp32"), zero) == pytest.approx(published, rel=1e-9)
    assert _state_bytes_per_param(_problem(), zero) == pytest.approx(published - 2.0, rel=1e-9)


def test_fp32_gradients_reduce_twice_the_bytes():
    # With nothing hidden behind compute (assumptions.overlap 0) a data-parallel-only layout's network time is the
    # gradient all-reduce alone: twice the bytes in fp32.
    def network_s(dtype: str) -> float:
        problem = _problem(dtype, overlap=0.0)
        request = CheckRequest("H100-SXM", 16, tp=1, pp=1, zero=0, micro_batch=1, compare=False)
        return check(problem, request).plan.time_breakdown_s["network"]

    assert network_s("bf16") > 0
    assert network_s("fp32") == pytest.approx(2.0 * network_s("bf16"), rel=1e-9)


def test_the_megatron_export_launches_the_gradients_the_plan_assumed():
    def args(dtype: str | None) -> str:
        problem = _problem(dtype)
        result = check(problem, CheckRequest("H100-SXM", 8, tp=2, pp=1, zero=1, micro_batch=1, compare=False))
        return export(result.plan, "megatron", job=problem.job)

    assert "--grad-reduce-in-bf16" in args(None)
    assert "--grad-reduce-in-bf16" not in args("fp32")


def test_a_megatron_answer_says_which_gradients_it_assumed():
    def notes(dtype: str | None) -> list[str]:
        problem = _problem(dtype)
        return check(problem, CheckRequest("H100-SXM", 8, tp=2, pp=1, zero=1, micro_batch=1, compare=False)).notes

    said = [n for n in notes(None) if n.startswith("gradients: bf16")]
    assert len(said) == 1 and "--grad-reduce-in-bf16" in said[0] and "gradient_dtype: fp32" in said[0]
    assert not any(n.startswith("gradients:") for n in notes("fp32"))
