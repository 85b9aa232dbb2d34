"""Sentences for people, written from typed results: why a problem is infeasible and by how much, why a
portfolio job was dropped, how a configuration compares with a measured one.

The solver and planning layers return data (binding constraint families, candidate rows, ratios); this
module is the one place that turns them into the ``detail`` and ``summary`` strings of the output.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .inputs import units
from .inputs.catalog import find_sku
from .inputs.schema import Portfolio, Sku, Strategy
from .inputs.units import YEAR_S, fmt_budget, fmt_bytes, fmt_duration, parse_count
from .physics.constants import GIB, LOW_PRECISION_GEMM_CEILING_RATIO
from .physics.precision import LOW_PRECISIONS
from .planning.calibration import predict, resolve_row
from .planning.candidates import (
    CONTEXT_PARALLEL_MIN_SEQ_LEN,
    MICRO_BATCH_CHOICES,
    PP_CHOICES,
    VIRTUAL_STAGE_CHOICES,
    Candidate,
    CandidateTable,
    blocking_rules,
    not_rentable,
    offer_rows,
    row_rejection,
)
from .planning.context import Calibration, HardwareRow, JobContext
from .planning.plans import SPOT_SUFFIX, headroom_note
from .results import Infeasibility, MeasuredComparison, Plan, PortfolioResult
from .solver.model import solver_rows
from .solver.portfolio.data import JobData, PoolSpec, whole_steps


@dataclass(frozen=True)
class _Rows:
    """A table's priced rows, those no filter, supply limit or batch rule excludes, and those that fit."""

    rows: list[Candidate]
    allowed: list[Candidate]
    fitting: list[Candidate]

    @classmethod
    def of(cls, table: CandidateTable) -> _Rows:
        rows = [c for c in table.candidates if c.index >= 0 and c.row.offer is not None]
        allowed = [c for c in rows if c.rejected_by not in ("filter", "supply", "global_batch")]
        return cls(rows, allowed, [c for c in allowed if c.fits])


def _where(c: Candidate) -> str:
    return f"{c.row.nodes} x {c.row.gpus_per_node} {c.row.sku.name}"


TOGETHER = "these constraints cannot all hold together; loosen one of them"


def infeasibility(table: CandidateTable, binding: list[str]) -> list[Infeasibility]:
    """For each binding family, how far the nearest candidate is from satisfying it."""
    r = _Rows.of(table)
    if not r.rows:
        blocked = [c for c in table.candidates if c.rejected_by == "framework" and c.row.offer is not None]
        if blocked:
            return [_framework(table.ctx, blocked[0])]
        return [Infeasibility(constraint="catalog", detail="the catalog has no priced offers")]
    ctx = table.ctx
    out = []
    if "filter" in binding or all(c.rejected_by == "filter" for c in r.rows):
        out.append(_filter(ctx, any(c.rejected_by != "filter" for c in r.rows)))
    if "supply" in binding:
        out += _supply(ctx, r)
    if "memory" in binding or (r.allowed and not r.fitting):
        out.append(_memory(ctx, r))
    c = ctx.constraints
    # a deadline or budget no fitting plan meets even alone is named whatever the solver's core held (it
    # named the budget only, and a user who raised it was still infeasible)
    late = c.deadline_s is not None and bool(r.fitting) and min(x.time_s for x in r.fitting) > c.deadline_s
    dear = c.budget_usd is not None and bool(r.fitting) and min(x.cost_usd for x in r.fitting) > c.budget_usd
    if ("deadline" in binding or late) and r.fitting and c.deadline_s is not None:
        item = _deadline(c.deadline_s, c.budget_usd, r)
        if item.over_by and item.over_by > 0:  # (none within the budget either: the budget's item says so)
            out.append(item)
    if ("budget" in binding or dear) and r.fitting and c.budget_usd is not None:
        out.append(_budget(c.deadline_s, c.budget_usd, r))
    if not out:
        out.append(Infeasibility(constraint="+".join(binding) or "unknown", detail=TOGETHER))
    return out


def _framework(ctx: JobContext, c: Candidate) -> Infeasibility:
    return Infeasibility(constraint="framework", detail=framework_reason(ctx, c))


