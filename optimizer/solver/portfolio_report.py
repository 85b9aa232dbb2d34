"""Portfolio outputs: the schedule with dates and pool use, why jobs were dropped, and what makes an
infeasible portfolio infeasible."""

from __future__ import annotations

import datetime as dt
from typing import Optional

from ..plans import plan_from
from ..results import DroppedJob, Infeasibility, PoolUse, PortfolioResult, ScheduledJob
from ..schema import Portfolio
from ..units import fmt_duration
from .portfolio_data import JobData, PoolSpec

def _date(pf: Portfolio, hours: float) -> Optional[str]:
    if pf.start is None:
        return None
    return (dt.datetime.combine(pf.start, dt.time()) + dt.timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M")


def extract(pf, jobs, choices, pools, result: PortfolioResult) -> None:
    """Fill the result from per-job (option index or None, start step)."""
    step_h = pf.time_step_s / 3600.0
    usage = {k: [] for k in range(len(pools))}
    pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
    for job, (i, s) in zip(jobs, choices):
        if i is None:
            result.dropped.append(DroppedJob(job=job.name, reason=_drop_reason(pf, job)))
            continue
        opt = job.options[i]
        e = s + job.durations[i]
        plan = plan_from(job.table.ctx, opt.row, job.table.evaluation, opt.index)
        late = 0.0 if job.deadline is None else max(0.0, (e - job.deadline) * step_h)
        result.schedule.append(ScheduledJob(job=job.name, offer=opt.row.offer.name, plan=plan, start_h=s * step_h,
                                            end_h=e * step_h, cost_usd=round(opt.cost_usd, 2),
                                            start_date=_date(pf, s * step_h), end_date=_date(pf, e * step_h),
                                            late_h=late))
        usage[pool_of[opt.row.offer.name]].append((s, e, opt.row.gpus))
    result.total_cost_usd = round(sum(j.cost_usd for j in result.schedule), 2)
    result.makespan_h = max((j.end_h for j in result.schedule), default=0.0)
    for k, pool in enumerate(pools):
        if not usage[k] and pool.name not in {p.offer for p in pf.pools}:
            continue
        events = sorted({t for s, e, _ in usage[k] for t in (s, e)})
        timeline = [(t * step_h, sum(g for s, e, g in usage[k] if s <= t < e)) for t in events]
        result.pools.append(PoolUse(offer=pool.name, gpus=pool.peak_capacity,
                                    peak_used=max((u for _, u in timeline), default=0), timeline=timeline))


def _drop_reason(pf: Portfolio, job: JobData) -> str:
    if not job.options:
        return "no option fits this job (memory or GPU filters)"
    fastest = min(job.durations)
    if job.deadline is not None and job.release + fastest > job.deadline:
        return "cannot meet its deadline even alone"
    if job.required:
        return "required, but the GPU pools, deadlines and budget cannot carry it together with the others"
    return "dropped so that the budget and GPU supply carry the higher-priority jobs"


def explain_portfolio(pf: Portfolio, jobs: list[JobData], pools: list[PoolSpec], horizon: int) -> list[Infeasibility]:
    step_h = pf.time_step_s / 3600.0
    out = []
    for job in jobs:
        if not job.required:
            continue
        if not job.options:
            out.append(Infeasibility(constraint="memory", detail=f"job {job.name!r}: no option fits (memory or GPU filters)"))
            continue
        fastest = min(job.durations)
        limit = min(horizon, job.deadline if job.deadline is not None and pf.objective != "weighted_lateness" else horizon)
        if job.release + fastest > limit:
            over = (job.release + fastest - limit) * step_h
            out.append(Infeasibility(constraint="deadline", over_by=over, detail=(
                f"job {job.name!r} cannot finish in time even alone: its fastest option takes "
                f"{fmt_duration(fastest * pf.time_step_s)}, {fmt_duration(over * 3600)} past its "
                f"{'deadline' if limit != horizon else 'horizon'}")))
    if pf.budget_usd is not None:
        floor = sum(min(c.cost_usd for c in job.options) for job in jobs if job.required and job.options)
        if floor > pf.budget_usd:
            out.append(Infeasibility(constraint="budget", over_by=floor - pf.budget_usd, detail=(
                f"the required jobs cost at least ${floor:,.2f} at their cheapest options: "
                f"${floor - pf.budget_usd:,.2f} over the budget of ${pf.budget_usd:,.2f}")))
    for k, pool in enumerate(pools):
        pool_names = {o for o in pool.offers}
        need = 0.0
        for job in jobs:
            if job.required and job.options and all(c.row.offer.name in pool_names for c in job.options):
                need += min(c.row.gpus * d for c, d in zip(job.options, job.durations)) * step_h
        have = sum((e - s) * g for s, e, g in pool.segments) * step_h
        if need > have:
            out.append(Infeasibility(constraint="supply", over_by=need - have, detail=(
                f"pool {pool.name}: required jobs that can only run there need at least {need:,.0f} GPU-hours; "
                f"it offers {have:,.0f} over the horizon")))
    if not out:
        out.append(Infeasibility(constraint="schedule", detail=(
            "each job fits alone, but not all together: GPU pools, deadlines, dependencies and the budget "
            "conflict; loosen a deadline, add pool capacity, raise the budget or make a job optional")))
    return out
