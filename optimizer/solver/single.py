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
- Infeasible: the assumption literals CP-SAT reports as sufficient for infeasibility, reduced to a
  minimal set, name the binding families (``explain`` says by how much the nearest candidate misses each).
- Stopped: a solve that ends on its time limit without a plan is ``unknown``, never infeasible. The time
  limit bounds the whole command: the frontier and the runners-up solve in what the best plan's solve left,
  keep only what CP-SAT proved optimal, and say so in the notes where they stopped short.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from ..inputs import units
from ..money import budget_cents, usd_to_cents
from ..planning.candidates import Candidate, CandidateTable
from ..planning.context import JobContext
from ..planning.plans import plan_from
from ..results import Option, OptionsResult, Plan, RunnerUp, SolveResult
from .model import JobVars, PlanModel, aeons_error, overflow_error, scaled, solver_rows

SOLVED = (cp_model.OPTIMAL, cp_model.FEASIBLE)
# Past this many rows CP-SAT solves a job's model without presolve. Measured (a 70B QLoRA job on n one-node
# H100 offers, 4 rows each): with presolve 0.4 s at 400 rows, 1.6 s at 800, 4.6 s at 1,600 and no solution
# in 10 s at 4,000 (probing adds 200,000 clauses); without, 0.5, 0.8, 1.2 and 0.3-0.5 s, the same optimum.
PRESOLVE_ROWS = 500


def optimality_gap(objective: float, bound: float, proven: bool) -> float:
    """Relative distance between a solution and the solver's bound: |obj - bound| / |obj| (0 when proven)."""
    return 0.0 if proven or objective == 0 else abs(objective - bound) / abs(objective)


def _model(table: CandidateTable, *, deadline: bool = True, budget: bool = True) -> tuple[PlanModel, JobVars]:
    c = table.ctx.constraints
    pm = PlanModel()
    job = pm.add_job("job", table)
    pm.presolve = len(job.rows) <= PRESOLVE_ROWS
    # past the years any rental is planned for no plan is one to rent: the cheapest plan is the cheapest
    # within them (a 17-year cheapest plan had refused the question where an 8-year one answers it)
    pm.model.add(job.attr["too_long"] == 0)
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


@dataclass
class SingleOutcome:
    """A solve's result and, when infeasible, the minimal set of constraint families that bind."""

    result: SolveResult
    binding: list[str] = field(default_factory=list)
    best: Candidate | None = None
    cheapest: Candidate | None = None  # the plan a near-tie passed over (None: the best is the cheapest)


class _Clock:
    """The seconds left of one command's time limit, shared by its solves."""

    def __init__(self, limit_s: float) -> None:
        self.end = time.perf_counter() + limit_s

    def left_s(self) -> float:
        return max(0.0, self.end - time.perf_counter())