def framework_reason(ctx: JobContext, c: Candidate) -> str:
    """Why no layout on the candidate's hardware is one the job's framework (or any, under auto) runs."""
    who = "no framework runs any" if ctx.job.framework == "auto" else f"{ctx.job.framework} runs no"
    return (
        f"{who} layout of this job (e.g. on {_where(c)}): {'; '.join(blocking_rules(ctx, c.row))}; "
        "change job.framework (--framework) or the job's method or options"
    )


def _filter(ctx: JobContext, some_pass: bool = False) -> Infeasibility:
    """The GPU filters bind: none passes them, or (``some_pass``) those that pass cannot run the job (the
    other reasons say why) and an offer they leave out could."""
    g = ctx.constraints.gpu
    filters = (
        (f" types={','.join(g.types)}" if g.types else "")
        + (f" min_memory={fmt_bytes(g.min_memory_bytes)}" if g.min_memory_bytes else "")
        + (f" providers={','.join(g.providers)}" if g.providers else "")
        + (f" count={g.count} (GPUs per node)" if g.count else "")
    )
    detail = (
        f"the GPU filters{filters} leave out every offer that could run this job (those they keep cannot: see "
        "the other reasons); loosen them"
        if some_pass
        else f"no offer passes the GPU filters{filters} with precision {ctx.job.precision}; loosen them"
    )
    if not some_pass and ctx.constraints.spot == "only":
        # spot only: an offer without a spot price has no row at all, so it cannot be the filters' doing
        unpriced = [
            o.name
            for o in ctx.catalog.offers
            if o.spot_price_usd_per_gpu_hour is None
            and any(  # at any node size it rents (a GPU count filter reads GPUs per node)
                row_rejection(ctx, HardwareRow(find_sku(ctx.catalog, o.sku), o, 1, count)) != "filter"
                for count in {*o.single_node_counts(), o.gpus_per_node}
            )
        ]
        if unpriced:
            detail = (
                f"spot only (constraints.spot: only, --spot), and no offer that passes the GPU filters{filters} has a "
                f"spot price ({', '.join(unpriced[:4])}{', ...' if len(unpriced) > 4 else ''} rent on demand only); "
                "allow on-demand capacity (constraints.spot: allow) or give those offers a spot_price"
            )
    return Infeasibility(constraint="filter", detail=detail)


def _supply(ctx: JobContext, r: _Rows) -> list[Infeasibility]:
    unrestricted = [c for c in r.rows if c.rejected_by in (None, "supply") and c.fits]
    c = ctx.constraints
    # with a deadline, the plans that also meet it (judged at p50, as the deadline's own explanation is):
    # the smallest plan that merely fits may be within the limit and too slow ("needs 8 GPUs on 1 node;
    # max_nodes=2 does not allow it")
    in_time = [x for x in unrestricted if c.deadline_s is None or x.time_s <= c.deadline_s]
    if not in_time:
        return []
    smallest = min(in_time, key=lambda x: (x.row.gpus, x.row.nodes))
    limit = f"max_nodes={c.max_nodes}" if c.max_nodes else f"max_gpus={c.max_gpus}"
    what = "fits" if c.deadline_s is None else f"fits and meets the deadline of {fmt_duration(c.deadline_s)}"
    detail = (
        f"the smallest plan that {what}, {_where(smallest)}, needs {smallest.row.gpus} GPUs on "
        f"{smallest.row.nodes} node(s); {limit} does not allow it"
    )
    return [Infeasibility(constraint="supply", over_by=float(smallest.row.gpus), detail=detail)]


