"""``portfolio``: many jobs sharing GPU pools and one budget over a calendar (docs/design.md section 10).

Time runs in steps of ``time_step`` (default one hour) from the portfolio start. The model is built by
``build``; the solve is lexicographic, in two CP-SAT runs: first the weight of dropped jobs (a required
job weighs more than all optional ones together, so a schedule always exists and the greedy schedule is
a complete warm start), then, with that weight fixed, the portfolio's objective. When CP-SAT finds
nothing in time the greedy schedule is the answer, labelled. A required job still dropped makes the
answer infeasible only when the first run proved it; otherwise the status is unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ortools.sat.python import cp_model

from ...inputs.schema import Catalog, Portfolio
from ...physics.constants import CENTS_PER_USD, optimality_gap, usd_to_cents
from ...results import PortfolioResult
from .build import PortfolioModel, build, warm_start
from .data import pool_specs, prepare_jobs, shortlist
from .extract import extract
from .greedy import greedy_schedule

# Past this many options, jobs keep a shortlist and presolve skips probing (measured: probing ate
# 13 s of a 13 s limit at 1,000 jobs before search started).
LARGE_MODEL_OPTIONS = 5_000

Choices = list[tuple[int | None, int]]  # per job: option index (None: dropped) and start step


class _Progress(cp_model.CpSolverSolutionCallback):
    """Prints the current best objective and bound while solving (interactive terminals only)."""

    def __init__(self, out: Callable[[str], None]):
        super().__init__()
        self._out = out
        self._t0 = time.perf_counter()
        self.phase = "jobs"  # "jobs": dropped weight; then the objective (cost in USD, or its own unit)

    def on_solution_callback(self) -> None:
        value, bound = self.objective_value, self.best_objective_bound
        if self.phase == "cost":
            text = f"cost ${value / CENTS_PER_USD:,.2f}  bound ${bound / CENTS_PER_USD:,.2f}"
        elif self.phase == "jobs":
            text = f"dropped weight {value:,.0f}  bound {bound:,.0f}"
        else:
            text = f"{self.phase} objective {value:,.0f}  bound {bound:,.0f}"
        self._out(f"  {time.perf_counter() - self._t0:6.1f} s  {text}")


@dataclass
class PortfolioOutcome:
    """The result, the model it came from (for explanations), and whether dropping was proven optimal."""

    result: PortfolioResult
    model: PortfolioModel
    dropped_proven: bool


def solve_portfolio(
    pf: Portfolio,
    catalog: Catalog,
    *,
    time_limit_s: float = 60.0,
    workers: int = 2,
    progress: Callable[[str], None] | None = None,
) -> PortfolioOutcome:
    """Schedule every job of the portfolio: which option, when, at what cost; what was dropped."""
    started = time.perf_counter()
    step = pf.time_step_s
    horizon = int(pf.horizon_s // step)
    pools = pool_specs(pf, catalog, horizon)
    jobs = prepare_jobs(pf, catalog, horizon)
    large = sum(len(job.options) for job in jobs) > LARGE_MODEL_OPTIONS
    notes = []
    if large:
        total = sum(len(job.options) for job in jobs)
        for job in jobs:
            job.options, job.durations = shortlist(job.options, job.durations)
        notes.append(
            f"large portfolio: each job keeps its two cheapest and its fastest option per offer "
            f"({sum(len(job.options) for job in jobs):,} of {total:,} options); the optimum is over that shortlist"
        )
    pm = build(pf, jobs, pools, horizon)
    budget_cents = None if pf.budget_usd is None else usd_to_cents(pf.budget_usd)
    placed = greedy_schedule(jobs, pools, pm.pool_of, horizon, budget_cents)
    warm_start(pm, placed)
    solver, status, dropped_proven = _two_phase(pm, time_limit_s, workers, progress, started, large)

    result = PortfolioResult(
        status="unknown",
        objective=pf.objective,
        total_cost_usd=0.0,
        gap=0.0,
        schedule=[],
        dropped=[],
        pools=[],
        budget_usd=pf.budget_usd,
        horizon_h=horizon * step / 3600.0,
        notes=notes,
    )
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        result.status = "optimal" if status == cp_model.OPTIMAL else "feasible"
        result.gap = optimality_gap(solver.objective_value, solver.best_objective_bound, status == cp_model.OPTIMAL)
        choices: Choices = [(v.picked(solver), solver.value(start)) for v, start in zip(pm.jv, pm.starts)]
    else:
        result.status = "feasible"
        choices = [(p[0], p[1]) if p else (None, 0) for p in placed]
        result.gap = _greedy_gap(pm, choices)
        result.notes.append(
            f"CP-SAT found no schedule within {time_limit_s:g} s: this is the greedy schedule "
            "(earliest deadline first, cheapest option); raise --time-limit or coarsen time_step"
        )
    extract(pf, jobs, choices, pools, result)
    result.solve_s = time.perf_counter() - started
    return PortfolioOutcome(result, pm, dropped_proven)


def _two_phase(
    pm: PortfolioModel, time_limit_s: float, workers: int, progress, started: float, large: bool
) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus, bool]:
    """Minimise the dropped weight (a third of the time), then, with it fixed, the objective."""
    m = pm.pm.model
    solver = pm.pm.solver(time_limit_s / 3, workers=workers)
    if large:
        solver.parameters.cp_model_probing_level = 0
    callback = _Progress(progress) if progress else None
    dropped = pm.dropped_weight()
    m.minimize(dropped)
    status = solver.solve(m, callback)
    dropped_proven = status == cp_model.OPTIMAL
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        m.add(dropped <= round(solver.objective_value))
        m.clear_hints()
        for v in pm.jv:
            for pick in v.picks:
                m.add_hint(pick, solver.boolean_value(pick))
        for start in pm.starts:
            m.add_hint(start, solver.value(start))
        solver.parameters.max_time_in_seconds = max(1.0, time_limit_s - (time.perf_counter() - started))
        m.minimize(pm.objective())
        if callback:
            callback.phase = pm.pf.objective
        status = solver.solve(m, callback)
    return solver, status, dropped_proven


def _greedy_gap(pm: PortfolioModel, choices: Choices) -> float:
    """The greedy schedule's gap against each scheduled job's cheapest option."""
    picked = [(job, i) for job, (i, _) in zip(pm.jobs, choices) if i is not None]
    cost = sum(job.options[i].cost_usd for job, i in picked)
    floor = sum(min(c.cost_usd for c in job.options) for job, _ in picked)
    return (cost - floor) / cost if cost else 0.0
