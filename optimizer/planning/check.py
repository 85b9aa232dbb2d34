"""A hand-picked configuration: its layout, evaluated (``gpuplan check``), and how it compares with a
measured one. Sentences about it are ``explain``'s; the comparison with the optimum is ``api``'s.

The user fixes the SKU and GPU count and any of nodes, TP, PP, ZeRO stage, micro-batch and recompute;
the fastest layout that fits among the rest is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from ..errors import ArgumentError, GpuplanError, JobError
from ..inputs.layout_fields import pinned, words
from ..physics.context_parallel import is_all_to_all
from ..physics.layout import Recompute
from ..physics.recompute_modules import frees_beyond_flash
from ..results import MeasuredComparison, Plan
from .calibration import predict_layout, resolve_row
from .context import HardwareRow, JobContext
from .evaluation import best_layout, evaluate
from .frameworks import PREFERENCE
from .layout_grid import (
    EP_CHOICES,
    GRID_FIELDS,
    TP_CHOICES,
    Requested,
    cp_splits_heads,
    cp_splits_sequence,
    fewest_broken_rules,
    strategy_grid,
    tp_over_whole_nodes,
)
from .model_state import training_state
from .plans import plan_from
from .runnable import why_not_runnable


@dataclass(frozen=True)
class Fixed:
    """What the user fixed (None: gpuplan chooses): the layout dimensions of inputs/layout_fields.py that pin the
    layout (``pinned("layout")``), by the same names (tests/cli/test_layout_vocabulary.py holds them equal; their
    order here is the order a note lists what the user gave).

    ``zero`` alone means what ZeRO and FSDP mean by it: stages 1-3 shard over every data-parallel rank
    (ZeRO-0 over none); ``shard_degree`` asks for a hybrid shard (ZeRO-3 inside groups of that many
    ranks, replicated across them: HSDP, ZeRO++ hpZ)."""

    tp: int | None = None
    pp: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None  # none, selective, full (every layer) or layers:N (N of each stage)
    shard_degree: int | None = None
    cp: int | None = None
    ep: int | None = None
    virtual_stages: int | None = None
    expert_tp: int | None = None  # parallel folding: TP inside the experts, when it differs from tp
    grad_accum: int | None = None  # micro-batches per optimizer step (a free batch: any up to its cap)

    @property
    def requested(self) -> Requested:
        """What the layout grid must offer beyond solve's own choices."""
        # full recompute named: every layer (0) or N of each stage; otherwise the fewest that fit
        layers = None if self.recompute in (None, "none", "selective", "op") else Recompute.parse(self.recompute)[1]
        shared = {f.name: getattr(self, f.name) for f in fields(Requested) if f.name in _FIXED_NAMES}
        return Requested(**shared, hand_picked=True, recompute_layers=layers, op_recompute=self.recompute == "op")

    @classmethod
    def of(cls, request: Any) -> Fixed:
        """The layout a request (``CheckRequest``) pins: its fields of the same names."""
        return cls(**{name: getattr(request, name) for name in pinned("layout")})

    def grid_values(self, ctx: JobContext) -> dict[str, int | None]:
        """Fixed values as strategy-grid columns."""
        rc = None if self.recompute is None else int(Recompute.parse(self.recompute)[0])
        if rc == Recompute.SELECTIVE and ctx.job.tiled_attention and not frees_beyond_flash(ctx.modules):
            rc = int(Recompute.NONE)  # FlashAttention already drops the s^2 tensors selective recompute would
        if ctx.activation_reserve != "auto":
            rc = None  # with a fixed activation reserve, recompute changes nothing but time
        zero = 3 if self.zero is None and self.shard_degree is not None else self.zero
        return {
            "tp": self.tp,
            "pp": self.pp,
            "zero": zero,
            "micro_batch": self.micro_batch,
            "grad_accum": self.grad_accum,
            "recompute": rc,
            "cp": self.cp,
            "ep": self.ep,
            "virtual_stages": self.virtual_stages,
        }

    def mask(self, grid: np.ndarray, ctx: JobContext) -> np.ndarray:
        col = {name: grid[:, i] for i, name in enumerate(GRID_FIELDS)}
        keep = np.ones(len(grid), dtype=bool)
        for name, value in self.grid_values(ctx).items():
            if value is not None and name != "zero":
                keep &= col[name] == value
        zero = self.grid_values(ctx)["zero"]
        if zero is not None:
            same, alone = col["zero"] == zero, col["dp"] * col["cp"] == 1
            # A stage that shards over data-parallel ranks, on layouts that have some; only where the fixed
            # TP, PP and CP leave none is one rank (where every ZeRO stage is stage 0) taken, and said.
            sharded = keep & same & ~alone
            keep &= sharded if zero >= 1 and sharded.any() else (same | alone)
        if self.shard_degree is not None:
            keep &= col["shard"] == self.shard_degree
        elif self.zero is not None:
            keep &= col["shard"] == np.where(col["zero"] >= 1, col["dp"] * col["cp"], 1)  # full sharding
        return keep


