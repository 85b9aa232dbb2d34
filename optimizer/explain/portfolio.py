"""Why a portfolio cannot place its required jobs, and why each dropped job was left out: a job's options,
window, release and dependencies, the budget and the pools' GPU-hours, as sentences."""

from __future__ import annotations

from ..inputs.schema import Portfolio
from ..inputs.units import fmt_budget, fmt_duration
from ..planning.candidates import (
    offer_rows,
    row_rejection,
)
from ..results import Infeasibility, PortfolioResult
from ..solver.portfolio.data import JobData, PoolSpec, whole_steps
from .infeasible import TOGETHER, filter_infeasibility, infeasibility, no_rows


def no_option(job: JobData) -> list[Infeasibility]:
    """Why a portfolio job has no option: what its candidate table rejected every row for (the GPU
    filters, memory, supply, the framework), as ``solve`` says it for one job."""
    fallback = [Infeasibility(constraint="memory", detail="no option fits this job (memory or GPU filters)")]
    if not job.table.candidates:  # a portfolio's tables keep no row that the filters or supply limits reject
        ctx = job.table.ctx
        why = {row_rejection(ctx, row) for row in offer_rows(ctx)}
        if not why:  # no row at all: no offer priced, or spot required where none sells it
            return [no_rows(ctx)]
        return [filter_infeasibility(ctx)] if why == {"filter"} else fallback
    rejected = sorted({c.rejected_by for c in job.table.candidates if c.rejected_by})
    items = [i for i in infeasibility(job.table, rejected) if i.detail != TOGETHER]
    return items or fallback


def drop_reason(
    pf: Portfolio, job: JobData, proven: bool, earliest_end: float, dropped: frozenset[str] = frozenset()
) -> str:
    """Why a job is not in the schedule. ``proven``: the solver proved that no schedule places every
    required job; without that proof a required job left out is the search's failure, not the inputs'.
    ``earliest_end``: the step it could end at the earliest after the jobs it waits for; ``dropped``: the
    jobs left out of the schedule."""
    if not job.options:
        return "; ".join(item.detail for item in no_option(job))
    fastest = min(job.durations)
    if (late := _released_too_late(pf, job)) is not None:
        return late
    horizon = whole_steps(pf.horizon_s, pf.time_step_s)
    if job.release + fastest > min(horizon, job.deadline if job.deadline is not None else horizon):
        ends = "meet its deadline" if job.deadline is not None and job.deadline <= horizon else "end within the horizon"
        if (rounding := _step_rounding(pf, job)) is not None:
            return f"cannot {ends} in whole time steps: {rounding}"
        return f"cannot {ends} even alone"
    if earliest_end == float("inf") and job.after:
        return "waits ('after:') for a job that can never run, so it can never start"
    if job.deadline is not None and earliest_end > job.deadline and pf.objective != "weighted_lateness":
        return "cannot meet its deadline after the jobs it waits for ('after:')"
    if pf.budget_usd is not None and (cheapest := min(o.cost_usd for o in job.options)) > pf.budget_usd:
        return f"its cheapest option alone (${cheapest:,.2f}) costs more than the budget ({fmt_budget(pf.budget_usd)})"
    if dropped and (waits := [d for d in job.after if d in dropped]):
        return f"waits ('after:') for {', '.join(map(repr, waits))}, left out of the schedule too"
    if job.required and proven:
        return "required, but the GPU pools, deadlines and budget cannot carry it together with the others"
    if job.required:
        return (
            "required, but no schedule found within the time limit carries it together with the others "
            "(not proven impossible)"
        )
    if proven:
        return "dropped so that the budget and GPU supply carry the higher-priority jobs"
    # without that proof (a large portfolio's search, or a time limit hit first) fewer drops may exist
    return (
        "optional: no schedule found within the time limit carries it together with the others (not proven impossible)"
    )


def _released_too_late(pf: Portfolio, job: JobData) -> str | None:
    """That a job is released at or after the end of the portfolio's horizon, or None: such a job was said
    to lack pool room, or to finish some hours past the horizon, where no part of it can run at all."""
    entry = pf.jobs[job.index]
    if entry.release_s < pf.horizon_s:
        return None  # (a deadline at or before the release is refused with the portfolio file)
    return (
        f"released at {fmt_duration(entry.release_s)}, not before the portfolio's horizon "
        f"({fmt_duration(pf.horizon_s)}): no part of it can run; move its release earlier or the horizon later"
    )


