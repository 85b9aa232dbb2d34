"""Diagnostic: where the portfolio search's optimality gap lives, bound or schedule.

On one constructed instance (``portfolio_bench.constructed``, every job required) it reports the
Lagrangian bound, the search's schedule (``api.portfolio`` with ``--search-limit``), and CP-SAT on the
whole model (every job required, minimise cost, hinted with the squeaky-wheel schedule) with
``--exact-limit``: its best schedule and its proven bound. When CP-SAT proves optimality, the optimum
splits the gap into the bound's share (optimum - bound) and the search's (schedule - optimum).

    python bench/portfolio_gap.py --jobs 40 --horizon-days 4 --exact-limit 120
    python bench/portfolio_gap.py --jobs 200 --exact-limit 300
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
from ortools.sat.python import cp_model  # noqa: E402
from portfolio_bench import constructed  # noqa: E402

from optimizer import api  # noqa: E402
from optimizer.money import usd_to_cents  # noqa: E402
from optimizer.solver.model import new_solver  # noqa: E402
from optimizer.solver.portfolio import data as pdata  # noqa: E402
from optimizer.solver.portfolio.build import build, warm_start  # noqa: E402
from optimizer.solver.portfolio.greedy import capacity_arrays, squeaky_wheel  # noqa: E402
from optimizer.solver.portfolio.lagrange import Ascent  # noqa: E402
from optimizer.solver.portfolio.lp import drop_weights, window  # noqa: E402


def split_gap(jobs, pools, pool_of, horizon, prices, placed) -> dict[str, float]:
    """Cents: a schedule's cost minus the Lagrangian value at ``prices`` (every job required, no budget),
    split exactly into its two non-negative parts (complementary slackness):

        cost - L(prices) = sum_j [rc_j(placement) - min rc_j]  +  sum_kt price_kt (capacity_kt - use_kt)

    with rc_j the job's cost plus its GPU-steps priced in. The first is the search's to win (jobs not at
    their cheapest priced slot); the second, priced GPU-steps left idle, a schedule can only shrink by
    packing tighter, and the relaxation's own weakness shows there (a fractional schedule leaves none)."""
    cap = capacity_arrays(pools, horizon)
    prefix = [np.concatenate(([0.0], np.cumsum(p[:horizon]))) for p in prices]
    use = [np.zeros(horizon + 1) for _ in pools]
    slot = 0.0
    for job, p in zip(jobs, placed):
        if p is None:
            continue
        r, lim = window(job, horizon)
        best = np.inf
        for opt, d in zip(job.options, job.durations):
            if 0 < d <= lim - r:
                pre = prefix[pool_of[opt.row.offer_name]]
                best = min(
                    best,
                    usd_to_cents(opt.cost_usd)
                    + opt.row.gpus * float(np.min(pre[r + d : lim + 1] - pre[r : lim - d + 1])),
                )
        i, s = p
        opt, d = job.options[i], job.durations[i]
        k = pool_of[opt.row.offer_name]
        slot += usd_to_cents(opt.cost_usd) + opt.row.gpus * (prefix[k][s + d] - prefix[k][s]) - best
        use[k][s : s + d] += opt.row.gpus
    idle = sum(float((price[:horizon] * (c[:horizon] - u[:horizon])).sum()) for price, c, u in zip(prices, cap, use))
    return {"slot_cents": round(slot), "idle_cents": round(idle)}


def placements(result, jobs, step_s: float):
    """Per job, (option index, start step) of a result's schedule, or None."""
    by_name = {e.job: e for e in result.schedule}
    out: list[tuple[int, int] | None] = []
    for job in jobs:
        e = by_name.get(job.name)
        if e is None:
            out.append(None)
            continue
        s, d = round(e.start_h * 3600 / step_s), round((e.end_h - e.start_h) * 3600 / step_s)
        i = next(
            i
            for i, (o, dd) in enumerate(zip(job.options, job.durations))
            if o.row.offer_name == e.offer and dd == d and abs(round(o.cost_usd, 2) - e.cost_usd) < 0.006
        )
        out.append((i, s))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--horizon-days", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--search-limit", type=float, default=60.0)
    ap.add_argument("--exact-limit", type=float, default=120.0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    pf, catalog, known = constructed(args.jobs, seed=args.seed, horizon_d=args.horizon_days)
    horizon = pdata.whole_steps(pf.horizon_s, pf.time_step_s)
    jobs = pdata.prepare_jobs(pf, catalog, horizon)
    pools = pdata.pool_specs(pf, catalog, horizon)
    pool_of = {o: k for k, p in enumerate(pools) for o in p.offers}
    weights = drop_weights(jobs)
    first = squeaky_wheel(jobs, pools, pool_of, horizon, None, time.perf_counter() + 10, weights)
    result = api.portfolio(pf, catalog=catalog, time_limit_s=args.search_limit, workers=args.workers)
    ours = placements(result, jobs, pf.time_step_s)
    lag = Ascent(jobs, pools, pool_of, horizon, None).run(
        first.score[0],
        deadline=time.perf_counter() + 30,
        target_cents=usd_to_cents(result.total_cost_usd),
    )
    out = {
        "jobs": args.jobs,
        "horizon_h": horizon,
        "gpus": sum(p.gpus for p in pf.pools),
        "packed_use": round(known.utilisation, 3),
        "packed_cents": usd_to_cents(known.cost_usd),
        "lagrangian_cents": round(lag.bound_cents or 0.0),
        "search_cents": usd_to_cents(result.total_cost_usd),
        "search_bound_cents": usd_to_cents(result.bound_usd or 0.0),
        "search_placed": len(result.schedule),
        "squeaky_placed": sum(p is not None for p in first.placed),
        "search_split": split_gap(jobs, pools, pool_of, horizon, lag.prices, ours),
    }
    if args.exact_limit <= 0:
        print(json.dumps(out))
        return
    # The whole model: every job that the squeaky wheel placed must run; minimise cost.
    pm = build(pf, jobs, pools, horizon)
    for done, p in zip(pm.dones, first.placed):
        if p is not None:
            pm.pm.model.add(done == 1)
    for on in pm.pm.switches.values():  # every constraint family on (fixed, not assumed: presolve keeps working)
        pm.pm.model.add(on == 1)
    warm_start(pm, first.placed)
    pm.pm.model.minimize(pm.total_cost())
    solver = new_solver(args.exact_limit, args.workers)
    t0 = time.perf_counter()
    status = solver.solve(pm.pm.model)
    exact = (
        [
            (v.picked(solver), solver.value(st)) if v.picked(solver) is not None else None
            for v, st in zip(pm.jv, pm.starts)
        ]
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
        else None
    )
    out.update(
        cp_sat_status=solver.status_name(status),
        cp_sat_cents=round(solver.objective_value) if exact is not None else None,
        cp_sat_bound_cents=round(solver.best_objective_bound),
        cp_sat_s=round(time.perf_counter() - t0, 1),
        cp_sat_split=None if exact is None else split_gap(jobs, pools, pool_of, horizon, lag.prices, exact),
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
