"""The whole model in CP-SAT (docs/design.md section 10): small portfolios (``solve.SEARCH_JOBS`` jobs or fewer,
and every objective but cost) are solved in it, warm-started from greedy; search-path portfolios up to
``solve.POLISH_JOBS`` jobs end in it, hinted with the search's schedule (``_polish``). Lexicographic, in two runs:
first the weight of dropped jobs, then, with that fixed, the objective. Each run's time is counted in work, as
CP-SAT's deterministic time (``_solve_within``), and its search is the same on every run (``_deterministic``): two
runs stop at the same point whatever the machine's pace, and the wall clock stops one only at the work budget's
safety stop, which the answer then says (``work.CUT_NOTE``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from ...inputs.schema import Portfolio
from ...money import CENTS_PER_USD, usd_to_cents
from ...money import budget_cents as budget_cents_of
from ...results import PortfolioResult
from ..single import optimality_gap
from . import work
from .build import PortfolioModel, build, warm_start
from .data import JobData, PoolSpec, shortlist
from .greedy import Placement, greedy_schedule
from .lp import drop_weights, lp_bound
from .progress import cost_gap, say_at

# Past this many options, jobs keep a shortlist and presolve skips probing (measured: probing ate
# 13 s of a 13 s limit at 1,000 jobs before search started).
LARGE_MODEL_OPTIONS = 5_000


# CP-SAT's interleaved search (``_deterministic``) checks its deterministic limit between batches, and ends past it:
# measured on 30 jobs, at 2.0-3.8 times a limit of 0.5-2.26 s; it is given the limit over this (2.5: one of two
# 30-job instances of tests/solver/test_portfolio_determinism.py's without deadlines ran into the wall clock at 10 s).
INTERLEAVE_OVERRUN = 3.0


Choices = list[tuple[int | None, int]]  # per job: option index (None: dropped) and start step


class _Progress(cp_model.CpSolverSolutionCallback):
    """Prints the phase, the best objective, the bound and the gap while CP-SAT solves."""

    def __init__(self, out: Callable[[str], None], started: float | None = None, lp_bound: float | None = None):
        super().__init__()
        self._out = out
        self._t0 = time.perf_counter() if started is None else started
        self.lp_bound = lp_bound  # cents, raises the cost phase's bound
        self.phase = "jobs"  # "jobs": dropped weight; then the objective (cost in USD, or its own unit)

    def on_solution_callback(self) -> None:
        value, bound = self.objective_value, self.best_objective_bound
        if self.phase == "cost":
            bound = max(bound, self.lp_bound or 0.0)
            gap = (value - bound) / value if value else 0.0
            text = f"cp-sat   cost ${value / CENTS_PER_USD:,.2f}  bound ${bound / CENTS_PER_USD:,.2f}  gap {gap:.2%}"
        elif self.phase == "jobs":
            text = f"cp-sat   dropped weight {value:,.0f}  bound {bound:,.0f}"
        else:
            text = f"cp-sat   {self.phase} objective {value:,.0f}  bound {bound:,.0f}"
        self._out(f"  {time.perf_counter() - self._t0:6.1f} s  {text}")


@dataclass
class PortfolioData:
    """What explanations need: the jobs with their options, the pools, the horizon in steps."""

    jobs: list[JobData]
    pools: list[PoolSpec]
    horizon: int


def _greedy_only(jobs: list[JobData], weights: list[int], placed: list[Placement], result: PortfolioResult) -> Choices:
    """The answer when no time is left for the search: the greedy schedule, its gap against every placed job
    at its cheapest option (and every required job, when none may be dropped), said as such."""
    dropped = sum(w for w, p in zip(weights, placed) if p is None)
    cost = sum(usd_to_cents(job.options[p[0]].cost_usd) for job, p in zip(jobs, placed) if p is not None)
    bound = _cheapest_bound(jobs, weights, dropped)
    result.method, result.status, result.bound_source = "greedy", "feasible", "cheapest_options"
    result.bound_usd = round(bound / CENTS_PER_USD, 2)
    result.gap = cost_gap(cost, bound)
    result.notes.append(
        "the time limit left no time for the search (reading the files and evaluating the options took it): "
        "this is the greedy schedule (earliest deadline first, cheapest option that fits); gap against every "
        "job at its cheapest option; raise --time-limit for the search"
    )
    return [(p[0], p[1]) if p else (None, 0) for p in placed]


def _polish(
    pf: Portfolio,
    data: PortfolioData,
    result: PortfolioResult,
    choices: Choices,
    dropped_proven: bool,
    deadline: float,
    workers: int,
    progress: Callable[[str], None] | None,
    started: float,
) -> tuple[Choices, bool]:
    """The whole model in CP-SAT (two phases, ``_two_phase``) hinted with the search's schedule; keeps
    whichever schedule drops less weight, then costs less, and the higher of the two bounds. Both bounds
    hold for the kept schedule: the search's is for as many drops as its own schedule or fewer, CP-SAT's
    for as many as its phase 1 proved or found, never more than the hint's."""
    jobs, pools, horizon = data.jobs, data.pools, data.horizon
    pm = _built(pf, jobs, pools, horizon)
    placed: list[Placement] = [(o, s) if o is not None else None for o, s in choices]
    warm_start(pm, placed)
    solver, status, proven = _two_phase(pm, deadline, workers, progress, started, False, None)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return choices, dropped_proven
    weights = drop_weights(jobs)

    def score(ch: Choices) -> tuple[int, int]:
        dropped = sum(w for w, (o, _) in zip(weights, ch) if o is None)
        return dropped, sum(usd_to_cents(job.options[o].cost_usd) for job, (o, _) in zip(jobs, ch) if o is not None)

    found: Choices = [(v.picked(solver), solver.value(start)) for v, start in zip(pm.jv, pm.starts)]
    best = min(found, choices, key=score)
    cost = score(best)[1]
    bound = max(result.bound_usd * CENTS_PER_USD if result.bound_usd is not None else 0.0, solver.best_objective_bound)
    if status == cp_model.OPTIMAL and best is found:
        bound = float(cost)
    raised = bound > (result.bound_usd or 0.0) * CENTS_PER_USD + 0.5
    if raised:
        result.bound_source = "cp_sat"
    result.bound_usd = round(bound / CENTS_PER_USD, 2)
    result.gap = cost_gap(cost, bound)
    if status == cp_model.OPTIMAL and proven and best is found:
        result.status = "optimal"  # the fewest drops proven, then the least cost for them
    result.notes.append(
        f"then the whole model in CP-SAT from that schedule ({'optimal' if status == cp_model.OPTIMAL else 'stopped'}"
        f"{', a better schedule' if best is found and score(found) < score(choices) else ''})"
        + ("; the gap is now against CP-SAT's bound" if raised else "")
    )
    return best, dropped_proven or proven