def _memory(ctx: JobContext, r: _Rows) -> Infeasibility:
    train = ctx.train
    # sharded over the GPUs (ZeRO >= 1: Adafactor's second moment is then full size)
    optimizer_bytes = float(train.optimizer_bytes_at(1))
    state = train.weights_total(ctx.shape.params) + (train.grad_bytes + optimizer_bytes) * train.trainable_params
    candidates = r.allowed or r.rows
    largest = max(candidates, key=lambda x: x.row.gpus * x.capacity_bytes)
    nearest = min(candidates, key=lambda x: x.memory_bytes - x.capacity_bytes)
    detail = (
        f"the training state needs {fmt_bytes(state)} in total; the largest allowed configuration, "
        f"{_where(largest)}, holds {fmt_bytes(largest.row.gpus * largest.capacity_bytes)}; the closest layout "
        f"({nearest.row.gpus} {nearest.row.sku.name}) needs {nearest.memory_bytes / GIB:,.1f} GiB per GPU of "
        f"{nearest.capacity_bytes / GIB:,.1f} GiB"
    )
    return Infeasibility(
        constraint="memory", over_by=(nearest.memory_bytes - nearest.capacity_bytes) / GIB, detail=detail
    )


def _deadline(deadline_s: float, budget_usd: float | None, r: _Rows) -> Infeasibility:
    """How far the fastest plan misses the deadline; where the fastest of all meets it, the fastest within
    the budget (the two bind together: it read "-1.5e+03 s over the deadline")."""
    fastest = min(r.fitting, key=lambda x: x.time_s)
    affordable = [x for x in r.fitting if budget_usd is not None and x.cost_usd <= budget_usd]
    within = ""
    if fastest.time_s <= deadline_s and affordable:
        fastest, within = min(affordable, key=lambda x: x.time_s), " within the budget"
    over = fastest.time_s - deadline_s
    detail = (
        f"the fastest plan{within}, {_where(fastest)}, needs {fmt_duration(fastest.time_s)}: {fmt_duration(over)} "
        f"over the deadline of {fmt_duration(deadline_s)}"
    )
    return Infeasibility(constraint="deadline", over_by=over / 3600.0, detail=detail)


def _budget(deadline_s: float | None, budget_usd: float, r: _Rows) -> Infeasibility:
    in_time = [x for x in r.fitting if deadline_s is None or x.time_s <= deadline_s]
    cheapest = min(in_time or r.fitting, key=lambda x: x.cost_usd)
    over = cheapest.cost_usd - budget_usd
    within = " within the deadline" if in_time and deadline_s is not None else ""
    detail = (
        f"the cheapest plan{within}, {_where(cheapest)}, costs ${cheapest.cost_usd:,.2f}: ${over:,.2f} over the "
        f"budget of {fmt_budget(budget_usd)}"
    )
    return Infeasibility(constraint="budget", over_by=over, detail=detail)


def no_option(job: JobData) -> list[Infeasibility]:
    """Why a portfolio job has no option: what its candidate table rejected every row for (the GPU
    filters, memory, supply, the framework), as ``solve`` says it for one job."""
    fallback = [Infeasibility(constraint="memory", detail="no option fits this job (memory or GPU filters)")]
    if not job.table.candidates:  # a portfolio's tables keep no row that the filters or supply limits reject
        ctx = job.table.ctx
        why = {row_rejection(ctx, row) for row in offer_rows(ctx)}
        return [_filter(ctx)] if why == {"filter"} else fallback
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


def measured_summary(ctx: JobContext, mine: Sku, base: Sku, cmp: MeasuredComparison) -> str:
    """One sentence: faster or slower than the measured configuration, cheaper or dearer, and which
    hardware ratio carries it (with the efficiency class and the exposed communication where they matter)."""
    money = ""
    if cmp.cost_ratio is not None:
        money = f" and {'cheaper' if cmp.cost_ratio < 1 else 'dearer'} ({cmp.cost_ratio:.2f}x the cost)"
    r = cmp.ratios
    text = (
        f"vs the measured {cmp.measured} ({cmp.measured_tokens_per_s:,.0f} tokens/s, {cmp.measured_bound}-bound): "
        f"{cmp.speedup:.2f}x {'faster' if cmp.speedup > 1 else 'slower'}{money}; carried by the "
        f"{cmp.carried_by.replace('_', ' ')} ratio {r[cmp.carried_by]:.2f}x (compute {r['dense_compute']:.2f}x, "
        f"HBM {r['hbm_bandwidth']:.2f}x, link {r['intra_node_link']:.2f}x)"
    )
    if cmp.carried_by == "dense_compute" and abs(cmp.efficiency_class_ratio - 1) > 0.01:
        scale = ctx.calibration.compute
        text += (
            f"; x{cmp.efficiency_class_ratio:.2f} for the efficiency class ({mine.form_factor} "
            f"{ctx.compute_efficiency(mine) / scale:.2f} vs {base.form_factor} {ctx.compute_efficiency(base) / scale:.2f}"
            f" default, both scaled by the measured x{scale:.2f})"
        )
    link = r["intra_node_link"]
    if cmp.exposed_network_share > 0.02 and abs(link - 1) > 0.01:
        text += (
            f"; {cmp.exposed_network_share:.0%} of the measured step is exposed communication, which the "
            f"{'faster' if link > 1 else 'slower'} link {'shrinks' if link > 1 else 'grows'}"
        )
    if cmp.layout_differences:
        text += f"; the layouts differ ({'; '.join(cmp.layout_differences)}), which no hardware ratio carries"
    return text


