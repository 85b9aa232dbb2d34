"""A greedy schedule: earliest deadline first, each job on its cheapest option that fits the pool at
its earliest start. The baseline the portfolio benchmark compares against, and CP-SAT's warm start."""

from __future__ import annotations

from ...physics.constants import usd_to_cents


def greedy_schedule(
    jobs, pools, pool_of, horizon: int, budget_cents: int | None = None
) -> list[tuple[int, int] | None]:
    """Per job, (option index, start step) or None when it could not be placed (pools, deadline, budget)."""
    used = [[0] * (horizon + 1) for _ in pools]
    spent = 0
    placed: list[tuple[int, int] | None] = [None] * len(jobs)
    index = {job.name: k for k, job in enumerate(jobs)}
    order = sorted(
        range(len(jobs)),
        key=lambda k: (
            jobs[k].deadline if jobs[k].deadline is not None else horizon,
            not jobs[k].required,
            jobs[k].name,
        ),
    )
    pending = list(order)
    for _ in range(len(jobs)):  # dependencies: place a job once its predecessors are placed
        progress = False
        for k in list(pending):
            job = jobs[k]
            if any(placed[index[d]] is None and index[d] in pending for d in job.after):
                continue
            pending.remove(k)
            progress = True
            if any(placed[index[d]] is None for d in job.after):
                continue
            ready = max([job.release] + [_end(jobs[index[d]], placed[index[d]]) for d in job.after])
            ranked = sorted(range(len(job.options)), key=lambda i: (job.options[i].cost_usd, job.durations[i]))
            for i in ranked:
                opt, dur = job.options[i], job.durations[i]
                cents = usd_to_cents(opt.cost_usd)
                if budget_cents is not None and spent + cents > budget_cents:
                    continue
                p = pool_of[opt.row.offer_name]
                last = min(horizon, job.deadline if job.deadline is not None else horizon) - dur
                start = next(
                    (
                        s
                        for s in range(ready, last + 1)
                        if all(used[p][t] + opt.row.gpus <= pools[p].capacity_at(t) for t in range(s, s + dur))
                    ),
                    None,
                )
                if start is not None:
                    for t in range(start, start + dur):
                        used[p][t] += opt.row.gpus
                    placed[k] = (i, start)
                    spent += cents
                    break
        if not progress:
            break
    return placed


def _end(job, placement: tuple[int, int] | None) -> int:
    """The step a placed job ends at."""
    if placement is None:
        raise ValueError(f"job {job.name} is not placed")
    option, start = placement
    return start + job.durations[option]
