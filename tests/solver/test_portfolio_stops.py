"""Issue 53: the work-budgeted portfolio search ends at its wall-clock stop whatever the load, and every turn of
its loops moves its clock on. Once the wall clock has stopped the budget the clock reads infinity: a phase's
deadline set from it (now plus a share of what is left) must not be infinite too, nor the repair search's
``deadline - now`` NaN, which no ``left < 0.2`` stops (neighbourhoods of a few milliseconds each, without end)."""

from __future__ import annotations

import math
import time

import pytest
from test_portfolio_scale import _constructed, _setup

from optimizer import portfolio
from optimizer.solver.portfolio import work
from optimizer.solver.portfolio.greedy import greedy_schedule
from optimizer.solver.portfolio.lns import Search, search

STEPS_MAX = 50  # more neighbourhood steps than any of these searches may take


@pytest.fixture(scope="module")
def instance():
    pf, catalog = _constructed(60, 0)
    jobs, pools, pool_of, horizon, budget = _setup(pf, catalog)
    placed = greedy_schedule(jobs, pools, pool_of, horizon, budget)
    return pf, catalog, (jobs, pools, pool_of, horizon, budget, placed)


def _state(instance) -> Search:
    jobs, pools, pool_of, horizon, budget, placed = instance[2]
    return Search(jobs, pools, pool_of, horizon, budget, list(placed), workers=2)


def _failing_after(original, most: int, calls: list | None = None):
    """``Search.reoptimise_many`` failing past ``most`` calls: a search that would not end fails instead."""
    calls = [] if calls is None else calls

    def counted(self, subsets, time_limit_s, must=None):
        calls.append(len(subsets))
        assert len(calls) <= most, "the search goes on past its stop"
        return original(self, subsets, time_limit_s, must)

    return counted


@pytest.fixture
def few_steps(monkeypatch):
    """The neighbourhood steps a test's search takes (at most ``STEPS_MAX``)."""
    calls: list[int] = []
    monkeypatch.setattr(Search, "reoptimise_many", _failing_after(Search.reoptimise_many, STEPS_MAX, calls))
    return calls


def test_a_search_given_a_deadline_set_after_the_wall_clock_stop_ends_at_once(instance, few_steps):
    state = _state(instance)
    with work.budget(0.0, time.perf_counter() - 1.0) as clock:
        # how solve.py set a phase's end: now (infinite once stopped) plus a share of what is left (nothing)
        until = work.now() + 0.3 * max(0.0, 10.0 - work.now())
        assert until == math.inf
        t0 = time.perf_counter()
        search(state, until)
        assert time.perf_counter() - t0 < 5.0 and not few_steps and clock.cut
        # and the helpers that replace that arithmetic never give NaN
        assert work.left(until) == 0.0 and work.share_of(0.3, until) == math.inf and work.past(until)
        assert work.between(math.inf, math.inf) == 0.0 and work.past(math.nan)


def test_a_search_whose_picks_free_no_job_charges_its_turns_and_ends(instance, monkeypatch, few_steps):
    # every neighbourhood empty: before, each ran an empty CP-SAT model that charged nothing, tens of thousands of
    # them to the deadline; now a turn that frees no job costs ``STEP_FLOOR_S`` and solves nothing
    monkeypatch.setattr(Search, "around", lambda self, t, size, pools=None, seeds=None: [])
    state = _state(instance)
    with work.budget(0.0, math.inf) as clock:
        t0 = time.perf_counter()
        search(state, 2.0)
        assert time.perf_counter() - t0 < 10.0 and not few_steps and not clock.cut
    assert clock.spent >= 1.8


def test_a_clock_whose_work_never_advances_stops_at_the_wall_clock(instance, monkeypatch):
    # no work ever counted: only the wall clock's stop ends the search, and it does
    for name in ("READ_S", "SCAN_S", "SCAN_STEP_S", "MODEL_JOB_S", "STEP_FLOOR_S"):
        monkeypatch.setattr(work, name, 0.0)
    monkeypatch.setattr(work, "CPSAT_S", 1e-300)  # (a divisor: CP-SAT's deterministic limit)
    state = _state(instance)
    t0 = time.perf_counter()
    with work.budget(0.0, t0 + 1.5) as clock:
        search(state, 100.0)
    assert clock.cut and clock.spent < 1e-6 and time.perf_counter() - t0 < 1.5 + 3.0


@pytest.mark.parametrize("reads", [300, 5_000, 14_100])
def test_a_budget_stopped_anywhere_ends_the_whole_solve_promptly(monkeypatch, reads):
    # the wall clock's stop at the clock's ``reads``-th read, wherever the machine's pace: in the first ascent (where
    # a rounding left short of jobs wins and its repair search needs a finite deadline), in the roundings,
    # in the neighbourhoods (200 jobs: 525 reads to the first bound, 14,021 to the rounding, about 14,400 in all).
    # Every phase after it ends at its first check, and the answer says the wall clock stopped it. More than
    # solve.POLISH_JOBS jobs: no CP-SAT polish after the search (the wall clock times that on its own).
    pf, catalog = _constructed(200, 0)
    original = work.Clock.now

    def now(self):
        self.reads = getattr(self, "reads", 0) + 1
        self.cut = self.cut or self.reads > reads
        return original(self)

    monkeypatch.setattr(work.Clock, "now", now)
    monkeypatch.setattr(Search, "reoptimise_many", _failing_after(Search.reoptimise_many, STEPS_MAX))
    t0 = time.perf_counter()
    result = portfolio(pf, catalog=catalog, time_limit_s=60, workers=2)
    assert time.perf_counter() - t0 < 20.0
    assert work.CUT_NOTE in result.notes and result.method == "lp_lns"
    assert len(result.schedule) == len(pf.jobs)