_FIXED_NAMES = frozenset(f.name for f in fields(Fixed))


@dataclass(frozen=True)
class Checked:
    """A hand-picked configuration's plan and whether a framework runs it (and if not, why)."""

    plan: Plan
    runnable: bool
    because: list[str]


def check_row(ctx: JobContext, sku: str, gpus: int, nodes: int | None, spot: bool, fixed: Fixed) -> Checked:
    """The fastest fitting layout of ``gpus`` x ``sku`` that keeps what the user fixed, preferring one
    the job's framework runs; if none does, the best of those breaking the fewest of its rules, marked not
    runnable with the rules."""
    row = resolve_row(ctx, sku, gpus, nodes, spot)
    if ctx.peak_flops(row.sku) is None:
        raise JobError(
            f"{row.sku.name} has no dense {ctx.job.precision} rate in the catalog; use bf16 or another GPU",
            source=ctx.problem.source_path,
            field="job.precision",
        )
    _check_arguments(row, fixed)
    if fixed.expert_tp is not None and not ctx.shape.experts:
        raise ArgumentError(
            "expert tensor parallelism splits the routed experts of a mixture-of-experts model; this model is "
            "dense (no experts in its shapes), so there is nothing to split: drop --expert-tp, or use --tp",
            field="expert_tp",
        )
    # the layouts solve searches first (a fine-tune's recipe batch exactly: a measured configuration predicts
    # itself on them); only where none keeps what the user fixed, those rounding that batch up to the GPUs
    grid = np.zeros((0, len(GRID_FIELDS)), dtype=np.int64)
    for round_up in (False, True) if ctx.recipe_batch_sequences is not None else (False,):
        requested = replace(fixed.requested, hand_picked=round_up)
        grid = strategy_grid(ctx, row, runnable_only=False, requested=requested)
        grid = grid[fixed.mask(grid, ctx)]
        if len(grid):
            break
    if len(grid) == 0:
        raise _why_no_layout(ctx, row, {**fixed.grid_values(ctx), "shard_degree": fixed.shard_degree})
    runnable = grid[:, GRID_FIELDS.index("framework")] >= 0
    ev = evaluate(ctx, [row], [grid[runnable] if runnable.any() else grid[fewest_broken_rules(ctx, grid)]])
    plan = plan_from(ctx, row, ev, best_layout(ev))
    if runnable.any():
        return Checked(plan, True, [])
    named = ctx.job.framework if ctx.job.framework != "auto" else "none"
    plan.strategy = plan.strategy.model_copy(update={"framework": named})
    return Checked(plan, False, _broken_rules(ctx, plan))


# The parallel dimensions a hand-picked configuration may leave open, with their labels.
PARALLEL_DIMENSIONS = words("tp", "pp", "cp", "ep")


