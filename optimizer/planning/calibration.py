"""Calibration from short-run measurements (``job.measured``; the seed's advice: run short, record
throughput and peak memory, then plan from that).

Rule, per measurement: predict its configuration with the current model and note what bounds it.
Then scale the efficiency of that resource alone, by bisection, until the prediction equals the
measurement: compute-bound -> the compute efficiency (so other GPUs project by dense FLOPS),
memory-bound -> the achieved HBM bandwidth (projects by HBM bandwidth), network-bound -> the link
efficiency (projects by link bandwidth). Measurements with the same bound share the geometric mean of
their factors, which carries them to GPUs never measured. What that shared fit still misses at each
measured configuration, in throughput and (given a measured peak) in the framework reserve, is kept as
an anchor (``anchors``): a measured configuration then predicts its measurement exactly, and the rows of a
measured GPU or architecture lean on the nearest anchors. Its spread narrows (``uncertainty``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..errors import ArgumentError, GpuplanError, JobError
from ..inputs.catalog import find_sku, offers_for
from ..inputs.schema import Catalog, Offer, Problem
from ..inputs.units import fmt_bytes
from .anchors import Anchor
from .candidates import not_rentable
from .context import Calibration, HardwareRow, JobContext, build_context, capacity_bytes
from .evaluation import best_layout, evaluate
from .layout_grid import strategy_grid


def job_context(problem: Problem, catalog: Catalog) -> JobContext:
    """The context a query plans with: built from the problem, calibrated when it carries measurements."""
    ctx = build_context(problem, catalog)
    return calibrate(ctx) if problem.job.measured else ctx


def resolve_row(ctx: JobContext, sku_name: str, gpus: int, nodes: int | None = None, spot: bool = False) -> HardwareRow:
    """The SKU on its cheapest offer that rents ``gpus`` on ``nodes`` nodes (else its cheapest; ties by offer
    name; the bare SKU if none prices it), or the offer ``sku_name`` names (a plan's ``offer``), with ``gpus``
    laid out on ``nodes`` nodes (default: the fewest that hold them). Errors name the argument (``gpus``,
    ``nodes``, ``spot``); callers relocate them to a file field where needed."""
    if gpus < 1:
        raise ArgumentError("must be at least 1", field="gpus")
    offers = sorted(offers_for(ctx.catalog, sku_name), key=lambda o: (o.price_usd_per_gpu_hour, o.name))
    # an offer name selects its own SKU; a SKU name every offer of it
    sku = find_sku(ctx.catalog, offers[0].sku if offers else sku_name)
    if spot:
        offers = [o for o in offers if o.spot_price_usd_per_gpu_hour]
        if not offers:
            raise ArgumentError(
                f"no offer in catalog '{ctx.catalog.name}' has a spot price for {sku_name}", field="spot"
            )

    def rents(o: Offer) -> bool:
        n = nodes or math.ceil(gpus / o.gpus_per_node)
        return n >= 1 and gpus % n == 0 and not_rentable(o, n, gpus // n) is None

    # a whole-rack offer may be the cheapest of a SKU and rent no 8 GPUs, where another offer's trays do
    offers.sort(key=lambda o: not rents(o))  # stable: cheapest first within each
    offer = offers[0] if offers else None
    per_node_max = offer.gpus_per_node if offer else sku.gpus_per_node
    nodes = nodes or math.ceil(gpus / per_node_max)
    if nodes < 1:
        raise ArgumentError("must be at least 1", field="nodes")
    if gpus % nodes:
        raise ArgumentError(
            f"{gpus} GPUs do not split evenly over {nodes} nodes; pick a GPU count divisible by the node count",
            field="gpus",
        )
    per_node = gpus // nodes
    if per_node > per_node_max:
        # the node is the offer's where one prices the SKU (OCI rents GB200 by the 4-GPU tray, not the rack)
        named = offer is not None and sku_name.lower() in {offer.name.lower(), *(a.lower() for a in offer.aliases)}
        node = (
            f"a {sku.name} node holds"
            if offer is None
            else f"of each {offer.name} node" + ("" if named else f" (the cheapest {sku.name} offer)")
        )
        raise ArgumentError(
            f"{per_node} GPUs per node exceeds the {per_node_max} {node}; "
            f"use {math.ceil(gpus / per_node_max)} nodes or fewer GPUs",
            field="nodes",
        )
    return HardwareRow(sku, offer, nodes, per_node, spot)


def _row_grid(ctx: JobContext, row: HardwareRow):
    """The row's strategies (any global batch where none meets the job's)."""
    grid = strategy_grid(ctx, row)
    return grid if len(grid) else strategy_grid(ctx, row, ignore_batch=True)


def predict_layout(ctx: JobContext, row: HardwareRow):
    """The evaluation of a row's strategies and the index of its best layout, as ``check`` picks it."""
    ev = evaluate(ctx, [row], [_row_grid(ctx, row)])
    return ev, best_layout(ev)


