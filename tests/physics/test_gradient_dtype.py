"""job.gradient_dtype: gradients accumulated and reduced in bf16 (which the Megatron export writes as
--grad-reduce-in-bf16), fp32 (Megatron-LM's own default under --bf16, nanotron's accumulate_grad_in_fp32) or auto,
the default: each framework's own (torchtitan's mixed_precision_reduce is float32 only; DDP under autocast reduces
the fp32 parameters' gradients; accelerate's FSDP and DeepSpeed reduce in bf16): the state a GPU holds, the
data-parallel traffic, and the launch the export writes."""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.present.exports import export

GIB = 2**30


def _problem(gradient_dtype: str | None = None, framework: str = "megatron", **assumptions) -> Problem:
    job = {
        "name": "llama-8b",
        "model": "llama-3.1-8b",
        "tokens": "10B",
        "seq_len": 4096,
        "global_batch": 256,
        "framework": framework,
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


def _network_s(dtype: str | None, framework: str, zero: int, **job) -> float:
    problem = _problem(dtype, framework, overlap=0.0)
    if job:
        problem = problem.model_copy(update={"job": problem.job.model_copy(update=job)})
    request = CheckRequest("H100-SXM", 16, tp=1, pp=1, zero=zero, micro_batch=1, compare=False)
    return check(problem, request).plan.time_breakdown_s["network"]


@pytest.mark.parametrize(("framework", "zero"), [("torchtitan", 0), ("fsdp", 0)])
def test_auto_reduces_the_fp32_parameters_gradients_where_the_framework_does(framework, zero):
    # DDP under autocast keeps fp32 parameters, so their gradients all-reduce in fp32 (torchtitan, accelerate): the
    # all-reduce alone (overlap 0) is twice the bf16 one, as a stated fp32
    assert _network_s(None, framework, zero) == pytest.approx(2.0 * _network_s("bf16", framework, zero), rel=1e-9)
    assert _network_s(None, framework, zero) == pytest.approx(_network_s("fp32", framework, zero), rel=1e-9)
    # pure bf16 training (no fp32 master copy) has bf16 parameters and gradients
    assert _network_s(None, framework, zero, master_weights=False) == pytest.approx(
        _network_s("bf16", framework, zero), rel=1e-9
    )


@pytest.mark.parametrize(
    ("framework", "zero", "fp32"), [("torchtitan", 3, True), ("fsdp", 3, False), ("deepspeed", 3, False)]
)
def test_auto_is_each_sharded_frameworks_reduce_dtype(framework, zero, fp32):
    # torchtitan/config/configs.py: mixed_precision_reduce: Literal["float32"]; accelerate's FSDP plugin reduces in
    # the mixed precision dtype; DeepSpeed's communication_data_type is bf16 under bf16
    expected = _network_s("fp32" if fp32 else "bf16", framework, zero)
    assert _network_s(None, framework, zero) == pytest.approx(expected, rel=1e-9)
    assert _network_s("fp32", framework, zero) > _network_s("bf16", framework, zero)


@pytest.mark.parametrize("framework", ["torchtitan", "fsdp"])
def test_an_fp32_reduce_under_fsdp_adds_no_gradient_buffer(framework):
    # FSDP's gradients are its sharded parameters' (fp32 beside fp32 master weights: inside mixed precision's 16 bytes
    # a parameter, 4 + 4 + 8); only Megatron-Core keeps an fp32 main_grad beside bf16 weights (the test above)
    assert _state_bytes_per_param(_problem("fp32", framework), 3) == pytest.approx(
        _state_bytes_per_param(_problem("bf16", framework), 3), rel=1e-9
    )


def test_ddp_under_autocast_holds_fp32_buckets():
    # accelerate's DDP (zero_grad-free buckets, gradient_as_bucket_view off) over fp32 parameters under autocast:
    # 4 (parameter) + 4 (gradient) + 8 (AdamW's moments) + 4 (DDP's bucket of fp32 gradients) = 20 bytes a parameter;
    # bf16 gradients and buckets 16 + 2
    assert _state_bytes_per_param(_problem("fp32", "fsdp"), 0) == pytest.approx(20.0, rel=1e-9)
    assert _state_bytes_per_param(_problem(None, "fsdp"), 0) == pytest.approx(20.0, rel=1e-9)
    assert _state_bytes_per_param(_problem("bf16", "fsdp"), 0) == pytest.approx(18.0, rel=1e-9)


def test_a_torchtitan_answer_says_its_gradients_reduce_in_fp32():
    def notes(dtype: str | None) -> list[str]:
        problem = _problem(dtype, "torchtitan")
        return check(problem, CheckRequest("H100-SXM", 16, tp=1, pp=1, zero=3, micro_batch=1, compare=False)).notes

    said = [n for n in notes(None) if n.startswith("gradients: reduced in fp32")]
    assert len(said) == 1 and "mixed_precision_reduce" in said[0] and "gradient_dtype: bf16" in said[0]
    assert not any(n.startswith("gradients: reduced in fp32") for n in notes("fp32"))
    assert any(n.startswith("gradients: reduced in bf16") and "float32" in n for n in notes("bf16"))
