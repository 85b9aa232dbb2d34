"""transformers' eager experts loop and DeepSpeed ZeRO-3's per-expert fetches (physics/moe.py expert_loop_s,
assumptions.experts_implementation): the expected experts a micro-batch hits, the loop's constant against the
table it comes from, and which layouts run the loop."""

from __future__ import annotations

import itertools
import math

import pytest

from optimizer import CheckRequest, check
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.constants import HF_EXPERT_ITERATION_S
from optimizer.physics.moe import experts_hit
from optimizer.physics.shapes import ModelShape


def _shape(experts: int, k: int, layers: int = 1) -> ModelShape:
    return ModelShape(params=1e9, active_params=1e8, layers=layers, hidden=1024, experts=experts, experts_per_token=k)


@pytest.mark.parametrize(("experts", "k", "tokens"), [(6, 2, 1), (6, 2, 3), (8, 3, 2), (5, 1, 4)])
def test_the_experts_a_micro_batch_hits_are_counted_as_every_routing_would_hit_them(experts, k, tokens):
    # every token picks k distinct experts, each k-subset alike: the mean number of distinct experts picked,
    # over every routing of the micro-batch's tokens
    picks = list(itertools.combinations(range(experts), k))
    total = sum(len(set().union(*routing)) for routing in itertools.product(picks, repeat=tokens))
    assert experts_hit(_shape(experts, k), tokens) == pytest.approx(total / len(picks) ** tokens)


def test_the_loop_constant_gives_back_the_table_it_was_derived_from():
    # transformers PR 42697's A100 table, Qwen1.5-MoE-A2.7B (24 layers, 60 experts, top-4), forward of 16
    # tokens: eager 271.80 ms against grouped_mm 64.27 ms
    loop_s = 24 * float(experts_hit(_shape(60, 4), 16)) * HF_EXPERT_ITERATION_S
    assert loop_s == pytest.approx((271.80 - 64.27) / 1e3, rel=0.01)


def _checked(framework: str, impl: str, **layout):
    data = {
        "catalog": "default",
        "job": {"model": "qwen3-30b-a3b", "tokens": "1B", "seq_len": 4096, "global_batch": 64, "framework": framework},
        "assumptions": {"experts_implementation": impl},
    }
    problem = Problem.model_validate(expand_models(data))
    return check(problem, CheckRequest("H100-SXM", 16, framework=framework, nodes=2, micro_batch=1, **layout))


def _check(framework: str, impl: str, **layout):
    return _checked(framework, impl, **layout).plan


def test_only_transformers_expert_modules_at_ep_1_run_the_loop_and_only_zero_3_fetches_them_one_by_one():
    grouped = _check("deepspeed", "grouped_mm", zero=3, tp=1, ep=1, recompute="full")
    zero3 = _check("deepspeed", "eager", zero=3, tp=1, ep=1, recompute="full")
    zero2 = _check("deepspeed", "eager", zero=2, tp=1, ep=1, recompute="full")
    fsdp_ep = _check("fsdp", "eager", zero=3, ep=8, recompute="full")  # an expert-parallel backend is named
    assert "expert_loop" not in grouped.time_breakdown_s and "expert_loop" not in fsdp_ep.time_breakdown_s
    # ZeRO-3 fetches each of 128 experts' 3 linears in 48 layers in forward, recomputed forward and backward
    fetch_s = zero3.time_breakdown_s["expert_loop"] - zero2.time_breakdown_s["expert_loop"]
    steps = zero3.strategy.grad_accum
    assert fetch_s == pytest.approx(steps * 3 * 48 * 128 * 3 * 4.1e-4, rel=1e-6)
    assert zero3.step_s > zero2.step_s > grouped.step_s
    assert math.isclose(zero3.step_s - grouped.step_s, zero3.time_breakdown_s["expert_loop"], rel_tol=0.05)
    # the step waits for the host: a faster GPU would not shorten it, and the plan says so
    assert zero3.bound == "host" and grouped.bound == "compute"


def test_fsdp_runs_the_loop_but_fetches_whole_blocks_and_its_note_does_not_claim_per_expert_fetches():
    plan = _check("fsdp", "eager", zero=3, tp=1, ep=1, recompute="full")
    deepspeed = _check("deepspeed", "eager", zero=3, tp=1, ep=1, recompute="full")
    assert 0 < plan.time_breakdown_s["expert_loop"] < deepspeed.time_breakdown_s["expert_loop"]
    notes = {fw: _checked(fw, "eager", zero=3, tp=1, ep=1).notes for fw in ("fsdp", "deepspeed")}
    assert not any("fetched one at a time" in n for n in notes["fsdp"])
    assert any("fetched one at a time" in n for n in notes["deepspeed"])