def check_notes(ctx: JobContext, plan: Plan) -> list[str]:
    """Caveats of a check: the memory headroom in force, no price, a verdict that flips between GB and GiB, a
    fixed activation reserve."""
    notes = [headroom_note(ctx.constraints.memory_headroom, plan)]
    sku = find_sku(ctx.catalog, plan.sku)
    if plan.offer is None:
        notes.append(
            f"no offer in catalog '{ctx.catalog.name}' prices {sku.name}: cost is null; "
            "pass --catalog with a price sheet that lists it"
        )
    label, reported = sku.memory_label_bytes, sku.memory_reported_bytes
    need = plan.memory_gib.total * GIB
    if reported and (need <= label) != (need <= reported):
        notes.append(
            f"the verdict depends on the memory unit: the {sku.name} label reads {fmt_bytes(label)}, the "
            f"device reports {fmt_bytes(reported)}; this check used the {plan.memory_gib.basis} figure "
            f"({fmt_bytes(plan.memory_gib.capacity * GIB)})"
        )
    if ctx.activation_reserve != "auto":
        notes.append("activations are the fixed job.activation_reserve, not computed from shapes")
    if ctx.recipe_batch_sequences is not None:  # (a batch it rounded up to the GPUs, said)
        notes += batch_notes(ctx, plan)
    notes += measurement_notes(ctx) + precision_notes(ctx)
    if plan.hours.p50 * 3600.0 > units.LIMITS["duration"].high:
        notes.append(
            f"this configuration runs {_years(plan.hours.p50 * 3600.0)}, past the {LIMIT_YEARS} any GPU rental is "
            "planned for: solve leaves such plans out"
        )
    for point, m in zip(ctx.calibration.points, ctx.job.measured):
        peak = m.peak_memory_bytes
        if (
            peak
            and point == (plan.sku, plan.gpus, plan.nodes)
            and need > peak * 1.02
            and plan.memory_gib.reserve < 0.01
        ):
            notes.append(
                f"the measured peak {fmt_bytes(peak)} is below what gpuplan counts for this layout's state and "
                f"activations ({fmt_bytes(need)}) with no reserve left to take off: the verdict keeps "
                f"{fmt_bytes(need)}; if the run used another layout or activation checkpointing, give it with "
                "the check flags"
            )
    offer = next((o for o in ctx.catalog.offers if plan.offer and o.name == plan.offer.removesuffix(SPOT_SUFFIX)), None)
    if offer is not None and (why := not_rentable(offer, plan.nodes, plan.gpus_per_node)):
        # a verdict on hardware the offer does not rent, which solve never plans (a cost below its optimum)
        notes.append(f"offer {offer.name} {why}: it cannot be rented there as it stands")
    return notes + moe_notes(ctx, plan)


