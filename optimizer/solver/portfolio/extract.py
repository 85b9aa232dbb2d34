"""Portfolio outputs: the schedule with dates and pool use, and the dropped jobs (their reasons are
``explain``'s)."""

from __future__ import annotations

import datetime as dt

from ...inputs.schema import Portfolio
from ...planning.plans import plan_from
from ...results import DroppedJob, PoolUse, PortfolioResult, ScheduledJob
from .data import PoolSpec


def _date(pf: Portfolio, hours: float) -> str | None:
    if pf.start is None:
        return None
    return (dt.datetime.combine(pf.start, dt.time()) + dt.timedelta(hours=hours)).strftime("%Y-%m-%d %H:%M")


def extract(pf: Portfolio, jobs: list, choices: list, pools: list[PoolSpec], result: PortfolioResult) -> None:
    """Fill the result from per-job (option index or None, start step)."""
    step_h = pf.time_step_s / 3600.0
    usage: dict[int, list[tuple[int, int, int]]] = {k: [] for k in range(len(pools))}
    pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
    for job, (i, s) in zip(jobs, choices):
        if i is None:
            result.dropped.append(DroppedJob(job=job.name, reason=""))
            continue
        opt = job.options[i]
        e = s + job.durations[i]
        plan = plan_from(job.table.ctx, opt.row, job.table.evaluation, opt.index)
        # against the deadline as written, not the step it rounds down to (7h at 2h steps is not 6h)
        deadline_s = pf.jobs[job.index].deadline_s
        late = 0.0 if deadline_s is None else max(0.0, e * step_h - deadline_s / 3600.0)
        result.schedule.append(
            ScheduledJob(
                job=job.name,
                offer=opt.row.offer_name,
                plan=plan,
                start_h=s * step_h,
                end_h=e * step_h,
                cost_usd=round(opt.cost_usd, 2),
                start_date=_date(pf, s * step_h),
                end_date=_date(pf, e * step_h),
                late_h=late,
            )
        )
        usage[pool_of[opt.row.offer_name]].append((s, e, opt.row.gpus))
    result.total_cost_usd = round(sum(j.cost_usd for j in result.schedule), 2)
    result.makespan_h = max((j.end_h for j in result.schedule), default=0.0)
    for k, pool in enumerate(pools):
        if not usage[k] and pool.name not in {p.offer for p in pf.pools}:
            continue
        # GPUs in use from each start or end on: the changes at each, summed in time order (one pass; a sum
        # over every run at every event grows with jobs x events: 0.14 s at 5,000 jobs on 720 steps)
        change: dict[int, int] = {}
        for s, e, g in usage[k]:
            change[s] = change.get(s, 0) + g
            change[e] = change.get(e, 0) - g
        timeline, used = [], 0
        for t in sorted(change):
            used += change[t]
            timeline.append((t * step_h, used))
        result.pools.append(
            PoolUse(
                offer=pool.name,
                gpus=pool.peak_capacity,
                peak_used=max((u for _, u in timeline), default=0),
                timeline=timeline,
                capacity=[(s * step_h, g) for s, _, g in pool.segments],
            )
        )