def added_dimensions(
    ctx: JobContext, sku: str, gpus: int, nodes: int | None, spot: bool, fixed: Fixed, plan: Plan
) -> tuple[dict[str, int], Checked | None]:
    """The parallel dimensions check added to a configuration that fixed some of its layout (TP 4 beside a
    user's ZeRO-3 and micro-batch 2), and the same configuration without them (each at 1): its checked plan,
    or None where no layout has them at 1."""
    if fixed == Fixed():
        return {}, None
    s = plan.strategy
    added = {name: getattr(s, name) for name in PARALLEL_DIMENSIONS if getattr(fixed, name) is None}
    added = {name: degree for name, degree in added.items() if degree > 1}
    if not added:
        return {}, None
    try:
        ones: dict[str, Any] = dict.fromkeys(added, 1)
        return added, check_row(ctx, sku, gpus, nodes, spot, replace(fixed, **ones))
    except GpuplanError:
        return added, None


def nearest_fixes(
    ctx: JobContext, sku: str, gpus: int, nodes: int | None, spot: bool, fixed: Fixed
) -> list[tuple[str, Plan]]:
    """For a configuration that does not fit: the closest changes that make it fit, each with its plan
    (full recompute, micro-batch 1, optimizer offload, activation offload, optimizer step in backward, then
    the fewest GPUs of the same SKU)."""
    tries: list[tuple[str, JobContext, int, int | None, Fixed]] = []
    if fixed.recompute != "full" and ctx.activation_reserve == "auto":
        tries.append(("full recompute", ctx, gpus, nodes, replace(fixed, recompute="full")))
    if fixed.micro_batch not in (None, 1):
        tries.append(("micro-batch 1", ctx, gpus, nodes, replace(fixed, micro_batch=1)))
    if ctx.job.offload != "optimizer":
        job = ctx.job.model_copy(update={"offload": "optimizer"})
        offloaded = replace(ctx, problem=ctx.problem.model_copy(update={"job": job}))
        tries.append(("optimizer offload to CPU", offloaded, gpus, nodes, fixed))
    if not ctx.job.activation_offload and ctx.activation_reserve == "auto":
        tries.append(("activation offload to CPU", _with_job(ctx, activation_offload=True), gpus, nodes, fixed))
    if not ctx.job.optimizer_in_backward and ctx.job.method == "full":
        in_backward = _with_job(ctx, optimizer_in_backward=True)
        in_backward = replace(in_backward, train=replace(ctx.train, optimizer_in_backward=True))
        tries.append(("optimizer step in backward", in_backward, gpus, nodes, fixed))
    # the training state's own levers: pure bf16 (no fp32 master copy: torchtune's default dtype bf16), an 8-bit
    # AdamW (bitsandbytes' AdamW8bit)
    if ctx.job.master_weights and ctx.job.method == "full" and ctx.job.precision != "fp32":
        tries.append(("pure bf16, no fp32 master weights", _with_state(ctx, master_weights=False), gpus, nodes, fixed))
    if ctx.job.optimizer == "adamw":
        tries.append(("8-bit AdamW", _with_state(ctx, optimizer="adamw8bit"), gpus, nodes, fixed))
    for more in (2 * gpus, 4 * gpus, 8 * gpus):
        tries.append((f"{more} GPUs", ctx, more, None, fixed))
    out = []
    for label, context, count, node_count, choice in tries:
        try:
            checked = check_row(context, sku, count, node_count, spot, choice)
        except GpuplanError:
            continue
        if checked.plan.fits and checked.runnable:
            out.append((label, checked.plan))
            if label.endswith("GPUs"):
                break  # the fewest GPUs that fit
    return out


def _with_state(ctx: JobContext, **updates) -> JobContext:
    """The same context with job fields the training state reads changed, and that state rebuilt."""
    changed = _with_job(ctx, **updates)
    return replace(changed, train=training_state(changed.job, ctx.shape, ctx.assumptions.lora_branch_traffic))


def _with_job(ctx: JobContext, **updates) -> JobContext:
    """The same context with job fields changed (for fields the training state does not read)."""
    job = ctx.job.model_copy(update=updates)
    return replace(ctx, problem=ctx.problem.model_copy(update={"job": job}))


