"""Diagnostic: how far is a large portfolio's schedule from optimal, window by window, and how far is
the time-indexed LP from the integer optimum there?

Builds ``portfolio_bench.constructed(jobs, ...)`` (default: the instance issue 13 was measured on,
``--prices uniform``, evenly sized pools, seed 0), schedules it with ``api.portfolio``, then for each
time window frees the scheduled jobs whose whole window (release to deadline) lies inside it, keeps
every other job where the schedule put it, and solves what is left exactly in the start-time form (a
binary per job, option and start; pool capacity per step): its LP with GLOP and its integer optimum
with SCIP (OR-Tools' MIP solver). Prints, per window, the schedule's cost of the freed jobs, the LP,
the integer optimum (proven or not) and the percentages between them.

Where SCIP proves the optimum, "optimum above LP" is the LP's integrality gap for that window with its
surroundings fixed (the fixed jobs leave a ragged capacity that the whole problem could smooth, so it
overstates the whole problem's gap), and "schedule above optimum" is what the search left in it.

    python bench/portfolio_window_gap.py --windows 100-160,300-360,500-560
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from ortools.linear_solver import pywraplp  # noqa: E402
from portfolio_bench import constructed  # noqa: E402
from portfolio_gap import placements  # noqa: E402

from optimizer import api  # noqa: E402
from optimizer.money import usd_to_cents  # noqa: E402
from optimizer.solver.portfolio.data import pool_specs, prepare_jobs, whole_steps  # noqa: E402
from optimizer.solver.portfolio.greedy import capacity_arrays  # noqa: E402
from optimizer.solver.portfolio.lp import window  # noqa: E402


def window_gap(jobs, pools, pool_of, horizon, placed, lo: int, hi: int, mip_s: float) -> str:
    free_jobs = [
        k for k, job in enumerate(jobs) if placed[k] and lo <= window(job, horizon)[0] and window(job, horizon)[1] <= hi
    ]
    cap = [c[:horizon].astype(int) for c in capacity_arrays(pools, horizon)]
    for k, p in enumerate(placed):
        if p is not None and k not in free_jobs:
            i, s = p
            cap[pool_of[jobs[k].options[i].row.offer_name]][s : s + jobs[k].durations[i]] -= jobs[k].options[i].row.gpus
    cents = {k: [usd_to_cents(o.cost_usd) for o in jobs[k].options] for k in free_jobs}
    current = sum(cents[k][placed[k][0]] for k in free_jobs)
    columns = []  # (job, option, start, pool, gpus, steps)
    for k in free_jobs:
        r, lim = window(jobs[k], horizon)
        for i, (opt, d) in enumerate(zip(jobs[k].options, jobs[k].durations)):
            q, g = pool_of[opt.row.offer_name], opt.row.gpus
            columns += [(k, i, s, q, g, d) for s in range(r, lim - d + 1) if d > 0 and (cap[q][s : s + d] >= g).all()]

    def solve(kind: str) -> tuple[float, float, bool]:
        solver = pywraplp.Solver.CreateSolver(kind)
        xs = [solver.NumVar(0, 1, "") if kind == "GLOP" else solver.BoolVar("") for _ in columns]
        per_job: dict[int, list] = {k: [] for k in free_jobs}
        per_step: dict[tuple[int, int], list] = {}
        for x, (k, _, s, q, g, d) in zip(xs, columns):
            per_job[k].append(x)
            for t in range(s, s + d):
                per_step.setdefault((q, t), []).append((g, x))
        for k in free_jobs:
            solver.Add(sum(per_job[k]) == 1)
        for (q, t), items in per_step.items():
            solver.Add(sum(g * x for g, x in items) <= int(cap[q][t]))
        solver.Minimize(sum(cents[k][i] * x for x, (k, i, *_) in zip(xs, columns)))
        solver.SetTimeLimit(int(mip_s * 1000))
        status = solver.Solve()
        objective = solver.Objective()
        return objective.Value(), objective.BestBound(), status == pywraplp.Solver.OPTIMAL

    lp, _, _ = solve("GLOP")
    started = time.perf_counter()
    best, bound, proven = solve("SCIP")
    return (
        f"[{lo}, {hi}) h: {len(free_jobs)} jobs freed, schedule ${current / 100:,.2f}, LP ${lp / 100:,.2f}, "
        f"integer ${best / 100:,.2f} ({'proven' if proven else f'bound ${bound / 100:,.2f}'}, "
        f"{time.perf_counter() - started:.0f} s): schedule above LP {current / lp - 1:.2%}, optimum above LP "
        f"{best / lp - 1:.2%}, schedule above optimum {current / best - 1:.2%}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--load", type=float, default=0.82)
    parser.add_argument("--prices", default="uniform", choices=["market", "uniform"])
    parser.add_argument("--pools-sized", default="even", choices=["even", "demand", "mixed"])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--windows", default="100-160,300-360,500-560", help="hour ranges, e.g. 100-160,300-360")
    parser.add_argument("--mip-limit", type=float, default=120.0, help="seconds for SCIP per window")
    args = parser.parse_args()
    pf, catalog, _ = constructed(
        args.jobs, seed=args.seed, load=args.load, optional=0.2, pools_sized=args.pools_sized, prices_drawn=args.prices
    )
    result = api.portfolio(pf, catalog=catalog, time_limit_s=args.time_limit, workers=2)
    print(f"schedule ${result.total_cost_usd:,.2f}, bound ${result.bound_usd:,.2f}, gap {result.gap:.2%}", flush=True)
    horizon = whole_steps(pf.horizon_s, pf.time_step_s)
    pools, jobs = pool_specs(pf, catalog, horizon), prepare_jobs(pf, catalog, horizon)
    pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
    placed = placements(result, jobs, pf.time_step_s)
    for part in args.windows.split(","):
        lo, hi = (int(v) for v in part.split("-"))
        print(window_gap(jobs, pools, pool_of, horizon, placed, lo, hi, args.mip_limit), flush=True)


if __name__ == "__main__":
    main()
