"""A greedy schedule: earliest deadline first, each job on its cheapest option that fits the pool at
its earliest start. The baseline the portfolio benchmark compares against, and the search's first
complete schedule (optionally trying the LP relaxation's preferred option of each job first).

Pool use is kept as one numpy array per pool (GPUs free at each step), so placing a job costs
O(options x horizon) vector operations, not a Python loop over steps."""

from __future__ import annotations

import numpy as np

from ...physics.constants import usd_to_cents

Placement = tuple[int, int] | None  # (option index, start step) or None: not placed


def capacity_arrays(pools, horizon: int) -> list[np.ndarray]:
    """GPUs each pool offers at every step (one extra step at the end, always 0)."""
    out = []
    for pool in pools:
        cap = np.zeros(horizon + 1, dtype=np.int64)
        for s, e, g in pool.segments:
            cap[max(0, s) : max(0, min(e, horizon))] = g
        out.append(cap)
    return out


def earliest_start(free: np.ndarray, gpus: int, dur: int, ready: int, last: int) -> int | None:
    """The first step s in [ready, last] with at least ``gpus`` free at every step of [s, s + dur)."""
    if last < ready:
        return None
    if dur <= 0:
        return ready
    short = np.concatenate(([0], np.cumsum(free[: last + dur] < gpus)))
    starts = np.arange(ready, last + 1)
    ok = np.nonzero(short[starts + dur] - short[starts] == 0)[0]
    return int(starts[ok[0]]) if len(ok) else None


def end_step(job, placement: Placement) -> int:
    """The step a placed job ends at."""
    if placement is None:
        raise ValueError(f"job {job.name} is not placed")
    option, start = placement
    return start + job.durations[option]


def greedy_schedule(
    jobs,
    pools,
    pool_of,
    horizon: int,
    budget_cents: int | None = None,
    prefer: list[int | None] | None = None,
) -> list[Placement]:
    """Per job, (option index, start step) or None when it could not be placed (pools, deadline, budget).
    ``prefer``: per job an option to try first (else cheapest first, ties shorter)."""
    free = capacity_arrays(pools, horizon)
    spent = 0
    placed: list[Placement] = [None] * len(jobs)
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
            ready = max([job.release] + [end_step(jobs[index[d]], placed[index[d]]) for d in job.after])
            ranked = sorted(range(len(job.options)), key=lambda i: (job.options[i].cost_usd, job.durations[i]))
            first = None if prefer is None else prefer[k]
            if first is not None:
                ranked.remove(first)
                ranked.insert(0, first)
            for i in ranked:
                opt, dur = job.options[i], job.durations[i]
                cents = usd_to_cents(opt.cost_usd)
                if budget_cents is not None and spent + cents > budget_cents:
                    continue
                p = pool_of[opt.row.offer_name]
                last = min(horizon, job.deadline if job.deadline is not None else horizon) - dur
                start = earliest_start(free[p], opt.row.gpus, dur, ready, last)
                if start is not None:
                    free[p][start : start + dur] -= opt.row.gpus
                    placed[k] = (i, start)
                    spent += cents
                    break
        if not progress:
            break
    return placed
