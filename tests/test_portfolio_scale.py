"""Portfolio at scale: the LP relaxation's bound never exceeds the brute-force optimum; on instances
feasible by construction no required job is dropped; the time limit bounds the whole call; jobs of
one shape share one candidate table."""

import random
import time

from hypothesis import HealthCheck, given, settings
from test_portfolio import brute_force, check_schedule, small_portfolios

from optimizer import load_catalog, portfolio
from optimizer.inputs.schema import Catalog, Offer, Portfolio
from optimizer.physics.constants import usd_to_cents
from optimizer.solver.portfolio.data import pool_specs, prepare_jobs
from optimizer.solver.portfolio.greedy import capacity_arrays, earliest_start
from optimizer.solver.portfolio.lp import drop_weights, lp_bound

HW = load_catalog("hardware")
MODEL = {"params": "8B", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336, "vocab": 128256}


def _lp(pf, catalog, dropped_limit):
    horizon = int(pf.horizon_s // pf.time_step_s)
    jobs = prepare_jobs(pf, catalog, horizon)
    pools = pool_specs(pf, catalog, horizon)
    pool_of = {o: k for k, p in enumerate(pools) for o in p.offers}
    budget = None if pf.budget_usd is None else usd_to_cents(pf.budget_usd)
    return jobs, lp_bound(jobs, pools, pool_of, horizon, budget, dropped_limit)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_portfolios())
def test_lp_bound_never_above_the_brute_force_optimum(instance):
    pf, catalog = instance
    expected = brute_force(pf, catalog)
    if expected is None:
        return
    dropped, cost = expected
    jobs, lp = _lp(pf, catalog, dropped)
    assert not lp.infeasible, "the optimum is a point of the relaxation"
    assert lp.bound_cents is not None and lp.bound_cents <= cost + 1e-6


def _constructed(n_jobs: int, seed: int = 0) -> tuple[Portfolio, Catalog]:
    """Jobs packed by hand into two pools (one shape per token count, repeated), then given windows
    around their packed slots: a schedule placing every job exists by construction."""
    rng = random.Random(seed)
    offers = [
        Offer(name="cheap", sku="H100-SXM", price=2.0, gpus_per_node=8, gpu_counts=[4, 8], max_nodes=1),
        Offer(name="dear", sku="H200", price=4.0, gpus_per_node=8, gpu_counts=[4, 8], max_nodes=1),
    ]
    catalog = Catalog(name="built", skus=HW.skus, offers=offers)
    entries = [
        {"name": f"j{i}", "job": {"model": MODEL, "tokens": f"{rng.choice([2, 4, 6])}00M", "seq_len": 4096}}
        for i in range(n_jobs)
    ]
    pools = [{"offer": "cheap", "gpus": 8}, {"offer": "dear", "gpus": 8}]
    draft = Portfolio.model_validate({"horizon": "20d", "time_step": "4h", "pools": pools, "jobs": entries})
    horizon = int(draft.horizon_s // draft.time_step_s)
    jobs = prepare_jobs(draft, catalog, horizon)
    specs = pool_specs(draft, catalog, horizon)
    pool_of = {o: k for k, p in enumerate(specs) for o in p.offers}
    free = capacity_arrays(specs, horizon)
    for entry, job in zip(entries, jobs):
        order = list(range(len(job.options)))
        rng.shuffle(order)
        for i in order:
            opt, d = job.options[i], job.durations[i]
            p = pool_of[opt.row.offer_name]
            s = earliest_start(free[p], opt.row.gpus, d, rng.randrange(horizon // 2), horizon - d)
            if s is not None:
                free[p][s : s + d] -= opt.row.gpus
                entry["release"] = f"{4 * max(0, s - rng.randint(0, 3))}h"
                entry["deadline"] = f"{4 * min(horizon, s + d + rng.randint(0, 3))}h"
                break
        else:
            entry.update({"required": False})
    pf = Portfolio.model_validate({"horizon": "20d", "time_step": "4h", "pools": pools, "jobs": entries})
    return pf, catalog


def test_feasible_by_construction_drops_no_required_job():
    pf, catalog = _constructed(45)
    assert sum(e.required for e in pf.jobs) >= 20
    result = portfolio(pf, catalog=catalog, time_limit_s=8, workers=1)
    required = {e.name for e in pf.jobs if e.required}
    assert not [d.job for d in result.dropped if d.job in required]
    assert result.status in ("feasible", "optimal") and result.method == "lp_lns"
    check_schedule(pf, result, catalog)
    assert result.bound_source == "lp_relaxation" and result.bound_usd is not None
    assert result.bound_usd <= result.total_cost_usd + 0.01
    assert abs(result.gap - (result.total_cost_usd - result.bound_usd) / result.total_cost_usd) < 1e-3


def test_time_limit_holds_end_to_end():
    pf, catalog = _constructed(60, seed=1)
    started = time.perf_counter()
    result = portfolio(pf, catalog=catalog, time_limit_s=4, workers=1, started=started)
    took = time.perf_counter() - started
    assert took < 4 + 1.5, took
    assert result.schedule and result.solve_s <= took + 1e-6


def test_jobs_of_one_shape_share_one_table():
    pf, catalog = _constructed(12)
    horizon = int(pf.horizon_s // pf.time_step_s)
    jobs = prepare_jobs(pf, catalog, horizon)
    assert len({id(j.table) for j in jobs}) <= 3 < len(jobs)
    assert drop_weights(jobs)[0] >= 1
