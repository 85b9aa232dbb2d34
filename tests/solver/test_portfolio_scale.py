"""Portfolio at scale: the LP relaxation's bound never exceeds the brute-force optimum; on instances
feasible by construction no required job is dropped; the time limit bounds the whole call; jobs of
one shape share one candidate table."""

import random
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_portfolio import brute_force, check_schedule, small_portfolios

from optimizer import load_catalog, portfolio
from optimizer.inputs.files import portfolio_job_problem
from optimizer.inputs.schema import Catalog, JobSpec, ModelSpec, Offer, Portfolio, Problem
from optimizer.money import usd_to_cents
from optimizer.planning.calibration import job_context
from optimizer.planning.candidates import build_table, retimed
from optimizer.planning.plans import plan_from
from optimizer.solver.portfolio.compact import compact, retime
from optimizer.solver.portfolio.data import pool_specs, prepare, prepare_jobs, whole_steps
from optimizer.solver.portfolio.greedy import (
    behind,
    capacity_arrays,
    earliest_start,
    feasible_starts,
    greedy_schedule,
    guided_schedule,
    squeaky_wheel,
)
from optimizer.solver.portfolio.lagrange import Ascent, _range_min
from optimizer.solver.portfolio.lns import Search, freed_options, relocate_far
from optimizer.solver.portfolio.lp import drop_weights, lp_bound
from optimizer.solver.portfolio.slots import priced_slots

HW = load_catalog("hardware")
MODEL = {"params": "8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256}


def _setup(pf, catalog):
    """The solver's view of a portfolio: jobs with options, pools, offer -> pool, horizon, budget (cents)."""
    horizon = whole_steps(pf.horizon_s, pf.time_step_s)
    jobs = prepare_jobs(pf, catalog, horizon)
    pools = pool_specs(pf, catalog, horizon)
    pool_of = {o: k for k, p in enumerate(pools) for o in p.offers}
    budget = None if pf.budget_usd is None else usd_to_cents(pf.budget_usd)
    return jobs, pools, pool_of, horizon, budget


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_portfolios())
def test_relaxations_never_above_the_brute_force_optimum(instance):
    # Both lower bounds (the bucketed GLOP LP and the Lagrangian of the start-time model) against the
    # optimum found by enumerating every option and start, with no more dropped weight than it drops.
    pf, catalog = instance
    expected = brute_force(pf, catalog)
    if expected is None:
        return
    dropped, cost = expected
    jobs, pools, pool_of, horizon, budget = _setup(pf, catalog)
    lp = lp_bound(jobs, pools, pool_of, horizon, budget, dropped)
    lag = Ascent(jobs, pools, pool_of, horizon, budget).run(dropped, deadline=time.perf_counter() + 2)
    # the solver's ascent resumed (from its best multipliers), here aimed at a target below the optimum
    ascent = Ascent(jobs, pools, pool_of, horizon, budget)
    # first for another drop limit (every job may be left out): its best bound is not carried over
    ascent.run(sum(drop_weights(jobs)), deadline=time.perf_counter() + 0.5)
    ascent.run(dropped, deadline=time.perf_counter() + 1)
    resumed = ascent.run(dropped, deadline=time.perf_counter() + 1, target_cents=0.9 * cost)
    for bound in (lp, lag, resumed):
        assert not bound.infeasible, "the optimum is a point of the relaxation"
        assert bound.bound_cents is not None and bound.bound_cents <= cost + 1e-6


def _job(name: str, options: list[tuple[str, int, float]], window: tuple[int, int]) -> SimpleNamespace:
    """A job for the schedulers: (pool, steps, USD) per option, 8 GPUs each, a [release, deadline) window."""
    return SimpleNamespace(
        name=name,
        options=[SimpleNamespace(row=SimpleNamespace(offer_name=p, gpus=8), cost_usd=usd) for p, _, usd in options],
        durations=[d for _, d, _ in options],
        release=window[0],
        deadline=window[1],
        required=True,
        weight=1000,
        after=[],
    )


# Two 8-GPU pools for 4 steps: job a runs on the cheap pool ($10) or the dear one ($20), job b only on the
# cheap one; both must run in steps [0, 2).
TWO_POOLS = [
    SimpleNamespace(offers={"cheap"}, segments=[(0, 4, 8)]),
    SimpleNamespace(offers={"dear"}, segments=[(0, 4, 8)]),
]
POOL_OF = {"cheap": 0, "dear": 1}
CONTESTED = [_job("a", [("cheap", 2, 10.0), ("dear", 2, 20.0)], (0, 2)), _job("b", [("cheap", 2, 10.0)], (0, 2))]


def test_squeaky_wheel_places_the_job_greedy_crowds_out():
    # Earliest deadline first (a tie, so by name) gives a the cheap pool and leaves b nowhere to run; the
    # next pass places b first, and a moves to the dear pool.
    assert greedy_schedule(CONTESTED, TWO_POOLS, POOL_OF, 4) == [(0, 0), None]
    placed = squeaky_wheel(CONTESTED, TWO_POOLS, POOL_OF, 4, None, time.perf_counter() + 5, drop_weights(CONTESTED))
    assert placed.placed == [(1, 0), (0, 0)] and placed.order == [1, 0]


def test_packing_against_neighbours_leaves_room_for_the_long_job():
    # One 8-GPU pool for 12 steps. A short job (2 steps, any time from step 3) is placed first; at its
    # earliest start (3-5) it splits the pool into gaps of 3 and 7 steps, too short for the 8-step job that
    # follows. Packed against its neighbours it takes the end of the horizon (10-12), and both run.
    pool = [SimpleNamespace(offers={"p"}, segments=[(0, 12, 8)])]
    jobs = [_job("short", [("p", 2, 10.0)], (3, 12)), _job("long", [("p", 8, 40.0)], (0, 12))]
    assert greedy_schedule(jobs, pool, {"p": 0}, 12, order=[0, 1]) == [(0, 3), None]
    assert greedy_schedule(jobs, pool, {"p": 0}, 12, order=[0, 1], fit="contact") == [(0, 10), (0, 0)]