def _check_arguments(row: HardwareRow, fixed: Fixed) -> None:
    """Flags that contradict each other or the hardware: bad input, not a verdict."""
    g = row.gpus_per_node
    if fixed.tp is not None and fixed.tp > g and (not tp_over_whole_nodes(fixed.tp, g) or row.gpus % fixed.tp):
        raise ArgumentError(
            f"tensor parallelism {fixed.tp} is larger than the {g} GPUs per node and is not whole nodes of "
            f"{row.gpus} GPUs: TP runs inside a node, or over whole nodes (a multiple of {g} that divides the GPUs; "
            "its collectives then cross the network)",
            field="tp",
        )


def _broken_rules(ctx: JobContext, plan: Plan) -> list[str]:
    """The rules the plan breaks: every one of the job's framework (the first alone cited TP with ZeRO-2
    where the user's own PP with ZeRO-3 broke another), or under auto the first of each framework."""
    layers = int(ctx.job.model.layers or 0)
    names = PREFERENCE if ctx.job.framework == "auto" else (ctx.job.framework,)
    most = 1 if len(names) > 1 else None
    return [
        rule
        for name in names
        for rule in why_not_runnable(
            name,
            plan.strategy,
            layers,
            ctx.job.method,
            ctx.job.optimizer,
            ctx.job.seq_len,
            ctx.job.precision,
            ctx.job.context_parallel,
        )[:most]
    ]


def _tp_impossible(tp: int, g: int, model) -> str | None:
    """Why a hand-picked TP cannot split this model on nodes of ``g`` GPUs (None: it can)."""
    if not model.heads:
        return "a model given by its parameter count alone has no TP (give its shapes or a preset)"
    kv = model.kv_heads or model.heads
    if model.heads % tp or kv % tp:
        return f"it must divide the {model.heads} attention heads and the {kv} key/value heads"
    if tp <= g and (tp not in TP_CHOICES or g % tp):
        return f"inside a node it must be one of {', '.join(map(str, TP_CHOICES))} dividing the {g} GPUs per node"
    return None