def _cheapest_bound(jobs: list[JobData], weights: list[int], dropped_limit: int) -> float:
    """Cents: every required job at its cheapest option, when dropping one would drop more than allowed."""
    return float(
        sum(
            min(usd_to_cents(c.cost_usd) for c in job.options)
            for job, w in zip(jobs, weights)
            if job.options and w > dropped_limit
        )
    )


def _exact(
    pf: Portfolio,
    data: PortfolioData,
    result: PortfolioResult,
    deadline: float,
    workers: int,
    progress: Callable[[str], None] | None,
    started: float,
    time_limit_s: float,
) -> tuple[Choices, bool]:
    """The whole model in CP-SAT (two phases), warm-started from greedy; greedy when it finds nothing."""
    jobs, pools, horizon = data.jobs, data.pools, data.horizon
    large = sum(len(job.options) for job in jobs) > LARGE_MODEL_OPTIONS
    if large:
        total = sum(len(job.options) for job in jobs)
        for job in jobs:
            job.options, job.durations = shortlist(job.options, job.durations)
        result.notes.append(
            f"large portfolio: each job keeps its two cheapest and its fastest option per offer "
            f"({sum(len(job.options) for job in jobs):,} of {total:,} options); the optimum is over that shortlist"
        )
    budget_cents = None if pf.budget_usd is None else budget_cents_of(pf.budget_usd)
    if work.past(deadline):  # no time for the model (5,000 jobs: seconds to build): greedy at once
        pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
        placed = greedy_schedule(jobs, pools, pool_of, horizon, budget_cents)
        return _greedy_only(jobs, drop_weights(jobs), placed, result), False
    pm = _built(pf, jobs, pools, horizon)
    placed = greedy_schedule(jobs, pools, pm.pool_of, horizon, budget_cents)
    greedy_cost = sum(usd_to_cents(job.options[p[0]].cost_usd) for job, p in zip(jobs, placed) if p)
    say_at(progress, started)(f"greedy   cost ${greedy_cost / CENTS_PER_USD:,.2f}")
    warm_start(pm, placed)
    lp_cents = None
    if pf.objective == "cost":
        weights = drop_weights(jobs)
        dropped = sum(w for w, p in zip(weights, placed) if p is None)
        left = work.left(deadline)
        lp = lp_bound(jobs, pools, pm.pool_of, horizon, budget_cents, dropped, time_limit_s=max(0.5, 0.2 * left))
        lp_cents = lp.bound_cents
    solver, status, dropped_proven = _two_phase(pm, deadline, workers, progress, started, large, lp_cents)
    result.method = "cp_sat"
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        result.status = "optimal" if status == cp_model.OPTIMAL else "feasible"
        bound, source = solver.best_objective_bound, "cp_sat"
        if lp_cents is not None and lp_cents > bound and pf.objective == "cost":
            # The LP bound holds for as few drops as the greedy schedule: valid if CP-SAT's is no better.
            new_drop = sum(w for w, v in zip(drop_weights(jobs), pm.jv) if v.picked(solver) is None)
            if new_drop >= sum(w for w, p in zip(drop_weights(jobs), placed) if p is None):
                bound, source = lp_cents, "lp_relaxation"
        if status == cp_model.OPTIMAL:
            bound = solver.objective_value
        result.gap = optimality_gap(solver.objective_value, bound, status == cp_model.OPTIMAL)
        if pf.objective == "cost":
            result.bound_usd = round(bound / CENTS_PER_USD, 2)
            result.bound_source = source
        choices: Choices = [(v.picked(solver), solver.value(start)) for v, start in zip(pm.jv, pm.starts)]
    else:
        result.status = "feasible"
        result.method = "greedy"
        choices = [(p[0], p[1]) if p else (None, 0) for p in placed]
        result.gap = _greedy_gap(pm, choices)
        result.bound_source = "cheapest_options"
        result.notes.append(
            f"CP-SAT found no schedule within {time_limit_s:g} s: this is the greedy schedule "
            "(earliest deadline first, cheapest option); raise --time-limit or coarsen time_step"
        )
    return choices, dropped_proven


