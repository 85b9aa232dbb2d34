"""Sentences for people, written from typed results: why a problem is infeasible and by how much, why a
portfolio job was dropped, how a configuration compares with a measured one.

The solver and planning layers return data (binding constraint families, candidate rows, ratios); this
module is the one place that turns them into the ``detail`` and ``summary`` strings of the output.
"""

from __future__ import annotations

from .inputs.catalog import find_sku
from .inputs.schema import Portfolio, Sku
from .inputs.units import fmt_bytes, fmt_duration
from .physics.constants import GIB
from .planning.candidates import CandidateTable
from .planning.context import JobContext
from .results import Infeasibility, MeasuredComparison, Plan, PortfolioResult
from .solver.portfolio.data import JobData, PoolSpec


def infeasibility(table: CandidateTable, binding: list[str]) -> list[Infeasibility]:
    """For each binding family, how far the nearest candidate is from satisfying it."""
    ctx = table.ctx
    c = ctx.constraints
    rows = [cand for cand in table.candidates if cand.index >= 0 and cand.row.offer is not None]
    allowed = [cand for cand in rows if cand.rejected_by not in ("filter", "supply", "global_batch")]
    fitting = [cand for cand in allowed if cand.fits]
    out = []
    if not rows:
        return [Infeasibility(constraint="catalog", detail="the catalog has no priced offers")]
    if "filter" in binding or not [r for r in rows if r.rejected_by != "filter"]:
        g = c.gpu
        out.append(
            Infeasibility(
                constraint="filter",
                detail=(
                    "no offer passes the GPU filters"
                    + (f" types={','.join(g.types)}" if g.types else "")
                    + (f" min_memory={fmt_bytes(g.min_memory_bytes)}" if g.min_memory_bytes else "")
                    + (f" providers={','.join(g.providers)}" if g.providers else "")
                    + f" with precision {ctx.job.precision}; loosen them"
                ),
            )
        )
    if "supply" in binding:
        unrestricted = [cand for cand in rows if cand.rejected_by in (None, "supply") and cand.fits]
        if unrestricted:
            smallest = min(unrestricted, key=lambda x: (x.row.gpus, x.row.nodes))
            limit = f"max_nodes={c.max_nodes}" if c.max_nodes else f"max_gpus={c.max_gpus}"
            out.append(
                Infeasibility(
                    constraint="supply",
                    over_by=float(smallest.row.gpus),
                    detail=(
                        f"the smallest plan that fits, {smallest.row.nodes} x {smallest.row.gpus_per_node} {smallest.row.sku.name}, "
                        f"needs {smallest.row.gpus} GPUs on {smallest.row.nodes} node(s); {limit} does not allow it"
                    ),
                )
            )
    if "memory" in binding or (allowed and not fitting):
        state = (
            ctx.train.weights_total(ctx.shape.params)
            + (ctx.train.grad_bytes + ctx.train.optimizer_bytes) * ctx.train.trainable_params
        )
        largest = max(allowed or rows, key=lambda x: x.row.gpus * x.capacity_bytes)
        nearest = min(allowed or rows, key=lambda x: x.memory_bytes - x.capacity_bytes)
        out.append(
            Infeasibility(
                constraint="memory",
                over_by=(nearest.memory_bytes - nearest.capacity_bytes) / GIB,
                detail=(
                    f"the training state needs {fmt_bytes(state)} in total; the largest allowed configuration, "
                    f"{largest.row.nodes} x {largest.row.gpus_per_node} {largest.row.sku.name}, holds "
                    f"{fmt_bytes(largest.row.gpus * largest.capacity_bytes)}; the closest layout "
                    f"({nearest.row.gpus} {nearest.row.sku.name}) needs {nearest.memory_bytes / GIB:,.1f} GiB per GPU of "
                    f"{nearest.capacity_bytes / GIB:,.1f} GiB"
                ),
            )
        )
    if "deadline" in binding and fitting and c.deadline_s is not None:
        fastest = min(fitting, key=lambda x: x.time_s)
        over = fastest.time_s - c.deadline_s
        out.append(
            Infeasibility(
                constraint="deadline",
                over_by=over / 3600.0,
                detail=(
                    f"the fastest plan, {fastest.row.nodes} x {fastest.row.gpus_per_node} {fastest.row.sku.name}, needs "
                    f"{fmt_duration(fastest.time_s)}: {fmt_duration(over)} over the deadline of {fmt_duration(c.deadline_s)}"
                ),
            )
        )
    if "budget" in binding and fitting and c.budget_usd is not None:
        pool = [x for x in fitting if c.deadline_s is None or x.time_s <= c.deadline_s] or fitting
        cheapest = min(pool, key=lambda x: x.cost_usd)
        over = cheapest.cost_usd - c.budget_usd
        within = " within the deadline" if pool is not fitting else ""
        out.append(
            Infeasibility(
                constraint="budget",
                over_by=over,
                detail=(
                    f"the cheapest plan{within}, {cheapest.row.nodes} x {cheapest.row.gpus_per_node} {cheapest.row.sku.name}, "
                    f"costs ${cheapest.cost_usd:,.2f}: ${over:,.2f} over the budget of ${c.budget_usd:,.2f}"
                ),
            )
        )
    if not out:
        out.append(
            Infeasibility(
                constraint="+".join(binding) or "unknown",
                detail="these constraints cannot all hold together; loosen one of them",
            )
        )
    return out