def precision_notes(ctx: JobContext) -> list[str]:
    """What a low precision's speed rests on, and how far the time model has been checked at it."""
    if ctx.job.precision not in LOW_PRECISIONS or ctx.job.measured:  # a measurement calibrates the speed
        return []
    if ctx.job.precision == "fp8":
        # physics/precision.py; bench/precision_pairs.py (BENCHMARKS.md) for the published pairs
        return [
            f"fp8: only the GEMM kernels run faster, at most {2 * LOW_PRECISION_GEMM_CEILING_RATIO:.2f}x (the "
            "published largest FP8 over BF16 GEMM rates: 1.77x H100 to 1.97x B200), on their share of the BF16 "
            "step; attention, norms, activations and communication run as in BF16 and the operand casts add "
            "HBM traffic. Published FP8 gains on one layout: 1.00-1.62x over 23 pairs, which gpuplan predicts "
            "within 5 % (median)"
        ]
    # validation/throughput_runs.yaml, mb260401-llama3-70b-gb200-nvfp4 (bench/throughput.py): the one
    # published NVFP4 layout gpuplan runs; its 405B NVFP4 row splits layers as gpuplan's pipelines do not
    return [
        "nvfp4: the GEMM kernels are timed at the FP4 peak with the FP8 kernels' share of it; the one published "
        "NVFP4 layout gpuplan can run (Llama 3 70B pre-training on 64 GB200, Megatron-Bridge 26.04) ran 12 % "
        "slower than this predicts, 1.31x its MXFP8 speed where the peaks differ 2x: expect the time to run longer"
    ]


def moe_notes(ctx: JobContext, plan: Plan | None) -> list[str]:
    """For a mixture of experts: how the experts are split and the share of the step their all-to-all takes."""
    if plan is None or not ctx.shape.experts:
        return []
    s = plan.strategy
    a2a_s = plan.time_breakdown_s.get("all_to_all", 0.0)
    experts = int(ctx.shape.experts)
    if s.ep <= 1:
        return [
            f"experts: all {experts} routed experts on every GPU (EP 1), no all-to-all; "
            "expert parallelism did not pay here (try --ep to compare)"
        ]
    where = "across nodes" if s.ep * (s.expert_tp or s.tp) > plan.gpus_per_node else "inside a node"
    dispatcher = ctx.assumptions.moe_dispatcher
    overlap = ctx.assumptions.moe_overlap
    share = a2a_s / plan.step_s if plan.step_s else 0.0
    return [
        f"experts: EP {s.ep}, {experts // s.ep} routed experts per GPU; expert all-to-all {where} "
        f"({dispatcher} dispatcher, {overlap:.0%} overlapped): {a2a_s:.2f} s of the {plan.step_s:.2f} s step "
        f"({share:.0%}) exposed",
        *_host_note(ctx, plan),
    ]


def _host_note(ctx: JobContext, plan: Plan) -> list[str]:
    """The MoE layers' host launch waits when they take a noticeable share of the step: they are per
    micro-batch, so larger micro-batches or full-iteration CUDA graphs remove most of them."""
    host_s = plan.time_breakdown_s.get("moe_host", 0.0)
    share = host_s / plan.step_s if plan.step_s else 0.0
    if share < 0.05:
        return []
    per_layer_ms = ctx.settings.moe_host_s_per_layer * 1e3
    return [
        f"MoE host time: {host_s:.2f} s of the step ({share:.0%}) waiting for kernel launches, {per_layer_ms:g} ms per "
        f"MoE layer and micro-batch of {plan.strategy.micro_batch} (docs/design.md 5.11); with full-iteration CUDA "
        "graphs set assumptions.moe_host_ms_per_layer: 0"
    ]


# The efficiency a measurement calibrates, per bound (planning/calibration.py), in the answer's words.
_CALIBRATED = {
    "compute": "compute efficiency",
    "memory": "achieved HBM bandwidth",
    "network": "link efficiency",
}


