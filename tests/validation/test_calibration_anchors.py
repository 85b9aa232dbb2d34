"""Measurements keep their promise (issue 46): every measured configuration predicts its own measurement,
whatever else was measured, and the rows around it lean on the nearest one.

Seed 000's advice is to measure short runs on both cards and decide: 1,000 B200 GPU-hours (8 GPUs x 125 h)
cost $5,500; on a B300 1.5x faster, $4,628.67. Two measurements that say exactly that answer the B300: each
card keeps its own speed, not one compute factor blended from both (both cards at 5,443 tokens/s).
"""

from __future__ import annotations

import pytest

from optimizer import CheckRequest, apply_overrides, check, plan
from optimizer.inputs.files import expand_models
from optimizer.inputs.schema import Problem
from optimizer.physics.cost import run_cost_usd

TOKENS = 2e9


def _seed_job(*measured: str) -> Problem:
    """The seed's 70B full fine-tune on 2B tokens, priced by nodus-2026-11 (B200 $5.50, B300 $6.943), with
    pure running time (no start-up) as in the seed's arithmetic."""
    data = {
        "catalog": "nodus-2026-11",
        "job": {
            "name": "seed-000-measured",
            "model": "llama-3.1-70b",
            "method": "full",
            "tokens": "2B",
            "seq_len": 4096,
            "global_batch": 512,
        },
        "assumptions": {"startup": 0},
    }
    return apply_overrides(Problem.model_validate(expand_models(data)), measured=list(measured))


def _running_cost_usd(p) -> float:
    """Hours of training at the plan's throughput, times its GPUs and price (no checkpoints, no failures)."""
    return run_cost_usd(p.price_usd_per_gpu_hour, p.gpus, TOKENS / p.tokens_per_s / 3600.0)


def test_seed_000_two_measurements_price_each_card_as_measured_and_pick_the_b300():
    job = _seed_job("8xB200:4444.44 tok/s", "8xB300:6666.67 tok/s")
    b200 = check(job, CheckRequest("B200", 8, compare=False)).plan
    b300 = check(job, CheckRequest("B300", 8, compare=False)).plan
    assert b200.tokens_per_s == pytest.approx(4444.44, rel=1e-3)
    assert b300.tokens_per_s == pytest.approx(6666.67, rel=1e-3)
    assert _running_cost_usd(b200) == pytest.approx(5500.0, rel=1e-3)
    assert _running_cost_usd(b300) == pytest.approx(4628.67, rel=1e-3)
    best = plan(apply_overrides(job, gpu_types="B200,B300", max_gpus=8), runners_up=False).best
    assert best.sku == "B300"


@pytest.mark.parametrize(
    "third",
    ["16xB200@2:8000 tok/s", "8xH100-SXM:2500 tok/s", "64xB300@8:40k tok/s"],
    ids=["b200x16", "h100", "b300x64"],
)
def test_a_third_measurement_never_moves_the_first_two(third):
    two = _seed_job("8xB200:4444.44 tok/s", "8xB300:6666.67 tok/s")
    three = _seed_job("8xB200:4444.44 tok/s", "8xB300:6666.67 tok/s", third)
    for sku in ("B200", "B300"):
        before = check(two, CheckRequest(sku, 8, compare=False)).plan.tokens_per_s
        after = check(three, CheckRequest(sku, 8, compare=False)).plan.tokens_per_s
        assert after == pytest.approx(before, rel=1e-3), sku


def test_between_two_measured_counts_the_speed_interpolates_and_the_answer_says_so():
    """8 and 32 B200 measured at 4,000 and 12,000 tokens/s: 16 B200 lie between them in log GPUs, and 64
    beyond the last lean on it, said in the plan's spread."""
    job = _seed_job("8xB200:4000 tok/s", "32xB200@4:12000 tok/s")
    at = {n: check(job, CheckRequest("B200", n, compare=False)).plan for n in (8, 16, 32, 64)}
    assert at[8].tokens_per_s == pytest.approx(4000, rel=1e-3)
    assert at[32].tokens_per_s == pytest.approx(12000, rel=1e-3)
    assert 4000 < at[16].tokens_per_s < 12000
    assert "interpolated between 8 and 32 GPUs" in at[16].spread_source
    assert "extrapolated from 32 to 64 GPUs" in at[64].spread_source


def test_a_measured_peak_is_predicted_at_its_own_configuration_beside_another():
    """Two measured peaks on two cards: each configuration's memory is its own peak, not their mean."""
    # (a peak is reached by moving the reserve, never below zero: above the allocated peak predicted on each card,
    # 164.0 GiB on B200 since the reserve stopped growing with capacity)
    job = _seed_job("8xB200:4444.44 tok/s,165GiB", "8xB300:6666.67 tok/s,262GiB")
    for sku, peak_gib in (("B200", 165), ("B300", 262)):
        memory = check(job, CheckRequest(sku, 8, compare=False)).plan.memory_gib
        assert memory.total == pytest.approx(peak_gib, abs=0.01), sku