def drop_reason(pf: Portfolio, job: JobData) -> str:
    if not job.options:
        return "no option fits this job (memory or GPU filters)"
    fastest = min(job.durations)
    if job.deadline is not None and job.release + fastest > job.deadline:
        return "cannot meet its deadline even alone"
    if job.required:
        return "required, but the GPU pools, deadlines and budget cannot carry it together with the others"
    return "dropped so that the budget and GPU supply carry the higher-priority jobs"


def portfolio_infeasibility(
    pf: Portfolio, jobs: list[JobData], pools: list[PoolSpec], horizon: int
) -> list[Infeasibility]:
    step_h = pf.time_step_s / 3600.0
    out = []
    for job in jobs:
        if not job.required:
            continue
        if not job.options:
            out.append(
                Infeasibility(constraint="memory", detail=f"job {job.name!r}: no option fits (memory or GPU filters)")
            )
            continue
        fastest = min(job.durations)
        limit = min(
            horizon, job.deadline if job.deadline is not None and pf.objective != "weighted_lateness" else horizon
        )
        if job.release + fastest > limit:
            over = (job.release + fastest - limit) * step_h
            out.append(
                Infeasibility(
                    constraint="deadline",
                    over_by=over,
                    detail=(
                        f"job {job.name!r} cannot finish in time even alone: its fastest option takes "
                        f"{fmt_duration(fastest * pf.time_step_s)}, {fmt_duration(over * 3600)} past its "
                        f"{'deadline' if limit != horizon else 'horizon'}"
                    ),
                )
            )
    if pf.budget_usd is not None:
        floor = sum(min(c.cost_usd for c in job.options) for job in jobs if job.required and job.options)
        if floor > pf.budget_usd:
            out.append(
                Infeasibility(
                    constraint="budget",
                    over_by=floor - pf.budget_usd,
                    detail=(
                        f"the required jobs cost at least ${floor:,.2f} at their cheapest options: "
                        f"${floor - pf.budget_usd:,.2f} over the budget of ${pf.budget_usd:,.2f}"
                    ),
                )
            )
    for pool in pools:
        pool_names = set(pool.offers)
        need = 0.0
        for job in jobs:
            if job.required and job.options and all(c.row.offer_name in pool_names for c in job.options):
                need += min(c.row.gpus * d for c, d in zip(job.options, job.durations)) * step_h
        have = sum((e - s) * g for s, e, g in pool.segments) * step_h
        if need > have:
            out.append(
                Infeasibility(
                    constraint="supply",
                    over_by=need - have,
                    detail=(
                        f"pool {pool.name}: required jobs that can only run there need at least {need:,.0f} GPU-hours; "
                        f"it offers {have:,.0f} over the horizon"
                    ),
                )
            )
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


def fill_drop_reasons(result: PortfolioResult, pf: Portfolio, jobs: list[JobData]) -> None:
    """Each dropped job's reason, from its options, deadline and priority."""
    by_name = {job.name: job for job in jobs}
    for dropped in result.dropped:
        dropped.reason = drop_reason(pf, by_name[dropped.job])


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
    if cmp.exposed_network_share > 0.02:
        text += (
            f"; {cmp.exposed_network_share:.0%} of the measured step is exposed communication, which the "
            "faster link shrinks"
        )
    return text


def check_notes(ctx: JobContext, plan: Plan) -> list[str]:
    """Caveats of a check: no price, a verdict that flips between GB and GiB, a fixed activation reserve."""
    notes = []
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
    return notes