def _two_phase(
    pm: PortfolioModel, deadline: float, workers: int, progress, started: float, large: bool, lp_cents: float | None
) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus, bool]:
    """Minimise the dropped weight (a third of the time left), then, with it fixed, the objective. ``deadline``: in
    the running work budget's time (``work``), each phase limited by CP-SAT's deterministic time, so that where
    it stops is the same on every run; the wall clock only stops it at the budget's safety stop."""
    m = pm.pm.model
    solver = pm.pm.solver(1.0, workers=workers)
    _deterministic(solver, m, workers)
    if large:
        solver.parameters.cp_model_probing_level = 0
    callback = _Progress(progress, started, lp_cents) if progress else None
    dropped = pm.dropped_weight()
    m.minimize(dropped)
    status = _solve_within(solver, m, callback, max(0.1, work.left(deadline) / 3))
    dropped_proven = status == cp_model.OPTIMAL
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        m.add(dropped <= round(solver.objective_value))
        m.clear_hints()
        for v in pm.jv:
            for pick in v.picks:
                m.add_hint(pick, solver.boolean_value(pick))
        for start in pm.starts:
            m.add_hint(start, solver.value(start))
        m.minimize(pm.objective())
        if callback:
            callback.phase = pm.pf.objective
        status = _solve_within(solver, m, callback, max(0.1, work.left(deadline)))
    return solver, status, dropped_proven


def _built(pf: Portfolio, jobs: list[JobData], pools: list[PoolSpec], horizon: int) -> PortfolioModel:
    """The whole model (``build``), its building charged to the work budget."""
    pm = build(pf, jobs, pools, horizon)
    work.charge(work.BUILD_OPTION_S * sum(len(job.options) for job in jobs))
    return pm


def _deterministic(solver: cp_model.CpSolver, m: cp_model.CpModel, workers: int) -> None:
    """The same search on every run: one worker where the model has assumptions (CP-SAT then searches on one
    whatever it is told: "Forcing sequential search as assumptions are not supported in multi-thread"), or
    several interleaved in deterministic batches (``interleave_search``: the same answer whatever the threads'
    pace). A parallel search that shares its solutions as they come is not the same twice under a time limit."""
    if workers >= 2 and not m.proto.assumptions:
        solver.parameters.interleave_search = True
    elif m.proto.assumptions:
        solver.parameters.num_workers = 1


def _solve_within(
    solver: cp_model.CpSolver, m: cp_model.CpModel, callback: cp_model.CpSolverSolutionCallback | None, work_s: float
) -> cp_model.CpSolverStatus:
    """CP-SAT on ``m`` for ``work_s`` seconds of the reference machine, as its deterministic time (``work.CPSAT_MODEL_S``),
    the wall clock stopping it only at the work budget's safety stop; the work charged, and the budget marked
    stopped where the wall clock ended the solve (``work.stop``)."""
    over = INTERLEAVE_OVERRUN if solver.parameters.interleave_search else 1.0
    solver.parameters.max_deterministic_time = work_s * work.SPEED / (work.CPSAT_MODEL_S * over)
    solver.parameters.max_time_in_seconds = max(0.01, min(work.wall_left(), 1e6))
    status = solver.solve(m, callback)
    work.charge(work.CPSAT_MODEL_S * solver.deterministic_time)
    finished = status in (cp_model.OPTIMAL, cp_model.INFEASIBLE, cp_model.MODEL_INVALID)
    limits = solver.parameters
    if not finished and (
        solver.deterministic_time < limits.max_deterministic_time
        or solver.wall_time >= 0.99 * limits.max_time_in_seconds
    ):
        work.stop()  # (the wall clock's stop: where it came depends on the machine's pace)
    return status


def _greedy_gap(pm: PortfolioModel, choices: Choices) -> float:
    """The greedy schedule's gap against each scheduled job's cheapest option."""
    picked = [(job, i) for job, (i, _) in zip(pm.jobs, choices) if i is not None]
    cost = sum(job.options[i].cost_usd for job, i in picked)
    floor = sum(min(c.cost_usd for c in job.options) for job, _ in picked)
    return (cost - floor) / cost if cost else 0.0
