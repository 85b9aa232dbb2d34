"""A greedy schedule: earliest deadline first, each job on its cheapest option that fits the pool at
its earliest start (or, given a relaxation's capacity prices, the option and start that cost least with
their GPU-steps priced in). The baseline the portfolio benchmark compares against; repeated as squeaky-
wheel passes, also largest job first and packed against its neighbours, the search's first complete
schedule.

Pool use is kept as one numpy array per pool (GPUs free at each step), so placing a job costs
O(options x horizon) vector operations, not a Python loop over steps."""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ...money import usd_to_cents
from . import work

Placement = tuple[int, int] | None  # (option index, start step) or None: not placed
Fit = Literal["earliest", "contact"]  # where in its window a greedy pass starts a job


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
    ok = _fit_mask(free, gpus, dur, ready, last)
    if not len(ok):
        return None  # no run of ``dur`` steps between ready and the end of the timeline
    first = int(ok.argmax())  # the first True (argmax stops there), or 0 when there is none
    return ready + first if ok[first] else None


def feasible_starts(free: np.ndarray, gpus: int, dur: int, ready: int, last: int) -> np.ndarray:
    """Every step s in [ready, last] with at least ``gpus`` free at every step of [s, s + dur)."""
    if last < ready:
        return np.zeros(0, dtype=np.int64)
    return ready + _fit_mask(free, gpus, dur, ready, last).nonzero()[0]


def _fit_mask(free: np.ndarray, gpus: int, dur: int, ready: int, last: int) -> np.ndarray:
    """Per offset o in [0, last - ready], whether start ready + o has ``gpus`` free over its ``dur``
    steps: a running count of short steps over the window only (not from step 0: most calls look at a
    day). Method calls, not numpy's wrappers: the search makes hundreds of thousands of these."""
    short_steps = free[ready : last + dur] < gpus
    work.charge_scan(len(short_steps))
    short = np.zeros(len(short_steps) + 1, dtype=np.int64)
    short_steps.cumsum(out=short[1:])
    starts = max(0, len(short_steps) - dur + 1)
    return short[dur : dur + starts] == short[:starts]


def contact_start(free: np.ndarray, gpus: int, dur: int, ready: int, last: int) -> int | None:
    """The feasible start in [ready, last] whose neighbours are busiest: the fewest GPUs free in the step
    just before it plus the step just after it (the horizon's edges count as busy), earliest on a tie.
    Packing a job against its neighbours leaves fewer gaps too short for the jobs still to come (what it
    gains and where it does not pay: ``phases.CONTACT_JOBS``)."""
    starts = feasible_starts(free, gpus, dur, ready, last)
    if len(starts) == 0:
        return None
    before = np.where(starts > 0, free[np.maximum(starts - 1, 0)], 0)
    return int(starts[np.argmin(before + free[starts + dur])])  # free[horizon] is 0: the end is busy


def due_steps(jobs, horizon: int) -> list[int]:
    """Per job, the step it must end by for itself and every job waiting for it ('after:') to meet their
    deadlines: its own deadline (or the horizon), and each waiting job's due step less that job's fastest
    option, through chains of waits (a predecessor with no deadline of its own is due when its dependants
    need it; issue 53: one started on day 12.4 of a day-7 release, past its dependant's day-10 deadline)."""
    index = {job.name: k for k, job in enumerate(jobs)}
    due = [min(horizon, job.deadline if job.deadline is not None else horizon) for job in jobs]
    waiting = [job for job in jobs if job.after]
    for _ in range(len(jobs)):  # relax along the waits until nothing moves (a chain settles in its length)
        moved = False
        for job in waiting:
            need = due[index[job.name]] - min(job.durations, default=0)
            for name in job.after:
                d = index[name]
                if need < due[d]:
                    due[d], moved = need, True
        if not moved:
            break
    return due


def default_order(jobs, horizon: int) -> list[int]:
    """Earliest due step first (``due_steps``: a deadline, or what the jobs waiting for it need), required
    before optional, then by name."""
    due = due_steps(jobs, horizon)
    return sorted(range(len(jobs)), key=lambda k: (due[k], not jobs[k].required, jobs[k].name))


