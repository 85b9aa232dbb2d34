"""``portfolio``: many jobs sharing GPU pools and one budget over a calendar, scheduled by CP-SAT.

Formulation (time in steps of ``time_step``, default one hour, counted from the portfolio start):

  data      per job j: options o = the rows of its candidate table that fit (same table as
            ``solve``), with duration d_jo = ceil(time / step), GPUs g_jo, cost c_jo (cents) and
            pool p(o); release r_j, deadline D_j, weight w_j, required or optional, predecessors.
            Per pool p: capacity over time (a base and windows).
  variables pick_jo (the PlanModel's per-job booleans, at most one per job), start_j, end_j, done_j = sum_o pick_jo, and an optional interval per (j, o)
            of length d_jo starting at start_j, present iff pick_jo; late_j for weighted lateness.
  constraints
            cumulative per pool: sum of g_jo over present intervals <= capacity(t); windows with
            less capacity become fixed blocking intervals of the difference;
            budget: sum pick_jo c_jo <= B; release: start_j >= r_j; horizon: end_j <= H;
            deadline (cost, makespan objectives): end_j <= D_j when done_j;
            dependencies: start_j >= end_k and done_j <= done_k for k before j.
  objective lexicographic, in two solves: first the weight of dropped jobs (a required job weighs
            more than all optional ones together, so a schedule always exists and the greedy one is a
            complete warm start), then, with that weight fixed, cost (sum c), makespan (max end) or
            weighted lateness (sum w_j late_j), ties broken by cost. A required job still dropped at
            the end makes the answer infeasible (proven when the first solve is optimal).

A single job is a portfolio of one; the same ``PlanModel`` builds both. Options on one offer that
another option of the same job beats on GPUs, duration and cost at once are pruned first.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional

from ortools.sat.python import cp_model

from ..loading import problem_catalog
from ..results import Infeasibility, PortfolioResult
from ..schema import Catalog, Portfolio
from .greedy import greedy_schedule
from .model import JobVars, PlanModel
from .portfolio_data import pool_specs, prepare_jobs, shortlist
from .portfolio_report import explain_portfolio, extract


class _Progress(cp_model.CpSolverSolutionCallback):
    """Prints the current best objective and bound while solving (interactive terminals only)."""

    def __init__(self, out: Callable[[str], None]):
        super().__init__()
        self._out = out
        self._t0 = time.perf_counter()
        self.phase = "jobs"  # "jobs": dropped weight; then the objective (cost in USD, or its own unit)

    def on_solution_callback(self) -> None:
        value, bound = self.ObjectiveValue(), self.BestObjectiveBound()
        if self.phase == "cost":
            value, bound = value / 100.0, bound / 100.0
            text = f"cost ${value:,.2f}  bound ${bound:,.2f}"
        elif self.phase == "jobs":
            text = f"dropped weight {value:,.0f}  bound {bound:,.0f}"
        else:
            text = f"{self.phase} objective {value:,.0f}  bound {bound:,.0f}"
        self._out(f"  {time.perf_counter() - self._t0:6.1f} s  {text}")


def portfolio(pf: Portfolio, *, catalog: Optional[Catalog] = None, time_limit_s: float = 60.0, workers: int = 2,
              progress: Optional[Callable[[str], None]] = None) -> PortfolioResult:
    """Schedule every job of the portfolio: which option, when, at what cost; what was dropped."""
    started = time.perf_counter()
    catalog = catalog or problem_catalog(pf)
    step = pf.time_step_s
    horizon = int(pf.horizon_s // step)
    pools = pool_specs(pf, catalog, horizon)
    jobs = prepare_jobs(pf, catalog, horizon)
    pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
    notes = []
    total_options = sum(len(job.options) for job in jobs)
    if total_options > LARGE_MODEL_OPTIONS:
        for job in jobs:
            job.options, job.durations = shortlist(job.options, job.durations)
        kept = sum(len(job.options) for job in jobs)
        notes.append(f"large portfolio: each job keeps its two cheapest and its fastest option per offer "
                     f"({kept:,} of {total_options:,} options); the optimum is over that shortlist")

    pm = PlanModel()
    m = pm.model
    jv: list[JobVars] = []
    starts, ends, dones, lates = [], [], [], []
    intervals_by_pool: dict[int, list] = {k: [] for k in range(len(pools))}
    for job in jobs:
        v = pm.add_job(f"j{job.index}", job.table, rows=job.options, required=False, attributes=False)
        jv.append(v)
        start = m.NewIntVar(min(job.release, horizon), horizon, f"start_j{job.index}")
        end = m.NewIntVar(0, horizon, f"end_j{job.index}")
        done = m.NewBoolVar(f"done_j{job.index}")
        m.Add(sum(v.picks) == done)
        m.Add(end == start + sum(d * p for d, p in zip(job.durations, v.picks)))
        m.Add(start == min(job.release, horizon)).OnlyEnforceIf(done.Not())
        for opt, dur, pick in zip(job.options, job.durations, v.picks):
            interval = m.NewOptionalFixedSizeIntervalVar(start, dur, pick, f"run_j{job.index}_{opt.row.key}")
            intervals_by_pool[pool_of[opt.row.offer.name]].append((interval, opt.row.gpus))
        late = m.NewIntVar(0, horizon, f"late_j{job.index}")
        if job.deadline is not None:
            if pf.objective == "weighted_lateness":
                m.Add(late >= end - job.deadline)
            else:
                m.Add(end <= job.deadline).OnlyEnforceIf([done, pm.switch("deadline")])
        starts.append(start), ends.append(end), dones.append(done), lates.append(late)
    index = {job.name: k for k, job in enumerate(jobs)}
    for k, job in enumerate(jobs):
        for dep in job.after:
            d = index[dep]
            m.Add(starts[k] >= ends[d]).OnlyEnforceIf(dones[k])
            m.Add(dones[k] <= dones[d])
    for k, pool in enumerate(pools):
        items = intervals_by_pool[k]
        if not items:
            continue
        cap = pool.peak_capacity
        for s, e, gpus in pool.segments:
            if gpus < cap and e > s:  # less capacity in this window: block the difference
                items.append((m.NewIntervalVar(s, e - s, e, f"block_{k}_{s}"), cap - gpus))
        m.AddCumulative([i for i, _ in items], [g for _, g in items], cap)
    if pf.objective != "weighted_lateness":
        _energy_cuts(m, jobs, jv, pools, pool_of, horizon)
    cost_terms = [int(round(c.cost_usd * 100)) * p for job, v in zip(jobs, jv) for c, p in zip(job.options, v.picks)]
    total_cost = sum(cost_terms)
    if pf.budget_usd is not None:
        m.Add(total_cost <= int(round(pf.budget_usd * 100))).OnlyEnforceIf(pm.switch("budget"))
    max_cost = sum(max((int(round(c.cost_usd * 100)) for c in job.options), default=0) for job in jobs) + 1
    must = sum(job.weight for job in jobs if not job.required) + 1  # a required job outweighs all optional ones
    dropped = sum((must if job.required else job.weight) * (1 - dones[k]) for k, job in enumerate(jobs))
    if pf.objective == "cost":
        primary = total_cost
    elif pf.objective == "makespan":
        makespan = m.NewIntVar(0, horizon, "makespan")
        m.AddMaxEquality(makespan, ends)
        primary = makespan * max_cost + total_cost
    else:
        primary = sum(job.weight * lates[k] for k, job in enumerate(jobs)) * max_cost + total_cost

    m.ClearAssumptions()
    m.AddAssumptions(list(pm.switches.values()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = 0
    if sum(len(job.options) for job in jobs) > LARGE_MODEL_OPTIONS:
        # Presolve probing over tens of thousands of optional intervals can eat the whole time limit
        # before search starts (measured: 13 s of 13 s at 1,000 jobs); skip it on large portfolios.
        solver.parameters.cp_model_probing_level = 0
    callback = _Progress(progress) if progress else None
    # Lexicographic: first keep the most weight of optional jobs, then optimise the objective with that
    # weight fixed, so the reported gap is the objective's own.
    budget_cents = None if pf.budget_usd is None else int(round(pf.budget_usd * 100))
    placed = greedy_schedule(jobs, pools, pool_of, horizon, budget_cents)
    for k, (job, v) in enumerate(zip(jobs, jv)):  # warm start from the greedy schedule, every variable
        for i, pick in enumerate(v.picks):
            m.AddHint(pick, placed[k] is not None and placed[k][0] == i)
        start = placed[k][1] if placed[k] else min(job.release, horizon)
        end = start + (job.durations[placed[k][0]] if placed[k] else 0)
        m.AddHint(starts[k], start)
        m.AddHint(ends[k], end)
        m.AddHint(dones[k], placed[k] is not None)
        m.AddHint(lates[k], max(0, end - job.deadline) if job.deadline is not None and placed[k] else 0)
    solver.parameters.max_time_in_seconds = time_limit_s / 3
    m.Minimize(dropped)
    status = solver.Solve(m, callback)
    dropped_proven = status == cp_model.OPTIMAL
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        m.Add(dropped <= round(solver.ObjectiveValue()))
        m.ClearHints()
        for v in jv:
            for pick in v.picks:
                m.AddHint(pick, solver.BooleanValue(pick))
        for start in starts:
            m.AddHint(start, solver.Value(start))
        elapsed = time.perf_counter() - started
        solver.parameters.max_time_in_seconds = max(1.0, time_limit_s - elapsed)
        m.Minimize(primary)
        if callback:
            callback.phase = pf.objective
        status = solver.Solve(m, callback)

    result = PortfolioResult(status="unknown", objective=pf.objective, total_cost_usd=0.0, gap=0.0, schedule=[],
                             dropped=[], pools=[], budget_usd=pf.budget_usd, horizon_h=horizon * step / 3600.0,
                             notes=notes)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        result.status = "optimal" if status == cp_model.OPTIMAL else "feasible"
        obj, bound = solver.ObjectiveValue(), solver.BestObjectiveBound()
        result.gap = 0.0 if status == cp_model.OPTIMAL or obj == 0 else abs(obj - bound) / abs(obj)
        choices = [(v.picked(solver), solver.Value(start)) for v, start in zip(jv, starts)]
    else:
        # CP-SAT found nothing in time (very large portfolios): answer with the greedy schedule, its gap
        # measured against each scheduled job's cheapest option.
        result.status = "feasible"
        choices = [(p[0], p[1]) if p else (None, 0) for p in placed]
        cost = sum(job.options[i].cost_usd for job, (i, _) in zip(jobs, choices) if i is not None)
        floor = sum(min(c.cost_usd for c in job.options) for job, (i, _) in zip(jobs, choices) if i is not None)
        result.gap = (cost - floor) / cost if cost else 0.0
        result.notes.append(f"CP-SAT found no schedule within {time_limit_s:g} s: this is the greedy schedule "
                            "(earliest deadline first, cheapest option); raise --time-limit or coarsen time_step")
    extract(pf, jobs, choices, pools, result)
    missing = [d.job for d in result.dropped if jobs[index[d.job]].required]
    if missing:
        result.status = "infeasible" if dropped_proven else "unknown"
        result.infeasible = explain_portfolio(pf, jobs, pools, horizon)
        if not dropped_proven:
            result.infeasible.append(Infeasibility(constraint="time_limit", detail=(
                f"required jobs {', '.join(missing)} were not placed within {time_limit_s:g} s; "
                "raise --time-limit, coarsen time_step or add capacity")))
    result.solve_s = time.perf_counter() - started
    return result


LARGE_MODEL_OPTIONS = 5_000
ENERGY_CUT_TERMS = 200_000  # beyond this many terms per pool, keep a few prefix and suffix windows


def _energy_cuts(m, jobs, jv, pools, pool_of, horizon) -> None:
    """Redundant linear cuts that tighten CP-SAT's LP bound: per pool and window [R, D) between a
    release and a deadline, the GPU-steps of the jobs that must run inside it fit its capacity.
    Large portfolios keep the windows [0, D) and [R, horizon) only, so the model stays small."""
    for k, pool in enumerate(pools):
        cap = [pool.capacity_at(t) for t in range(horizon)]
        energy = [(job.release, horizon if job.deadline is None else job.deadline, opt.row.gpus * d, pick)
                  for job, v in zip(jobs, jv) for opt, d, pick in zip(job.options, job.durations, v.picks)
                  if pool_of[opt.row.offer.name] == k]
        if not energy:
            continue
        releases = sorted({r for r, _, _, _ in energy})
        dues = sorted({d for _, d, _, _ in energy} | {horizon})
        windows = [(r, d) for r in releases for d in dues if d > r]
        if len(windows) * len(energy) > ENERGY_CUT_TERMS:
            keep = max(1, ENERGY_CUT_TERMS // (2 * len(energy)))
            windows = [(0, d) for d in dues[::max(1, len(dues) // keep)]] + \
                      [(r, horizon) for r in releases[::max(1, len(releases) // keep)] if r > 0]
        for start, due in windows:
            terms = [e * p for r, d, e, p in energy if r >= start and d <= due]
            if terms:
                m.Add(sum(terms) <= sum(cap[start:due]))


def progress_printer() -> Optional[Callable[[str], None]]:
    """Progress lines on stderr when it is an interactive terminal, else nothing."""
    if sys.stderr.isatty():
        return lambda line: print(line, file=sys.stderr, flush=True)
    return None
