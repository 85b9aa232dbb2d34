"""The candidate space: hardware rows x strategies, evaluated with the physics in one vectorised pass.

For each hardware row (offer, nodes, GPUs per node) the generator lists the strategies that respect
the global batch: TP inside a node (dividing the heads), PP (uneven stages allowed, plain or
interleaved 1F1B), DP the rest, ZeRO 0-3 over all DP ranks or hybrid-sharded inside a node,
recompute, and micro-batches with an integer gradient accumulation. Offers with a spot price add
spot rows. All of them go through ``physics`` at once (numpy arrays), and
for each row the fastest strategy that fits is kept: on a fixed row cost rises with time, so that
strategy is optimal for both objectives (docs/design.md section 3.4). Rows with nothing that fits keep their
least-memory strategy, flagged, so the solver's memory constraint and the explanations see them.

Both the CP-SAT model and the brute-force test oracle read the ``CandidateTable`` built here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from ..inputs.catalog import find_sku, passes_gpu_names
from ..inputs.schema import Offer
from .context import HardwareRow, JobContext, capacity_bytes
from .evaluation import EVALUATION_PASS_LAYOUTS, Evaluation, _Evaluator, _run_hours_and_cost, best_layout
from .frameworks import PREFERENCE
from .layout_grid import GRID_FIELDS, strategy_grid


@dataclass
class Candidate:
    """A hardware row with its best strategy (or least-memory one, when nothing fits)."""

    row: HardwareRow
    index: int  # into the Evaluation
    fits: bool
    time_s: float
    cost_usd: float  # nan when the row has no price
    memory_bytes: float
    capacity_bytes: float  # usable capacity less the headroom: what the layout may take
    rejected_by: str | None = None  # filter, supply, global_batch, framework, memory (before deadline/budget)


@dataclass
class CandidateTable:
    ctx: JobContext
    rows: list[HardwareRow]
    evaluation: Evaluation
    candidates: list[Candidate] = field(default_factory=list)

    def feasible(self) -> list[Candidate]:
        return [c for c in self.candidates if c.rejected_by is None]

    # rows the time limit left unevaluated (``build_table(until=...)``): they are not in ``rows``
    unevaluated: int = 0

    @cached_property
    def offer_ids(self) -> dict[str, int]:
        # cached: the solver reads it for every row (1,000 offers x 8,000 reads took a second)
        return {o.name: k for k, o in enumerate(self.ctx.catalog.offers)}


# --------------------------------------------------------------------------- hardware rows


def offer_rows(ctx: JobContext) -> list[HardwareRow]:
    """Every (offer, nodes, GPUs per node) the catalog can rent, up to each offer's supply."""
    rows = []
    for offer in ctx.catalog.offers:
        sku = find_sku(ctx.catalog, offer.sku)
        for spot in _spot_choices(ctx.constraints.spot, offer.spot_price_usd_per_gpu_hour is not None):
            for count in offer.single_node_counts():
                rows.append(HardwareRow(sku, offer, 1, count, spot))
            for nodes in range(2, offer.max_nodes + 1):
                rows.append(HardwareRow(sku, offer, nodes, offer.gpus_per_node, spot))
    return rows


def not_rentable(offer: Offer, nodes: int, per_node: int) -> str | None:
    """Why ``nodes`` nodes of ``per_node`` GPUs are not what the offer rents (``offer_rows``: one
    node of one of its GPU counts, or up to max_nodes whole nodes), or None."""
    if nodes > offer.max_nodes:
        return (
            f"supplies at most {offer.max_nodes} node{'s' if offer.max_nodes > 1 else ''} "
            f"({offer.max_nodes * offer.gpus_per_node} GPUs) to one job; this configuration needs {nodes}"
        )
    if nodes == 1 and per_node not in offer.single_node_counts():
        counts = ", ".join(map(str, offer.single_node_counts()))
        return f"rents one node with {counts} GPUs; this configuration uses {per_node}"
    if nodes > 1 and per_node != offer.gpus_per_node:
        return f"rents several nodes only whole, {offer.gpus_per_node} GPUs each; this configuration uses {per_node}"
    return None


def _spot_choices(policy: str, has_spot_price: bool) -> tuple[bool, ...]:
    """On-demand and/or spot rows of an offer under constraints.spot (allow, never, only)."""
    choices = (False, True) if has_spot_price else (False,)
    return tuple(c for c in choices if (policy == "allow") or (c == (policy == "only")))


def row_rejection(ctx: JobContext, row: HardwareRow) -> str | None:
    """Filters (GPU type, memory, provider, precision) and user supply limits (max nodes / GPUs)."""
    c = ctx.constraints
    gpu = c.gpu
    if not passes_gpu_names(gpu, row.sku, row.offer):
        return "filter"
    if gpu.min_memory_bytes and capacity_bytes(row, ctx.assumptions.memory_basis)[0] < gpu.min_memory_bytes:
        return "filter"
    if gpu.count is not None and row.gpus_per_node != gpu.count:
        return "filter"
    if ctx.peak_flops(row.sku) is None:
        return "filter"
    if c.max_nodes is not None and row.nodes > c.max_nodes:
        return "supply"
    if c.max_gpus is not None and row.gpus > c.max_gpus:
        return "supply"
    return None


# --------------------------------------------------------------------------- strategies


SHOWN_UNBATCHED_LAYOUTS = 200_000