def solve_table(
    table: CandidateTable, *, time_limit_s: float = 10.0, runners_up: bool = True, started: float | None = None
) -> SingleOutcome:
    """The best plan for the problem's objective, the cost/time frontier and the runners-up. The time limit
    runs from ``started`` (a ``time.perf_counter()`` time, default now: the command's start, so that reading
    the files and building the table count against it). Where it stops CP-SAT before a plan, the answer is
    the best plan known (``best_known``), never none where the table holds one."""
    begun = time.perf_counter()
    clock = _Clock(max(0.0, (begun if started is None else started) + time_limit_s - begun))
    ctx = table.ctx
    runnable = [c for c in solver_rows(table) if c.fits and c.rejected_by != "filter"]
    if runnable and min(c.time_s for c in runnable) > units.LIMITS["duration"].high:
        raise aeons_error(table, min(runnable, key=lambda c: c.time_s))  # even the fastest plan runs for ages
    status = cp_model.UNKNOWN
    if clock.left_s() > 0:  # (the table took the time: no model is built for a solve with none left)
        pm, job = _model(table)
        pm.set_objective(ctx.problem.objective)
        solver, status = pm.solve(clock.left_s())
    c = ctx.constraints
    result = SolveResult(
        status="unknown",
        objective=ctx.problem.objective,
        best=None,
        frontier=[],
        candidates=len(solver_rows(table)),
        deadline_h=None if c.deadline_s is None else c.deadline_s / 3600.0,
        budget_usd=c.budget_usd,
    )
    outcome = SingleOutcome(result)
    if status in SOLVED:
        outcome.best = job.chosen(solver)
        result.status = "optimal" if status == cp_model.OPTIMAL else "feasible"
        result.gap = optimality_gap(solver.objective_value, solver.best_objective_bound, status == cp_model.OPTIMAL)
        if (
            status == cp_model.OPTIMAL
            and (faster := near_tie(table, pm, job, outcome.best, clock.left_s())) is not None
        ):
            result.passed_over = _to_plan(table, outcome.best)
            outcome.cheapest, outcome.best = outcome.best, faster
        result.best = _to_plan(table, outcome.best)
        if result.passed_over is not None:
            result.notes.append(near_tie_note(ctx, result.best, result.passed_over))
    elif status == cp_model.INFEASIBLE and not table.unevaluated:
        result.status = "infeasible"
        outcome.binding = pm.binding_families(solver, clock.left_s)
    elif status == cp_model.MODEL_INVALID:  # the integer columns overflow: runs of centuries, costs of trillions
        raise overflow_error(table)
    elif status != cp_model.INFEASIBLE:  # stopped by the time limit before any plan: the best one known
        outcome.best, cheapest = best_known(table)
        if cheapest is not None:
            result.passed_over = _to_plan(table, cheapest)
            outcome.cheapest = cheapest
        if outcome.best is not None:
            result.best = _to_plan(table, outcome.best)
            result.status = "feasible"
            if result.passed_over is not None:
                result.notes.append(near_tie_note(ctx, result.best, result.passed_over))
            result.gap = 1.0 if table.unevaluated else 0.0  # no bound on rows not evaluated; the scan's own
            if not table.unevaluated:
                result.notes.append(
                    f"CP-SAT stopped at the time limit ({time_limit_s:g} s) before it found a plan: this is the "
                    f"best of the {result.candidates:,} candidate rows by a scan of them all under the same "
                    "constraints (not proved by the solver)"
                )
    if table.unevaluated:
        # whatever CP-SAT proved, it proved over the rows evaluated: a plan, never a proof of none
        kept = len(table.candidates)
        if result.status == "optimal":
            result.status, result.gap = "feasible", 1.0
        result.notes.append(
            f"the time limit ({time_limit_s:g} s) ran out while the candidate table was built: {kept:,} of "
            f"{kept + table.unevaluated:,} hardware rows were evaluated, and "
            + ("this is the best plan among them" if result.best else "none of them is a plan")
            + " (rows not evaluated may hold a better one); raise --time-limit to evaluate them all"
        )
    points: list[Candidate] = []
    complete = False
    proved = status == cp_model.OPTIMAL or (status not in SOLVED and not table.unevaluated)  # CP-SAT's, or the scan's
    if clock.left_s() > 0:
        points, complete = frontier(table, clock.left_s(), outcome.best, proved)
    elif outcome.best is not None and proved and _at_p50(ctx):
        points = [outcome.best]  # no time for the walk: the optimum is a frontier point as it stands (frontier)
    result.frontier = [_to_plan(table, cand) for cand in points]
    if not complete:
        shown = f"it shows the {len(points)} point(s) proved by then" if points else "no point was proved by then"
        result.notes.append(
            f"the time limit ({time_limit_s:g} s) ran out before the cost/time frontier was complete: {shown}; "
            "give more time (--time-limit) for the rest"
        )
    if runners_up:
        result.runners_up, complete = find_runners_up(table, outcome.best, clock, outcome.cheapest)
        if not complete:
            result.notes.append(
                f"the time limit ({time_limit_s:g} s) ran out before every other GPU's best plan was proved: "
                "the runners-up list only those proved; give more time (--time-limit) for the rest"
            )
    result.solve_s = time.perf_counter() - begun
    return outcome


