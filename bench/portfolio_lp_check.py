"""Diagnostic: is the time-indexed LP tight on small constructed portfolios?

For each seed, builds ``portfolio_bench.constructed(jobs, horizon_d=..., prices_drawn=..., pools_sized=...)``,
solves the exact LP relaxation with GLOP (``lp.lp_bound``, no drop allowed) and schedules with
``api.portfolio`` (at these sizes the whole model goes to CP-SAT, which may prove the optimum), and prints
how far the schedule lies above the LP. Where CP-SAT proves optimality that is the LP's integrality gap.

    python bench/portfolio_lp_check.py 30 3 uniform even 120 0 1
    python bench/portfolio_lp_check.py 100 6 uniform even 240 0

Arguments: jobs, horizon days, prices (market | uniform), pools sized (even | demand | mixed), time limit
in seconds, then the seeds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from portfolio_bench import constructed  # noqa: E402

from optimizer import portfolio  # noqa: E402
from optimizer.solver.portfolio.data import pool_specs, prepare_jobs, whole_steps  # noqa: E402
from optimizer.solver.portfolio.lp import lp_bound  # noqa: E402


def main(argv: list[str]) -> None:
    n, horizon_d, prices, sized, limit = int(argv[0]), int(argv[1]), argv[2], argv[3], float(argv[4])
    for seed in map(int, argv[5:]):
        pf, catalog, _ = constructed(n, seed=seed, horizon_d=horizon_d, prices_drawn=prices, pools_sized=sized)
        horizon = whole_steps(pf.horizon_s, pf.time_step_s)
        pools, jobs = pool_specs(pf, catalog, horizon), prepare_jobs(pf, catalog, horizon)
        pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
        lp = lp_bound(jobs, pools, pool_of, horizon, None, 0, time_limit_s=120)
        started = time.perf_counter()
        result = portfolio(pf, catalog=catalog, time_limit_s=limit, workers=2)
        cost = result.total_cost_usd
        lp_usd = lp.bound_cents / 100 if lp.bound_cents is not None else float("nan")
        print(
            f"jobs={n} horizon={horizon_d}d {prices} {sized} seed={seed} status={result.status} "
            f"cost=${cost:,.2f} LP=${lp_usd:,.2f} above the LP {(cost - lp_usd) / cost:.2%} "
            f"dropped={len(result.dropped)} {time.perf_counter() - started:.0f} s",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
