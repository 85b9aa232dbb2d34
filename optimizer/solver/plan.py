"""``plan`` (gpuplan solve) and ``options``: the optimum, the exact Pareto frontier, why others lost.

- Best plan: one CP-SAT solve of the ``PlanModel`` with every constraint family on.
- Frontier (epsilon-constraint): minimise time (ties: cost) with memory, supply and filters on but
  deadline and budget off; record the point; require a strictly lower cost; repeat until
  infeasible. Points come fastest first, each strictly cheaper, and each is the fastest plan under
  its cost bound, hence also the cheapest under its own time: the exact non-dominated set.
  The deadline and budget are lines drawn across it, not filters of it.
- Runners-up: per other SKU, its best plan (under every constraint if it has one, else with the
  deadline and budget relaxed), the reason it lost and its break-even price (and, multi-node, the
  scaling efficiency) at which it would win.
- Infeasible: the assumption literals CP-SAT reports as sufficient for infeasibility name the
  binding families; the candidate table says by how much the nearest candidate misses each.
"""

from __future__ import annotations

import math
import time
from typing import Optional

from ortools.sat.python import cp_model

from ..candidates import Candidate, CandidateTable, build_table
from ..context import build_context
from ..errors import JobError
from ..loading import problem_catalog
from ..physics.memory import GIB
from ..plans import plan_from
from ..results import Infeasibility, Option, OptionsResult, Plan, RunnerUp, SolveResult
from ..schema import Catalog, Problem
from ..units import fmt_bytes, fmt_duration
from .model import JobVars, PlanModel, solver_rows

SOLVED = (cp_model.OPTIMAL, cp_model.FEASIBLE)


def _model(table: CandidateTable, *, deadline: bool = True, budget: bool = True) -> tuple[PlanModel, JobVars]:
    c = table.ctx.constraints
    pm = PlanModel()
    job = pm.add_job("job", table)
    pm.add_memory(job)
    pm.add_supply(job, table)
    pm.add_filter(job)
    if deadline:
        pm.add_deadline(job, c.deadline_s)
    if budget:
        pm.add_budget([job], c.budget_usd)
    return pm, job


def _to_plan(table: CandidateTable, candidate: Candidate) -> Plan:
    return plan_from(table.ctx, candidate.row, table.evaluation, candidate.index)


def prepare(problem: Problem, catalog: Optional[Catalog] = None) -> CandidateTable:
    catalog = catalog or problem_catalog(problem)
    if not catalog.offers:
        raise JobError(f"catalog '{catalog.name}' has no offers (prices), so there is nothing to plan with; "
                       "use a price sheet such as 'default' or 'nodus-2026-11'", field="catalog")
    ctx = build_context(problem, catalog)
    return build_table(ctx, keep_rejected=True)


def plan(problem: Problem, *, catalog: Optional[Catalog] = None, time_limit_s: float = 10.0,
         runners_up: bool = True) -> SolveResult:
    """The best plan for the problem's objective, the cost/time frontier and the runners-up."""
    started = time.perf_counter()
    table = prepare(problem, catalog)
    ctx = table.ctx
    pm, job = _model(table)
    pm.set_objective(problem.objective)
    solver, status = pm.solve(time_limit_s)
    c = ctx.constraints
    result = SolveResult(
        status="infeasible", objective=problem.objective, best=None, frontier=[],
        candidates=len(job.rows), deadline_h=None if c.deadline_s is None else c.deadline_s / 3600.0,
        budget_usd=c.budget_usd,
    )
    best_candidate = None
    if status in SOLVED:
        best_candidate = job.chosen(solver)
        result.best = _to_plan(table, best_candidate)
        result.status = "optimal" if status == cp_model.OPTIMAL else "feasible"
        objective, bound = solver.ObjectiveValue(), solver.BestObjectiveBound()
        result.gap = 0.0 if status == cp_model.OPTIMAL or objective == 0 else abs(objective - bound) / abs(objective)
    elif status == cp_model.INFEASIBLE:
        result.infeasible = explain(table, pm.binding_families(solver))
    else:
        result.notes.append(f"the solver stopped after {time_limit_s:g} s without a plan; raise the time limit")
    result.frontier = [_to_plan(table, cand) for cand in frontier(table, time_limit_s)]
    if runners_up:
        result.runners_up = find_runners_up(table, best_candidate, time_limit_s)
    if c.deadline_quantile == "p90":
        result.notes.append("the deadline must hold at p90")
    result.solve_s = time.perf_counter() - started
    return result