def test_lagrangian_bound_prices_the_contested_pool():
    # Each job alone would take the cheap pool ($20 together); the pool holds one of them in [0, 2), so
    # every schedule costs $30. Pricing the cheap pool's GPU-steps lifts the bound from $20 to about $30.
    lag = Ascent(CONTESTED, TWO_POOLS, POOL_OF, 4, None).run(0, deadline=time.perf_counter() + 5)
    assert lag.bound_cents is not None and 2_950 <= lag.bound_cents <= 3_000
    assert lag.prices[0][:2].sum() > 0 and lag.prices[1].sum() == 0


def test_a_resumed_ascent_goes_on_from_its_best_multipliers():
    # Stopped after its first iteration (zero prices: both jobs on the cheap pool, $20), the ascent
    # resumed climbs to the contested pair's $30 and never reports less than it had.
    ascent = Ascent(CONTESTED, TWO_POOLS, POOL_OF, 4, None)
    first = ascent.run(0, deadline=time.perf_counter())
    assert first.iterations == 1 and first.bound_cents == pytest.approx(2_000)
    resumed = ascent.run(0, deadline=time.perf_counter() + 5)
    assert resumed.bound_cents is not None and 2_950 <= resumed.bound_cents <= 3_000
    again = ascent.run(0, deadline=time.perf_counter())
    assert again.bound_cents == resumed.bound_cents and again.prices[0][:2].sum() > 0


@pytest.mark.skipif(sys.platform != "linux", reason="runs apart only where processes fork")
def test_an_ascent_run_apart_answers_as_in_line_and_leaves_its_multipliers_to_resume_from():
    # The contested pair converges in well under a second: run in a forked process, the ascent gives the
    # same bound and shares as in line, and the Ascent it came from resumes at that bound.
    in_line = Ascent(CONTESTED, TWO_POOLS, POOL_OF, 4, None).run(0, deadline=time.perf_counter() + 5)
    ascent = Ascent(CONTESTED, TWO_POOLS, POOL_OF, 4, None)
    apart = ascent.run_apart(0, deadline=time.perf_counter() + 5)
    assert apart is not None
    time.sleep(1)  # (collecting stops it: let it converge first, in a few milliseconds)
    out = apart.collect(10)
    assert out is not None and out.bound_cents == in_line.bound_cents and out.shares == in_line.shares
    assert ascent.run(0, deadline=time.perf_counter()).bound_cents == in_line.bound_cents


def test_the_relaxations_averaged_choices_are_its_schedule():
    # The LP of the contested pair is integral: b on the cheap pool, a on the dear one, both at step 0.
    # The relaxed choices averaged over the ascent's last iterations say so.
    lag = Ascent(CONTESTED, TWO_POOLS, POOL_OF, 4, None).run(0, deadline=time.perf_counter() + 5)
    assert max(lag.shares[0], key=lag.shares[0].get) == 1 and lag.shares[1] == {0: 1.0}
    assert all(abs(sum(share.values()) - 1) < 1e-9 for share in lag.shares)
    assert lag.mean_start == [0.0, 0.0]


def test_a_relaxation_with_nothing_that_fits_still_gives_every_job_its_shares():
    # (the rounding reads them for every job): both jobs need 2 steps and get 1
    tight = [_job("a", [("cheap", 2, 10.0)], (0, 1)), _job("b", [("dear", 2, 10.0)], (1, 2))]
    for job in tight:
        job.required = False
    lag = Ascent(tight, TWO_POOLS, POOL_OF, 4, None).run(2_000, deadline=time.perf_counter() + 5)
    assert lag.bound_cents == 0.0 and lag.shares == [{}, {}] and lag.mean_start == [0.0, 0.0]


def test_rounding_keeps_the_relaxations_options_and_leaves_out_what_does_not_fit():
    weights = drop_weights(CONTESTED)
    later = time.perf_counter() + 5
    rounded = guided_schedule(
        CONTESTED, TWO_POOLS, POOL_OF, 4, None, later, weights, [{1: 0.9, 0: 0.1}, {0: 1.0}], [0, 0]
    )
    assert rounded.placed == [(1, 0), (0, 0)]
    # both given the cheap pool, one of them stays out for the repair step (squeaky wheel or not)
    crowded = guided_schedule(CONTESTED, TWO_POOLS, POOL_OF, 4, None, later, weights, [{0: 1.0}, {0: 1.0}], [0, 0])
    assert sorted(crowded.placed, key=str) == [(0, 0), None]
    # the one left out goes first in a second rounding, which leaves out the other
    out = crowded.placed.index(None)
    again = guided_schedule(
        CONTESTED, TWO_POOLS, POOL_OF, 4, None, later, weights, [{0: 1.0}, {0: 1.0}], [0, 0], first=[out]
    )
    assert again.placed[out] == (0, 0) and again.placed[1 - out] is None
    # with a fallback, the job crowded off the cheap pool takes its next option there instead of staying
    # out: a, placed second (mean start 1), falls back to the dear pool; b has nothing to fall back to
    widened = guided_schedule(
        CONTESTED, TWO_POOLS, POOL_OF, 4, None, later, weights, [{0: 1.0}, {0: 1.0}], [1, 0], fallback=[[0, 1], [0]]
    )
    assert widened.placed == [(1, 0), (0, 0)]