def predict(ctx: JobContext, row: HardwareRow) -> tuple[float, str, float]:
    """(tokens/s, bound, total memory bytes) of the row's best layout under ``ctx``."""
    ev, i = predict_layout(ctx, row)
    return float(ev.timing.tokens_per_s[i]), ev.timing.bound_at(i), float(ev.memory.total[i])


def _scaled(ctx: JobContext, resource: str, factor: float) -> JobContext:
    """``ctx`` with the calibration factor on ``resource`` (compute, memory or network) set to ``factor``."""
    fields: dict[str, Any] = {resource: factor}
    return replace(ctx, calibration=replace(ctx.calibration, **fields))


# Where ``_fit`` stops: the factor (or the throughput) known to 1e-12 of itself, past any figure gpuplan prints
# (a double's own resolution near the top of the bracket, ln 1000, is 1e-15).
FIT_LOG_RESOLUTION = 1e-12


def _fit(ctx: JobContext, row: HardwareRow, resource: str, target: float) -> float:
    """The factor on ``resource`` that makes the predicted throughput equal ``target``: the root of the log gap
    in the log factor, bracketed in [1/1000, 1000] and found by the Illinois variant of regula falsi (Dowell &
    Jarratt 1971), which keeps the bracket as bisection does and, the throughput being near a power of the
    factor, lands in a few evaluations where bisection took 44 (16 measurements took 5.8 s under --time-limit 1).
    Outside the bracket, its nearer end (``_fit_all`` then refuses a measurement it cannot reach)."""
    base = getattr(ctx.calibration, resource)

    def gap(x: float) -> float:
        return math.log(predict(_scaled(ctx, resource, base * math.exp(x)), row)[0] / target)

    lo, hi = math.log(1e-3), math.log(1e3)
    g_lo, g_hi = gap(lo), gap(hi)
    if g_lo >= 0.0 or g_hi <= 0.0:
        return base * math.exp(lo if g_lo >= 0.0 else hi)
    side = 0
    while hi - lo > FIT_LOG_RESOLUTION:
        x = (lo * g_hi - hi * g_lo) / (g_hi - g_lo)
        if not lo < x < hi:  # rounding at the bracket's ends: halve it
            x = (lo + hi) / 2
        g = gap(x)
        if abs(g) < FIT_LOG_RESOLUTION:
            return base * math.exp(x)
        if g < 0.0:
            lo, g_lo = x, g
            g_hi = g_hi / 2 if side == -1 else g_hi  # the same end kept twice: Illinois halves the other's value
            side = -1
        else:
            hi, g_hi = x, g
            g_lo = g_lo / 2 if side == 1 else g_lo
            side = 1
    return base * math.exp((lo + hi) / 2)


def _refused(ctx: JobContext, i: int, reason: str, part: str = "") -> GpuplanError:
    """The error for measurement ``i``: naming its --measured flag where it came from one, else its field
    in the job file."""
    flag = ctx.job.measured[i].flag
    if flag is not None:
        return ArgumentError(f"{flag!r}: {reason}", field="measured")
    return JobError(reason, source=ctx.problem.source_path, field=f"job.measured[{i}]{part}")


def _check_peak(ctx: JobContext, row: HardwareRow, peak_bytes: float | None, i: int) -> None:
    """A measured peak cannot exceed what the GPU has: that measurement is a typo or another GPU."""
    if peak_bytes is None:
        return
    capacity, basis = capacity_bytes(row, ctx.assumptions.memory_basis)
    reported = row.sku.memory_reported_bytes or 0.0
    if peak_bytes > max(capacity, reported, row.sku.memory_label_bytes):
        raise _refused(
            ctx,
            i,
            f"the measured peak {fmt_bytes(peak_bytes)} is more than a {row.sku.name} holds ({fmt_bytes(capacity)}, "
            f"{basis}); check the number and its unit (GB = 10^9 bytes, GiB = 2^30)",
            ".peak_memory",
        )