def calibration_note(ctx: JobContext) -> list[str]:
    """That the answer is calibrated from measurements, and by how much: per measured configuration what
    gpuplan's model alone predicts there, and the factor on each efficiency the fit set."""
    c = ctx.calibration
    if not c.active:
        return []
    model = replace(ctx, calibration=Calibration())
    points = []
    for m in ctx.job.measured:
        row = resolve_row(model, m.sku, m.gpus, m.nodes)
        predicted = predict(model, row)[0]
        points.append(
            f"{m.gpus} x {row.sku.name} measured {m.tokens_per_s:,.0f} tokens/s where the model alone predicts "
            f"{predicted:,.0f} ({m.tokens_per_s / predicted - 1:+.0%})"
        )
    factors = [
        f"{what} x{getattr(c, bound):.3g}" for bound, what in _CALIBRATED.items() if abs(getattr(c, bound) - 1) > 1e-9
    ]
    if c.reserve_delta_bytes:
        sign = "+" if c.reserve_delta_bytes > 0 else "-"
        peaks = sum(1 for m in ctx.job.measured if m.peak_memory_bytes)
        whose = "the measured peak" if peaks == 1 else "the measured peaks' mean; each measured GPU keeps its own"
        factors.append(f"framework reserve {sign}{fmt_bytes(abs(c.reserve_delta_bytes))} ({whose})")
    scaled = "; ".join(factors) or "no factor (the model already reproduces it)"
    anchored = ""
    if len(ctx.job.measured) > 1:
        anchored = (
            "; each measured configuration predicts its own measurement, and a plan on a measured GPU (or its "
            "architecture) leans on the nearest measurement (its p90 spread says which)"
        )
    return [f"calibrated from job.measured: {'; '.join(points)}; so every plan here has {scaled}{anchored}"]


def measurement_notes(ctx: JobContext) -> list[str]:
    """Calibration from measurements, said (``calibration_note``), and a measured configuration gpuplan's
    memory model says cannot run: every projection is anchored to it."""
    return calibration_note(ctx) + [
        f"the measured {gpus} x {sku} does not fit gpuplan's memory model ({fmt_bytes(need)} per GPU for its "
        f"least-memory layout, of {fmt_bytes(capacity)}): the run saved memory in a way gpuplan does not model, "
        "and the throughput calibrated from it is anchored to a layout that cannot run here; check the "
        "measurement's GPU count and the job's model, method and sequence length"
        for (sku, gpus, _nodes), need, capacity in ctx.calibration.unfit
    ]


def _years(seconds: float) -> str:
    return f"{seconds / YEAR_S:,.2f} years"


LIMIT_YEARS = f"{units.LIMITS['duration'].high / YEAR_S:.0f} years"  # the years a rental may be planned for


def aeons_notes(table: CandidateTable, best: Plan | None) -> list[str]:
    """Plans past the years a rental is planned for are left out of solve: say so where one of them would
    have been cheaper than the answer (a 10.04-year plan $0.76 cheaper had been left out silently)."""
    limit = units.LIMITS["duration"].high
    if best is None or best.cost_usd is None:
        return []
    left_out = [
        c
        for c in solver_rows(table)
        if c.time_s > limit and c.fits and c.rejected_by is None and c.cost_usd < best.cost_usd.p50
    ]
    if not left_out:
        return []
    cheapest = min(left_out, key=lambda c: c.cost_usd)
    return [
        f"plans running past {LIMIT_YEARS} are left out, as no rental is planned that far ahead: the cheapest of "
        f"them, {cheapest.row.gpus} x {cheapest.row.sku.name}, would cost ${cheapest.cost_usd:,.2f} over "
        f"{_years(cheapest.time_s)}"
    ]


def outside_search_notes(ctx: JobContext, strategy: Strategy) -> list[str]:
    """Choices ``check`` accepts by hand that solve does not search (its time model is not validated there):
    the comparison with the best plan cannot say that plan beats this one (a CP 2 layout at 4k tokens was
    $4.38 cheaper than solve's optimum, which had never tried it)."""
    outside = []
    if strategy.cp > 1 and ctx.job.seq_len < CONTEXT_PARALLEL_MIN_SEQ_LEN:
        outside.append(f"context parallelism below {CONTEXT_PARALLEL_MIN_SEQ_LEN:,} tokens")
    if strategy.expert_tp and strategy.expert_tp != strategy.tp:
        outside.append("an expert TP other than the attention TP (parallel folding)")
    if strategy.virtual_stages > max(VIRTUAL_STAGE_CHOICES):
        outside.append(f"more than {max(VIRTUAL_STAGE_CHOICES)} pipeline chunks per GPU")
    if strategy.pp not in PP_CHOICES:
        outside.append(f"PP {strategy.pp} (solve tries {', '.join(map(str, PP_CHOICES))})")
    if strategy.micro_batch not in MICRO_BATCH_CHOICES:
        choices = ", ".join(map(str, MICRO_BATCH_CHOICES))
        outside.append(f"a micro-batch of {strategy.micro_batch} (solve tries {choices})")
    if not outside:
        return []
    return [
        f"this layout uses {' and '.join(outside)}, which solve does not search (gpuplan's time model is not "
        "validated there): its best plan below is the best of the layouts it searches, and this one is not "
        "compared with them"
    ]


