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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache

import numpy as np

from ..inputs.catalog import find_sku, passes_gpu_names
from ..inputs.schema import Offer, Strategy
from ..physics import reliability
from ..physics.constants import (
    FALLBACK_NETWORK_GB_PER_S_PER_GPU,
    FREE_BATCH_MICRO_BATCHES_PER_STAGE,
    HOST_MEMORY_SERVER_GPUS,
)
from ..physics.cost import run_cost_usd
from ..physics.layout import RECOMPUTE_LEAST, Cluster, Layout, Offload, Recompute
from ..physics.memory import (
    MemoryBreakdown,
    activation_bytes,
    headroom_bytes,
    host_optimizer_bytes,
    least_recomputed_layers,
    memory_breakdown,
)
from ..physics.time import StepTime, step_time
from .columns import concat, take
from .context import HardwareRow, JobContext, capacity_bytes
from .frameworks import CODES, FRAMEWORKS, METHOD_CODES, OPTIMIZER_CODES, PRECISION_CODES, PREFERENCE, recompute_count
from .labels import (
    expert_loop,
    fused_kernels,
    label_layouts,
    loss_bytes_per_vocab,
    partial_recompute,
    sequence_parallel,
    zero3_per_step,
)
from .reliability import checkpoint_hours, interruption_rate

TP_CHOICES = (1, 2, 4, 8)
# uneven stages allowed: the first holds ceil(L / p) layers. 9 and 18 take the factor 9 out of a 72-GPU NVL72
# rack (TP 2 x PP 9 x DP 4), so that its data-parallel ranks, a power of two, divide a global batch of 256
PP_CHOICES = (1, 2, 3, 4, 6, 8, 9, 12, 16, 18)
MICRO_BATCH_CHOICES = (1, 2, 4, 8, 16, 32)
VIRTUAL_STAGE_CHOICES = (1, 2, 4, 8)  # interleaved 1F1B (Narayanan et al. 2021, section 2.2)
CP_CHOICES = (1, 2, 4, 8)  # context parallelism (ring attention) for long sequences
EP_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # expert parallelism for MoE models
CONTEXT_PARALLEL_MIN_SEQ_LEN = 16384  # below this, activations are small enough without splitting sequences
LAYOUT_FIELDS = Layout.field_names()
GRID_FIELDS = (*LAYOUT_FIELDS, "framework")  # the framework's code in frameworks.PREFERENCE


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


def _divisors(n: int, choices) -> list[int]:
    return [c for c in choices if c <= n and n % c == 0]


def _offload_choices(setting: str, zero: int, dp: int) -> tuple[Offload, ...]:
    """ZeRO-Offload runs with stage 2 or 3 (or a single data-parallel rank)."""
    possible = zero >= 2 or dp == 1
    if setting == "optimizer":
        return (Offload.OPTIMIZER,) if possible else ()
    if setting == "auto" and possible:
        return (Offload.NONE, Offload.OPTIMIZER)
    return (Offload.NONE,)


@dataclass(frozen=True)
class Requested:
    """Layout values a hand-picked configuration (``check``) asks for beyond the grid solve searches: any
    context-parallel degree, EP, chunk count, expert TP, micro-batch, gradient accumulation or pipeline
    degree (None: the grid's own choices)."""

    cp: int | None = None
    ep: int | None = None
    virtual_stages: int | None = None
    expert_tp: int | None = None
    micro_batch: int | None = None
    grad_accum: int | None = None
    pp: int | None = None
    # a hand-picked configuration: a fine-tune's recipe batch its GPUs do not divide rounds up (33 on 3 GPUs)
    hand_picked: bool = False
    # under full recompute, the layers per stage recomputed (0: all; None: the fewest that fit, where the
    # framework recomputes some layers only)
    recompute_layers: int | None = None
    op_recompute: bool = False  # per-op selective recompute asked for (else only under torchtitan)


def strategy_grid(
    ctx: JobContext,
    row: HardwareRow,
    *,
    ignore_batch: bool = False,
    runnable_only: bool = True,
    requested: Requested = Requested(),
) -> np.ndarray:
    """Integer rows of ``GRID_FIELDS`` valid for ``row``: the layouts the job's framework runs (every
    layout, labelled -1 where no framework runs it, with ``runnable_only=False``), once per framework label
    (``frameworks.label_layouts``: two under auto where frameworks cost it differently), a layout's labels
    next to each other in preference order (``_shadowed`` reads them so)."""
    grid = _layouts(ctx, row, ignore_batch, requested)
    if not len(grid):  # nothing to label (a node count no layout of the global batch fits)
        return np.zeros((0, len(GRID_FIELDS)), dtype=np.int64)
    index, codes, unrun = label_layouts(
        _rule_columns(ctx, grid),
        int(ctx.job.model.layers or 0),
        ctx.job.framework,
        ctx.job.kernels,
        ctx.assumptions.zero3_gathers,
    )
    if not runnable_only:
        index, codes = np.concatenate([index, unrun]), np.concatenate([codes, np.full(len(unrun), -1)])
        order = np.argsort(index, kind="stable")
        index, codes = index[order], codes[order]
    return np.column_stack([grid[index], codes]).astype(np.int64).reshape(-1, len(GRID_FIELDS))


