"""Priced slots and the neighbourhoods they guide: each job's cheapest slot at given capacity prices is
the minimum over every option and start (enumerated here), no placement sits below it, and the
neighbourhood search with a shortlist of options keeps every schedule feasible and never makes it worse."""

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_portfolio import small_portfolios
from test_portfolio_scale import CONTESTED, POOL_OF, TWO_POOLS, _constructed, _setup

from optimizer.money import usd_to_cents
from optimizer.solver.portfolio.greedy import greedy_schedule
from optimizer.solver.portfolio.lagrange import Ascent
from optimizer.solver.portfolio.lns import Search, search
from optimizer.solver.portfolio.lp import window
from optimizer.solver.portfolio.slots import priced_slots


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_portfolios(), st.integers(0, 2**31 - 1))
def test_cheapest_priced_slot_is_the_enumerated_minimum(instance, seed):
    pf, catalog = instance
    jobs, pools, pool_of, horizon, budget = _setup(pf, catalog)
    rng = np.random.default_rng(seed)
    prices = [rng.uniform(0, 50, horizon) for _ in pools]
    slots = priced_slots(jobs, pool_of, horizon, prices)
    for j, job in enumerate(jobs):
        r, lim = window(job, horizon)
        every = [
            usd_to_cents(opt.cost_usd) + opt.row.gpus * sum(prices[pool_of[opt.row.offer_name]][s : s + d])
            for opt, d in zip(job.options, job.durations)
            for s in range(r, lim - d + 1)
            if d > 0
        ]
        if not every:
            assert slots.best_cents[j] == np.inf
            continue
        assert abs(slots.best_cents[j] - min(every)) < 1e-6 * max(1.0, min(every))
        assert r <= slots.middle[j] < lim
    # no placement a schedule can hold is cheaper, priced, than its job's cheapest slot
    state = Search(jobs, pools, pool_of, horizon, budget, greedy_schedule(jobs, pools, pool_of, horizon, budget))
    assert all(excess >= -1e-6 for excess, _ in state.slot_excess(slots))


def test_the_contested_job_is_priced_off_the_cheap_pool():
    # At the relaxation's prices job a's cheapest slot is on the dear pool (the cheap one is b's only
    # option); a schedule giving a the cheap pool has a positive excess for it.
    lag = Ascent(CONTESTED, TWO_POOLS, POOL_OF, 4, None).run(0, deadline=time.perf_counter() + 5)
    assert lag.converged
    slots = priced_slots(CONTESTED, POOL_OF, 4, lag.prices)
    assert slots.pool.tolist() == [1, 0]
    state = Search(CONTESTED, TWO_POOLS, POOL_OF, 4, None, [(0, 0), None])
    assert [k for e, k in state.slot_excess(slots) if e > 1] == [0]


@pytest.mark.parametrize("workers", [1, 2])
def test_priced_neighbourhoods_keep_schedules_feasible_and_never_worse(workers):
    # workers=2: two neighbourhoods disjoint in time are solved at once, one thread each
    pf, catalog = _constructed(45, seed=2)
    jobs, pools, pool_of, horizon, budget = _setup(pf, catalog)
    placed = greedy_schedule(jobs, pools, pool_of, horizon, budget)
    state = Search(jobs, pools, pool_of, horizon, budget, list(placed), workers=workers)
    before = (state.dropped_weight(), state.cost_cents())
    lag = Ascent(jobs, pools, pool_of, horizon, budget).run(before[0], deadline=time.perf_counter() + 2)
    slots = priced_slots(jobs, pool_of, horizon, lag.prices)
    search(state, time.perf_counter() + 3, slots=slots)
    assert (state.dropped_weight(), state.cost_cents()) <= before
    # an independent sweep of the pools and the windows
    use = [np.zeros(horizon, dtype=int) for _ in pools]
    for job, p in zip(jobs, state.placed):
        if p is None:
            continue
        i, s = p
        r, lim = window(job, horizon)
        assert r <= s and s + job.durations[i] <= lim
        use[pool_of[job.options[i].row.offer_name]][s : s + job.durations[i]] += job.options[i].row.gpus
    for pool, used in zip(pools, use):
        assert all(used[t] <= pool.capacity_at(t) for t in range(horizon))
    # no required job lost (each outweighs all optional ones, and the dropped weight never grows)
    assert len(state.required_dropped()) <= sum(p is None and job.required for job, p in zip(jobs, placed))


def test_neighbourhoods_run_together_only_when_their_windows_are_apart():
    pf, catalog = _constructed(45, seed=2)
    jobs, pools, pool_of, horizon, budget = _setup(pf, catalog)
    state = Search(jobs, pools, pool_of, horizon, None, greedy_schedule(jobs, pools, pool_of, horizon), workers=2)
    by_release = sorted(range(len(jobs)), key=lambda k: window(jobs[k], horizon)[0])
    early, late = by_release[:3], by_release[-3:]
    assert state.reach(early)[1] <= state.reach(late)[0]
    assert state.independent([early, late])
    assert not state.independent([early, early[:1]])  # the same job: overlapping windows
    budgeted = Search(jobs, pools, pool_of, horizon, 10**12, list(state.placed), workers=2)
    assert not budgeted.independent([early, late])  # a budget couples every job
