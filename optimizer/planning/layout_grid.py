"""The layouts a hardware row can run: TP inside a node (dividing the heads), PP (uneven stages allowed, plain or
interleaved 1F1B), CP for long sequences, EP and expert TP for MoE models, DP the rest with ZeRO 0-3 over every
DP rank or hybrid-sharded inside a node, recompute, offload, and micro-batches with an integer gradient
accumulation that meets the global batch; each layout labelled with the frameworks that run it
(docs/design.md section 3.4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..physics.constants import (
    FREE_BATCH_MICRO_BATCHES_PER_STAGE,
)
from ..physics.context_parallel import is_all_to_all, ulysses_heads_split
from ..physics.layout import RECOMPUTE_LEAST, Layout, Offload, Recompute
from ..physics.recompute_modules import frees_beyond_flash
from .context import HardwareRow, JobContext
from .frameworks import EXCHANGE_CODES, FRAMEWORKS, METHOD_CODES, OPTIMIZER_CODES, PRECISION_CODES, PREFERENCE
from .labels import (
    label_layouts,
)

TP_CHOICES = (1, 2, 4, 8)
# uneven stages allowed: the first holds ceil(L / p) layers. 9 and 18 take the factor 9 out of a 72-GPU NVL72
# rack (TP 2 x PP 9 x DP 4), so that its data-parallel ranks, a power of two, divide a global batch of 256
PP_CHOICES = (1, 2, 3, 4, 6, 8, 9, 12, 16, 18)
MICRO_BATCH_CHOICES = (1, 2, 4, 8, 16, 32)
VIRTUAL_STAGE_CHOICES = (1, 2, 4, 8)  # interleaved 1F1B (Narayanan et al. 2021, section 2.2)
CP_CHOICES = (1, 2, 4, 8)  # context parallelism the planner tries for long sequences (check takes any degree)
EP_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # expert parallelism for MoE models
CONTEXT_PARALLEL_MIN_SEQ_LEN = 16384  # below this, activations are small enough without splitting sequences
LAYOUT_FIELDS = Layout.field_names()
GRID_FIELDS = (*LAYOUT_FIELDS, "framework")  # the framework's code in frameworks.PREFERENCE


def _divisors(n: int, choices) -> list[int]:
    return [c for c in choices if c <= n and n % c == 0]


def tp_over_whole_nodes(tp: int, gpus_per_node: int) -> bool:
    """A TP wider than a node that spans whole nodes (a hand-picked layout check takes; solve keeps TP in a node)."""
    return tp > gpus_per_node and tp % gpus_per_node == 0


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
    context-parallel degree, EP, chunk count, expert TP, TP over whole nodes, micro-batch, gradient accumulation or pipeline
    degree (None: the grid's own choices)."""

    cp: int | None = None
    ep: int | None = None
    virtual_stages: int | None = None
    expert_tp: int | None = None
    tp: int | None = None  # a TP of whole nodes (wider than a node: its collectives over the network)
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
    columns["context_parallel"] = np.full(len(grid), EXCHANGE_CODES[ctx.job.context_parallel])
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
    if ctx.shape.has_shapes and requested.tp and tp_over_whole_nodes(requested.tp, g):
        tps = [requested.tp]  # a hand-picked TP of whole nodes (nanotron's 80B at TP 16); solve keeps TP in a node
    if ctx.shape.has_shapes:
        tps = [t for t in tps if model.heads % t == 0 and (model.kv_heads or model.heads) % t == 0]
    pps = [p for p in pipeline_choices(requested.pp) if ctx.shape.has_shapes and 2 * p <= (model.layers or 0)] or [1]
    # Under FlashAttention selective recompute of the attention core keeps the same tensors as none (docs/design.md
    # section 4.4); of Megatron-Core's other modules (job.recompute_modules), less
    recomputes = [Recompute.NONE, Recompute.FULL]
    if not ctx.job.tiled_attention or frees_beyond_flash(ctx.modules):
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
        if gpus % (tp * pp * cp) or not cp_splits_heads(ctx, tp, cp):
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
    """(ep, etp) pairs: EP over the DP x CP ranks, the experts split by the attention TP (etp 0), and where the expert
    TP is left open and a framework folds, expert TP 1 as well; or, for an expert TP other than ``tp`` (asked, or 1
    for a pinned EP only folding reaches), only Megatron-Core's parallel folding: EP x expert TP dividing all TP x DP
    x CP ranks (Megatron-Core MoE docs, "MoE Parallel Folding")."""
    if not ctx.shape.experts:
        return _DENSE  # (a grid of a million layouts asks this for each of them)
    if requested_etp is None or requested_etp == tp:
        unfolded = [(ep, 0) for ep in expert_choices(ctx, replicas, requested_ep)]
        if requested_etp == tp or tp == 1:
            return unfolded
        if not requested_ep or (requested_ep, 0) in unfolded:
            # expert TP left open: the attention TP (Megatron-LM's --expert-tensor-parallel-size default) and, where a
            # framework folds, expert TP 1, today's recipes' (Megatron-Bridge recipes/qwen/qwen3_moe.py
            # expert_tensor_parallel_size 1 at TP 4; its H100 Qwen3-235B perf recipe TP 2 x ETP 1)
            return unfolded + (_folded(ctx, tp, replicas, requested_ep, 1) if _may_fold(ctx) else [])
        requested_etp = 1
    return _folded(ctx, tp, replicas, requested_ep, requested_etp)