def best_known(table: CandidateTable) -> tuple[Candidate | None, Candidate | None]:
    """The plan the model of ``solve_table`` asks for, found by a scan of the table's rows instead of CP-SAT:
    what a solve the time limit stopped before any plan answers. The same constraints (within the years any
    rental is planned for, fits, filters, supply, the catalog's node counts, the deadline as ``check`` judges
    it, the budget in cents) and the same objective (cost then time, or time then cost; under cost, the
    fastest within the cost tolerance of the cheapest); ties go to the first row. Returned with the plan it
    passed over for a near-tie (None where it is the cheapest); (None, None) when no row passes."""
    ctx = table.ctx
    c = ctx.constraints
    budget = None if c.budget_usd is None else budget_cents(c.budget_usd)
    allowed = [
        cand
        for cand in solver_rows(table)
        if cand.fits
        and cand.rejected_by not in ("filter", "supply")
        and cand.time_s <= units.LIMITS["duration"].high
        and cand.row.offer is not None
        and cand.row.nodes <= cand.row.offer.max_nodes
        and (budget is None or usd_to_cents(cand.cost_usd) <= budget)
    ]

    def rank(cand: Candidate) -> tuple[float, float]:
        cents = usd_to_cents(cand.cost_usd)
        return (cents, cand.time_s) if ctx.problem.objective == "cost" else (cand.time_s, cents)

    # in the objective's order, those that meet the deadline (the model's own "late" column), read lazily: a
    # scan of thousands of rows is what answers when the time limit has run out
    passing = (cand for cand in sorted(allowed, key=rank) if scaled(cand, table)["late"] == 0)
    first = next(passing, None)
    if first is None or ctx.problem.objective != "cost":
        return first, None
    within = usd_to_cents(first.cost_usd) + c.cost_tolerance_cents(usd_to_cents(first.cost_usd))
    near = itertools.takewhile(lambda cand: usd_to_cents(cand.cost_usd) <= within, passing)
    chosen = min([first, *near], key=lambda x: (x.time_s, rank(x)))
    return chosen, (None if chosen is first else first)


def best_candidate(table: CandidateTable, time_limit_s: float) -> Candidate | None:
    """The problem's optimum over ``table`` under every constraint (near-ties to the faster plan, as
    ``solve_table`` takes them), or None (none, or not proved in time)."""
    clock = _Clock(time_limit_s)
    pm, job = _model(table)
    pm.set_objective(table.ctx.problem.objective)
    solver, status = pm.solve(clock.left_s())
    if status != cp_model.OPTIMAL:
        return None
    cheapest = job.chosen(solver)
    return near_tie(table, pm, job, cheapest, clock.left_s()) or cheapest


def near_tie(
    table: CandidateTable, pm: PlanModel, job: JobVars, cheapest: Candidate, time_limit_s: float
) -> Candidate | None:
    """Under the cost objective, the fastest plan (then the cheapest) costing at most the job's cost tolerance
    above ``cheapest``, the proved optimum, under the same constraints: a lexicographic second objective on
    the model ``cheapest`` was solved on (which it changes). None where no such plan is faster, the tolerance
    is 0, or the time limit stops the solve before it proves one."""
    ctx = table.ctx
    if ctx.problem.objective != "cost" or time_limit_s <= 0:
        return None
    cents = usd_to_cents(cheapest.cost_usd)
    tolerance = ctx.constraints.cost_tolerance_cents(cents)
    if tolerance <= 0:
        return None
    pm.model.add(pm.cost_cents(job) <= cents + tolerance)
    pm.set_objective("time")
    solver, status = pm.solve(time_limit_s)
    if status != cp_model.OPTIMAL:
        return None
    faster = job.chosen(solver)
    return faster if faster.time_s < cheapest.time_s else None


def near_tie_note(ctx: JobContext, best: Plan, cheapest: Plan) -> str:
    """What choosing the faster of two near-tied plans costs and saves, and the tolerance that allowed it."""
    extra = (best.cost_usd.p50 if best.cost_usd else 0.0) - (cheapest.cost_usd.p50 if cheapest.cost_usd else 0.0)
    base = cheapest.cost_usd.p50 if cheapest.cost_usd else 0.0
    tolerance = ctx.constraints.cost_tolerance
    said = "auto: 1 % of the cheapest plan's cost or $1, whichever is larger" if tolerance == "auto" else tolerance
    said = f"${said:,.2f}" if isinstance(said, float) else said
    return (
        f"near-tie: the cheapest plan, {cheapest.label()} at ${base:,.2f} for {units.fmt_duration(cheapest.hours.p50 * 3600.0)}, "
        f"was passed over for one {cheapest.hours.p50 / best.hours.p50:.2f}x faster at ${extra:,.2f} "
        f"({extra / base if base else 0.0:.2%}) more, within constraints.cost_tolerance ({said}); set cost_tolerance: 0 for the "
        "cheapest plan whatever its time"
    )