def plan_notes(ctx: JobContext, best: Plan | None) -> list[str]:
    """What gpuplan decided for the user: the global batch when free or given in tokens, the spot
    policy and the framework (docs/design.md sections 3.2 and 3.5)."""
    job, notes = ctx.job, [headroom_note(ctx.constraints.memory_headroom, best)]
    notes += batch_notes(ctx, best)
    notes.append(spot_note(ctx.constraints.spot, "constraints.spot"))
    notes += measurement_notes(ctx) + precision_notes(ctx)
    notes += moe_notes(ctx, best)
    if job.framework == "auto" and best is not None:
        notes.append(
            f"framework: any; the plan runs in {best.strategy.framework} (set job.framework or --framework to plan "
            "for the one your team uses)"
        )
    return notes


def batch_notes(ctx: JobContext, best: Plan | None) -> list[str]:
    """The global batch gpuplan chose, and why: a fine-tune's recipe batch, a free batch under its cap, or a
    batch in tokens as the sequences it became."""
    job, notes = ctx.job, []
    if best is not None and ctx.recipe_batch_sequences is not None:
        s = best.strategy
        recipe = ctx.recipe_batch_sequences
        made = "" if s.global_batch == recipe else f", the least at or above the recipe's {recipe:,} this layout makes"
        notes.append(
            f"global batch: {s.global_batch:,} sequences ({s.global_batch * job.seq_len:,} tokens) a step{made}, "
            "as published fine-tuning recipes set it (Megatron-Bridge's Llama 3 SFT and LoRA recipes: 32 x 4,096 "
            "tokens), since job.global_batch is not set; set job.global_batch to fix another, or "
            "'global_batch: free' to let gpuplan choose any"
        )
    elif best is not None and (job.global_batch is None or job.free_batch):
        s = best.strategy
        why = "job.global_batch is free" if job.free_batch else "job.global_batch is not set (a pre-training)"
        notes.append(
            f"global batch chosen: {s.global_batch:,} sequences ({s.global_batch * job.seq_len / 1e6:,.2f}M tokens), "
            f"since {why}; at most {ctx.max_free_batch_sequences:,} sequences, twice the "
            "compute-optimal batch of DeepSeek's scaling law for this job; set job.global_batch to fix it"
        )
    elif isinstance(job.global_batch, str) and not job.free_batch:
        exact = parse_count(job.global_batch, "job.global_batch") / job.seq_len
        notes.append(
            f"global batch {job.global_batch} at {job.seq_len:,} tokens per sequence is {exact:,.1f} sequences, "
            f"rounded to {job.global_batch_sequences:,} so data-parallel layouts divide it"
        )
    return notes


# How a configuration's fixed values read: "ZeRO-3", "micro-batch 2", "full recompute".
_GIVEN = {
    "tp": "TP {}",
    "pp": "PP {}",
    "cp": "CP {}",
    "ep": "EP {}",
    "expert_tp": "expert TP {}",
    "zero": "ZeRO-{}",
    "shard_degree": "shard degree {}",
    "micro_batch": "micro-batch {}",
    "grad_accum": "{} micro-batches per step",
    "recompute": "{} recompute",
    "virtual_stages": "{} chunks/GPU",
}


