"""LoRA's branch kernels (physics/adapters.py, opt-in: assumptions.lora_branch_traffic): PEFT's
``result + lora_B(lora_A(x)) * scaling`` beside each adapted linear, at HBM bandwidth. Counted by hand here from
PEFT's ops on Llama 3.1 8B's shapes, and kept by every context the answer builds (a check's nearest fixes rebuild
the training state)."""

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models, problem_catalog
from optimizer.inputs.schema import Problem
from optimizer.physics.constants import CAST_HBM_EFFICIENCY
from optimizer.planning.check import _with_state
from optimizer.planning.context import build_context


def _problem(branches: bool) -> Problem:
    job = {"name": "lora", "model": "llama-3.1-8b", "method": "lora", "tokens": "1B", "seq_len": 4096}
    data = {"catalog": "default", "job": job, "assumptions": {"lora_branch_traffic": branches}}
    return Problem.model_validate(expand_models(data))


def test_the_branch_kernels_are_counted_only_when_asked_and_as_peft_runs_them():
    request = CheckRequest("H100-SXM", 1, micro_batch=1, recompute="none", compare=False)
    off, on = (check(_problem(b), request).plan for b in (False, True))
    assert "adapters" not in off.time_breakdown_s
    # per token and adapted linear: forward x in + 6 out, backward 5 in + 4 out 16-bit elements; Llama 3.1 8B's
    # q, k, v, o, gate, up, down (h 4096, kv 1024, f 14336) take in 3h + q + 2h + f, give out q + 2kv + h + 2f + h
    h, kv, f = 4096, 1024, 14336
    inputs, outputs = 3 * h + h + 2 * h + f, h + 2 * kv + h + 2 * f + h
    per_token = 32 * 2 * (6 * inputs + 10 * outputs)
    expected = per_token * 32 * 4096 / (3350e9 * CAST_HBM_EFFICIENCY)  # the recipe's 32 x 4,096 tokens a step
    assert on.time_breakdown_s["adapters"] == pytest.approx(expected, rel=1e-6)
    assert on.step_s == pytest.approx(off.step_s + expected, rel=1e-6)


def test_a_rebuilt_training_state_keeps_the_choice():
    for branches in (False, True):
        problem = _problem(branches)
        ctx = build_context(problem, problem_catalog(problem))
        rebuilt = _with_state(ctx, optimizer="adamw8bit")
        assert bool(ctx.train.lora_targets) is branches
        assert rebuilt.train.lora_targets == ctx.train.lora_targets
