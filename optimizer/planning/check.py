"""A hand-picked configuration: its layout, evaluated (``gpuplan check``), and how it compares with a
measured one. Sentences about it are ``explain``'s; the comparison with the optimum is ``api``'s.

The user fixes the SKU and GPU count and any of nodes, TP, PP, ZeRO stage, micro-batch and recompute;
the fastest layout that fits among the rest is chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentError, JobError
from ..physics.layout import Recompute
from ..results import MeasuredComparison, Plan
from .calibration import predict_layout, resolve_row
from .candidates import GRID_FIELDS, PP_CHOICES, TP_CHOICES, best_layout, evaluate, strategy_grid
from .context import HardwareRow, JobContext
from .plans import plan_from


@dataclass(frozen=True)
class Fixed:
    """What the user fixed (None: gpuplan chooses). Names are the API's parameter names."""

    tp: int | None = None
    pp: int | None = None
    zero: int | None = None
    micro_batch: int | None = None
    recompute: str | None = None

    def grid_values(self, ctx: JobContext) -> dict[str, int | None]:
        """Fixed values as strategy-grid columns."""
        rc = None if self.recompute is None else int(Recompute.from_label(self.recompute))
        if rc == Recompute.SELECTIVE and ctx.job.attention == "flash":
            rc = int(Recompute.NONE)  # FlashAttention already drops the s^2 tensors selective recompute would
        if ctx.activation_reserve != "auto":
            rc = None  # with a fixed activation reserve, recompute changes nothing but time
        return {"tp": self.tp, "pp": self.pp, "zero": self.zero, "micro_batch": self.micro_batch, "recompute": rc}


def check_row(ctx: JobContext, sku: str, gpus: int, nodes: int | None, spot: bool, fixed: Fixed) -> Plan:
    """The plan of the fastest fitting layout of ``gpus`` x ``sku`` that keeps what the user fixed."""
    row = resolve_row(ctx, sku, gpus, nodes, spot)
    if ctx.peak_flops(row.sku) is None:
        raise JobError(
            f"{row.sku.name} has no dense {ctx.job.precision} rate in the catalog; use bf16 or another GPU",
            field="job.precision",
        )
    if fixed.tp is not None and fixed.tp > row.gpus_per_node:
        raise ArgumentError(
            f"tensor parallelism {fixed.tp} is larger than the {row.gpus_per_node} GPUs per node; "
            "TP runs inside a node: lower TP or use more GPUs per node",
            field="tp",
        )
    values = fixed.grid_values(ctx)
    grid = strategy_grid(ctx, row)
    mask = np.ones(len(grid), dtype=bool)
    for name, value in values.items():
        if value is not None:
            mask &= grid[:, GRID_FIELDS.index(name)] == value
    grid = grid[mask]
    if len(grid) == 0:
        raise _why_no_layout(ctx, row, values)
    ev = evaluate(ctx, [row], [grid])
    return plan_from(ctx, row, ev, best_layout(ev))


def _why_no_layout(ctx: JobContext, row: HardwareRow, fixed: dict) -> JobError:
    """The error for a hand-picked configuration no layout satisfies, naming the choice that rules it out."""
    model = ctx.job.model
    tp, pp = fixed.get("tp"), fixed.get("pp")
    if tp is not None and (
        tp not in TP_CHOICES
        or row.gpus_per_node % tp
        or (model.heads and (model.heads % tp or (model.kv_heads or model.heads) % tp))
    ):
        return ArgumentError(
            f"TP {tp} is not possible here: it must be one of {', '.join(map(str, TP_CHOICES))}, divide the "
            f"{row.gpus_per_node} GPUs per node"
            + (" and the attention (and key/value) heads" if model.heads else " (and a params-only model has no TP)"),
            field="tp",
        )
    if (
        pp is not None
        and pp > 1
        and (pp not in PP_CHOICES or not model.layers or 2 * pp > model.layers or row.gpus % pp)
    ):
        return ArgumentError(
            f"PP {pp} is not possible here: it must be one of {', '.join(map(str, PP_CHOICES))}, divide the "
            f"{row.gpus} GPUs and leave at least two layers per stage (the model needs its layers given)",
            field="pp",
        )
    batch = ctx.job.global_batch_sequences
    if batch is not None:
        given = ", ".join(f"{k}={v}" for k, v in fixed.items() if v is not None) or "any options"
        return JobError(
            f"no layout of {row.gpus} GPUs with {given} divides the global batch of {batch} sequences (data-parallel "
            "ranks x micro-batch must divide it); change job.global_batch, the GPU count or the micro-batch",
            source=ctx.problem.source_path,
            field="job.global_batch",
        )
    return ArgumentError(
        "no valid layout for these options: optimizer offload needs ZeRO-2/3 or a single "
        "data-parallel rank, TP must divide the GPUs per node and the heads, PP the layers",
        field="offload",
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
    carried = {"compute": "dense_compute", "memory": "hbm_bandwidth", "network": "intra_node_link"}[base.bound]
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
    )