def _why_no_layout(ctx: JobContext, row: HardwareRow, fixed: dict) -> JobError:
    """The error for a hand-picked configuration no layout satisfies, naming the choice that rules it out."""
    model = ctx.job.model
    tp, pp = fixed.get("tp"), fixed.get("pp")
    if tp is not None and (why := _tp_impossible(tp, row.gpus_per_node, model)):
        return ArgumentError(f"TP {tp} is not possible here: {why}", field="tp")
    if pp is not None and pp > 1 and (not model.layers or 2 * pp > model.layers or row.gpus % (pp * (tp or 1))):
        if not model.layers:
            return ArgumentError(
                f"PP {pp} is not possible here: pipeline stages split the model's layers, and a model given by "
                "its parameter count alone has none (give its shapes or a preset)",
                field="pp",
            )
        fitting = [p for p in range(2, model.layers // 2 + 1) if row.gpus % (p * (tp or 1)) == 0]
        return ArgumentError(
            f"PP {pp} is not possible here: PP x TP must divide the {row.gpus} GPUs and each stage hold at least "
            f"two of the model's {model.layers} layers; "
            + (f"PP {', '.join(map(str, fitting))} would" if fitting else "no PP > 1 does on these GPUs"),
            field="pp",
        )
    cp = fixed.get("cp")
    if cp is not None and cp > 1 and (why := _cp_impossible(ctx, row, cp, tp or 1, pp or 1)):
        return ArgumentError(f"context parallelism {cp} is not possible here: {why}", field="cp")
    ep = fixed.get("ep")
    if ep is not None and ep > 1:
        return ArgumentError(
            f"expert parallelism {ep} is not possible here: the model must be a mixture of experts whose "
            f"routed experts ({int(ctx.shape.experts)}) and data-parallel x context-parallel ranks EP divides "
            f"(with --expert-tp, EP x expert TP divides the TP x DP x CP ranks: Megatron-Core's parallel folding); "
            f"EP is one of {', '.join(map(str, EP_CHOICES))}",
            field="ep",
        )
    v = fixed.get("virtual_stages")
    if v is not None and v > 1:
        return ArgumentError(
            f"{v} interleaved chunks per GPU are not possible here: they need PP > 1, no more PP x chunks than the "
            "layers plus 2 (the embedding and the output may hold a chunk each) and a micro-batch count that is a "
            "multiple of PP (Megatron-LM's rule)",
            field="virtual_stages",
        )
    zero, shard = fixed.get("zero"), fixed.get("shard_degree")
    if shard is not None and zero is not None and zero < 3:
        # a plan's own strategy, fed back: ZeRO-1/2 shard over every data-parallel rank, ZeRO-0 over none
        return ArgumentError(
            f"ZeRO-{zero} shards over {'no rank' if zero == 0 else 'every data-parallel rank'}, so its shard degree "
            f"is {'1' if zero == 0 else 'the data-parallel degree (DP x CP)'}, and no layout here has that as "
            f"{shard}; a shard group smaller than that is a hybrid ZeRO-3 shard (--zero 3 --shard-degree {shard}), "
            "or drop --shard-degree",
            field="shard_degree",
        )
    if shard is not None:
        return ArgumentError(
            f"a hybrid shard over {fixed['shard_degree']} GPUs is not possible here: it must divide the data-parallel "
            "ranks, be smaller than them and fit inside a node (GPUs per node / TP), on more than one node",
            field="shard_degree",
        )
    if ctx.job.offload == "optimizer" and fixed.get("zero") is not None and fixed["zero"] < 2:
        return ArgumentError(
            "optimizer offload (ZeRO-Offload) runs with ZeRO-2 or ZeRO-3, or a single data-parallel rank; "
            "choose --zero 2 or 3, or --offload none",
            field="offload",
        )
    if ctx.job.optimizer_in_backward:
        return JobError(
            f"optimizer_in_backward steps the optimizer once per backward pass, so it needs one micro-batch per step "
            f"and no pipeline: no layout of {row.gpus} GPUs makes data-parallel ranks x micro-batch equal the global "
            "batch with PP 1 (torchtune and torchtitan refuse gradient accumulation with it); change "
            "job.global_batch or the micro-batch, or turn optimizer_in_backward off",
            source=ctx.problem.source_path,
            field="job.optimizer_in_backward",
        )
    given = ", ".join(f"{k}={v}" for k, v in fixed.items() if v is not None) or "any options"
    return _batch_error(ctx, row, given)


def _cp_impossible(ctx: JobContext, row: HardwareRow, cp: int, tp: int, pp: int) -> str | None:
    """Which rule a hand-picked CP degree breaks (None: none), naming the job's exchange (job.context_parallel)."""
    exchange = ctx.job.context_parallel
    ulysses = is_all_to_all(exchange)
    fix = (
        "choose --cp among the degrees that do, or set job.context_parallel (ring: 2 x CP chunks; all_to_all: "
        "CP shards, the query heads split over TP x CP)"
    )
    if not ctx.job.tiled_attention or not ctx.shape.has_shapes:
        return (
            "it needs fused attention (job.attention: flash, cudnn or triton) and the model's shapes (heads, layers); "
            + fix
        )
    s = ctx.job.seq_len
    if not cp_splits_sequence(ctx, cp):
        chunks = f"{cp} equal shards" if ulysses else f"2 x {cp} equal chunks (causal load balancing)"
        fitting = [c for c in range(2, min(s, 4 * cp) + 1) if cp_splits_sequence(ctx, c)][:6]
        return (
            f"job.context_parallel {exchange} splits the sequence of {s:,} tokens (job.seq_len) into {chunks}, "
            f"which {s:,} is not a multiple of; CP {', '.join(map(str, fitting)) or 'none'} would; " + fix
        )
    if ulysses and not cp_splits_heads(ctx, tp, cp):
        model = ctx.job.model
        return (
            f"job.context_parallel {exchange} (Ulysses) gives each of the TP x CP = {tp * cp} ranks a share of the "
            f"{model.heads} query heads ({model.kv_heads or model.heads} KV heads), which they do not split into "
            "(the query heads must be a multiple of TP x CP; the KV heads per TP rank a multiple of CP or a divisor of "
            "it: DeepSpeed's UlyssesSPAttentionHF); " + fix
        )
    if row.gpus % (tp * pp * cp):
        return (
            f"TP x PP x CP = {tp} x {pp} x {cp} does not divide the {row.gpus} GPUs (the data-parallel ranks are what "
            "is left); choose a CP that divides the GPUs with the other degrees, or another GPU count"
        )
    return None


def _batch_error(ctx: JobContext, row: HardwareRow, given: str) -> JobError:
    """No layout of the row with the ``given`` choices makes the job's global batch: the given one, a
    fine-tune's recipe batch, or a free batch under its cap."""
    batch = ctx.job.global_batch_sequences
    if batch is None and ctx.recipe_batch_sequences is not None:
        return JobError(
            f"every layout of {row.gpus} GPUs with {given} makes a global batch other than the fine-tuning recipes' "
            f"{ctx.recipe_batch_sequences:,} sequences (or the least above it its data-parallel ranks make), which "
            "gpuplan plans when job.global_batch is not set; pick more TP or PP or a smaller micro-batch, or set "
            "job.global_batch (or 'free')",
            source=ctx.problem.source_path,
            field="job.global_batch",
        )
    if batch is None:
        return JobError(
            f"every layout of {row.gpus} GPUs with {given} makes a global batch above {ctx.max_free_batch_sequences:,} "
            "sequences, the most gpuplan chooses when job.global_batch is not set (twice the compute-optimal batch); "
            "set job.global_batch to run a larger one, or pick a smaller micro-batch",
            source=ctx.problem.source_path,
            field="job.global_batch",
        )
    return JobError(
        f"no layout of {row.gpus} GPUs with {given} divides the global batch of {batch} sequences (data-parallel "
        "ranks x micro-batch must divide it); change job.global_batch, the GPU count or the micro-batch",
        source=ctx.problem.source_path,
        field="job.global_batch",
    )


def versus_measured(ctx: JobContext, sku: str, gpus: int, nodes: int | None, plan: Plan) -> MeasuredComparison | None:
    """This configuration against the first measured one, or None (nothing measured, or this is it)."""
    row = resolve_row(ctx, sku, gpus, nodes, plan.spot)
    if not ctx.calibration.active or ctx.is_measured(row):
        return None
    m = ctx.job.measured[0]
    base_row = resolve_row(ctx, m.sku, m.gpus, m.nodes)
    ev, i = predict_layout(ctx, base_row)
    base = plan_from(ctx, base_row, ev, i)
    a, b = base_row.sku, row.sku
    ratios = {
        "dense_compute": (ctx.peak_flops(b) or 0) / (ctx.peak_flops(a) or 1),
        "hbm_bandwidth": b.hbm_bandwidth_gb_per_s / a.hbm_bandwidth_gb_per_s,
        "intra_node_link": b.intra_node_bandwidth_gb_per_s / a.intra_node_bandwidth_gb_per_s,
    }
    if base.bound == "host":  # waits for the host's launches: a faster GPU does not shorten them
        ratios["host"] = 1.0
    carrying = {"compute": "dense_compute", "memory": "hbm_bandwidth", "network": "intra_node_link", "host": "host"}
    carried = carrying[base.bound]
    mine, theirs = plan.strategy, base.strategy
    differences = [
        f"{label} {getattr(mine, name)}, measured {getattr(theirs, name)}"
        for name, label in _LAYOUT_LABELS.items()
        if getattr(mine, name) != getattr(theirs, name)
    ]
    return MeasuredComparison(
        measured=f"{base.gpus} x {a.name}",
        measured_tokens_per_s=base.tokens_per_s,
        measured_bound=base.bound,
        speedup=plan.tokens_per_s / base.tokens_per_s,
        ratios=ratios,
        carried_by=carried,
        cost_ratio=(plan.cost_usd.p50 / base.cost_usd.p50) if plan.cost_usd and base.cost_usd else None,
        efficiency_class_ratio=ctx.compute_efficiency(b) / ctx.compute_efficiency(a),
        exposed_network_share=base.time_breakdown_s["network"] / base.step_s if base.step_s else 0.0,
        layout_differences=differences,
    )


# The layout choices that change the work per token or its overlap, as versus_measured names them.
_LAYOUT_LABELS = words("tp", "pp", "cp", "ep", "zero", "recompute", "offload", "virtual_stages", "micro_batch")
