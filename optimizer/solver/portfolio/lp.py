"""A linear relaxation of the portfolio (cost objective), solved with OR-Tools' GLOP: a lower bound on
the cost of any schedule that drops no more weight than a given one, and each job's dominant option.

Time is cut into buckets of equal length. Per job j and option o (one that fits between the job's
release and min(deadline, horizon)):

    x_jo in [0, 1]                       fractional choice;  sum_o x_jo <= 1
    z_job >= 0                           steps option o runs in bucket b (b overlapping j's window)
    sum_b z_job = d_o x_jo               the option runs its whole duration
    sum_o z_job <= ov_jb sum_o x_jo      the job runs at most the steps of b inside its window
    sum_{jo in pool k} g_o z_job <= sum_{t in b} capacity_k(t)     pool capacity, bucket by bucket
    sum_jo c_o x_jo <= budget;  sum_j w_j (1 - sum_o x_jo) <= dropped weight allowed
    done_k <= done_j for k after j
    minimise sum_jo c_o x_jo

Every schedule gives a feasible point (x its picks, z its steps per bucket), so the optimum is a
valid lower bound; it drops non-preemption and start-time integrality, and releases and deadlines
count only through the buckets' overlaps with each job's window.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ortools.linear_solver import pywraplp

from ...money import usd_to_cents
from . import work
from .greedy import capacity_arrays

# Bucket count is chosen so that the LP keeps about this many z columns.
LP_COLUMNS = 150_000


@dataclass
class LpBound:
    """The relaxation's answer: ``bound_cents`` is None when it did not solve to optimality in time."""

    bound_cents: float | None
    infeasible: bool = False
    fractional_cents: list[float] = field(default_factory=list)  # per job, sum_o c_o x_jo
    buckets: int = 0
    seconds: float = 0.0


def window(job, horizon: int) -> tuple[int, int]:
    """[release, min(deadline, horizon)) in steps."""
    limit = min(horizon, job.deadline if job.deadline is not None else horizon)
    return min(job.release, horizon), limit


def fits_window(job, horizon: int) -> bool:
    """Whether some option of the job is no longer than its window."""
    r, lim = window(job, horizon)
    return any(d <= lim - r for d in job.durations)


def drop_weights(jobs) -> list[int]:
    """The weight of leaving each job out: a required job outweighs all optional ones together."""
    must = sum(job.weight for job in jobs if not job.required) + 1
    return [must if job.required else job.weight for job in jobs]


def _solve_within(lp, time_limit_s: float) -> int:
    """GLOP's status after at most ``time_limit_s``: under a work budget its deterministic time, the wall clock
    only as the safety stop, and the work charged as simplex iterations times the columns (the same on every
    run; GLOP's own deterministic time is not exposed)."""
    if work.counting():
        lp.SetSolverSpecificParametersAsString(f"max_deterministic_time: {max(0.01, time_limit_s):.6f}")
        lp.SetTimeLimit(max(1, int(min(work.wall_left(), 1e6) * 1000)))
    else:
        lp.SetTimeLimit(max(1, int(time_limit_s * 1000)))
    status = lp.Solve()
    work.charge(min(time_limit_s, work.LP_PIVOT_S * lp.iterations() * lp.NumVariables()))
    return status