def frontier(table: CandidateTable, time_limit_s: float = 10.0) -> list[Candidate]:
    """The exact time/cost Pareto frontier by the epsilon-constraint method (fastest first)."""
    pm, job = _model(table, deadline=False, budget=False)
    pm.set_objective("time")
    points: list[Candidate] = []
    while True:
        solver, status = pm.solve(time_limit_s)
        if status not in SOLVED:
            return points
        k = solver.Value(job.choice)
        points.append(job.rows[k])
        pm.model.Add(job.attr["cost_cents"] <= job.data[k]["cost_cents"] - 1)


def _efficiency_to_win(table: CandidateTable, runner: Plan, best_cost: float) -> Optional[float]:
    """Scaling efficiency at which a multi-node runner-up would cost what the best plan costs."""
    if runner.nodes < 2 or runner.price_usd_per_gpu_hour is None:
        return None
    billed = runner.cost_usd.p50 / runner.price_usd_per_gpu_hour / max(runner.hours.p50, 1e-12)  # billed GPUs
    startup_h = table.ctx.assumptions.startup_s / 3600.0
    train_h = runner.hours.p50 - startup_h
    budget_h = best_cost / (runner.price_usd_per_gpu_hour * billed) - startup_h
    if budget_h <= 0:
        return None
    needed = runner.scaling_efficiency * train_h / budget_h
    return needed if 0 < needed <= 1.0 else None


def find_runners_up(table: CandidateTable, best: Optional[Candidate], time_limit_s: float = 10.0) -> list[RunnerUp]:
    """For every SKU other than the best one: its best plan and why it lost.

    Its best plan under every constraint, if it has one (it lost on the objective); else its best
    plan with the deadline and budget off (it lost on whichever of them it breaks); else the layout
    closest to fitting (memory) or the one the supply limit excludes (supply).
    """
    if best is None:
        return []
    ctx = table.ctx
    objective = ctx.problem.objective
    best_plan = _to_plan(table, best)
    best_cost = best_plan.cost_usd.p50 if best_plan.cost_usd else math.inf
    skus = sorted({c.row.sku.name for c in solver_rows(table) if c.rejected_by != "filter"} - {best.row.sku.name})
    out = []
    for sku in skus:
        pm, job = _model(table)
        allowed = [i for i, cand in enumerate(job.rows) if cand.row.sku.name == sku]
        pm.restrict(job, allowed)
        pm.set_objective(objective)
        lost_on = objective
        solver, status = pm.solve(time_limit_s)
        if status not in SOLVED:
            lost_on = None
            solver, status = pm.solve(time_limit_s, assumptions={"deadline": False, "budget": False})
        if status in SOLVED:
            p = _to_plan(table, job.chosen(solver))
        else:
            mine = [job.rows[i] for i in allowed]
            fitting = [c for c in mine if c.fits]
            if fitting:
                lost_on, cand = "supply", min(fitting, key=lambda c: (c.row.gpus, c.time_s))
            else:
                lost_on, cand = "memory", min(mine, key=lambda c: (c.memory_bytes - c.capacity_bytes, c.row.gpus))
            p = _to_plan(table, cand)
        if lost_on is None:
            lost_on = "deadline" if p.meets_deadline is False else "budget"
        price = None
        if lost_on not in ("memory", "supply") and p.cost_usd is not None and p.price_usd_per_gpu_hour:
            price = round(best_cost * p.price_usd_per_gpu_hour / p.cost_usd.p50, 4)
        efficiency = _efficiency_to_win(table, p, best_cost) if lost_on not in ("memory", "supply") else None
        out.append(RunnerUp(**p.model_dump(), lost_on=lost_on, breakeven_price_usd_per_gpu_hour=price,
                            breakeven_scaling_efficiency=efficiency))
    order = {"cost": 0, "time": 0, "deadline": 1, "budget": 1, "supply": 2, "memory": 3}
    if objective == "cost":
        return sorted(out, key=lambda r: (order[r.lost_on], r.cost_usd.p50 if r.cost_usd else math.inf, r.hours.p50))
    return sorted(out, key=lambda r: (order[r.lost_on], r.hours.p50, r.cost_usd.p50 if r.cost_usd else math.inf))