def test_inserting_a_job_ejects_one_that_has_somewhere_else_to_go():
    # a holds the cheap pool and b, which runs nowhere else, is out: b goes in, a moves to the dear pool.
    state = Search(CONTESTED, TWO_POOLS, POOL_OF, 4, None, [(0, 0), None], workers=1)
    assert state.insert(1, [0], near=0)
    assert state.placed == [(1, 0), (0, 0)] and state.cost_cents() == 3_000
    # with nowhere else for a, nothing changes
    alone = [_job("a", [("cheap", 2, 10.0)], (0, 2)), _job("b", [("cheap", 2, 10.0)], (0, 2))]
    state = Search(alone, TWO_POOLS, POOL_OF, 4, None, [(0, 0), None], workers=1)
    assert not state.insert(1, [0], near=0) and state.placed == [(0, 0), None]


def test_a_deeper_ejection_chain_places_the_job_a_shallow_one_cannot():
    # One 8-GPU pool, 16 steps: b, c and d hold 0-4, 4-8 and 8-12, each free to run until its deadline;
    # 12-16 is free. a must run in 0-4: it pushes out b, which goes in only at 4-8 by pushing out c, which
    # goes in only at 8-12 by pushing out d, which moves to 12-16. Two levels of chain below a's own.
    pool = [SimpleNamespace(offers={"cheap"}, segments=[(0, 16, 8)])]
    jobs = [
        _job("a", [("cheap", 4, 10.0)], (0, 4)),
        _job("b", [("cheap", 4, 10.0)], (0, 8)),
        _job("c", [("cheap", 4, 10.0)], (4, 12)),
        _job("d", [("cheap", 4, 10.0)], (8, 16)),
    ]
    placed = [None, (0, 0), (0, 4), (0, 8)]
    state = Search(jobs, pool, POOL_OF, 16, None, placed, workers=1)
    assert not state.insert(0, [0], near=0) and state.placed == placed
    assert state.insert(0, [0], near=0, depth=2)
    assert state.placed == [(0, 0), (0, 4), (0, 8), (0, 12)] and state.cost_cents() == 4_000


def test_a_job_far_from_its_priced_slot_moves_back_ejecting_one_that_can_go_elsewhere():
    # a sits on the cheap pool and b, dear elsewhere ($40 against $10), was pushed to the dear pool ($50).
    # At prices where the cheap pool costs what it saves a (62.5 cents per GPU-step), b's slot is the cheap
    # pool: relocating b ejects a to the dear pool, $30; no single-job move gets there.
    jobs = [
        _job("a", [("cheap", 2, 10.0), ("dear", 2, 20.0)], (0, 2)),
        _job("b", [("cheap", 2, 10.0), ("dear", 2, 40.0)], (0, 2)),
    ]
    slots = priced_slots(jobs, POOL_OF, 4, [np.full(4, 62.5), np.zeros(4)])
    state = Search(jobs, TWO_POOLS, POOL_OF, 4, None, [(0, 0), (1, 0)], workers=1)
    assert state.move_each(time.perf_counter() + 5) == 0
    relocate_far(state, slots, time.perf_counter() + 5)
    assert state.placed == [(1, 0), (0, 0)] and state.cost_cents() == 3_000
    # with nowhere else for a, nothing moves
    alone = [_job("a", [("cheap", 2, 10.0)], (0, 2)), jobs[1]]
    state = Search(alone, TWO_POOLS, POOL_OF, 4, None, [(0, 0), (1, 0)], workers=1)
    relocate_far(state, priced_slots(alone, POOL_OF, 4, [np.full(4, 62.5), np.zeros(4)]), time.perf_counter() + 5)
    assert state.placed == [(0, 0), (1, 0)]


def test_a_left_out_job_goes_in_where_the_fewest_gpus_are_in_its_way():
    # The cheap pool (8 GPUs, 60 steps) is full: five jobs that can run only where they are fill steps
    # 0-50, and b, which may also run on the dear pool, holds 4 GPUs in 50-60. Job a (8 GPUs, 5 steps,
    # any time) can go in only at 50-55, by pushing b to the dear pool: the 24 starts nearest the middle
    # of its window all fall among the fixed jobs, so ejection there finds nothing; ranked by the
    # GPU-steps in the way, 50-55 come first.
    pools = [
        SimpleNamespace(offers={"cheap"}, segments=[(0, 60, 8)]),
        SimpleNamespace(offers={"dear"}, segments=[(0, 60, 8)]),
    ]
    fixed = [_job(f"f{i}", [("cheap", 10, 10.0)], (10 * i, 10 * i + 10)) for i in range(5)]
    b = _job("b", [("cheap", 10, 10.0), ("dear", 10, 20.0)], (50, 60))
    for option in b.options:
        option.row = SimpleNamespace(offer_name=option.row.offer_name, gpus=4)
    a = _job("a", [("cheap", 5, 10.0)], (0, 60))
    placed = [(0, 10 * i) for i in range(5)] + [(0, 50), None]
    state = Search([*fixed, b, a], pools, POOL_OF, 60, None, placed, workers=1)
    assert state._insertion(6, [0], 30.0, 24, 1) is None
    assert state.insert(6, [0], 30.0)
    assert state.placed[5] == (1, 50) and state.placed[6] is not None and 50 <= state.placed[6][1] <= 55
    assert state.placed[:5] == placed[:5] and state.cost_cents() == 8_000


