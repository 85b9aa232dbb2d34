"""What an answer says of a host-bound step (physics/host_launch.py): ``time_breakdown_s.host_launch`` carries the wait
beyond the GPU's own work and a note names it with what shrinks it. The published case it stands for: Stas Bekman's
torch.compile table (validation/unseen_families_10.yaml), Llama 3.2 1B at 512 tokens on one B200, 58.8 ms a step
eager and 18.7 ms compiled, where the GPU's work is a few ms; the 8B at 8,192 tokens is GPU-bound (12.9k tokens/s
either way)."""

from __future__ import annotations

from optimizer.api import check
from optimizer.inputs.files import expand_models
from optimizer.inputs.requests import CheckRequest
from optimizer.inputs.schema import Problem

# Llama 3.2 1B (meta-llama/Llama-3.2-1B config.json; validation/unseen_families_10.yaml's llama32_1b)
LLAMA_32_1B = {
    "params": 1235814400, "layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "head_dim": 64,
    "ffn_hidden": 8192, "vocab": 128256, "tied_embeddings": True,
}  # fmt: skip


def _check(model, seq_len: int, **job):
    data = {
        "catalog": "default",
        "job": {"model": model, "tokens": "1B", "seq_len": seq_len, "global_batch": 1, "framework": "fsdp", **job},
    }
    return check(Problem.model_validate(expand_models(data)), CheckRequest("B200", 1, micro_batch=1, recompute="full"))


def test_a_small_eager_step_is_host_bound_and_says_what_shrinks_it():
    result = _check(LLAMA_32_1B, 512, kernels="eager")
    plan = result.plan
    assert plan.bound == "host"
    wait_s = plan.time_breakdown_s["host_launch"]
    assert 0.3 < wait_s / plan.step_s < 0.9
    (note,) = [n for n in result.notes if n.startswith("host-bound")]
    assert "torch.compile" in note and f"{wait_s * 1e3:,.1f} ms" in note


def test_compile_shortens_the_wait_and_a_long_sequence_has_none():
    # the floor's own behaviour (compile lowers it, the 8B binds on its GPU) is tests/physics/test_host_launch.py's;
    # here, what the answer carries of it
    eager = _check(LLAMA_32_1B, 512, kernels="eager").plan
    compiled = _check(LLAMA_32_1B, 512, kernels="eager", compile=True).plan
    assert compiled.time_breakdown_s.get("host_launch", 0.0) < eager.time_breakdown_s["host_launch"]
    long = _check("llama-3.1-8b", 8192, kernels="eager")
    assert "host_launch" not in long.plan.time_breakdown_s
    assert not [n for n in long.notes if n.startswith("host-bound")]