def build_table(
    ctx: JobContext,
    rows: list[HardwareRow] | None = None,
    *,
    keep_rejected: bool = False,
    until: float | None = None,
) -> CandidateTable:
    """Evaluate every row's strategies and keep each row's best (see module docstring). Past ``until`` (a
    ``time.perf_counter()`` time) no more rows are built or evaluated: rows go in passes of about
    ``EVALUATION_PASS_LAYOUTS`` layouts, those no filter rejects first, and the table holds the rows evaluated
    by then (one pass at least) and counts the others as ``unevaluated``."""
    rows = offer_rows(ctx) if rows is None else rows
    rejections = [row_rejection(ctx, r) for r in rows]
    if not keep_rejected:
        rows = [r for r, why in zip(rows, rejections) if why is None]
        rejections = [None] * len(rows)
    order = list(range(len(rows)))
    if until is not None:
        order.sort(key=lambda i: rejections[i] is not None)
    cache: dict[tuple[int, int, bool], tuple[np.ndarray | None, bool]] = {}
    shown = 0  # layouts evaluated only to show a row the batch rejects
    pending = _Evaluator(ctx)
    added: list[int] = []  # rows in the order added
    for n, i in enumerate(order):
        if until is not None and n and time.perf_counter() > until:
            break
        row = rows[i]
        # A row's strategies depend only on its shape, so offers of the same shape share one grid.
        shape = (row.gpus_per_node, row.gpus, row.nodes > 1)
        if shape not in cache:
            grid = strategy_grid(ctx, row)
            if len(grid):
                cache[shape] = (grid, False)
            elif shown <= SHOWN_UNBATCHED_LAYOUTS:
                cache[shape] = (strategy_grid(ctx, row, ignore_batch=True), True)
            else:
                cache[shape] = (None, True)  # past what is shown: not even built
        built, unconstrained = cache[shape]
        grid = np.zeros((0, len(GRID_FIELDS)), dtype=np.int64) if built is None else built
        if unconstrained and (built is None or len(grid)):
            # No layout divides the global batch: still evaluate (unconstrained) to show its numbers.
            rejections[i] = rejections[i] or "global_batch"
            if built is None or (shown and shown + len(grid) > SHOWN_UNBATCHED_LAYOUTS):
                shown = SHOWN_UNBATCHED_LAYOUTS + 1  # full: no more such grids are built
                grid = np.zeros((0, len(GRID_FIELDS)), dtype=np.int64)  # listed as rejected, without numbers
            else:
                shown += len(grid)
        pending.add(row, grid)
        added.append(i)
        if until is not None and pending.pending_layouts >= EVALUATION_PASS_LAYOUTS:
            pending.flush()
    if until is None or not pending.parts or time.perf_counter() <= until:
        pending.flush()
    kept = sorted((i, k) for k, i in enumerate(added) if pending.evaluated(k))  # in the rows' own order
    kept_rows = [rows[i] for i, _ in kept]
    ev = pending.evaluation(kept_rows, [k for _, k in kept])
    table = _table(ctx, kept_rows, ev, [rejections[i] for i, _ in kept])
    table.unevaluated = len(rows) - len(kept)
    return table


def restricted(table: CandidateTable, frameworks: tuple[str, ...]) -> CandidateTable:
    """``table`` keeping only the layouts labelled with one of ``frameworks``: each row's best of those (a row
    with none that fits is out on memory). The evaluation is the same, so nothing is computed again."""
    ev = table.evaluation
    other = ~np.isin(ev.framework, [PREFERENCE.index(name) for name in frameworks])
    shadowed = other if ev.shadowed is None else ev.shadowed | other
    rejections = [c.rejected_by if c.rejected_by != "memory" else None for c in table.candidates]
    return _table(table.ctx, table.rows, replace(ev, shadowed=shadowed), rejections)


def retimed(table: CandidateTable, ctx: JobContext) -> CandidateTable:
    """``table`` for ``ctx``: the same job (model, method, batch, hardware, assumptions) with another
    token count. Layouts, memory and step times do not depend on it, so only each layout's hours and cost
    are computed again, and each row's best layout chosen again (the 1 % tie band is on hours, which
    start-up and interruptions make not proportional to tokens). A portfolio's jobs of one shape and many
    token counts share one evaluation this way."""
    ev = table.evaluation
    hours, cost = _run_hours_and_cost(ctx, table.rows, ev.row, ev.timing)
    rejections = [c.rejected_by if c.rejected_by != "memory" else None for c in table.candidates]
    return _table(ctx, table.rows, replace(ev, hours=hours, cost_usd=cost), rejections)


def _table(ctx: JobContext, rows: list[HardwareRow], ev: Evaluation, rejections: list[str | None]) -> CandidateTable:
    """Each row's best layout of the evaluation (``best_layout``), or why the row is out."""
    table = CandidateTable(ctx, rows, ev)
    fits = ev.fits
    starts = np.searchsorted(ev.row, np.arange(len(rows) + 1))
    for i, row in enumerate(rows):
        lo, hi = starts[i], starts[i + 1]
        why = rejections[i]
        if hi == lo:
            table.candidates.append(
                Candidate(
                    row,
                    -1,
                    False,
                    np.inf,
                    np.nan,
                    np.nan,
                    capacity_bytes(row, ctx.assumptions.memory_basis)[0],  # (no layout: nothing to keep free)
                    why or "framework",  # no layout that the job's framework(s) run
                )
            )
            continue
        best = best_layout(ev, lo, hi)
        fit = bool(fits[best])
        table.candidates.append(
            Candidate(
                row=row,
                index=int(best),
                fits=fit,
                time_s=float(ev.hours[best] * 3600.0),
                cost_usd=float(ev.cost_usd[best]),
                memory_bytes=float(ev.memory.total[best]),
                capacity_bytes=float(
                    ev.capacity_bytes[best] - np.broadcast_to(ev.headroom_bytes, np.shape(ev.row))[best]
                ),
                rejected_by=why or (None if fit else "memory"),
            )
        )
    return table