class _Walk:
    """One direction of the frontier walk: the fastest plan under a cost bound (``objective`` time, each
    next point strictly cheaper) or the cheapest plan under a time bound (``objective`` cost, each next
    point strictly faster), with memory, supply and filters on and the deadline and budget off."""

    def __init__(self, table: CandidateTable, objective: str) -> None:
        self.pm, self.job = _model(table, deadline=False, budget=False)
        self.pm.set_objective(objective)
        self.column = "cost_cents" if objective == "time" else "time_rank"
        self.done = False  # proved that no further point exists

    def beyond(self, k: int, *, inclusive: bool = False) -> None:
        """Later points must be strictly cheaper (faster) than row ``k``, or at most as dear with ``inclusive``."""
        self.pm.model.add(self.job.attr[self.column] <= self.job.data[k][self.column] - (0 if inclusive else 1))

    def step(self, time_limit_s: float) -> int | None:
        """The next point's row, or None: no further point (``done``) or the time limit stopped the solve."""
        solver, status = self.pm.solve(time_limit_s)
        self.done = status == cp_model.INFEASIBLE
        return solver.value(self.job.choice) if status == cp_model.OPTIMAL else None


def frontier(
    table: CandidateTable, time_limit_s: float = 10.0, best: Candidate | None = None, proved: bool = False
) -> tuple[list[Candidate], bool]:
    """The exact time/cost Pareto frontier by the epsilon-constraint method (fastest first), and whether it
    is complete: a point is kept only once CP-SAT proves it the fastest under its cost bound or the cheapest
    under its time bound (a merely feasible one is not on the frontier), and the solves share ``time_limit_s``.

    The walk starts at the best plan and goes both ways, one point each in turn, so a time limit leaves the
    points around the answer and never the answer off its own frontier. A ``proved`` optimum with the
    deadline judged at p50 is a frontier point as it stands (a plan as fast and cheaper, or as cheap and
    faster, would meet its deadline and budget and win the objective or its tie-breaker); otherwise the walk
    starts at the fastest plan costing at most the best plan's cost, and without a best plan at the fastest."""
    clock = _Clock(time_limit_s)
    cheaper, faster = _Walk(table, "time"), _Walk(table, "cost")
    rows = cheaper.job.rows
    points: list[int] = []
    at_p50 = _at_p50(table.ctx)
    start = next((i for i, c in enumerate(rows) if c is best), None)
    if start is None or not (proved and at_p50):
        faster.done = start is None  # from the fastest plan there is no faster one
        if start is not None:
            cheaper.beyond(start, inclusive=True)
        start = cheaper.step(clock.left_s())
        if start is None:
            return [], cheaper.done
    points.append(start)
    cheaper.beyond(start)
    faster.beyond(start)
    while not (cheaper.done and faster.done):
        for walk in (faster, cheaper):
            if walk.done:
                continue
            k = walk.step(clock.left_s())
            if k is None and not walk.done:
                return _fastest_first(rows, points), False
            if k is not None:
                points.append(k)
                walk.beyond(k)
    return _fastest_first(rows, points), True


def _at_p50(ctx) -> bool:
    """Whether the deadline, if any, is judged at p50 (the frontier's own time)."""
    return ctx.constraints.deadline_s is None or ctx.constraints.deadline_quantile == "p50"


def _fastest_first(rows: list[Candidate], points: list[int]) -> list[Candidate]:
    return [rows[k] for k in sorted(points, key=lambda k: (rows[k].time_s, rows[k].cost_usd))]


def _efficiency_for_hours(table: CandidateTable, runner: Plan, hours: float) -> float | None:
    """Scaling efficiency at which a multi-node runner-up would take ``hours`` (p50), if one up to 100 %
    does; its training time scales inversely with the efficiency, its start-up does not."""
    if runner.nodes < 2:
        return None
    startup_h = table.ctx.assumptions.startup_s / 3600.0
    allowed_h = hours - startup_h
    if allowed_h <= 0:
        return None
    needed = runner.scaling_efficiency * (runner.hours.p50 - startup_h) / allowed_h
    return needed if 0 < needed <= 1.0 else None


def _breakeven(
    table: CandidateTable, runner: Plan, lost_on: str, best: Plan, cheapest_usd: float | None = None
) -> tuple[float | None, float | None]:
    """(price per GPU-hour, scaling efficiency) at which the runner-up would no longer lose on what it lost
    on: cost (or the budget, under the cost objective): costing what wins (``_winning_cost_usd``); the budget
    under the time objective: costing the budget; time: taking the best plan's hours (no price does that); the
    deadline (judged at p50): taking the deadline's hours. None where nothing of the kind does."""
    c = table.ctx.constraints
    price = efficiency = None
    hourly = runner.price_usd_per_gpu_hour
    cost = runner.cost_usd.p50 if runner.cost_usd else None
    if table.ctx.problem.objective == "cost":
        target_usd = _winning_cost_usd(table, runner, best, cheapest_usd)
    else:
        target_usd = c.budget_usd
    if lost_on in ("cost", "budget") and target_usd and cost and hourly:
        price = round(target_usd * hourly / cost, 4)
        efficiency = _efficiency_for_hours(table, runner, runner.hours.p50 * target_usd / cost)
    elif lost_on == "time":
        efficiency = _efficiency_for_hours(table, runner, best.hours.p50)
    elif lost_on == "deadline" and c.deadline_s is not None and c.deadline_quantile == "p50":
        efficiency = _efficiency_for_hours(table, runner, c.deadline_s / 3600.0)
    return price, efficiency