def added_sentence(
    given: dict[str, object], added: dict[str, int], without: Plan | None, without_runs: bool, plan: Plan
) -> str | None:
    """What check added to the layout the user gave, and why: 'gpuplan added TP 4 to your ZeRO-3, micro-batch
    2: without it the fastest layout that fits takes 41% longer, with full recompute'."""
    if not added:
        return None
    yours = ", ".join(_GIVEN[name].format(value) for name, value in given.items() if value is not None)
    head = "gpuplan added " + " and ".join(f"{name.upper()} {degree}" for name, degree in added.items())
    head += f" to your {yours}"
    it = "it" if len(added) == 1 else "them"
    if without is None:
        return f"{head}: without {it} no layout of these GPUs keeps what you gave"
    if not without.fits:
        m = without.memory_gib
        return f"{head}: without {it} nothing fits ({m.total:,.1f} of {m.capacity:,.1f} GiB per GPU at best)"
    if not without_runs:
        return f"{head}: without {it} no framework the job allows runs the layout"
    slower = without.hours.p50 / plan.hours.p50 - 1.0
    how = (
        ""
        if without.strategy.recompute_label == plan.strategy.recompute_label
        else f", with {without.strategy.recompute_text}"
    )
    return f"{head}: without {it} the fastest layout that fits takes {slower:.0%} longer{how}"


def export_label_note(best: Plan, gap: str, alternative: Plan | None, frameworks: tuple[str, ...]) -> str:
    """Under framework auto, a LoRA plan labelled with a framework whose export gpuplan cannot write: what
    the best plan that an export writes costs instead."""
    where = " or ".join(frameworks)
    head = f"the plan runs in {best.strategy.framework}, but gpuplan cannot export it ({gap})"
    if alternative is None or alternative.cost_usd is None or best.cost_usd is None:
        return f"{head}; no plan in {where}, whose exports gpuplan writes, meets the constraints"
    extra = alternative.cost_usd.p50 / best.cost_usd.p50 - 1.0
    return (
        f"{head}; the best plan in {where}, which it exports, is {alternative.label()} ({alternative.strategy.framework}) "
        f"at ${alternative.cost_usd.p50:,.2f} ({extra:+.1%}) in {alternative.hours.p50:,.1f} h: set --framework "
        f"{alternative.strategy.framework} to plan it"
    )


def fix_notes(fixes: list[tuple[str, Plan]]) -> list[str]:
    """The nearest fixes of a configuration that does not fit, with their numbers."""
    if not fixes:
        return [
            "does not fit, and neither full recompute, micro-batch 1, optimizer or activation offload, the optimizer "
            "step in backward nor 8x the GPUs makes it fit"
        ]
    parts = [
        f"{label}: {p.memory_gib.total:,.1f} of {p.memory_gib.capacity:,.1f} GiB per GPU, {p.hours.p50:,.1f} h"
        + (f", ${p.cost_usd.p50:,.2f}" if p.cost_usd else "")
        for label, p in fixes
    ]
    return ["does not fit; nearest fixes: " + "; ".join(parts)]


def _reserve_text(reserve: str | float) -> str:
    """A fixed activation reserve as written: bytes per GPU, or a fraction (< 1) of the GPU's memory."""
    value = float(reserve)
    return f"{value:.0%} of each GPU's memory" if value < 1 else f"{fmt_bytes(value)} per GPU"


def recompute_note(ctx: JobContext, requested: str | None) -> list[str]:
    """Selective recompute under FlashAttention changes nothing: say so instead of listing it as a choice."""
    if requested in ("selective", "full") and ctx.activation_reserve != "auto":
        return [
            f"--recompute {requested} changes nothing here: job.activation_reserve fixes the activations "
            f"({_reserve_text(ctx.activation_reserve)}) instead of computing them from the shapes, so there is "
            "nothing for recompute to drop and no extra forward pass is counted: checked as none; remove "
            "activation_reserve to model recompute"
        ]
    if requested == "selective" and ctx.job.attention == "flash":
        return [
            "selective recompute changes nothing under FlashAttention, which never stores the s x s attention "
            "scores that selective recompute would drop (Korthikanti et al. 2022, section 5): checked as none"
        ]
    return []


def spot_note(policy: str, field: str) -> str:
    """The spot policy in force, always shown: spot wins long jobs on price, so say whether it was allowed."""
    verb = {"allow": "allowed", "never": "excluded", "only": "required"}[policy]
    return f"spot capacity {verb} ({field}: {policy}; --spot for spot only, --no-spot for none)"