def _folded(ctx: JobContext, tp: int, replicas: int, requested_ep: int | None, etp: int) -> list[tuple[int, int]]:
    """Megatron-Core's parallel folding: (ep, etp) with EP x expert TP dividing all TP x DP x CP ranks."""
    eps = expert_choices(ctx, tp * replicas, requested_ep)
    return [(ep, etp) for ep in eps if (tp * replicas) % (ep * etp) == 0]


def _may_fold(ctx: JobContext) -> bool:
    """Whether the job's framework (or one auto may pick) folds the experts' TP apart from the attention's."""
    names = FRAMEWORKS if ctx.job.framework == "auto" else (ctx.job.framework,)
    return any(FRAMEWORKS[name].expert_folding for name in names if name in FRAMEWORKS)


_DENSE = ((1, 0),)  # a dense model's one (ep, etp) pair


def context_choices(ctx: JobContext, requested: int | None = None) -> list[int]:
    """Context-parallel degrees: under FlashAttention, splitting the sequence as the job's exchange needs
    (``cp_splits_sequence``); the planner tries CP_CHOICES from 16k tokens up, a hand-picked ``requested``
    degree is allowed at any length and above 8 (Llama 3 trained at CP 16, XTuner's sequence parallel at 64)."""
    if not ctx.job.tiled_attention or not ctx.shape.has_shapes:
        return [1]
    if requested is not None and requested > 1:
        return [1, requested] if cp_splits_sequence(ctx, requested) else [1]
    if ctx.job.seq_len < CONTEXT_PARALLEL_MIN_SEQ_LEN:
        return [1]
    return [c for c in CP_CHOICES if cp_splits_sequence(ctx, c)]


def cp_splits_sequence(ctx: JobContext, cp: int) -> bool:
    """Whether ``cp`` ranks split the sequence: ring attention into 2 cp equal chunks (the causal load balancing of
    Megatron-Core and torchtitan), Ulysses into cp shards (DeepSpeed's and XTuner's sequence sharding)."""
    chunks = cp if is_all_to_all(ctx.job.context_parallel) else 2 * cp
    return ctx.job.seq_len % chunks == 0


def cp_splits_heads(ctx: JobContext, tp: int, cp: int) -> bool:
    """Whether a TP x CP layout's attention heads split as the job's exchange needs: always under ring attention
    (each rank keeps all its TP share of the heads); under Ulysses each TP rank's query heads over the cp ranks and
    the KV heads by DeepSpeed's rule (physics/context_parallel.py ulysses_heads_split)."""
    exchange = ctx.job.context_parallel
    if cp <= 1 or not is_all_to_all(exchange):
        return True
    model = ctx.job.model
    heads = model.heads or 0
    return bool(ulysses_heads_split(heads, model.kv_heads or heads, tp, cp, exchange))


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
