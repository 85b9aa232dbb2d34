"""Benchmark: portfolio scheduling at 10, 50, 200 and 1,000 jobs over 5-12 offers with binding
supply. Reports time to the first feasible schedule, to a 1 % gap and to proven optimality, and
the cost CP-SAT saves over a greedy baseline (earliest deadline first, cheapest option that fits).

    python bench/portfolio_bench.py                 # 10, 50, 200 jobs (60 s limit each)
    python bench/portfolio_bench.py --sizes 1000 --time-limit 120
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from ortools.sat.python import cp_model

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from optimizer import api, load_catalog
from optimizer.inputs import units  # noqa: E402
from optimizer.inputs.schema import Catalog, Offer, Portfolio  # noqa: E402
from optimizer.solver.portfolio import data as pdata  # noqa: E402
from optimizer.solver.portfolio import solve as pmod  # noqa: E402
from optimizer.solver.portfolio.greedy import greedy_schedule  # noqa: E402

MODELS = [
    {
        "name": "llama-3.1-8b",
        "params": "8.03B",
        "layers": 32,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 8,
        "ffn_hidden": 14336,
        "vocab": 128256,
    },
    {
        "name": "qwen3-14b",
        "params": "14.77B",
        "layers": 40,
        "hidden": 5120,
        "heads": 40,
        "kv_heads": 8,
        "ffn_hidden": 17408,
        "vocab": 151936,
    },
    {
        "name": "qwen3-32b",
        "params": "32.76B",
        "layers": 64,
        "hidden": 5120,
        "heads": 64,
        "kv_heads": 8,
        "head_dim": 128,
        "ffn_hidden": 25600,
        "vocab": 151936,
    },
    {
        "name": "mistral-7b",
        "params": "7.25B",
        "layers": 32,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 8,
        "ffn_hidden": 14336,
        "vocab": 32768,
    },
]
SKUS = [
    "B200",
    "B300",
    "H200",
    "H100-SXM",
    "A100-80GB",
    "H800",
    "MI300X",
    "A100-40GB",
    "RTX-PRO-6000",
    "L40S",
    "H100-PCIe",
    "B200",
]


def instance(n_jobs: int, n_offers: int, seed: int = 0, load: float = 0.5) -> tuple[Portfolio, Catalog]:
    rng = random.Random(seed)
    hw = load_catalog("hardware")
    offers = [
        Offer(name=f"o{i}-{s.lower()}", sku=s, price=round(rng.uniform(1.0, 7.0), 3), gpus_per_node=8, max_nodes=1)
        for i, s in enumerate(SKUS[:n_offers])
    ]
    catalog = Catalog(name="bench", skus=hw.skus, offers=offers)
    horizon_d = 30
    jobs = []
    for i in range(n_jobs):
        model = rng.choice(MODELS)
        method = rng.choice(["full", "full", "lora"])
        # Size jobs so that demand is about the pools' capacity: supply binds, cheap offers run out.
        tokens = rng.uniform(0.3, 1.7) * load * n_offers * 8 * horizon_d * 86400 * 0.6e15 / (n_jobs * 6 * 15e9)
        release = rng.randint(0, horizon_d // 2)
        jobs.append(
            {
                "name": f"job{i}",
                "job": {"model": model, "method": method, "tokens": tokens, "seq_len": 4096, "global_batch": 64},
                "release": f"{release}d",
                "deadline": f"{min(horizon_d, release + rng.randint(3, 10))}d",
                "priority": rng.choice([1, 2, 3]),
                "required": rng.random() > 0.2,
            }
        )
    gpus = 8  # one node per offer
    pools = [{"offer": o.name, "gpus": gpus} for o in offers]
    pf = Portfolio.model_validate({"horizon": f"{horizon_d}d", "time_step": "1h", "pools": pools, "jobs": jobs})
    # Every required job must be able to finish alone: widen its deadline to 1.5x its fastest option,
    # and make it optional when even that passes the horizon.
    horizon = int(pf.horizon_s // pf.time_step_s)
    for entry, job in zip(pf.jobs, pdata.prepare_jobs(pf, catalog, horizon)):
        fastest = min(job.durations, default=horizon + 1)
        need = job.release + int(1.5 * fastest)
        if need > horizon:
            entry.required = False
        elif job.deadline is not None and need > job.deadline:
            entry.deadline_s = need * pf.time_step_s
    return pf, catalog


def greedy(pf: Portfolio, catalog: Catalog) -> tuple[float, tuple[int, float]]:
    """The product's greedy schedule (EDF, cheapest option that fits): (cost, value)."""
    horizon = int(pf.horizon_s // pf.time_step_s)
    jobs = pdata.prepare_jobs(pf, catalog, horizon)
    pools = pdata.pool_specs(pf, catalog, horizon)
    pool_of = {o: k for k, p in enumerate(pools) for o in p.offers}
    placed = greedy_schedule(jobs, pools, pool_of, horizon)
    return sum(job.options[p[0]].cost_usd for job, p in zip(jobs, placed) if p), _value(
        pf, [e.name for e, p in zip(pf.jobs, placed) if p]
    )


def _value(pf: Portfolio, done: list[str]) -> tuple[int, float]:
    """What a schedule achieves, compared lexicographically: (required jobs placed, weight of optional ones)."""
    entries = {e.name: e for e in pf.jobs}
    return (sum(entries[n].required for n in done), sum(entries[n].weight for n in done if not entries[n].required))


class Recorder(cp_model.CpSolverSolutionCallback):
    def __init__(self):
        super().__init__()
        self.t0 = time.perf_counter()
        self.first = None
        self.one_percent = None

    def on_solution_callback(self):
        t = time.perf_counter() - self.t0
        if self.first is None:
            self.first = t
        obj, bound = self.objective_value, self.best_objective_bound
        if self.one_percent is None and obj and abs(obj - bound) / abs(obj) <= 0.01:
            self.one_percent = t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,50,200")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--time-step", default="1h", help="Schedule granularity (coarser solves faster).")
    ap.add_argument("--load", type=float, default=0.5, help="Demand / pool capacity (roughly); 0.7 is very tight.")
    args = ap.parse_args()
    print(f"time limit {args.time_limit:g} s, {args.workers} workers, time step {args.time_step}; times in seconds")
    print(
        f"{'jobs':>5} {'offers':>6} {'options':>7} {'prep':>6} {'first':>7} {'1% gap':>7} {'optimal':>8} {'status':>8} "
        f"{'gap':>6} {'req done':>9} {'opt wt':>6} {'cp-sat $':>11} {'greedy req':>10} {'g opt wt':>8} {'greedy $':>11} {'saving':>10}"
    )
    for n in [int(x) for x in args.sizes.split(",")]:
        offers = min(12, 5 + n // 50)
        pf, catalog = instance(n, offers, load=args.load)
        pf = pf.model_copy(update={"time_step_s": units.parse_duration_s(args.time_step)})
        t0 = time.perf_counter()
        horizon = int(pf.horizon_s // pf.time_step_s)
        jobs = pdata.prepare_jobs(pf, catalog, horizon)
        prep = time.perf_counter() - t0
        options = sum(len(j.options) for j in jobs)
        rec = Recorder()
        original = pmod._Progress
        pmod._Progress = lambda out: rec  # reuse the product's callback hook to record timings
        try:
            t1 = time.perf_counter()
            result = api.portfolio(
                pf, catalog=catalog, time_limit_s=args.time_limit, workers=args.workers, progress=lambda line: None
            )
            wall = time.perf_counter() - t1
        finally:
            pmod._Progress = original
        g_cost, g_value = greedy(pf, catalog)
        value = _value(pf, [j.job for j in result.schedule])
        required = sum(e.required for e in pf.jobs)
        if value == g_value:
            saving = f"{(g_cost - result.total_cost_usd) / g_cost:.1%}" if g_cost else "-"
        elif value > g_value:
            saving = "more done"
        else:
            saving = "less done"
        optimal = f"{wall:.1f}" if result.status == "optimal" else "-"
        one = rec.one_percent if rec.one_percent is not None else (wall if result.status == "optimal" else None)
        print(
            f"{n:>5} {offers:>6} {options:>7} {prep:>6.1f} {rec.first if rec.first is not None else float('nan'):>7.1f} "
            f"{one if one is not None else float('nan'):>7.1f} {optimal:>8} {result.status:>8} {result.gap:>6.2%} "
            f"{f'{value[0]}/{required}':>9} {value[1]:>6g} {result.total_cost_usd:>11,.0f} {f'{g_value[0]}/{required}':>10} "
            f"{g_value[1]:>8g} {g_cost:>11,.0f} {saving:>10}"
        )


if __name__ == "__main__":
    main()