def lp_bound(
    jobs,
    pools,
    pool_of: dict[str, int],
    horizon: int,
    budget_cents: int | None,
    dropped_limit: int | None,
    *,
    time_limit_s: float = 30.0,
    columns: int = LP_COLUMNS,
) -> LpBound:
    """Solve the relaxation; ``dropped_limit`` None means every job with an option must run."""
    t0 = time.perf_counter()
    weights = drop_weights(jobs)
    valid = []
    span = 0.0
    for job in jobs:
        r, lim = window(job, horizon)
        opts = [i for i, d in enumerate(job.durations) if d <= lim - r]
        valid.append(opts)
        span += len(opts) * max(1, lim - r) / max(1, horizon)
    n_buckets = int(max(4, min(horizon, columns / max(span, 1.0))))
    size = max(1, math.ceil(horizon / n_buckets))
    n_buckets = math.ceil(horizon / size)
    caps = capacity_arrays(pools, horizon)
    bucket_cap = [[int(c[b * size : min(horizon, (b + 1) * size)].sum()) for b in range(n_buckets)] for c in caps]

    lp = pywraplp.Solver.CreateSolver("GLOP")
    inf = lp.infinity()
    x: list[list] = []
    cap_rows: dict[tuple[int, int], pywraplp.Constraint] = {}
    cost_terms = []
    done_exprs = []
    budget = lp.Constraint(-inf, inf if budget_cents is None else float(budget_cents), "budget")
    # placed weight: sum_j w_j sum_o x_jo >= total weight - dropped_limit (every job that can run, if None)
    lower = sum(weights) - dropped_limit if dropped_limit is not None else sum(w for w, v in zip(weights, valid) if v)
    dropped = lp.Constraint(float(lower), inf, "placed")
    for j, job in enumerate(jobs):
        r, lim = window(job, horizon)
        one = lp.Constraint(-inf, 1.0, f"one_{j}")
        xs = []
        first, last = r // size, (lim - 1) // size if lim > r else -1
        rate_rows = {}
        for b in range(first, last + 1):
            ov = min(lim, (b + 1) * size) - max(r, b * size)
            if ov > 0:
                rate_rows[b] = lp.Constraint(-inf, 0.0, f"rate_{j}_{b}")
        for i in valid[j]:
            opt, d = job.options[i], job.durations[i]
            xv = lp.NumVar(0.0, 1.0, f"x_{j}_{i}")
            xs.append((i, xv))
            one.SetCoefficient(xv, 1.0)
            cents = usd_to_cents(opt.cost_usd)
            budget.SetCoefficient(xv, cents)
            dropped.SetCoefficient(xv, weights[j])
            cost_terms.append((xv, cents))
            total = lp.Constraint(0.0, 0.0, f"dur_{j}_{i}")
            total.SetCoefficient(xv, -float(d))
            k = pool_of[opt.row.offer_name]
            for b, row in rate_rows.items():
                z = lp.NumVar(0.0, inf, "")
                total.SetCoefficient(z, 1.0)
                row.SetCoefficient(z, 1.0)
                key = (k, b)
                if key not in cap_rows:
                    cap_rows[key] = lp.Constraint(-inf, float(bucket_cap[k][b]), f"cap_{k}_{b}")
                cap_rows[key].SetCoefficient(z, float(opt.row.gpus))
        for b, row in rate_rows.items():
            ov = min(lim, (b + 1) * size) - max(r, b * size)
            for _, xv in xs:
                row.SetCoefficient(xv, -float(ov))
        x.append(xs)
        done_exprs.append(xs)
    index = {job.name: j for j, job in enumerate(jobs)}
    for k, job in enumerate(jobs):
        for dep in job.after:
            row = lp.Constraint(-inf, 0.0, f"dep_{k}")
            for _, xv in done_exprs[k]:
                row.SetCoefficient(xv, 1.0)
            for _, xv in done_exprs[index[dep]]:
                row.SetCoefficient(xv, row.GetCoefficient(xv) - 1.0)
    objective = lp.Objective()
    for xv, cents in cost_terms:
        objective.SetCoefficient(xv, cents)
    objective.SetMinimization()
    status = _solve_within(lp, time_limit_s)
    out = LpBound(None, buckets=n_buckets)
    if status == pywraplp.Solver.INFEASIBLE:
        out.infeasible = True
    elif status == pywraplp.Solver.OPTIMAL:
        # GLOP's tolerances are ~1e-7 relative: shave them off so the bound stays below the optimum.
        value = objective.Value()
        out.bound_cents = max(0.0, value - 1e-6 * abs(value) - 1.0)
        for job, xs in zip(jobs, x):
            vals = [(xv.solution_value(), i) for i, xv in xs]
            out.fractional_cents.append(sum(v * usd_to_cents(job.options[i].cost_usd) for v, i in vals if v > 1e-9))
    out.seconds = time.perf_counter() - t0
    return out
