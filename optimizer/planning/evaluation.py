"""Every (hardware row, layout) pair through the physics in one vectorised pass: memory, step time, hours and
cost, rows with the same hardware figures evaluated together and in passes a time limit can stop between
(docs/design.md section 3.4)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ..inputs.schema import Strategy
from ..physics import reliability
from ..physics.constants import (
    FALLBACK_NETWORK_GB_PER_S_PER_GPU,
    HOST_MEMORY_SERVER_GPUS,
)
from ..physics.cost import run_cost_usd
from ..physics.host_launch import optimizer_step_ops
from ..physics.layout import RECOMPUTE_LEAST, Cluster, Layout, Offload, Recompute
from ..physics.memory import (
    FP32_GRAD_BYTES_PER_GRAD_BYTE,
    MemoryBreakdown,
    activation_bytes,
    headroom_bytes,
    host_optimizer_bytes,
    least_recomputed_layers,
    memory_breakdown,
)
from ..physics.memory_terms import ddp_copies, gradients_freed, not_concurrent_bytes
from ..physics.time import StepTime, step_time
from .columns import concat, take
from .context import HardwareRow, JobContext, capacity_bytes
from .frameworks import CODES, PREFERENCE, recompute_count
from .labels import (
    ddp_gradient_copy,
    expert_loop,
    fp32_gradient_buffer,
    fp32_reduce,
    frees_gradients,
    fused_kernels,
    grouped_gemm_per_expert,
    loss_bytes_per_vocab,
    loss_traffic_bytes_per_logit,
    partial_recompute,
    sequence_parallel,
    zero3_per_step,
)
from .layout_grid import GRID_FIELDS, LAYOUT_FIELDS
from .reliability import checkpoint_hours, interruption_rate


@dataclass
class Evaluation:
    """Physics of many (row, strategy) layouts, aligned arrays."""

    row: np.ndarray  # index into the hardware rows
    layout: Layout
    framework: np.ndarray  # code into frameworks.PREFERENCE
    memory: MemoryBreakdown
    host_bytes: np.ndarray  # CPU memory per host for offloaded optimizer state
    host_capacity_bytes: np.ndarray  # CPU memory per host
    capacity_bytes: np.ndarray
    timing: StepTime
    hours: np.ndarray
    cost_usd: np.ndarray
    headroom_bytes: np.ndarray | float = 0.0  # memory kept free beyond the peak (constraints.memory_headroom)
    optimizer_in_backward: bool = False  # job-wide memory options, shown in every strategy
    activation_offload: bool = False
    # per layout, whether the same layout under a more-preferred framework fits (frameworks.label_layouts):
    # the simplest framework that runs a layout and holds it is the one it runs in
    shadowed: np.ndarray | None = None

    @cached_property
    def complexity(self) -> np.ndarray:
        """Parallel dimensions of each layout (computed once: every row's best_layout reads it)."""
        return complexity(self.layout)

    @cached_property
    def fits(self) -> np.ndarray:
        held = (self.memory.total + self.headroom_bytes <= self.capacity_bytes) & (
            self.host_bytes <= self.host_capacity_bytes
        )
        return held if self.shadowed is None else held & ~self.shadowed

    def strategy(self, i: int) -> Strategy:
        lay = self.layout.at(i)
        return Strategy(
            tp=lay.tp,
            pp=lay.pp,
            dp=lay.dp,
            zero_stage=lay.zero,
            shard_degree=lay.shard,
            micro_batch=lay.micro_batch,
            grad_accum=lay.grad_accum,
            recompute=Recompute(int(lay.recompute)).label,
            recompute_layers=int(lay.recompute_layers)
            if lay.recompute == Recompute.FULL and lay.recompute_layers > 0
            else None,
            virtual_stages=lay.virtual_stages,
            offload=Offload(int(lay.offload)).label,
            optimizer_in_backward=self.optimizer_in_backward,
            activation_offload=self.activation_offload,
            cp=lay.cp,
            ep=lay.ep,
            expert_tp=lay.etp or None,
            framework=PREFERENCE[int(self.framework[i])] if self.framework[i] >= 0 else "none",
        )


def _row_figures(ctx: JobContext, row: HardwareRow) -> tuple:
    """Everything the physics of ``evaluate`` reads from a hardware row (not its price, interruptions or
    checkpoints, which only the hours and cost read): rows with equal figures and one grid share one
    evaluation of their layouts. NaN where a figure is missing (no rate at the job's precision)."""
    a = ctx.assumptions
    r = row
    return (
        ctx.peak_flops(r.sku) or np.nan,
        ctx.attention_peak_flops(r.sku) or np.nan,
        r.sku.hbm_bandwidth_gb_per_s * 1e9 * ctx.calibration.memory,
        r.sku.intra_node_bandwidth_gb_per_s * 1e9,
        (r.sku.network_gb_per_s_per_gpu or FALLBACK_NETWORK_GB_PER_S_PER_GPU) * 1e9,
        r.gpus_per_node,
        ctx.compute_efficiency(r.sku),
        r.nodes,
        capacity_bytes(r, a.memory_basis)[0],
        ctx.explicit_efficiency(r.nodes) or np.nan,
        r.gpus_per_host,
        min(r.sku.gpus_per_host or HOST_MEMORY_SERVER_GPUS, HOST_MEMORY_SERVER_GPUS),
        ctx.calibration.reserve_delta(r),
        ctx.calibration.speed_factor(r),
        ctx.fused_efficiency_ratio(r.sku),
        ctx.compiled_efficiency_ratio(r.sku),
        ctx.attention_efficiency(r.sku, fused=False) or np.nan,
        ctx.attention_efficiency(r.sku, fused=True) or np.nan,
        ctx.host_link_bytes_per_s(r.sku),
    )


# the entries of ``_row_figures``
ROW_FIGURES = 19


def _cluster(ctx: JobContext, figures: list[tuple], row_idx: np.ndarray) -> Cluster:
    """Per-layout hardware figures (each row's, repeated over its layouts)."""
    columns = np.asarray(figures, dtype=float).reshape(-1, ROW_FIGURES)[row_idx]
    a = ctx.assumptions
    return Cluster(
        peak_flops=columns[:, 0],
        attention_peak_flops=columns[:, 1],
        hbm_bytes_per_s=columns[:, 2],
        intra_bytes_per_s=columns[:, 3],
        network_bytes_per_s=columns[:, 4],
        gpus_per_node=columns[:, 5],
        compute_efficiency=columns[:, 6],
        nodes=columns[:, 7],
        fused_efficiency_ratio=columns[:, 14],
        compiled_efficiency_ratio=columns[:, 15],
        attention_efficiency_eager=columns[:, 16],
        attention_efficiency_fused=columns[:, 17],
        host_link_bytes_per_s=columns[:, 18],
        host_memory_bytes_per_s=a.host_memory_gb_per_s_per_gpu * 1e9,
    )


@dataclass
class _Physics:
    """What ``evaluate`` computes from the layouts and the hardware figures alone: everything but the hours
    and the cost (which read each row's price, interruptions and checkpoints)."""

    layout: Layout
    framework: np.ndarray
    memory: MemoryBreakdown
    host_bytes: np.ndarray
    host_capacity_bytes: np.ndarray
    capacity_bytes: np.ndarray
    headroom_bytes: np.ndarray
    timing: StepTime
    shadowed: np.ndarray | None


def _physics(ctx: JobContext, figures: list[tuple], grids: list[np.ndarray]) -> _Physics:
    """Memory and step time of every (row, layout) pair in one vectorised pass; ``figures`` per row
    (``_row_figures``), ``grids`` its layouts."""
    row_idx = np.repeat(np.arange(len(grids)), [len(g) for g in grids])
    grid = np.concatenate(grids) if grids else np.zeros((0, len(GRID_FIELDS)), dtype=np.int64)
    layout = Layout.from_grid(grid[:, : len(LAYOUT_FIELDS)])
    column = np.asarray(figures, dtype=float).reshape(-1, ROW_FIGURES)

    def per_row(k: int) -> np.ndarray:
        return column[:, k][row_idx]

    a = ctx.assumptions
    codes = grid[:, len(LAYOUT_FIELDS)]
    fused = fused_kernels(codes, ctx.job.kernels, ctx.job.framework, ctx.job.compile)
    te_layers = fused_kernels(codes, ctx.kernel_speed, ctx.job.framework)
    settings = replace(
        ctx.settings,
        fused_kernels=fused,
        fp8_saved_inputs=fused & (ctx.job.precision == "fp8"),
        sequence_parallel=sequence_parallel(codes, ctx.job.framework),
        # job.bytes_per_param states the whole training state, DDP's buckets included
        ddp_gradient_copy=ddp_gradient_copy(codes, ctx.job.framework) & (ctx.job.bytes_per_param is None),
        frees_gradients=frees_gradients(codes, ctx.job.framework),
        grouped_gemm_per_expert=grouped_gemm_per_expert(codes, ctx.job.framework, layout.ep),
        reduce_per_grad_byte=np.where(
            fp32_reduce(codes, ctx.job.framework, layout.zero, ctx.job.gradient_dtype, ctx.job.master_weights),
            FP32_GRAD_BYTES_PER_GRAD_BYTE,
            1.0,
        ),
        grad_buffer=np.where(
            fp32_gradient_buffer(codes, ctx.job.framework, ctx.job.gradient_dtype), FP32_GRAD_BYTES_PER_GRAD_BYTE, 1.0
        ),
        fused_framework=te_layers,
        # eager PyTorch layers issued from Python (not Transformer Engine's): the host floor (physics/host_launch.py),
        # but for a stated whole-step efficiency (assumptions.mfu), the stack's as it ran
        host_launch=~te_layers & (a.mfu == "auto"),
        compiled=ctx.job.compile,
        optimizer_step_ops=optimizer_step_ops(ctx.job.optimizer, ctx.job.optimizer_implementation),
        logits_bytes_per_vocab=loss_bytes_per_vocab(codes, ctx.job.loss, ctx.job.framework),
        loss_upcast=ctx.job.loss != "bf16",
        # under a stated efficiency the stack's kernels, the compiled loss's among them, are in the stated figure
        loss_traffic_bytes_per_logit=loss_traffic_bytes_per_logit(
            codes, ctx.job.loss, ctx.job.framework, ctx.compiled_loss
        ),
    )
    eager_experts = bool(ctx.shape.experts) and ctx.assumptions.experts_implementation == "eager"
    loop = expert_loop(codes, ctx.job.framework, layout.ep, layout.zero, eager_experts)
    settings = replace(settings, expert_loop=loop[0], zero3_module_fetch=loop[1])
    hw = _cluster(ctx, figures, row_idx)
    caps = per_row(8)
    held = zero3_per_step(codes, layout.pp, a.zero3_gathers)
    deepspeed = np.where(codes >= 0, codes == CODES["deepspeed"], ctx.job.framework == "deepspeed")
    mem = memory_breakdown(ctx.shape, ctx.train, layout, settings, caps, held, deepspeed)
    headroom = headroom_bytes(ctx.constraints.memory_headroom, caps)
    if np.any(per_row(12)):  # the calibration's reserve delta, before anything reads (and caches) mem.total
        mem.reserve = np.maximum(0.0, mem.reserve + per_row(12))
    layout, mem = _least_recompute(ctx, layout, codes, settings, mem, caps - headroom)
    # HBM traffic of activations: one stage's layers, one micro-batch (written forward, read backward).
    one_micro = Layout(**{**vars(layout), "grad_accum": 1, "virtual_stages": 1})
    acts_micro = (
        activation_bytes(ctx.shape, settings, one_micro) / np.asarray(layout.cp, float) if ctx.shape.has_shapes else 0.0
    )
    offloaded_micro = None
    if settings.activation_offload and ctx.shape.has_shapes:
        kept_all = activation_bytes(ctx.shape, replace(settings, activation_offload=False), one_micro)
        offloaded_micro = (kept_all - activation_bytes(ctx.shape, settings, one_micro)) / np.asarray(layout.cp, float)
    timing = step_time(
        ctx.shape,
        ctx.train,
        hw,
        layout,
        settings,
        activation_bytes_per_micro=acts_micro,
        explicit_efficiency=per_row(9),
        offloaded_bytes_per_micro=offloaded_micro,
        zero3_per_step=held,
        moe_routing=ctx.assumptions.moe_routing,
    )
    if np.any(per_row(13) != 1.0):  # the calibration's anchors: a measured configuration runs as measured
        timing = timing.faster(per_row(13))
    # offloaded state fills the CPU memory of each host (an NVL72 tray of 4, not the 72-GPU NVLink node); unless
    # the job gives the host memory, a SKU whose hosts are trays gets a tray's share of an 8-GPU server's
    host = host_optimizer_bytes(ctx.train, layout, per_row(10))
    host_capacity = np.full(len(row_idx), a.host_memory_per_node_bytes)
    if "host_memory_per_node_bytes" not in a.model_fields_set:
        host_capacity = host_capacity * per_row(11) / HOST_MEMORY_SERVER_GPUS
    return _Physics(
        layout=layout,
        framework=codes,
        memory=mem,
        host_bytes=host,
        host_capacity_bytes=host_capacity,
        capacity_bytes=caps,
        headroom_bytes=headroom,
        timing=timing,
        # only auto labels a layout twice (frameworks.label_layouts)
        shadowed=_shadowed(grid, row_idx, mem.total + headroom <= caps) if ctx.job.framework == "auto" else None,
    )


def _least_recompute(
    ctx: JobContext, layout: Layout, codes: np.ndarray, settings, mem: MemoryBreakdown, usable_bytes: np.ndarray
) -> tuple[Layout, MemoryBreakdown]:
    """Resolve the grid's RECOMPUTE_LEAST: under a framework that recomputes some layers only, the fewest it runs
    (``frameworks.recompute_count``) that fit the GPU (``usable_bytes``, the headroom left out); elsewhere, and
    where not even every layer recomputed fits, all. Only those rows are bisected (``mem`` holds every layer
    recomputed for them): on a 70B solve the bisection over every row took 40 % of the physics."""
    auto = np.asarray(layout.recompute_layers) == RECOMPUTE_LEAST
    if not np.any(auto):
        return layout, mem
    n = len(auto)
    chosen = np.zeros(n, dtype=np.int64)  # all
    kinds = partial_recompute(codes, ctx.job.framework)
    # the activations' room: beside the gradients where they live through the forward, else beside the weights and
    # state alone, the step (gradients and temporaries) fitting on its own (physics/memory_terms.not_concurrent_bytes)
    kept = mem.weights + mem.optimizer + mem.reserve
    freed = gradients_freed(layout, settings.frees_gradients)
    step_fits = kept + mem.gradients + mem.optimizer_step <= usable_bytes
    budget = np.where(freed, usable_bytes - kept, usable_bytes - (kept + mem.gradients))
    budget = np.where(step_fits, budget, -1.0)
    rows = np.flatnonzero(auto & (kinds != "none") & (mem.activations <= budget))
    if len(rows) and ctx.shape.has_shapes:
        some, some_settings = take(layout, rows, n), take(settings, rows, n)
        split = ctx.train.pipeline_split
        least = least_recomputed_layers(ctx.shape, some_settings, some, budget[rows], some.virtual_stages, split)
        counted = np.zeros(len(rows), dtype=np.int64)
        for kind in ("block", "every_k"):
            runs = recompute_count(kind, least, ctx.shape.layers, some.pp, some.virtual_stages)
            counted = np.where(kinds[rows] == kind, np.where(least > 0, runs, 0), counted)  # (0: all)
        chosen[rows] = np.where(counted >= some.stage_layers(ctx.shape.layers), 0, counted)
    layout = replace(layout, recompute_layers=np.where(auto, chosen, layout.recompute_layers))
    partial = np.flatnonzero(chosen > 0)
    if not len(partial):
        return layout, mem
    some = take(layout, partial, n)
    activations = np.array(mem.activations, dtype=float)
    acts = activation_bytes(ctx.shape, take(settings, partial, n), some, ctx.train.pipeline_split)
    activations[partial] = acts / np.asarray(some.cp, float)
    # what the activations and the step never hold at once, for the new activations (DDP's buckets persist)
    param_grads = mem.gradients / (1.0 + ddp_copies(layout, settings.ddp_gradient_copy, settings.bucket_per_grad_byte))
    apart = np.array(mem.not_concurrent, dtype=float)
    again = not_concurrent_bytes(activations, param_grads, mem.optimizer_step, layout, settings.frees_gradients)
    apart[partial] = again[partial]
    return layout, replace(mem, activations=activations, not_concurrent=apart)


# When a time limit may stop the evaluation, it runs in passes of about this many layouts (a pass of
# 100,000 takes about 0.1-0.2 s), and the time is checked between them.
EVALUATION_PASS_LAYOUTS = 100_000


def evaluate(ctx: JobContext, rows: list[HardwareRow], grids: list[np.ndarray]) -> Evaluation:
    """Run memory, time and cost physics for every (row, strategy) pair in one vectorised pass."""
    pending = _Evaluator(ctx)
    for row, grid in zip(rows, grids):
        pending.add(row, grid)
    pending.flush()
    return pending.evaluation(rows, list(range(len(rows))))


class _Evaluator:
    """Rows' layouts evaluated as they come: rows with the same hardware figures (``_row_figures``) and grid
    share one evaluation of their physics (1,000 offers of one GPU at 1,000 prices: one), the layouts not yet
    evaluated wait for ``flush`` (one vectorised pass over all of them), and each row gets its own hours and
    cost in ``evaluation``."""

    def __init__(self, ctx: JobContext) -> None:
        self.ctx = ctx
        self.group_of: dict[tuple, int] = {}
        self.figures: list[tuple] = []  # per group
        self.grids: list[np.ndarray] = []  # per group
        self.offset: list[int | None] = []  # per group, where its layouts start once evaluated
        self.rows: list[int] = []  # per row added, its group
        self.pending: list[int] = []  # groups not evaluated yet
        self.pending_layouts = 0
        self.parts: list[_Physics] = []
        self.lengths: list[int] = []

    def add(self, row: HardwareRow, grid: np.ndarray) -> None:
        fig = _row_figures(self.ctx, row)
        key = (tuple(None if isinstance(x, float) and np.isnan(x) else x for x in fig), id(grid))
        if key not in self.group_of:
            self.group_of[key] = len(self.figures)
            self.figures.append(fig)
            self.grids.append(grid)
            self.offset.append(None)
            self.pending.append(len(self.figures) - 1)
            self.pending_layouts += len(grid)
        self.rows.append(self.group_of[key])

    def flush(self) -> None:
        """One pass over the layouts waiting (none waiting: an empty pass the first time, so that there is one)."""
        if not self.pending and self.parts:
            return
        start = sum(self.lengths)
        for q in self.pending:
            self.offset[q] = start
            start += len(self.grids[q])
        self.parts.append(
            _physics(self.ctx, [self.figures[q] for q in self.pending], [self.grids[q] for q in self.pending])
        )
        self.lengths.append(self.pending_layouts)
        self.pending, self.pending_layouts = [], 0

    def evaluated(self, k: int) -> bool:
        """Whether the k-th row added has its layouts evaluated."""
        return self.offset[self.rows[k]] is not None

    def evaluation(self, rows: list[HardwareRow], added: list[int]) -> Evaluation:
        """The evaluation of ``rows``, the rows added at positions ``added`` (all evaluated), in that order."""
        shared = self.parts[0] if len(self.parts) == 1 else concat(self.parts, self.lengths)
        self.parts = [shared]  # (the passes' arrays freed)
        self.lengths = [sum(self.lengths)]
        groups = [self.rows[k] for k in added]
        if groups == list(range(len(self.figures))):
            physics = shared  # every row its own group, in order: nothing to share or reorder
        else:
            spans = []
            for q in groups:
                start = self.offset[q]
                assert start is not None  # (only evaluated rows are asked for)
                spans.append(np.arange(start, start + len(self.grids[q])))
            idx = np.concatenate(spans or [np.zeros(0, np.int64)])
            physics = take(shared, idx, self.lengths[0])
        row_idx = np.repeat(np.arange(len(rows)), [len(self.grids[q]) for q in groups])
        hours, cost = _run_hours_and_cost(self.ctx, rows, row_idx, physics.timing)
        return Evaluation(
            row=row_idx,
            layout=physics.layout,
            framework=physics.framework,
            memory=physics.memory,
            host_bytes=physics.host_bytes,
            host_capacity_bytes=physics.host_capacity_bytes,
            capacity_bytes=physics.capacity_bytes,
            timing=physics.timing,
            hours=hours,
            cost_usd=cost,
            headroom_bytes=physics.headroom_bytes,
            optimizer_in_backward=self.ctx.job.optimizer_in_backward,
            activation_offload=self.ctx.job.activation_offload,
            shadowed=physics.shadowed,
        )


def _shadowed(grid: np.ndarray, row_idx: np.ndarray, fits_gpu: np.ndarray) -> np.ndarray:
    """Per grid row, whether the row before it is the same layout on the same hardware row (labelled with a
    more-preferred framework: ``strategy_grid`` keeps a layout's labels together, in preference order) and it,
    or one before it, fits the GPU's memory."""
    layout = np.column_stack([row_idx, grid[:, : len(LAYOUT_FIELDS)]])
    same = np.zeros(len(grid), dtype=bool)
    same[1:] = np.all(layout[1:] == layout[:-1], axis=1)
    shadowed = np.zeros(len(grid), dtype=bool)
    for _ in range(len(PREFERENCE) - 1):  # a layout has at most one label per framework
        before = np.zeros(len(grid), dtype=bool)
        before[1:] = fits_gpu[:-1] | shadowed[:-1]
        shadowed = same & before
    return shadowed


def _run_hours_and_cost(
    ctx: JobContext, rows: list[HardwareRow], row_idx: np.ndarray, timing: StepTime
) -> tuple[np.ndarray, np.ndarray]:
    """Hours (interruptions, checkpoints and start-up included) and cost of the whole job per layout: the
    only part of an evaluation that depends on the job's token count."""
    a = ctx.assumptions

    def per_row(values) -> np.ndarray:
        return np.asarray(values, dtype=float)[row_idx]

    train_h = ctx.job.total_tokens / timing.tokens_per_s / 3600.0
    rate = per_row([interruption_rate(ctx, r) for r in rows])
    hours = (
        reliability.expected_hours(
            train_h, rate, per_row([checkpoint_hours(ctx, r) for r in rows]), a.restart_s / 3600.0
        )
        + a.startup_s / 3600.0
    )
    price = per_row([r.price_usd_per_gpu_hour if r.offer else np.nan for r in rows])
    billed = per_row([r.billed_gpus for r in rows])
    increment = per_row([r.offer.billing_increment_s if r.offer else 1.0 for r in rows])
    return hours, run_cost_usd(price, billed, hours, increment)


def complexity(layout: Layout) -> np.ndarray:
    """Parallel dimensions a team must set up: TP, PP, interleaving, a hybrid shard, offload."""
    return (
        (np.asarray(layout.tp) > 1).astype(int)
        + (np.asarray(layout.pp) > 1)
        + (np.asarray(layout.virtual_stages) > 1)
        + ((np.asarray(layout.zero) >= 3) & (np.asarray(layout.shard) < np.asarray(layout.dp) * np.asarray(layout.cp)))
        + (np.asarray(layout.offload) > 0)
        + (np.asarray(layout.cp) > 1)
        + (np.asarray(layout.ep) > 1)
    )


def best_layout(ev: Evaluation, lo: int = 0, hi: int | None = None) -> int:
    """Index of the best fitting layout in ``[lo, hi)``: the shortest whole job (on one hardware row both
    cost and time grow with it); among equally short ones the one with the fewest parallel dimensions,
    then less memory, then enumeration order. No slower layout is preferred for being simpler: a plan 1 %
    slower had been chosen, and ``check`` then found the faster layout cheaper than the optimum. The
    least-memory layout when none fits or none has a time (a row kept only to explain its rejection, e.g.
    an A100 for an FP8 job: no FP8 rate, so no time)."""
    hi = len(ev.row) if hi is None else hi
    idx = np.arange(lo, hi)
    ok = idx[ev.fits[lo:hi] & np.isfinite(ev.hours[lo:hi])]
    if not len(ok):
        return int(idx[np.lexsort((idx, ev.memory.total[lo:hi]))[0]])
    hours = np.round(ev.hours[ok], 9)
    order = np.lexsort((ok, ev.memory.total[ok], ev.complexity[ok], hours))
    return int(ok[order[0]])


# Rows that no layout of the global batch fits are evaluated without the batch only to show their numbers
# (``options``), up to this many layouts in all; the rest are rejected by the batch without numbers. An offer
# of 1,024 nodes took 12 s and 1.7 GB to plan, of which 2.1 million layouts of 997 node counts were such rows
# and 16,000 layouts were the rows the batch fits.