def _rule_columns(ctx: JobContext, grid: np.ndarray) -> dict[str, np.ndarray]:
    """A layout grid as the framework rules read it: its columns by name, plus the job-wide options."""
    columns = {name: grid[:, i] for i, name in enumerate(LAYOUT_FIELDS)}
    columns["optimizer_in_backward"] = np.full(len(grid), int(ctx.job.optimizer_in_backward))
    columns["activation_offload"] = np.full(len(grid), int(ctx.job.activation_offload))
    columns["method"] = np.full(len(grid), METHOD_CODES[ctx.job.method])
    columns["optimizer"] = np.full(len(grid), OPTIMIZER_CODES[ctx.job.optimizer])
    columns["precision"] = np.full(len(grid), PRECISION_CODES[ctx.job.precision])
    columns["seq_len"] = np.full(len(grid), int(ctx.job.seq_len))
    return columns


def fewest_broken_rules(ctx: JobContext, grid: np.ndarray) -> np.ndarray:
    """Rows of a layout grid that break the fewest rules of the job's framework (of the framework they break
    fewest of, under auto): where the user's flags already break one, the layout check fills in around them
    should not break another that a different choice avoids."""
    columns = _rule_columns(ctx, grid)
    names = PREFERENCE if ctx.job.framework == "auto" else (ctx.job.framework,)
    layers = int(ctx.job.model.layers or 0)
    counts = np.min(
        [sum(FRAMEWORKS[name].violations(columns, layers).values(), np.zeros(len(grid), int)) for name in names],
        axis=0,
    )
    return counts == counts.min()


def blocking_rules(ctx: JobContext, row: HardwareRow) -> list[str]:
    """Why no framework the job allows runs any layout of ``row``: per framework, the rules every one of its
    layouts breaks (the first when none is broken by all)."""
    grid = _layouts(ctx, row, True)
    columns = _rule_columns(ctx, grid)
    names = PREFERENCE if ctx.job.framework == "auto" else (ctx.job.framework,)
    out = []
    for name in names:
        broken = FRAMEWORKS[name].violations(columns, int(ctx.job.model.layers or 0))
        everywhere = [rule for rule, mask in broken.items() if len(mask) and bool(np.all(mask))]
        out += everywhere or [rule for rule, mask in broken.items() if np.any(mask)][:1]
    return out


def _layouts(ctx: JobContext, row: HardwareRow, ignore_batch: bool, requested: Requested = Requested()) -> np.ndarray:
    """Every layout of ``row`` that the batch and the model's shape allow, whatever the framework."""
    model = ctx.job.model
    g, gpus = row.gpus_per_node, row.gpus
    tps = _divisors(g, TP_CHOICES) if ctx.shape.has_shapes else [1]
    if ctx.shape.has_shapes:
        tps = [t for t in tps if model.heads % t == 0 and (model.kv_heads or model.heads) % t == 0]
    pps = [p for p in pipeline_choices(requested.pp) if ctx.shape.has_shapes and 2 * p <= (model.layers or 0)] or [1]
    # Under FlashAttention selective recompute keeps the same tensors as none (docs/design.md section 4.4).
    recomputes = [Recompute.NONE, Recompute.FULL]
    if ctx.job.attention != "flash":
        recomputes.insert(1, Recompute.SELECTIVE)
    if ctx.job.framework == "torchtitan" or requested.op_recompute:
        # torchtitan's own (the other frameworks' rules refuse it); not offered under auto, where its element-wise
        # recompute, not timed, would make a torchtitan plan look faster than it runs
        recomputes.append(Recompute.OP)
    if ctx.activation_reserve != "auto":
        recomputes = [Recompute.NONE]  # activations are a fixed reserve: recomputing would only cost time
    micro_batches = (requested.micro_batch,) if requested.micro_batch else MICRO_BATCH_CHOICES
    recomputed = RECOMPUTE_LEAST if requested.recompute_layers is None else requested.recompute_layers
    out = []
    for tp, pp, cp in [(t, p, c) for t in tps for p in pps for c in context_choices(ctx, requested.cp)]:
        if gpus % (tp * pp * cp):
            continue
        dp = gpus // (tp * pp * cp)
        for mb in micro_batches:
            accumulations = _accumulations(
                ctx, pp, dp * mb, ignore_batch, requested.grad_accum, requested.hand_picked, dp
            )
            for accum in accumulations:
                if ctx.job.optimizer_in_backward and (accum > 1 or pp > 1):
                    continue  # torchtune and torchtitan refuse optimizer-in-backward with accumulation or PP
                for zero, shard in _shardings(row, tp, dp * cp):
                    for off in _offload_choices(ctx.job.offload, zero, dp * cp):
                        for rc in recomputes:
                            layers = recomputed if rc == Recompute.FULL else 0
                            for v in _virtual_stages(pp, accum, model.layers or 0, requested.virtual_stages):
                                for ep, etp in _expert_layouts(ctx, tp, dp * cp, requested.ep, requested.expert_tp):
                                    out.append((tp, pp, dp, zero, shard, mb, accum, rc, v, off, cp, ep, etp, layers))
    return np.array(out, dtype=np.int64).reshape(-1, len(LAYOUT_FIELDS))


