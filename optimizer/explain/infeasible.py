"""Why one job has no plan, and by how much: each binding constraint family of its candidate table (the GPU
filters, supply, memory, the framework, the deadline, the budget) as an ``Infeasibility`` with its sentence."""

from __future__ import annotations

from dataclasses import dataclass

from ..inputs.catalog import find_sku
from ..inputs.units import fmt_budget, fmt_bytes, fmt_duration
from ..physics.constants import GIB
from ..planning.candidates import Candidate, CandidateTable, row_rejection
from ..planning.context import HardwareRow, JobContext
from ..planning.layout_grid import blocking_rules
from ..results import Infeasibility


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


def no_rows(ctx: JobContext) -> Infeasibility:
    """No hardware row at all: spot capacity required where no offer sells it, or no offer priced."""
    offers = ctx.catalog.offers
    if ctx.constraints.spot == "only" and offers and not any(o.spot_price_usd_per_gpu_hour for o in offers):
        return Infeasibility(
            constraint="spot",
            detail=f"spot capacity is required (constraints.spot: only, --spot) and none of the catalog's "
            f"{len(offers)} offers has a spot price: drop --spot (or set spot: allow), or plan on a catalog with "
            "spot prices",
        )
    return Infeasibility(constraint="catalog", detail="the catalog has no priced offers")


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
        return [no_rows(table.ctx)]
    ctx = table.ctx
    out = []
    if "filter" in binding or all(c.rejected_by == "filter" for c in r.rows):
        out.append(filter_infeasibility(ctx, any(c.rejected_by != "filter" for c in r.rows)))
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


def filter_infeasibility(ctx: JobContext, some_pass: bool = False) -> Infeasibility:
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