def _check_possible(ctx: JobContext, row: HardwareRow, m, i: int) -> str:
    """A measurement no GPU can make: more model FLOP/s than the GPUs' peak (MFU above 100 %), or a peak
    memory below the weights, gradients and optimizer state the layout must hold. Either is a typo (a unit,
    per GPU against in all) or another configuration, and calibrating to it would mislead every plan."""
    ev, k = predict_layout(ctx, row)
    peak = ctx.peak_flops(row.sku)
    mfu = ev.timing.model_flops_per_token * m.tokens_per_s / (row.gpus * peak) if peak else 0.0
    if mfu > 1.0:
        raise _refused(
            ctx,
            i,
            f"the measured {m.tokens_per_s:,.0f} tokens/s on {row.gpus} {row.sku.name} would be {mfu:,.0%} MFU, more "
            "model FLOP/s than the GPUs' peak; check the number and whether it is per GPU or in all",
        )
    state = float(ev.memory.state[k])
    if m.peak_memory_bytes is not None and m.peak_memory_bytes < 0.5 * state:
        raise _refused(
            ctx,
            i,
            f"the measured peak {fmt_bytes(m.peak_memory_bytes)} is less than half the {fmt_bytes(state)} per GPU "
            f"that the weights, gradients and optimizer state take on {row.gpus} {row.sku.name}; check the number "
            "and its unit (GB = 10^9 bytes, GiB = 2^30)",
            ".peak_memory",
        )
    return ev.timing.bound_at(k)  # what bounds the measured configuration, as ``predict`` says


# Two measurements of one configuration (GPU, count, nodes) further apart than this are not run-to-run
# noise (a few per cent) but a typo or two different settings: averaged, the plan was calibrated to a
# throughput neither run had, its spread narrowed as if measured (100k and 10k tok/s on 8 B200 gave
# 31.6k "measured").
MEASURED_SPREAD_MAX = 1.5


def _check_agree(ctx: JobContext, rows: list[HardwareRow]) -> None:
    """Measurements of the same configuration agree within ``MEASURED_SPREAD_MAX``."""
    seen: dict[tuple[str, int, int], int] = {}
    for i, (row, m) in enumerate(zip(rows, ctx.job.measured)):
        key = (row.sku.name, row.gpus, row.nodes)
        j = seen.setdefault(key, i)
        other = ctx.job.measured[j].tokens_per_s
        ratio = max(m.tokens_per_s, other) / min(m.tokens_per_s, other)
        if ratio > MEASURED_SPREAD_MAX:
            raise _refused(
                ctx,
                i,
                f"{m.tokens_per_s:,.0f} tokens/s on {row.gpus} {row.sku.name} ({row.nodes} node"
                f"{'s' if row.nodes > 1 else ''}) is {ratio:,.3g} times another measurement of the same "
                f"configuration ({other:,.0f} tokens/s), more than run-to-run noise; keep the one you trust (a "
                "configuration has one throughput), or correct the GPU count or nodes of the other",
            )


def calibrate(ctx: JobContext) -> JobContext:
    measurements = ctx.job.measured
    rows, bounds = [], []
    for i, m in enumerate(measurements):
        try:
            rows.append(resolve_row(ctx, m.sku, m.gpus, m.nodes))
        except GpuplanError as exc:
            raise _refused(ctx, i, exc.reason) from None
        _check_peak(ctx, rows[-1], m.peak_memory_bytes, i)
        bounds.append(_check_possible(ctx, rows[-1], m, i))
    _check_agree(ctx, rows)
    # The measured peaks move the reserve, the reserve can move a row's best layout, and the throughput is
    # fitted on that layout: repeat until the layouts the peaks are read from stay put (a peak of 150 GiB on
    # 32 B200 had let a layout win that was never fitted, 71,777 tokens/s 'measured' where 70,000 were).
    deltas: list[float | None] = [None] * len(rows)
    for _ in range(CALIBRATION_ROUNDS):
        calibrated = _calibrated(ctx, rows, bounds, deltas)
        peaks = [(k, m.peak_memory_bytes) for k, m in enumerate(measurements) if m.peak_memory_bytes]
        if not peaks:
            break
        # each measured row's layout under this calibration, its memory without the reserve correction
        raw = replace(calibrated, calibration=Calibration())
        new = list(deltas)
        for k, peak in peaks:
            new[k] = peak - _memory_of(raw, rows[k], predict_layout(calibrated, rows[k])[1])
        moved = max(abs((a or 0.0) - (b or 0.0)) for a, b in zip(new, deltas))
        deltas = new
        if moved < 2**20:  # within a MiB: the layouts stayed put
            break
    misses = tuple(abs(math.log(predict(calibrated, row)[0] / m.tokens_per_s)) for row, m in zip(rows, measurements))
    unfit = []
    for point, row in zip(calibrated.calibration.points, rows):
        ev, i = predict_layout(calibrated, row)
        if not ev.fits[i]:
            unfit.append((point, float(ev.memory.total[i]), capacity_bytes(row, ctx.assumptions.memory_basis)[0]))
    return replace(calibrated, calibration=replace(calibrated.calibration, misses=misses, unfit=tuple(unfit)))