def test_the_optional_jobs_greedy_leaves_out_go_in_where_another_job_can_move():
    # b is optional now, and greedy still gives a the cheap pool first; putting the left-out jobs in ejects
    # a to the dear pool, as for a required job. A job whose only option is longer than its window is
    # not "left out": nothing can place it, so nothing tries.
    optional_b = [CONTESTED[0], SimpleNamespace(**{**vars(CONTESTED[1]), "required": False, "weight": 3})]
    too_long = _job("c", [("cheap", 3, 10.0)], (0, 2))
    state = Search([*optional_b, too_long], TWO_POOLS, POOL_OF, 4, None, [(0, 0), None, None], workers=1)
    assert state.left_out() == [1]
    assert state.place_left_out(time.perf_counter() + 5) == 1
    assert state.placed == [(1, 0), (0, 0), None] and state.left_out() == []


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(0, 8), min_size=2, max_size=16),
    st.integers(1, 8),
    st.integers(1, 5),
    st.integers(0, 15),
    st.integers(0, 20),
)
def test_the_starts_that_fit_are_every_start_with_room_over_the_whole_run(free, gpus, dur, ready, last):
    # brute force: a start fits when every step it runs has the GPUs free (a step past the end of the
    # timeline has none: the last start asked for may run past it)
    free_arr = np.array([*free, 0], dtype=np.int64)
    expected = [
        s for s in range(ready, last + 1) if all(t < len(free_arr) and free_arr[t] >= gpus for t in range(s, s + dur))
    ]
    assert feasible_starts(free_arr, gpus, dur, ready, last).tolist() == expected
    assert earliest_start(free_arr, gpus, dur, ready, last) == (expected[0] if expected else None)


@given(st.data())
def test_the_range_minimum_is_the_smallest_value_in_each_range(data):
    # brute force: numpy's min over each slice; ranges of every length up to the whole row, so every level
    # of the sparse table (and a row shorter than the longest power of two) is read
    rows, width = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 40))
    cells = data.draw(st.lists(st.floats(-1e6, 1e6), min_size=rows * width, max_size=rows * width))
    values = np.array(cells).reshape(rows, width)
    asks = data.draw(
        st.lists(st.tuples(st.integers(0, rows - 1), st.integers(0, width - 1), st.integers(0, width - 1)), min_size=1)
    )
    row = np.array([r for r, _, _ in asks])
    lo = np.array([min(a, b) for _, a, b in asks])
    hi = np.array([max(a, b) for _, a, b in asks])
    expected = [values[r, a : b + 1].min() for r, a, b in zip(row, lo, hi)]
    assert _range_min(values, lo, hi, row).tolist() == expected


@st.composite
def _packed_pools(draw):
    """Up to 8 jobs on two 8-GPU pools over 8 steps: options (pool, steps, GPUs, USD), windows, a few
    waiting for an earlier job; a greedy schedule of them."""
    horizon = 8
    jobs = []
    for j in range(draw(st.integers(3, 8))):
        release = draw(st.integers(0, 5))
        options = [
            (draw(st.sampled_from(["cheap", "dear"])), draw(st.integers(1, 4)), draw(st.sampled_from([4, 8])))
            for _ in range(draw(st.integers(1, 3)))
        ]
        job = _job(
            f"j{j}", [(p, d, 1.0 + d * g * (2 if p == "dear" else 1)) for p, d, g in options], (release, horizon)
        )
        for option, (_, _, g) in zip(job.options, options):
            option.row = SimpleNamespace(offer_name=option.row.offer_name, gpus=g)
        job.deadline = draw(st.integers(release + 1, horizon))
        if j and draw(st.booleans()):
            job.after = [f"j{draw(st.integers(0, j - 1))}"]
        jobs.append(job)
    pools = [
        SimpleNamespace(offers={"cheap"}, segments=[(0, horizon, 8)]),
        SimpleNamespace(offers={"dear"}, segments=[(0, horizon, 8)]),
    ]
    return jobs, pools, horizon


def _holds_every_rule(state: Search, pools, horizon: int, before: list) -> None:
    """Every job placed ``before`` is still placed; windows, dependencies and capacity hold; and the
    search's own books (GPUs free, where each job runs) agree with the placements."""
    assert all(state.placed[y] is not None for y, p in enumerate(before) if p is not None)
    jobs = state.jobs
    index = {job.name: k for k, job in enumerate(jobs)}
    use = [np.zeros(horizon + 1, dtype=np.int64) for _ in pools]
    for k, (job, p) in enumerate(zip(jobs, state.placed)):
        if p is None:
            assert state.run_pool[k] == -1
            continue
        i, s = p
        assert job.release <= s and s + job.durations[i] <= job.deadline
        for dep in job.after:
            assert (q := state.placed[index[dep]]) is not None and q[1] + jobs[index[dep]].durations[q[0]] <= s
        use[POOL_OF[job.options[i].row.offer_name]][s : s + job.durations[i]] += job.options[i].row.gpus
        runs = (POOL_OF[job.options[i].row.offer_name], s, s + job.durations[i], job.options[i].row.gpus)
        assert (state.run_pool[k], state.run_start[k], state.run_end[k], state.run_gpus[k]) == runs
    for free, cap, used in zip(state.free, capacity_arrays(pools, horizon), use):
        assert (used[:horizon] <= 8).all() and (free == cap - used).all()


def _greedy_state(instance) -> Search:
    """The search's state from the greedy schedule of a drawn instance."""
    jobs, pools, horizon = instance
    return Search(jobs, pools, POOL_OF, horizon, None, greedy_schedule(jobs, pools, POOL_OF, horizon), workers=1)


