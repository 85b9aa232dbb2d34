"""Failures and preemptions: Young's interval, the first-order expected time and the Poisson p90,
against hand calculations; spot offers enter the candidate space with their risk in the p90."""

import math

import pytest

from optimizer import CheckRequest, check, load_job, plan
from optimizer.physics import reliability
from optimizer.physics.constants import FAILURES_PER_GPU_HOUR


def test_llama3_failure_rate():
    # 419 interruptions in 54 days on 16,384 GPUs (Llama 3 paper, section 3.3.4)
    assert pytest.approx(1.973e-5, rel=1e-3) == FAILURES_PER_GPU_HOUR
    assert pytest.approx(50_680, rel=1e-3) == 1 / FAILURES_PER_GPU_HOUR  # per-GPU MTBF, hours


def test_young_interval_and_expected_time_by_hand():
    # 1,024 GPUs: M = 1 / (1024 x 1.973e-5) = 49.5 h; a 6-minute checkpoint (0.1 h): tau = sqrt(2 x 0.1 x 49.5) = 3.15 h
    rate = reliability.interruption_rate_per_hour(1024, 128, FAILURES_PER_GPU_HOUR)
    mtbf = 1 / float(rate)
    tau = float(reliability.checkpoint_interval_h(rate, 0.1))
    assert tau == pytest.approx(math.sqrt(2 * 0.1 * mtbf))
    # 500 h of training: 500 (1 + 0.1/tau) + (500/M)(tau/2 + 0.25 h restart)
    expected = 500 * (1 + 0.1 / tau) + 500 / mtbf * (tau / 2 + 0.25)
    assert float(reliability.expected_hours(500, rate, 0.1, 0.25)) == pytest.approx(expected)
    # 0.1 / 3.146 = 3.2 % checkpointing + (1 / 49.5)(1.573 + 0.25) = 3.7 % lost work and restarts
    assert expected / 500 - 1 == pytest.approx(0.0686, abs=0.0005)


def test_poisson_quantile():
    assert reliability.poisson_quantile(0.0) == 0
    assert reliability.poisson_quantile(1.0) == 2  # P(N <= 1) = 0.736, P(N <= 2) = 0.920
    assert reliability.poisson_quantile(10.0) == 14  # P(N <= 13) = 0.864, P(N <= 14) = 0.917


def _poisson_quantile_by_summation(mean: float, q: float) -> int:
    k, term = 0, math.exp(-mean)
    total = term
    while total < q:
        k += 1
        term *= mean / k
        total += term
    return k


@pytest.mark.parametrize("mean", [450.0, 600.0, 700.0])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_poisson_quantile_honours_q_for_large_means(mean, q):
    # Above a mean of 500 a normal approximation takes over; it must still answer the quantile asked
    # for (it once returned the p90 whatever q was), within one count of the exact sum.
    assert abs(reliability.poisson_quantile(mean, q) - _poisson_quantile_by_summation(mean, q)) <= 1
    assert (
        reliability.poisson_quantile(mean, 0.5)
        < reliability.poisson_quantile(mean, 0.9)
        < reliability.poisson_quantile(mean, 0.99)
    )


def test_no_interruptions_means_no_overhead():
    assert float(reliability.expected_hours(100, 0.0, 0.1, 0.25)) == 100
    assert reliability.quantile_hours(100, 0.0, 0.1, 0.25) == 100


def test_spot_offer_is_a_candidate_with_its_risk_in_the_p90(problems):
    short = load_job(problems / "llama-8b-lora.yaml")
    answer = plan(short)
    assert any(p.spot for p in answer.frontier)
    # a long run (20x the tokens): preemptions become likely and widen the spread
    job = short.model_copy(update={"job": short.job.model_copy(update={"tokens": 10e9})})
    spot = check(job, CheckRequest("RTX-PRO-6000", 8, spot=True, compare=False)).plan
    ondemand = check(job, CheckRequest("RTX-PRO-6000", 8, compare=False)).plan
    assert spot.offer.endswith("(spot)") and spot.price_usd_per_gpu_hour == 0.89
    assert spot.hours.p50 > ondemand.hours.p50  # expected preemptions cost time ...
    assert spot.cost_usd.p50 < ondemand.cost_usd.p50  # ... but the discount wins on cost
    assert spot.hours.p90 / spot.hours.p50 > ondemand.hours.p90 / ondemand.hours.p50
    assert "spot preemptions" in spot.spread_source
