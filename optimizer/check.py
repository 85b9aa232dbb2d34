"""``check``: the verdict on a hand-picked configuration (DESIGN section 1).

The user fixes the SKU and GPU count and any of nodes, TP, PP, ZeRO stage, micro-batch and
recompute; gpuplan chooses the rest (the fastest layout that fits), says what it chose, and
reports fit, time, cost and, when asked, the distance to the optimum under the same constraints.
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .candidates import GRID_FIELDS, PP_CHOICES, TP_CHOICES, best_layout, evaluate, strategy_grid
from .context import HardwareRow, JobContext, build_context, capacity_bytes
from .errors import JobError
from .loading import find_sku, offers_for, problem_catalog
from .physics.memory import GIB, RECOMPUTE_CODES
from .plans import plan_from
from .results import CheckResult
from .schema import Catalog, Problem
from .units import fmt_bytes




def resolve_row(ctx: JobContext, sku_name: str, gpus: int, nodes: Optional[int], spot: bool = False) -> HardwareRow:
    """The SKU (and its cheapest offer, if priced) laid out on the fewest nodes that hold ``gpus``."""
    if gpus < 1:
        raise JobError("must be at least 1", field="--gpus")
    sku = find_sku(ctx.catalog, sku_name)
    offers = sorted(offers_for(ctx.catalog, sku_name), key=lambda o: (o.price_usd_per_gpu_hour, o.name))
    if spot:
        offers = [o for o in offers if o.spot_price_usd_per_gpu_hour]
        if not offers:
            raise JobError(f"no offer in catalog '{ctx.catalog.name}' has a spot price for {sku_name}", field="--spot")
    offer = offers[0] if offers else None
    per_node_max = offer.gpus_per_node if offer else sku.gpus_per_node
    nodes = nodes or math.ceil(gpus / per_node_max)
    if nodes < 1:
        raise JobError("must be at least 1", field="--nodes")
    if gpus % nodes:
        raise JobError(f"{gpus} GPUs do not split evenly over {nodes} nodes; pick a GPU count divisible by the node count",
                       field="--gpus")
    per_node = gpus // nodes
    if per_node > per_node_max:
        raise JobError(f"{per_node} GPUs per node exceeds the {per_node_max} a {sku.name} node holds; "
                       f"use --nodes {math.ceil(gpus / per_node_max)} or fewer GPUs", field="--nodes")
    return HardwareRow(sku, offer, nodes, per_node, spot)


def check(
    problem: Problem,
    sku: str,
    gpus: int,
    *,
    nodes: Optional[int] = None,
    tp: Optional[int] = None,
    pp: Optional[int] = None,
    zero: Optional[int] = None,
    micro_batch: Optional[int] = None,
    recompute: Optional[str] = None,
    offload: Optional[str] = None,
    catalog: Optional[Catalog] = None,
    compare: bool = True,
    spot: bool = False,
) -> CheckResult:
    """Does this configuration fit, how fast and how dear is it, and how far from the best plan?"""
    catalog = catalog or problem_catalog(problem)
    if offload is not None:
        problem = problem.model_copy(update={"job": problem.job.model_copy(update={"offload": offload})})
    ctx = build_context(problem, catalog)
    row = resolve_row(ctx, sku, gpus, nodes, spot)
    if ctx.peak_flops(row.sku) is None:
        raise JobError(f"{row.sku.name} has no dense {problem.job.precision} rate in the catalog; "
                       "use bf16 or another GPU", field="job.precision")
    if tp is not None and tp > row.gpus_per_node:
        raise JobError(f"tensor parallelism {tp} is larger than the {row.gpus_per_node} GPUs per node; "
                       "TP runs inside a node: lower --tp or use more GPUs per node", field="--tp")
    grid = strategy_grid(ctx, row)
    rc_code = None if recompute is None else RECOMPUTE_CODES[recompute]
    if rc_code == 1 and ctx.job.attention == "flash":
        rc_code = 0  # FlashAttention already drops the s^2 tensors selective recompute would recompute
    if ctx.activation_reserve != "auto":
        rc_code = None  # with a fixed activation reserve, recompute changes nothing but time
    fixed = {"tp": tp, "pp": pp, "zero": zero, "micro_batch": micro_batch, "recompute": rc_code}
    mask = np.ones(len(grid), dtype=bool)
    for name, value in fixed.items():
        if value is not None:
            mask &= grid[:, GRID_FIELDS.index(name)] == value
    grid = grid[mask]
    if len(grid) == 0:
        field, reason = _why_no_layout(ctx, row, fixed)
        raise JobError(reason, source=problem.source_path if field.startswith("job.") else None, field=field)
    ev = evaluate(ctx, [row], [grid])
    plan = plan_from(ctx, row, ev, best_layout(ev))

    chosen = []
    s = plan.strategy
    sharding = f"ZeRO-{s.zero_stage} over {s.shard_degree} GPUs" if s.dp > 1 else "no data parallelism to shard over"
    auto = {"tp": f"TP {s.tp}", "pp": f"PP {s.pp}", "zero": sharding,
            "micro_batch": f"micro-batch {s.micro_batch} (x{s.grad_accum} accumulation)",
            "recompute": f"recompute {s.recompute}"}
    for name, text in auto.items():
        if fixed.get(name) is None:
            chosen.append(text)
    if nodes is None:
        chosen.append(f"{row.nodes} node(s) of {row.gpus_per_node}")
    notes = _notes(ctx, row, plan)
    result = CheckResult(plan=plan, fits=plan.fits, chosen=chosen, notes=notes,
                         vs_measured=_versus_measured(ctx, row, plan))
    if compare:
        _compare_with_optimum(problem, catalog, result)
    return result


def _why_no_layout(ctx: JobContext, row: HardwareRow, fixed: dict) -> tuple[str, str]:
    """(field, reason) for a hand-picked configuration no layout satisfies."""
    model = ctx.job.model
    tp, pp = fixed.get("tp"), fixed.get("pp")
    if tp is not None and (tp not in TP_CHOICES or row.gpus_per_node % tp
                           or (model.heads and (model.heads % tp or (model.kv_heads or model.heads) % tp))):
        return "--tp", (f"TP {tp} is not possible here: it must be one of {', '.join(map(str, TP_CHOICES))}, divide the "
                f"{row.gpus_per_node} GPUs per node" + (" and the attention (and key/value) heads" if model.heads else
                                                         " (and a params-only model has no TP)"))
    if pp is not None and pp > 1 and (pp not in PP_CHOICES or not model.layers or 2 * pp > model.layers
                                      or row.gpus % pp):
        return "--pp", (f"PP {pp} is not possible here: it must be one of {', '.join(map(str, PP_CHOICES))}, divide the "
                f"{row.gpus} GPUs and leave at least two layers per stage (the model needs its layers given)")
    batch = ctx.job.global_batch_sequences
    if batch is not None:
        return "job.global_batch", (f"no layout of {row.gpus} GPUs with {', '.join(f'{k}={v}' for k, v in fixed.items() if v is not None) or 'any options'} "
                f"divides the global batch of {batch} sequences (data-parallel ranks x micro-batch must divide it); "
                "change job.global_batch, the GPU count or the micro-batch")
    return "--offload", ("no valid layout for these options: optimizer offload needs ZeRO-2/3 or a single "
                         "data-parallel rank, TP must divide the GPUs per node and the heads, PP the layers")


def _notes(ctx: JobContext, row: HardwareRow, plan) -> list[str]:
    notes = []
    if row.offer is None:
        notes.append(f"no offer in catalog '{ctx.catalog.name}' prices {row.sku.name}: cost is null; "
                     "pass --catalog with a price sheet that lists it")
    # Unit ambiguity: does the verdict change between the label read as GB and the reported GiB?
    label = row.sku.memory_label_bytes
    reported = row.sku.memory_reported_bytes
    used, basis = capacity_bytes(row, ctx.assumptions.memory_basis)
    need = plan.memory_gib.total * GIB
    if reported and (need <= label) != (need <= reported):
        notes.append(
            f"the verdict depends on the memory unit: the {row.sku.name} label reads {fmt_bytes(label)}, the "
            f"device reports {fmt_bytes(reported)}; this check used the {basis} figure ({fmt_bytes(used)})")
    if ctx.activation_reserve != "auto":
        notes.append("activations are the fixed job.activation_reserve, not computed from shapes")
    return notes


def _versus_measured(ctx: JobContext, row: HardwareRow, plan) -> Optional[dict]:
    """How this configuration compares with the first measured one, and which hardware ratio carries it."""
    if not ctx.calibration.active or ctx.is_measured(row):
        return None
    from .calibration import measured_row  # calibration sits above check's imports

    m = ctx.job.measured[0]
    base_row = measured_row(ctx, m.sku, m.gpus, m.nodes)
    from .calibration import predict_layout

    ev, i = predict_layout(ctx, base_row)
    base = plan_from(ctx, base_row, ev, i)
    a, b = base_row.sku, row.sku
    ratios = {
        "dense_compute": (ctx.peak_flops(b) or 0) / (ctx.peak_flops(a) or 1),
        "hbm_bandwidth": b.hbm_bandwidth_gb_per_s / a.hbm_bandwidth_gb_per_s,
        "intra_node_link": b.intra_node_bandwidth_gb_per_s / a.intra_node_bandwidth_gb_per_s,
    }
    carried = {"compute": "dense_compute", "memory": "hbm_bandwidth", "network": "intra_node_link"}[base.bound]
    speedup = plan.tokens_per_s / base.tokens_per_s
    out = {
        "measured": f"{base.gpus} x {a.name}", "measured_tokens_per_s": base.tokens_per_s,
        "measured_bound": base.bound, "speedup": speedup, "ratios": ratios, "carried_by": carried,
        "cost_ratio": (plan.cost_usd.p50 / base.cost_usd.p50) if plan.cost_usd and base.cost_usd else None,
    }
    share = base.time_breakdown_s["network"] / base.step_s if base.step_s else 0.0
    verdict = "faster" if speedup > 1 else "slower"
    money = ""
    if out["cost_ratio"] is not None:
        money = f" and {'cheaper' if out['cost_ratio'] < 1 else 'dearer'} ({out['cost_ratio']:.2f}x the cost)"
    ctx_note = (f"vs the measured {out['measured']} ({base.tokens_per_s:,.0f} tokens/s, {base.bound}-bound): "
                f"{speedup:.2f}x {verdict}{money}; carried by the {carried.replace('_', ' ')} ratio "
                f"{ratios[carried]:.2f}x (compute {ratios['dense_compute']:.2f}x, HBM {ratios['hbm_bandwidth']:.2f}x, "
                f"link {ratios['intra_node_link']:.2f}x)")
    class_ratio = ctx.compute_efficiency(b) / ctx.compute_efficiency(a)
    if carried == "dense_compute" and abs(class_ratio - 1) > 0.01:
        ctx_note += (f"; x{class_ratio:.2f} for the efficiency class ({b.form_factor} {ctx.compute_efficiency(b) / ctx.calibration.compute:.2f}"
                     f" vs {a.form_factor} {ctx.compute_efficiency(a) / ctx.calibration.compute:.2f} default, both scaled by the measured x{ctx.calibration.compute:.2f})")
    if share > 0.02:
        ctx_note += f"; {share:.0%} of the measured step is exposed communication, which the faster link shrinks"
    out["summary"] = ctx_note
    return out


def _compare_with_optimum(problem: Problem, catalog: Catalog, result: CheckResult) -> None:
    from .solver.plan import plan as solve_plan  # the solver layer sits above check

    try:
        answer = solve_plan(problem, catalog=catalog, runners_up=False)
    except JobError as exc:  # e.g. a hardware-only catalog: the verdict stands, the comparison cannot be made
        result.notes.append(f"no comparison with the best plan: {exc.reason}")
        return
    if answer.best is None:
        return
    result.optimum = answer.best
    mine = result.plan
    if mine.cost_usd is not None and answer.best.cost_usd is not None:
        result.extra_cost_vs_optimum_usd = round(mine.cost_usd.p50 - answer.best.cost_usd.p50, 2)
    if mine.cost_usd is not None:
        result.dominated_by = [
            p for p in answer.frontier
            if p.cost_usd is not None and p.hours.p50 <= mine.hours.p50 and p.cost_usd.p50 <= mine.cost_usd.p50
            and (p.hours.p50 < mine.hours.p50 or p.cost_usd.p50 < mine.cost_usd.p50)
        ]