def explain(table: CandidateTable, binding: list[str]) -> list[Infeasibility]:
    """For each binding family, how far the nearest candidate is from satisfying it."""
    ctx = table.ctx
    c = ctx.constraints
    rows = [cand for cand in table.candidates if cand.index >= 0 and cand.row.offer is not None]
    allowed = [cand for cand in rows if cand.rejected_by not in ("filter", "supply", "global_batch")]
    fitting = [cand for cand in allowed if cand.fits]
    out = []
    if not rows:
        return [Infeasibility(constraint="catalog", detail="the catalog has no priced offers")]
    if "filter" in binding or not [r for r in rows if r.rejected_by != "filter"]:
        g = c.gpu
        out.append(Infeasibility(constraint="filter", detail=(
            "no offer passes the GPU filters"
            + (f" types={','.join(g.types)}" if g.types else "")
            + (f" min_memory={fmt_bytes(g.min_memory_bytes)}" if g.min_memory_bytes else "")
            + (f" providers={','.join(g.providers)}" if g.providers else "")
            + f" with precision {ctx.job.precision}; loosen them")))
    if "supply" in binding:
        unrestricted = [cand for cand in rows if cand.rejected_by in (None, "supply") and cand.fits]
        if unrestricted:
            smallest = min(unrestricted, key=lambda x: (x.row.gpus, x.row.nodes))
            limit = f"max_nodes={c.max_nodes}" if c.max_nodes else f"max_gpus={c.max_gpus}"
            out.append(Infeasibility(constraint="supply", over_by=float(smallest.row.gpus), detail=(
                f"the smallest plan that fits, {smallest.row.nodes} x {smallest.row.gpus_per_node} {smallest.row.sku.name}, "
                f"needs {smallest.row.gpus} GPUs on {smallest.row.nodes} node(s); {limit} does not allow it")))
    if "memory" in binding or (allowed and not fitting):
        state = ctx.train.weights_total(ctx.shape.params) + (ctx.train.grad_bytes + ctx.train.optimizer_bytes) * ctx.train.trainable_params
        largest = max(allowed or rows, key=lambda x: x.row.gpus * x.capacity_bytes)
        nearest = min(allowed or rows, key=lambda x: x.memory_bytes - x.capacity_bytes)
        out.append(Infeasibility(constraint="memory", over_by=(nearest.memory_bytes - nearest.capacity_bytes) / GIB, detail=(
            f"the training state needs {fmt_bytes(state)} in total; the largest allowed configuration, "
            f"{largest.row.nodes} x {largest.row.gpus_per_node} {largest.row.sku.name}, holds "
            f"{fmt_bytes(largest.row.gpus * largest.capacity_bytes)}; the closest layout "
            f"({nearest.row.gpus} {nearest.row.sku.name}) needs {nearest.memory_bytes / GIB:,.1f} GiB per GPU of "
            f"{nearest.capacity_bytes / GIB:,.1f} GiB")))
    if "deadline" in binding and fitting and c.deadline_s is not None:
        fastest = min(fitting, key=lambda x: x.time_s)
        over = fastest.time_s - c.deadline_s
        out.append(Infeasibility(constraint="deadline", over_by=over / 3600.0, detail=(
            f"the fastest plan, {fastest.row.nodes} x {fastest.row.gpus_per_node} {fastest.row.sku.name}, needs "
            f"{fmt_duration(fastest.time_s)}: {fmt_duration(over)} over the deadline of {fmt_duration(c.deadline_s)}")))
    if "budget" in binding and fitting and c.budget_usd is not None:
        pool = [x for x in fitting if c.deadline_s is None or x.time_s <= c.deadline_s] or fitting
        cheapest = min(pool, key=lambda x: x.cost_usd)
        over = cheapest.cost_usd - c.budget_usd
        within = " within the deadline" if pool is not fitting else ""
        out.append(Infeasibility(constraint="budget", over_by=over, detail=(
            f"the cheapest plan{within}, {cheapest.row.nodes} x {cheapest.row.gpus_per_node} {cheapest.row.sku.name}, "
            f"costs ${cheapest.cost_usd:,.2f}: ${over:,.2f} over the budget of ${c.budget_usd:,.2f}")))
    if not out:
        out.append(Infeasibility(constraint="+".join(binding) or "unknown",
                                 detail="these constraints cannot all hold together; loosen one of them"))
    return out


def options(problem: Problem, *, catalog: Optional[Catalog] = None) -> OptionsResult:
    """Every hardware row considered, with its best strategy, hours, cost and what rejected it."""
    table = prepare(problem, catalog)
    out = []
    for cand in table.candidates:
        if cand.index < 0 or math.isnan(cand.time_s):
            continue
        p = _to_plan(table, cand)
        why = cand.rejected_by
        if why is None and p.meets_deadline is False:
            why = "deadline"
        if why is None and p.within_budget is False:
            why = "budget"
        out.append(Option(**p.model_dump(), feasible=why is None, rejected_by=why))
    return OptionsResult(options=out)