def _step_rounding(pf: Portfolio, job: JobData) -> str | None:
    """Why a job that fits its window in hours does not in whole time steps (the schedule starts at a
    step at or after the release, ends by the last step boundary at or before the deadline and runs whole
    steps), or None where it does not fit in hours either."""
    entry = pf.jobs[job.index]
    end_s = min(pf.horizon_s, entry.deadline_s if entry.deadline_s is not None else pf.horizon_s)
    fastest_s = min(c.time_s for c in job.options)
    if entry.release_s + fastest_s > end_s + 1e-6:
        return None
    step = pf.time_step_s
    return (
        f"its fastest option takes {fmt_duration(fastest_s)} and fits between {fmt_duration(entry.release_s)} and "
        f"{fmt_duration(end_s)} from the start, but with a time_step of {fmt_duration(step)} it may start no "
        f"earlier than {fmt_duration(job.release * step)}, must end by {fmt_duration(whole_steps(end_s, step) * step)} and "
        f"takes {fmt_duration(min(job.durations) * step)}; use a finer time_step (1h is the default)"
    )


def earliest_ends(jobs: list[JobData], hard_deadlines: bool = False) -> dict[str, float]:
    """Per job, the earliest step it can end: after its release and every job it waits for ('after:'),
    on its fastest option (inf: it can never run: no option, or it waits for a job that can never run,
    which with ``hard_deadlines`` includes one that cannot end by its own deadline). Dependencies are
    acyclic (the schema refuses cycles)."""
    by_name = {job.name: job for job in jobs}
    ends: dict[str, float] = {}

    def late(name: str) -> bool:
        deadline = by_name[name].deadline
        return hard_deadlines and deadline is not None and ends[name] > deadline

    for job in jobs:
        stack = [job.name]  # depth first without recursion: chains may be thousands of jobs long
        while stack:
            name = stack[-1]
            todo = [d for d in by_name[name].after if d not in ends]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            here = by_name[name]
            ready = max([float(here.release)] + [ends[d] if not late(d) else float("inf") for d in here.after])
            ends[name] = ready + min(here.durations) if here.options else float("inf")
    return ends


def portfolio_infeasibility(
    pf: Portfolio, jobs: list[JobData], pools: list[PoolSpec], horizon: int
) -> list[Infeasibility]:
    """Why no schedule places every required job: each required job that cannot run or end in time alone
    (``_job_alone``), the budget below the required jobs' cheapest cost (``_budget_short``), a pool or all
    pools short of GPU-hours (``_pools_short``); else the constraints conflict only together."""
    ends = earliest_ends(jobs, hard_deadlines=pf.objective != "weighted_lateness")
    out = [why for job in jobs if job.required for why in _job_alone(pf, job, ends, horizon)]
    budget = _budget_short(pf, jobs)
    if budget is not None:
        out.append(budget)
    out += _pools_short(pf, jobs, pools, supply_short=any(i.constraint == "supply" for i in out))
    if not out:
        out.append(
            Infeasibility(
                constraint="schedule",
                detail=(
                    "each job fits alone, but not all together: GPU pools, deadlines, dependencies and the budget "
                    "conflict; loosen a deadline, add pool capacity, raise the budget or make a job optional"
                ),
            )
        )
    return out