@settings(max_examples=200, deadline=None)
@given(_packed_pools(), st.integers(0, 7))
def test_inserting_a_job_keeps_every_rule_and_every_placed_job(instance, near):
    state = _greedy_state(instance)
    jobs, pools, horizon = instance
    for k in [k for k, p in enumerate(state.placed) if p is None]:
        before = list(state.placed)
        placed = state.insert(k, list(range(len(jobs[k].options))), near)
        if not placed:
            assert state.placed == before
            continue
        assert state.placed[k] is not None
        _holds_every_rule(state, pools, horizon, before)


@settings(max_examples=100, deadline=None)
@given(_packed_pools())
def test_putting_the_left_out_jobs_in_keeps_every_rule_and_every_placed_job(instance):
    state = _greedy_state(instance)
    _, pools, horizon = instance
    before = list(state.placed)
    added = state.place_left_out(time.perf_counter() + 5)
    assert sum(p is not None for p in state.placed) == sum(p is not None for p in before) + added
    _holds_every_rule(state, pools, horizon, before)


@settings(max_examples=100, deadline=None)
@given(_packed_pools(), st.lists(st.floats(0, 200), min_size=16, max_size=16))
def test_relocating_keeps_every_rule_and_never_costs_more(instance, prices):
    # at any prices (what the relaxation says only steers which jobs move and where to)
    state = _greedy_state(instance)
    jobs, pools, horizon = instance
    before, cost = list(state.placed), state.cost_cents()
    slots = priced_slots(jobs, POOL_OF, horizon, [np.array(prices[:8]), np.array(prices[8:])])
    relocate_far(state, slots, time.perf_counter() + 5)
    assert state.cost_cents() <= cost
    _holds_every_rule(state, pools, horizon, before)


@settings(max_examples=100, deadline=None)
@given(_packed_pools())
def test_a_jobs_cheapest_fit_is_the_cheapest_option_with_room_at_its_earliest_start(instance):
    # brute force over every option and start, each placed job lifted out in turn
    state = _greedy_state(instance)
    jobs, pools, horizon = instance
    for k, p in enumerate(state.placed):
        state._use(k, p, +1)
        r, lim = state._bounds(k)
        fits = [
            (state.cents[k][i], i, s)
            for i, (opt, d) in enumerate(zip(jobs[k].options, jobs[k].durations))
            for s in range(r, lim - d + 1)
            if all(state.free[POOL_OF[opt.row.offer_name]][t] >= opt.row.gpus for t in range(s, s + d))
        ]
        cents, i, s = min(fits) if fits else (0, None, None)
        assert state._cheapest_fit(k) == (cents, None if i is None else (i, s))
        state._use(k, p, -1)