def largest_first_order(jobs) -> list[int]:
    """Required before optional, then the most GPU-steps on the job's cheapest option first (first-fit
    decreasing, the classic order for packing: the big items go in while there is room for them)."""

    def size(k: int) -> float:
        job = jobs[k]
        if not job.options:
            return 0.0
        i = min(range(len(job.options)), key=lambda i: (job.options[i].cost_usd, job.durations[i]))
        return float(job.options[i].row.gpus * job.durations[i])

    return sorted(range(len(jobs)), key=lambda k: (not jobs[k].required, -size(k), jobs[k].name))


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
    prices: list[np.ndarray] | None = None,
    order: list[int] | None = None,
    fit: Fit = "earliest",
    in_order: bool = False,
) -> list[Placement]:
    """Per job, (option index, start step) or None when it could not be placed (pools, deadline, budget).
    Each job takes its cheapest option (ties: shorter) at its earliest start, or with ``fit`` "contact"
    at the start that packs it against its neighbours (``contact_start``; jobs others wait for still start
    as early as they can). ``prices``: cents
    per GPU-step per pool (a Lagrangian relaxation's capacity prices): each job then takes the option and
    start that cost least with the GPU-steps it occupies priced in, among those that fit. ``in_order``:
    each job tries its options in the order listed, not cheapest first."""
    free = capacity_arrays(pools, horizon)
    prefix = None if prices is None else [np.concatenate(([0.0], np.cumsum(p[:horizon]))) for p in prices]
    spent = 0
    placed: list[Placement] = [None] * len(jobs)
    index = {job.name: k for k, job in enumerate(jobs)}
    pending = list(default_order(jobs, horizon) if order is None else order)
    awaited = {d for job in jobs for d in job.after}
    due = due_steps(jobs, horizon) if awaited else None
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
            end = min(horizon, job.deadline if job.deadline is not None else horizon)
            # a job others wait for ends by the step they need first (``due_steps``), at its earliest start;
            # only if no option can is it placed for itself alone
            ends = [end] if due is None or due[k] >= end else [due[k], end]
            if prefix is not None:
                found = None
                for last_end in ends:
                    found = found or _priced_pick(job, free, prefix, pool_of, last_end, ready, budget_cents, spent)
                if found is not None:
                    i, at, cents = found
                    p = pool_of[job.options[i].row.offer_name]
                    free[p][at : at + job.durations[i]] -= job.options[i].row.gpus
                    placed[k] = (i, at)
                    spent += cents
                continue
            ranked = (
                range(len(job.options))
                if in_order
                else sorted(range(len(job.options)), key=lambda i: (job.options[i].cost_usd, job.durations[i]))
            )
            for last_end in ends:
                for i in ranked:
                    opt, dur = job.options[i], job.durations[i]
                    cents = usd_to_cents(opt.cost_usd)
                    if budget_cents is not None and spent + cents > budget_cents:
                        continue
                    p = pool_of[opt.row.offer_name]
                    place = contact_start if fit == "contact" and job.name not in awaited else earliest_start
                    start = place(free[p], opt.row.gpus, dur, ready, last_end - dur)
                    if start is not None:
                        free[p][start : start + dur] -= opt.row.gpus
                        placed[k] = (i, start)
                        spent += cents
                        break
                if placed[k] is not None:
                    break
        if not progress:
            break
    return placed


def _priced_pick(job, free, prefix, pool_of, last_step, ready, budget_cents, spent) -> tuple[int, int, int] | None:
    """The (option, start, cents) that fits, ends by ``last_step`` and costs least with its GPU-steps priced in."""
    best: tuple[float, int, int, int] | None = None
    for i, (opt, dur) in enumerate(zip(job.options, job.durations)):
        cents = usd_to_cents(opt.cost_usd)
        if budget_cents is not None and spent + cents > budget_cents:
            continue
        p = pool_of[opt.row.offer_name]
        starts = feasible_starts(free[p], opt.row.gpus, dur, ready, last_step - dur)
        if len(starts) == 0:
            continue
        priced = cents + opt.row.gpus * (prefix[p][starts + dur] - prefix[p][starts])
        n = int(np.argmin(priced))
        if best is None or priced[n] < best[0]:
            best = (float(priced[n]), i, int(starts[n]), cents)
    return None if best is None else best[1:]


# Iterated greedy stops after this many orders in a row that found nothing better (measured: on the
# 1,000-job benchmark the gains come in the first 20 or so; on 200 jobs CP-SAT neighbourhoods then do more).
REORDER_STALL = 30


@dataclass
class Pass:
    """A greedy schedule, the job order that produced it, and its score: (dropped weight, cents)."""

    placed: list[Placement]
    order: list[int]
    score: tuple[int, int]


def squeaky_wheel(
    jobs,
    pools,
    pool_of,
    horizon: int,
    budget_cents: int | None,
    deadline: float,
    weights: list[int],
    prices: list[np.ndarray] | None = None,
    passes: int = 50,
    order: list[int] | None = None,
    fit: Fit = "earliest",
    in_order: bool = False,
) -> Pass:
    """Greedy passes in which the jobs a pass left out go first in the next (squeaky-wheel
    optimisation, Joslin and Clements 1999, JAIR 10): each pass places the previous one's failures
    before the jobs that crowded them out. Stops when a pass leaves nothing out, after ``passes`` or at
    ``deadline`` (a perf_counter time); returns the pass that dropped the least weight, then cost least.
    ``order``: the first pass's job order (default earliest deadline first); ``fit`` and ``in_order``: as
    in ``greedy_schedule``."""
    order = default_order(jobs, horizon) if order is None else order
    best: Pass | None = None
    for _ in range(passes):
        placed = greedy_schedule(
            jobs, pools, pool_of, horizon, budget_cents, prices=prices, order=order, fit=fit, in_order=in_order
        )
        dropped = [k for k in order if placed[k] is None and jobs[k].options]
        score = (
            sum(weights[k] for k in dropped),
            sum(usd_to_cents(jobs[k].options[p[0]].cost_usd) for k, p in enumerate(placed) if p is not None),
        )
        if best is None or score < best.score:
            best = Pass(placed, order, score)
        if not dropped or work.past(deadline):
            break
        first = set(dropped)
        order = dropped + [k for k in order if k not in first]
    assert best is not None
    return best