def _winning_cost_usd(table: CandidateTable, runner: Plan, best: Plan, cheapest_usd: float | None) -> float | None:
    """The cost at which a runner-up wins under the cost objective, near-ties going to the faster plan: faster
    than the best plan, within the cost tolerance of the cheapest plan; slower, a cent under the cheapest plan's
    cost less that tolerance (the cheapest and the best plan then lie beyond its own tolerance)."""
    if cheapest_usd is None or math.isnan(cheapest_usd) or not best.cost_usd:
        return None
    cheapest = cheapest_usd
    tolerance_usd = table.ctx.constraints.cost_tolerance_cents(usd_to_cents(cheapest)) / 100.0
    if runner.hours.p50 < best.hours.p50:
        return cheapest + tolerance_usd
    return cheapest - tolerance_usd - 0.01


def find_runners_up(
    table: CandidateTable, best: Candidate | None, clock: _Clock | None = None, cheapest: Candidate | None = None
) -> tuple[list[RunnerUp], bool]:
    """For every SKU other than the best one: its best plan and why it lost; and whether every SKU was
    answered (a solve the time limit stopped proves nothing, so that SKU is left out).

    Its best plan under every constraint, if it has one (it lost on the objective); else its best
    plan with the deadline and budget off (it lost on whichever of them it breaks); else the layout
    closest to fitting (memory) or the one the supply limit excludes (supply).
    """
    clock = clock or _Clock(10.0)
    if best is None:
        return [], True
    ctx = table.ctx
    objective = ctx.problem.objective
    best_plan = _to_plan(table, best)
    cheapest_usd = (cheapest or best).cost_usd  # (a candidate's cost: a float)
    skus = sorted({c.row.sku.name for c in solver_rows(table) if c.rejected_by != "filter"} - {best.row.sku.name})
    out = []
    complete = True
    for sku in skus:
        if not clock.left_s():  # no time for its model (each reads every row): the time limit holds
            complete = False
            break
        pm, job = _model(table)
        allowed = [i for i, cand in enumerate(job.rows) if cand.row.sku.name == sku]
        pm.restrict(job, allowed)
        pm.set_objective(objective)
        lost_on: str | None = objective
        solver, status = pm.solve(clock.left_s())
        if status == cp_model.INFEASIBLE:
            lost_on = None
            solver, status = pm.solve(clock.left_s(), assumptions={"deadline": False, "budget": False})
        if status not in (cp_model.OPTIMAL, cp_model.INFEASIBLE):
            complete = False  # stopped on the time limit: neither its best plan nor why it lost is known
            continue
        if status == cp_model.OPTIMAL:
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
        elif objective == "cost" and p.cost_usd and best_plan.cost_usd and p.cost_usd.p50 < best_plan.cost_usd.p50:
            lost_on = "time"  # cheaper, but a near-tie went to the faster best plan
        price, efficiency = _breakeven(table, p, lost_on, best_plan, cheapest_usd)
        out.append(
            RunnerUp(
                **p.model_dump(),
                lost_on=lost_on,
                breakeven_price_usd_per_gpu_hour=price,
                breakeven_scaling_efficiency=efficiency,
            )
        )
    order = {"cost": 0, "time": 0, "deadline": 1, "budget": 1, "supply": 2, "memory": 3}
    if objective == "cost":
        out.sort(key=lambda r: (order[r.lost_on], r.cost_usd.p50 if r.cost_usd else math.inf, r.hours.p50))
    else:
        out.sort(key=lambda r: (order[r.lost_on], r.hours.p50, r.cost_usd.p50 if r.cost_usd else math.inf))
    return out, complete


def options_table(table: CandidateTable) -> OptionsResult:
    """Every hardware row considered, with its best strategy, hours, cost and what rejected it."""
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