def pipeline_choices(requested: int | None = None) -> tuple[int, ...]:
    """Pipeline degrees: solve's list, or with a hand-picked degree that one and 1 (any degree runs: stages
    may be uneven, the first holding ceil(L / p) layers; ``_layouts`` keeps at least two layers a stage)."""
    return PP_CHOICES if requested is None or requested == 1 else (1, requested)


def _accumulations(
    ctx: JobContext,
    pp: int,
    sequences_per_micro_step: int,
    ignore_batch: bool,
    requested: int | None,
    round_up: bool = False,
    data_parallel: int = 1,
) -> list[int]:
    """Micro-batches per optimizer step for ``sequences_per_micro_step`` (data-parallel ranks x micro-batch).

    A global batch fixes it (B / (d b), where d b divides B), and so does a fine-tune's recipe batch R; a
    hand-picked configuration (``round_up``, check's) whose d b does not divide R makes the least multiple
    of d above it, where b divides that (33 sequences on 3 GPUs, 64 on 64 data-parallel ranks). A free batch
    may be any multiple of d b up to ``max_free_batch_sequences``, and the step time per token never rises with the count (docs/design.md
    section 3.2: the bubble, the optimizer step and the once-per-step traffic are spread over more
    micro-batches; memory holds at most p micro-batches in flight), so the grid takes the most that fit,
    and also the most that are a multiple of p (interleaving needs one: ``_virtual_stages``). Under
    optimizer-in-backward only one. Ignoring the batch (a row kept only to show its numbers): one per
    step without PP, ``FREE_BATCH_MICRO_BATCHES_PER_STAGE`` per stage with it."""
    batch = None if ignore_batch else ctx.job.global_batch_sequences
    if batch is not None:
        accum = batch // sequences_per_micro_step
        divides = batch % sequences_per_micro_step == 0
        return [accum] if divides and requested in (None, accum) else []
    recipe = None if ignore_batch else ctx.recipe_batch_sequences
    if recipe is not None:  # a fine-tune's: the recipe's batch (check: else the least above it a layout makes)
        made = -(-recipe // data_parallel) * data_parallel if round_up else recipe  # a multiple of the DP ranks
        if recipe % sequences_per_micro_step == 0:
            made = recipe
        if made % sequences_per_micro_step:
            return []
        accum = made // sequences_per_micro_step
        return [accum] if requested in (None, accum) else []
    if ignore_batch:
        return [requested or (1 if pp == 1 else FREE_BATCH_MICRO_BATCHES_PER_STAGE * pp)]
    most = ctx.max_free_batch_sequences // sequences_per_micro_step
    if requested is not None:
        return [requested] if requested <= most else []
    if most < 1:
        return []
    if ctx.job.optimizer_in_backward:
        return [1]
    return sorted({most, most - most % pp} - {0})


def expert_choices(ctx: JobContext, replicas: int, requested: int | None = None) -> list[int]:
    """Expert-parallel degrees of an MoE model: dividing the ranks that hold the same weights (data- and
    context-parallel ones, as Megatron-Core folds EP) and the number of routed experts."""
    experts = int(ctx.shape.experts)
    if not experts:
        return [1]
    choices = [e for e in EP_CHOICES if replicas % e == 0 and experts % e == 0]
    return [e for e in choices if e in (1, requested)] if requested else choices


def _expert_layouts(
    ctx: JobContext, tp: int, replicas: int, requested_ep: int | None, requested_etp: int | None
) -> Sequence[tuple[int, int]]:
    """(ep, etp) pairs: EP over the DP x CP ranks, the experts split by the attention TP (etp 0); or, for an expert
    TP other than ``tp`` (asked, or 1 for a pinned EP only folding reaches), Megatron-Core's parallel folding: EP x
    expert TP dividing all TP x DP x CP ranks (Megatron-Core MoE docs, "MoE Parallel Folding")."""
    if not ctx.shape.experts:
        return _DENSE  # (a grid of a million layouts asks this for each of them)
    if requested_etp is None or requested_etp == tp:
        unfolded = [(ep, 0) for ep in expert_choices(ctx, replicas, requested_ep)]
        if requested_etp == tp or tp == 1 or not requested_ep or (requested_ep, 0) in unfolded:
            return unfolded
        requested_etp = 1
    folded = [
        ep for ep in expert_choices(ctx, tp * replicas, requested_ep) if (tp * replicas) % (ep * requested_etp) == 0
    ]
    return [(ep, requested_etp) for ep in folded]


_DENSE = ((1, 0),)  # a dense model's one (ep, etp) pair


def context_choices(ctx: JobContext, requested: int | None = None) -> list[int]:
    """Context-parallel degrees: under FlashAttention, dividing the sequence into 2 cp chunks (the causal
    load balancing of Megatron-Core and torchtitan); the planner tries them from 16k tokens up, a hand-
    picked ``requested`` degree is allowed at any length."""
    s = ctx.job.seq_len
    if ctx.job.attention != "flash" or not ctx.shape.has_shapes:
        return [1]
    if requested is not None and requested > 1:
        return [1, requested] if requested in CP_CHOICES and s % (2 * requested) == 0 else [1]
    if s < CONTEXT_PARALLEL_MIN_SEQ_LEN:
        return [1]
    return [c for c in CP_CHOICES if s % (2 * c) == 0]


def _shardings(row: HardwareRow, tp: int, dp: int) -> list[tuple[int, int]]:
    """(ZeRO stage, shard group): none (1), stages 1-3 over every data-parallel rank, and ZeRO-3 inside a
    node replicated across nodes (hybrid shard) on multi-node rows."""
    if dp == 1:
        return [(0, 1)]
    out = [(0, 1), (1, dp), (2, dp), (3, dp)]
    in_node = row.gpus_per_node // tp if row.gpus_per_node % tp == 0 else 0
    if row.nodes > 1 and 1 < in_node < dp and dp % in_node == 0:
        out.append((3, in_node))
    return out


@lru_cache(maxsize=4096)  # asked once per layout of a grid, with few distinct arguments
def _virtual_stages(pp: int, accum: int, layers: int, requested: int | None = None) -> tuple[int, ...]:
    """Interleaving needs the micro-batch count to be a multiple of the stages (Megatron-LM's rule) and no more
    chunks than the layers, the embedding and the output (each may hold a chunk of its own: Megatron-Core's
    account_for_embedding/loss_in_pipeline_split, torchtitan's first/last_stage_less_layers). The planner tries 2,
    4 and 8 chunks; a hand-picked count may be any."""
    choices = [1, requested] if requested and requested > 1 else VIRTUAL_STAGE_CHOICES
    return tuple(v for v in choices if v == 1 or (pp > 1 and accum % pp == 0 and layers + 2 >= pp * v))


# --------------------------------------------------------------------------- evaluation


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
    settings = replace(
        ctx.settings,
        fused_kernels=fused,
        fp8_saved_inputs=fused & (ctx.job.precision == "fp8"),
        sequence_parallel=sequence_parallel(codes, ctx.job.framework),
        fused_framework=fused_kernels(codes, "fused" if ctx.kernels_stated_fused else "auto", ctx.job.framework),
        logits_bytes_per_vocab=loss_bytes_per_vocab(codes, ctx.job.loss, ctx.job.framework),
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
    budget = usable_bytes - (mem.weights + mem.gradients + mem.optimizer + mem.reserve)
    rows = np.flatnonzero(auto & (kinds != "none") & (mem.activations <= budget))
    if len(rows) and ctx.shape.has_shapes:
        some, some_settings = take(layout, rows, n), take(settings, rows, n)
        least = least_recomputed_layers(ctx.shape, some_settings, some, budget[rows], some.virtual_stages)
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
    activations[partial] = activation_bytes(ctx.shape, take(settings, partial, n), some) / np.asarray(some.cp, float)
    return layout, replace(mem, activations=activations)


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