def reorder_search(
    jobs,
    pools,
    pool_of,
    horizon: int,
    budget_cents: int | None,
    deadline: float,
    weights: list[int],
    start: Pass,
    report=None,
    seed: int = 0,
    fit: Fit = "earliest",
    rival: tuple[int, int] | None = None,
) -> Pass:
    """Iterated greedy over job orders (Ruiz and Stuetzle 2007, "A simple and effective iterated greedy
    algorithm for the permutation flowshop", EJOR 177): take a few of the jobs that pay most above their
    cheapest option (a random 0.5-5 %, weighted by that excess) to the front of the best order, repair with
    squeaky-wheel passes, keep the result when it is better (less weight dropped, then cheaper). Measured on the
    1,000-job benchmark: 2.9 % cheaper in 11 s, where CP-SAT neighbourhoods gained 0.3 % in 50 s.
    ``rival``: the score of a schedule found otherwise; the search stops once, at the pace it has kept, it
    would not reach that score by ``deadline``."""
    rng = random.Random(seed)
    began = work.now()
    cheapest = [min((usd_to_cents(o.cost_usd) for o in job.options), default=0) for job in jobs]
    best = start
    stale = 0
    while not work.past(deadline) and stale < REORDER_STALL:
        excess = sorted(
            (((usd_to_cents(jobs[k].options[p[0]].cost_usd) - cheapest[k]) * rng.random(), k))
            for k, p in enumerate(best.placed)
            if p is not None
        )
        count = max(1, int(rng.uniform(0.005, 0.05) * len(excess)))
        front = {k for e, k in excess[-count:] if e > 0}
        if not front:
            break
        order = [k for k in best.order if k in front] + [k for k in best.order if k not in front]
        trial = squeaky_wheel(
            jobs, pools, pool_of, horizon, budget_cents, deadline, weights, passes=15, order=order, fit=fit
        )
        stale += 1
        if trial.score < best.score:
            best, stale = trial, 0
            if report is not None:
                report(best)
        now = work.now()
        if rival is not None and behind(start.score, best.score, rival, now - began, deadline - now):
            break
    return best


def behind(first: tuple[int, int], now: tuple[int, int], rival: tuple[int, int], spent_s: float, left_s: float) -> bool:
    """Whether a search whose best score went from ``first`` to ``now`` in ``spent_s`` seconds stays behind
    ``rival`` after ``left_s`` more at that pace: it drops more weight (its passes never drop less, so it
    cannot catch up), or its cost does not fall fast enough."""
    if now[0] != rival[0]:
        return now[0] > rival[0]
    pace = (first[1] - now[1]) / spent_s if first[0] == now[0] and spent_s > 0 else 0.0
    return now[1] - pace * left_s > rival[1]


def guided_schedule(
    jobs,
    pools,
    pool_of,
    horizon: int,
    budget_cents: int | None,
    deadline: float,
    weights: list[int],
    shares: list[dict[int, float]],
    mean_start: list[float],
    first: list[int] | None = None,
    fallback: list[list[int]] | None = None,
) -> Pass:
    """Squeaky-wheel passes in which each job may take only the option a relaxation's solution gives it
    most of (``shares``: per job, option -> share), jobs in the order of the relaxation's mean start.
    The linear relaxation picks options almost integrally (1,000-job benchmark: 14 of 1,000 jobs split
    between options, 466 between starts), so what it leaves to do is the timing; jobs it gives no option
    stay unplaced, as do those that find no room, for a repair step to place. ``first``: jobs to place
    before all others (ones an earlier rounding left out). ``fallback``: per job, options it may take, in
    that order, where its own finds no room (where the relaxation is far from integral, e.g. half its
    jobs split over starts and a tenth over pools, holding every job to one option leaves dozens out)."""
    prefer = [max(share, key=lambda i: (share[i], -i)) if share else None for share in shares]
    tried = [
        ([i] if i is not None else []) + [o for o in (fallback[k] if fallback else []) if o != i]
        for k, i in enumerate(prefer)
    ]
    fixed = []
    for job, ranked in zip(jobs, tried):
        one = copy.copy(job)
        one.options, one.durations = [job.options[i] for i in ranked], [job.durations[i] for i in ranked]
        fixed.append(one)
    ahead = list(dict.fromkeys(first or []))
    taken = set(ahead)
    order = ahead + sorted((k for k in range(len(jobs)) if k not in taken), key=lambda k: (mean_start[k], k))
    found = squeaky_wheel(fixed, pools, pool_of, horizon, budget_cents, deadline, weights, order=order, in_order=True)
    placed: list[Placement] = [
        (ranked[p[0]], p[1]) if p is not None else None for ranked, p in zip(tried, found.placed)
    ]
    return Pass(placed, found.order, found.score)