def _constructed(n_jobs: int, seed: int = 0) -> tuple[Portfolio, Catalog]:
    """Jobs packed by hand into two pools (one shape per token count, repeated), then given windows
    around their packed slots: a schedule placing every job exists by construction."""
    rng = random.Random(seed)
    offers = [
        Offer(name="cheap", sku="H100-SXM", price=2.0, gpus_per_node=8, gpu_counts=[4, 8], max_nodes=1),
        Offer(name="dear", sku="H200", price=4.0, gpus_per_node=8, gpu_counts=[4, 8], max_nodes=1),
    ]
    catalog = Catalog(name="built", skus=HW.skus, offers=offers)
    entries = [
        {"name": f"j{i}", "job": {"model": MODEL, "tokens": f"{rng.choice([2, 4, 6])}00M", "seq_len": 4096}}
        for i in range(n_jobs)
    ]
    pools = [{"offer": "cheap", "gpus": 8}, {"offer": "dear", "gpus": 8}]
    draft = Portfolio.model_validate({"horizon": "20d", "time_step": "4h", "pools": pools, "jobs": entries})
    horizon = whole_steps(draft.horizon_s, draft.time_step_s)
    jobs = prepare_jobs(draft, catalog, horizon)
    specs = pool_specs(draft, catalog, horizon)
    pool_of = {o: k for k, p in enumerate(specs) for o in p.offers}
    free = capacity_arrays(specs, horizon)
    for entry, job in zip(entries, jobs):
        order = list(range(len(job.options)))
        rng.shuffle(order)
        for i in order:
            opt, d = job.options[i], job.durations[i]
            p = pool_of[opt.row.offer_name]
            s = earliest_start(free[p], opt.row.gpus, d, rng.randrange(horizon // 2), horizon - d)
            if s is not None:
                free[p][s : s + d] -= opt.row.gpus
                entry["release"] = f"{4 * max(0, s - rng.randint(0, 3))}h"
                entry["deadline"] = f"{4 * min(horizon, s + d + rng.randint(0, 3))}h"
                break
        else:
            entry.update({"required": False})
    pf = Portfolio.model_validate({"horizon": "20d", "time_step": "4h", "pools": pools, "jobs": entries})
    return pf, catalog


def test_feasible_by_construction_drops_no_required_job():
    pf, catalog = _constructed(45)
    assert sum(e.required for e in pf.jobs) >= 20
    result = portfolio(pf, catalog=catalog, time_limit_s=8, workers=1)
    required = {e.name for e in pf.jobs if e.required}
    assert not [d.job for d in result.dropped if d.job in required]
    assert result.status in ("feasible", "optimal") and result.method == "lp_lns"
    check_schedule(pf, result, catalog)
    assert result.bound_source in ("lp_relaxation", "lagrangian_relaxation", "cp_sat") and result.bound_usd is not None
    assert result.bound_usd <= result.total_cost_usd + 0.01
    assert abs(result.gap - (result.total_cost_usd - result.bound_usd) / result.total_cost_usd) < 1e-3


def test_a_required_job_no_gpu_can_hold_leaves_the_large_portfolio_scheduled_and_says_why():
    # 46 jobs go to the search; one required job is a 2T-parameter model that fits no GPU of the catalog.
    # Nothing can place it, so the repair step does not try; every other required job is placed.
    pf, catalog = _constructed(45)
    model = {**MODEL, "params": "2T", "layers": 400, "hidden": 32768}
    huge = type(pf.jobs[0]).model_validate({"name": "huge", "job": {"model": model, "tokens": "1B", "seq_len": 4096}})
    pf = pf.model_copy(update={"jobs": [*pf.jobs, huge]})
    result = portfolio(pf, catalog=catalog, time_limit_s=8, workers=1)
    assert result.status == "infeasible" and result.method == "lp_lns"
    required = {e.name for e in pf.jobs if e.required}
    dropped = [(d.job, d.reason) for d in result.dropped if d.job in required]
    # the reason is solve's for one job: how much memory it needs against what the catalog holds
    assert [job for job, _ in dropped] == ["huge"]
    assert dropped[0][1].startswith("the training state needs") and "per GPU of" in dropped[0][1], dropped
    assert {j.job for j in result.schedule} >= required - {"huge"}


def test_a_budget_below_the_required_jobs_cheapest_total_is_infeasible_not_unknown():
    # 45 jobs go to the search, which cannot prove anything by itself; but the required jobs' cheapest
    # options already cost more than the budget, so no schedule exists and the answer says so: status
    # infeasible, the budget rule with how far over, no "raise the time limit", and the reasons say the
    # budget cannot carry the jobs left out.
    pf, catalog = _constructed(45)
    jobs, *_ = _setup(pf, catalog)
    floor = sum(min(o.cost_usd for o in j.options) for j in jobs if j.required and j.options)
    pf = pf.model_copy(update={"budget_usd": round(floor / 2, 2)})
    result = portfolio(pf, catalog=catalog, time_limit_s=6, workers=1)
    assert result.status == "infeasible" and result.method == "lp_lns"
    budget = [i for i in result.infeasible if i.constraint == "budget"]
    assert budget and abs(budget[0].over_by - (floor - pf.budget_usd)) < 0.01
    assert not any(i.constraint == "time_limit" for i in result.infeasible)
    required = {e.name for e in pf.jobs if e.required}
    assert all("cannot carry" in d.reason for d in result.dropped if d.job in required)


def test_a_job_that_cannot_meet_its_deadline_after_the_job_it_waits_for_is_infeasible():
    # A required job made to wait ('after:') for the job that ends last, with a deadline it could meet
    # alone but not after that one: no schedule exists, and the search path (45 jobs) says so by rule,
    # naming the job it waits for and by how much it is late, instead of "raise the time limit".
    from optimizer.explain import earliest_ends

    pf, catalog = _constructed(45)
    jobs, *_ = _setup(pf, catalog)
    ends = earliest_ends(jobs)
    first = max(jobs, key=lambda j: ends[j.name])
    second = min((j for j in jobs if j.required and j is not first), key=lambda j: j.release)
    steps = ends[first.name] + min(second.durations) - 1  # one step short
    entries = [
        e.model_copy(update={"after": [first.name], "deadline_s": steps * pf.time_step_s})
        if e.name == second.name
        else e
        for e in pf.jobs
    ]
    pf = pf.model_copy(update={"jobs": entries})
    result = portfolio(pf, catalog=catalog, time_limit_s=6, workers=1)
    assert result.status == "infeasible" and result.method == "lp_lns"
    rule = [i for i in result.infeasible if i.constraint == "deadline" and repr(second.name) in i.detail]
    assert rule and repr(first.name) in rule[0].detail and abs(rule[0].over_by - pf.time_step_s / 3600) < 1e-6
    assert not any(i.constraint == "time_limit" for i in result.infeasible)
    assert [d.reason for d in result.dropped if d.job == second.name] == [
        "cannot meet its deadline after the jobs it waits for ('after:')"
    ]


def test_a_budget_that_drops_optional_jobs_is_proven_optimal_not_left_at_the_relaxations_gap():
    # 45 jobs, every third optional, and a budget at 90 % of what they all cost: some optional jobs must
    # go. The relaxations price the budget fractionally, so the search alone once proved only a 26 % gap
    # on its (already optimal) schedule, and it cannot prove which optional jobs must go; a portfolio
    # this small then goes to the whole model in CP-SAT from that schedule, which proves it within the
    # same time limit.
    pf, catalog = _constructed(45)
    jobs = [
        e.model_copy(update={"required": False, "priority": 1 + k % 3}) if k % 3 == 0 else e
        for k, e in enumerate(pf.jobs)
    ]
    pf = pf.model_copy(update={"jobs": jobs})
    everything = portfolio(pf, catalog=catalog, time_limit_s=8, workers=1)
    assert not everything.dropped
    pf = pf.model_copy(update={"budget_usd": round(0.9 * everything.total_cost_usd, 2)})
    result = portfolio(pf, catalog=catalog, time_limit_s=8, workers=1)
    assert result.dropped and not [d for d in result.dropped if "required" in d.reason]
    check_schedule(pf, result, catalog)
    assert result.status == "optimal" and result.gap < 1e-6
    # the cost bound may come from the relaxation itself (its rounded schedule is optimal here); that
    # no schedule drops less weight is CP-SAT's proof
    assert result.bound_source in ("cp_sat", "lagrangian_relaxation")


def test_time_limit_holds_end_to_end():
    pf, catalog = _constructed(60, seed=1)
    started = time.perf_counter()
    result = portfolio(pf, catalog=catalog, time_limit_s=4, workers=1, started=started)
    took = time.perf_counter() - started
    assert took < 4 + 1.5, took
    assert result.schedule and result.solve_s <= took + 1e-6


def test_the_time_limit_holds_while_options_are_built():
    """Each distinct job's table takes time (here ~5 ms, 0.1 s on a real catalog): past the limit the answer
    is "unknown", at once, with the time limit as the reason and nothing claimed infeasible (300 such jobs
    ran 22.9 s under a 2 s limit); the jobs evaluated by then are scheduled, the others left out as not
    evaluated (issue 40: a time limit ends in the best answer known, not in nothing)."""
    pf, catalog = _constructed(400, seed=2)  # 400 distinct jobs: about 2 s of tables
    jobs = [
        j.model_copy(update={"job": j.job.model_copy(update={"seq_len": 1024 + 16 * k})}) for k, j in enumerate(pf.jobs)
    ]
    pf = pf.model_copy(update={"jobs": jobs})
    started = time.perf_counter()
    result = portfolio(pf, catalog=catalog, time_limit_s=0.3, workers=1, started=started)
    assert time.perf_counter() - started < 0.3 + 1.0
    assert result.status == "unknown" and len(result.schedule) < len(jobs)
    assert [i.constraint for i in result.infeasible] == ["time_limit"] and "--time-limit" in result.infeasible[0].detail
    unevaluated = [d for d in result.dropped if "before its options were evaluated" in d.reason]
    assert len(result.schedule) + len(result.dropped) == len(jobs) and len(unevaluated) > len(jobs) // 2


def test_jobs_of_one_shape_share_one_table():
    pf, catalog = _constructed(12)
    horizon = whole_steps(pf.horizon_s, pf.time_step_s)
    jobs = prepare_jobs(pf, catalog, horizon)
    assert len({id(j.table) for j in jobs}) <= 3 < len(jobs)
    assert drop_weights(jobs)[0] >= 1


@pytest.mark.parametrize("method", ["full", "lora"])
@pytest.mark.parametrize("tokens", ["3M", "700M", "40B"])
def test_a_table_retimed_for_other_tokens_is_the_table_built_for_them(method, tokens):
    """Jobs that differ only in tokens share one evaluation of their layouts: the retimed table equals,
    row by row, the one built from scratch (best layout, hours, cost), from a few minutes of training,
    where start-up dominates and the 1 % tie band picks other layouts, to weeks."""
    catalog = load_catalog("default")

    def ctx(n: str):
        job = JobSpec(
            model=ModelSpec(
                params=8.03e9, layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256
            ),
            method=method,
            tokens=n,
            global_batch=64,
        )
        return job_context(Problem(job=job), catalog)

    built, retimed_table = build_table(ctx(tokens)), retimed(build_table(ctx("1B")), ctx(tokens))
    assert [(c.row, c.index, c.time_s, c.cost_usd, c.rejected_by) for c in retimed_table.candidates] == [
        (c.row, c.index, c.time_s, c.cost_usd, c.rejected_by) for c in built.candidates
    ]


def test_jobs_of_one_shape_and_many_token_counts_share_one_evaluation():
    pf, catalog = _constructed(12)
    jobs = [
        j.model_copy(update={"job": j.job.model_copy(update={"tokens": 1e8 * (k + 1), "global_batch": 64})})
        for k, j in enumerate(pf.jobs)
    ]
    pf = pf.model_copy(update={"jobs": jobs})
    data = prepare_jobs(pf, catalog, whole_steps(pf.horizon_s, pf.time_step_s))
    assert len({id(j.table) for j in data}) == len(data)  # a table per token count
    assert len({id(j.table.evaluation.timing) for j in data}) == 1  # one evaluation of the one shape


def test_a_freed_job_may_leave_a_full_pool_for_its_cheapest_option_on_another():
    # a has four options on the cheap pool, all cheaper than its one on the dear pool, so neither the
    # priced shortlist nor the cheapest two reach the dear pool; b runs only on the cheap pool, in the
    # same two steps. A neighbourhood freeing both places b only if a may take its cheapest dear option.
    a = _job(
        "a", [("cheap", 2, 10.0), ("cheap", 2, 11.0), ("cheap", 2, 12.0), ("cheap", 2, 13.0), ("dear", 2, 20.0)], (0, 2)
    )
    jobs = [a, CONTESTED[1]]
    state = Search(jobs, TWO_POOLS, POOL_OF, 4, None, [(0, 0), None], workers=1)
    state.allowed = freed_options(state, priced_slots(jobs, POOL_OF, 4, [np.zeros(4), np.zeros(4)]))
    assert state.allowed[0] == {0, 1, 2, 4}
    assert state.reoptimise_many([[0, 1]], 5.0) == [(True, True)]
    assert state.placed == [(4, 0), (0, 0)] and state.cost_cents() == 3_000


def test_iterated_greedy_gives_up_on_a_schedule_it_cannot_catch_at_its_pace():
    # $1 off in 10 s, $5 behind: 10 s more leave it behind, 60 s more do not; no progress never catches
    # up; a search dropping more weight is behind whatever it costs, one dropping less is ahead.
    assert behind((0, 10_000), (0, 9_900), (0, 9_400), spent_s=10, left_s=10)
    assert not behind((0, 10_000), (0, 9_900), (0, 9_400), spent_s=10, left_s=60)
    assert behind((0, 10_000), (0, 10_000), (0, 9_999), spent_s=1, left_s=1_000)
    assert behind((1, 10_000), (1, 5_000), (0, 20_000), spent_s=1, left_s=1_000)
    assert not behind((0, 10_000), (0, 10_000), (1, 1_000), spent_s=1, left_s=0)


def test_a_repair_places_its_job_or_changes_nothing():
    # The repair step's neighbourhood must place its job (b, out, runs only on the cheap pool that a
    # holds): it moves a to the dear pool. Where a has nowhere else to go, the neighbourhood is
    # infeasible and the schedule stays as it was, not traded for a dearer one.
    state = Search(CONTESTED, TWO_POOLS, POOL_OF, 4, None, [(0, 0), None], workers=1)
    [(improved, _)] = state.reoptimise_many([[1, 0]], 5.0, must=1)
    assert improved and state.placed == [(1, 0), (0, 0)]
    alone = [_job("a", [("cheap", 2, 10.0)], (0, 2)), _job("b", [("cheap", 2, 10.0)], (0, 2))]
    state = Search(alone, TWO_POOLS, POOL_OF, 4, None, [(0, 0), None], workers=1)
    [(improved, _)] = state.reoptimise_many([[1, 0]], 5.0, must=1)
    assert not improved and state.placed == [(0, 0), None]


def _waiting_pair() -> tuple[list[SimpleNamespace], list[SimpleNamespace], dict[str, int]]:
    """Issue 53's drop, small: 'pre' is released at step 7 with no deadline of its own, cheapest on the slow
    pool (6 steps), dearer on the fast one (2 steps); 'dep' waits for it and must end by step 11 (2 steps on
    either pool). Started on its cheapest option, pre ends at 13, so dep misses its deadline while the fast
    pool sits idle; on the fast pool pre ends at 9 and dep fits."""
    pools = [
        SimpleNamespace(offers={"slow"}, segments=[(0, 20, 8)]),
        SimpleNamespace(offers={"fast"}, segments=[(0, 20, 8)]),
    ]
    pre = _job("pre", [("slow", 6, 10.0), ("fast", 2, 30.0)], (7, 20))
    pre.deadline = None
    dep = _job("dep", [("slow", 2, 5.0), ("fast", 2, 8.0)], (7, 11))
    dep.after = ["pre"]
    return [pre, dep], pools, {"slow": 0, "fast": 1}


def test_a_job_others_wait_for_ends_when_their_deadlines_need_it():
    jobs, pools, pool_of = _waiting_pair()
    placed = greedy_schedule(jobs, pools, pool_of, 20)
    assert placed[1] is not None, placed  # it was None: pre took its cheapest option, ending at step 13
    assert placed == [(1, 7), (0, 9)]


def test_a_required_job_is_rescued_by_moving_the_job_it_waits_for_earlier():
    # The schedule as the failing construction left it: pre on the slow pool from step 7, dep out. Before
    # dep is given up, the repair step moves pre to the fast pool, where it ends in time, and places dep.
    jobs, pools, pool_of = _waiting_pair()
    state = Search(jobs, pools, pool_of, 20, None, [(0, 7), None], workers=1)
    assert state.rescue(1)
    assert state.placed == [(1, 7), (0, 9)]
    # nothing to wait for and no room anywhere in its window: it stays out, and nothing moves
    blocked = [_job("big", [("slow", 5, 1.0)], (0, 4))]
    alone = Search(blocked, pools, pool_of, 20, None, [None], workers=1)
    assert not alone.rescue(0) and alone.placed == [None]


def _finetunes(specs: list[dict]) -> Portfolio:
    """Inline jobs of the 8B model on the default catalog, one per spec (fields of the job)."""
    jobs = [
        {"name": f"j{i}", "job": {"model": MODEL, "seq_len": 4096, "global_batch": 64, **spec}}
        for i, spec in enumerate(specs)
    ]
    return Portfolio.model_validate({"horizon": "30d", "pools": [{"offer": "nodus-b200", "gpus": 16}], "jobs": jobs})


@pytest.mark.parametrize("method", ["lora", "full"])
def test_a_compact_table_retimed_is_the_whole_table_retimed(method):
    # A compact table keeps a few layouts per row out of up to 125,000 (issue 53: 5.4 GB at 1,000 distinct
    # jobs); for every token count it gives the candidates, and the plans, that the whole table gives.
    catalog = load_catalog("default")
    pf = _finetunes([{"method": method, "tokens": t} for t in ("1B", "100M", "40B")])
    ctxs = [job_context(portfolio_job_problem(pf, i), catalog) for i in range(3)]
    whole = build_table(ctxs[0])
    small = compact(whole)
    assert len(small.evaluation.row) * 20 < len(whole.evaluation.row)
    for ctx in ctxs:
        expected, got = retimed(whole, ctx), retime(small, ctx)

        def seen(table):  # (the index into the evaluation differs: the compact one has fewer layouts)
            return [
                {k: v for k, v in vars(c).items() if k != "index"} | {"found": c.index >= 0} for c in table.candidates
            ]

        assert seen(got) == seen(expected)
        for a, b in zip(expected.candidates, got.candidates):
            if a.index >= 0 and a.rejected_by is None:
                want = plan_from(ctx, a.row, expected.evaluation, a.index).model_dump()
                assert plan_from(ctx, b.row, got.evaluation, b.index).model_dump() == want


def test_tables_built_on_two_cores_are_the_tables_built_in_line():
    catalog = load_catalog("default")
    specs = [{"method": m, "tokens": "1B", "seq_len": s} for m in ("lora", "qlora") for s in (2048, 4096)]
    pf = _finetunes(specs + [{"method": "lora", "tokens": "3B", "seq_len": 2048}])
    horizon = whole_steps(pf.horizon_s, pf.time_step_s)
    one, two = prepare(pf, catalog, horizon, workers=1), prepare(pf, catalog, horizon, workers=2)
    assert two.tables == one.tables == 5 and not two.unevaluated

    def seen(p):
        return [[(o.row.key, o.index, o.time_s, o.cost_usd) for o in job.options] + job.durations for job in p.jobs]

    assert seen(two) == seen(one) and all(job.table.ctx is not None for job in two.jobs)