def _calibrated(ctx: JobContext, rows: list[HardwareRow], bounds: list[str], deltas: list[float | None]) -> JobContext:
    """``ctx`` calibrated with the measured peaks' reserve ``deltas`` (None: no peak): the shared factor per
    bound fitted over every measurement, then each measurement's anchor, what the shared factors still miss at
    its configuration (``anchors``), so that it predicts itself."""
    given = [d for d in deltas if d is not None]
    shared_delta = sum(given) / len(given) if given else 0.0
    archs = [row.sku.architecture for row in rows]
    points = tuple((r.sku.name, r.gpus, r.nodes) for r in rows)
    reserve_only = tuple(Anchor(r.sku.name, a, r.gpus, r.nodes, 1.0, d) for r, a, d in zip(rows, archs, deltas))
    base = Calibration(reserve_delta_bytes=shared_delta, anchors=reserve_only)
    fitted = _fit_all(replace(ctx, calibration=base), rows, bounds)
    shared = _with_factors(replace(ctx, calibration=base), fitted)
    speeds = [m.tokens_per_s / predict(shared, row)[0] for row, m in zip(rows, ctx.job.measured)]
    calibration = replace(
        shared.calibration,
        points=points,
        anchors=tuple(Anchor(r.sku.name, a, r.gpus, r.nodes, v, d) for r, a, v, d in zip(rows, archs, speeds, deltas)),
    )
    return replace(ctx, calibration=calibration)


# Rounds of (fit the throughput, read the peak) in ``calibrate``: two settle every case seen; four bound it.
CALIBRATION_ROUNDS = 4


def _memory_of(ctx: JobContext, row: HardwareRow, i: int) -> float:
    """Total memory per GPU of the row's layout ``i`` (an index ``predict_layout`` gave), under ``ctx``."""
    return float(evaluate(ctx, [row], [_row_grid(ctx, row)[i : i + 1]]).memory.total[0])


def _with_factors(ctx: JobContext, fitted: dict[str, float]) -> JobContext:
    """``ctx`` with the fitted factors (compute, memory, network) set, the others as they were."""
    c = ctx.calibration
    calibration = replace(
        c,
        compute=fitted.get("compute", c.compute),
        memory=fitted.get("memory", c.memory),
        network=fitted.get("network", c.network),
    )
    return replace(ctx, calibration=calibration)


# Rounds of fitting every bound's factor with the others' applied (Gauss-Seidel): measurements on different
# bounds settle in two or three; a relative change below FIT_TOLERANCE ends it.
FIT_ROUNDS = 6
FIT_TOLERANCE = 1e-4


def _fit_all(ctx: JobContext, rows: list[HardwareRow], bounds: list[str]) -> dict[str, float]:
    """Per bound, the geometric mean of the factors that reproduce each measurement of that bound, each fitted
    with the other bounds' factors applied, until they settle (fitted with the others at 1, a network-bound
    measurement on 64 B200 was predicted 1.3 % off once a compute-bound one on 8 B200 set the compute factor)."""
    fitted: dict[str, float] = {}
    for _ in range(FIT_ROUNDS):
        current = _with_factors(ctx, fitted)
        factors: dict[str, list[float]] = {}
        for i, (row, m, bound) in enumerate(zip(rows, ctx.job.measured, bounds)):
            factor = _fit(current, row, bound, m.tokens_per_s)
            if abs(predict(_scaled(current, bound, factor), row)[0] / m.tokens_per_s - 1.0) > 0.05:
                raise _unreachable(current, row, m, i)
            factors.setdefault(bound, []).append(factor)
        new = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in factors.items()}
        settled = all(abs(math.log(new[k] / fitted[k])) < FIT_TOLERANCE for k in new) if fitted else len(new) == 1
        fitted = new
        if settled:
            break
    return fitted


def _unreachable(ctx: JobContext, row: HardwareRow, m, i: int) -> GpuplanError:
    """No factor in the fit's range (1/1000 to 1000 times the model's efficiency) reproduces the measurement:
    either far off, or a part of the step the bound's efficiency does not move (an offloaded optimizer step)
    already takes longer than the measurement leaves."""
    predicted = predict(ctx, row)[0]
    faster = m.tokens_per_s > predicted
    how = (
        f"{m.tokens_per_s / predicted:,.3g} times faster"
        if faster
        else f"{predicted / m.tokens_per_s:,.3g} times slower"
    )
    return _refused(
        ctx,
        i,
        f"the measured {m.tokens_per_s:,.0f} tokens/s on {row.gpus} {row.sku.name} is {how} than gpuplan predicts "
        f"({predicted:,.0f} tokens/s), beyond any efficiency it can fit (a part of the step the efficiency does "
        "not move, such as an optimizer step offloaded to the CPU, may bound it); check the number and its unit "
        "(tok/s, k, M), and the job's offload and recompute settings",
    )