def _job_alone(pf: Portfolio, job: JobData, ends: dict[str, float], horizon: int) -> list[Infeasibility]:
    """Why a required job cannot be placed whatever the others do: no option, its fastest option past its
    deadline (or the horizon, or a window whole time steps miss), or the jobs it waits for ending too late."""
    step_h = pf.time_step_s / 3600.0
    if not job.options:
        return [
            Infeasibility(constraint=i.constraint, detail=f"job {job.name!r}: {i.detail}", over_by=i.over_by)
            for i in no_option(job)
        ]
    fastest = min(job.durations)
    limit = min(horizon, job.deadline if job.deadline is not None and pf.objective != "weighted_lateness" else horizon)
    ends_at = "deadline" if limit != horizon else "horizon"
    if job.release + fastest > limit:
        over = (job.release + fastest - limit) * step_h
        rounding = _step_rounding(pf, job)
        if (late := _released_too_late(pf, job)) is not None:
            detail = f"job {job.name!r} is {late}"
        elif rounding is not None:
            detail = f"job {job.name!r} does not fit its window in whole time steps: {rounding}"
        else:
            detail = (
                f"job {job.name!r} cannot finish in time even alone: its fastest option takes "
                f"{fmt_duration(fastest * pf.time_step_s)}, {fmt_duration(over * 3600)} past its {ends_at}"
            )
        return [Infeasibility(constraint="deadline" if rounding is None else "time_step", over_by=over, detail=detail)]
    if ends[job.name] <= limit:
        return []
    waits = [d for d in job.after if ends[d] > job.release]
    over = (ends[job.name] - limit) * step_h
    never = over == float("inf")
    because = (
        "which can never run (no option fits it, or none meets its deadline), so it can never start"
        if never
        else f"so it cannot end before hour {ends[job.name] * step_h:,.0f}, {fmt_duration(over * 3600)} past its "
        f"{ends_at}"
    )
    return [
        Infeasibility(
            constraint="deadline",
            over_by=None if never else over,
            detail=f"job {job.name!r} must wait for {', '.join(repr(d) for d in waits)} ('after:'), {because}",
        )
    ]


def _budget_short(pf: Portfolio, jobs: list[JobData]) -> Infeasibility | None:
    """The budget below what the required jobs and every job they wait for ('after:'), optional or not, cost
    at their cheapest options: all of them must run."""
    if pf.budget_usd is None:
        return None
    by_name = {job.name: job for job in jobs}
    needed, todo = set(), [job.name for job in jobs if job.required]
    while todo:
        if (name := todo.pop()) not in needed:
            needed.add(name)
            todo.extend(by_name[name].after)
    floor = sum(min(c.cost_usd for c in by_name[n].options) for n in needed if by_name[n].options)
    if floor <= pf.budget_usd:
        return None
    waited = sorted(n for n in needed if not by_name[n].required)
    who = "the required jobs" + (
        f" and the jobs they wait for ({', '.join(map(repr, waited))}, 'after:')" if waited else ""
    )
    return Infeasibility(
        constraint="budget",
        over_by=floor - pf.budget_usd,
        detail=(
            f"{who} cost at least ${floor:,.2f} at their cheapest options: "
            f"${floor - pf.budget_usd:,.2f} over the budget of {fmt_budget(pf.budget_usd)}"
        ),
    )


def _pools_short(pf: Portfolio, jobs: list[JobData], pools: list[PoolSpec], supply_short: bool) -> list[Infeasibility]:
    """Each pool alone short of the GPU-hours of the required jobs that can only run there, then (unless one
    pool is: ``supply_short`` says whether a supply shortfall is known already) all pools together: jobs that
    can run on several pools escape the first check, so pools that are short only together are named too."""
    step_h = pf.time_step_s / 3600.0
    groups = [([pool], f"pool {pool.name}: required jobs that can only run there") for pool in pools]
    if len(pools) > 1:
        groups.append((pools, "all pools together: the required jobs"))
    out: list[Infeasibility] = []
    for group, who in groups:
        if len(group) > 1 and (supply_short or out):
            break
        pool_names = {offer for pool in group for offer in pool.offers}
        need = 0.0
        for job in jobs:
            if job.required and job.options and all(c.row.offer_name in pool_names for c in job.options):
                need += min(c.row.gpus * d for c, d in zip(job.options, job.durations)) * step_h
        have = sum((e - s) * g for pool in group for s, e, g in pool.segments) * step_h
        if need > have:
            out.append(
                Infeasibility(
                    constraint="supply",
                    over_by=need - have,
                    detail=(
                        f"{who} need at least {need:,.0f} GPU-hours; "
                        f"{'it offers' if len(group) == 1 else 'they offer'} {have:,.0f} over the horizon"
                    ),
                )
            )
    return out


def fill_drop_reasons(result: PortfolioResult, pf: Portfolio, jobs: list[JobData], proven: bool) -> None:
    """Each dropped job's reason, from its options, deadline and priority, and whether the solver proved
    that no schedule places every required job."""
    by_name = {job.name: job for job in jobs}
    ends = earliest_ends(jobs, hard_deadlines=pf.objective != "weighted_lateness")
    left_out = frozenset(d.job for d in result.dropped)
    for dropped in result.dropped:
        dropped.reason = drop_reason(pf, by_name[dropped.job], proven, ends[dropped.job], left_out)
