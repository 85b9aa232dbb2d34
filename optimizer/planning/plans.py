"""Turning one evaluated layout into a ``Plan`` (the output contract), with deadline and budget verdicts."""

from __future__ import annotations

import math

import numpy as np

from ..inputs.requests import SPOT_SUFFIX
from ..inputs.units import fmt_bytes
from ..physics.constants import GIB
from ..physics.cost import run_cost_usd
from ..physics.memory import MEMORY_EDGE_SHARE, MEMORY_HEADROOM_DEFAULT, headroom_bytes
from ..physics.precision import LOW_PRECISIONS
from ..results import MemoryGiB, Plan, Quantiles
from .context import HardwareRow, JobContext, capacity_bytes
from .evaluation import Evaluation
from .uncertainty import p90_hours, sources


def _f(x) -> float:
    return float(x)


def meets_deadline(ctx: JobContext, hours_p50: float, hours_p90: float) -> bool | None:
    """Whether a plan's hours at the deadline's quantile are within the deadline (None without one): the one
    test ``check`` and the solver share (the solver had compared whole seconds, rounding the hours up and the
    deadline down, and excluded a plan 0.1 s inside it that check accepted)."""
    c = ctx.constraints
    if c.deadline_s is None:
        return None
    hours = hours_p90 if c.deadline_quantile == "p90" else hours_p50
    return hours * 3600.0 <= c.deadline_s + 1e-6


def plan_from(ctx: JobContext, row: HardwareRow, ev: Evaluation, i: int) -> Plan:
    mem, timing = ev.memory, ev.timing
    capacity, basis = capacity_bytes(row, ctx.assumptions.memory_basis)
    hours_p50 = _f(ev.hours[i])
    tokens_per_s = _f(timing.tokens_per_s[i])
    hours_p90 = p90_hours(ctx, row, tokens_per_s)
    peak = ctx.peak_flops(row.sku) or math.nan
    mfu = timing.model_flops_per_token * tokens_per_s / (row.gpus * peak)
    price = row.price_usd_per_gpu_hour
    cost = None
    if price is not None:
        cost_p50 = _f(ev.cost_usd[i])
        # billed like the p50: whole increments of the p90 hours (scaling the p50 by the hours' ratio charged
        # a p90 still inside the p50's billed day for more than that day)
        increment = row.offer.billing_increment_s if row.offer else 1.0
        cost_p90 = max(cost_p50, float(run_cost_usd(price, row.billed_gpus, hours_p90, increment)))
        cost = Quantiles(p50=round(cost_p50, 2), p90=round(cost_p90, 2))
    c = ctx.constraints
    meets = meets_deadline(ctx, hours_p50, hours_p90)
    within = None if c.budget_usd is None or cost is None else cost.p50 <= c.budget_usd + 1e-6
    breakdown = {
        "compute": _f(timing.compute_s[i]),
        "memory": _f(timing.memory_s[i]),
        "network": max(0.0, _f(timing.network_s[i])),
        "bubble": _f(timing.bubble_s[i]),
        # the optimizer step once a step, on the GPUs or the host (physics/time.py _update_s), busy time too
        "optimizer_step": _f(np.broadcast_to(timing.update_s, np.shape(timing.step_s))[i]),
    }
    if ctx.shape.experts:  # MoE: the exposed expert all-to-all, a part of "network"
        breakdown["all_to_all"] = _f(np.broadcast_to(timing.all_to_all_s, np.shape(timing.step_s))[i])
        # and the host launch waits of its layers (docs/design.md 5.11), a part of the micro-batches' busy time
        breakdown["moe_host"] = _f(np.broadcast_to(timing.moe_host_s, np.shape(timing.step_s))[i])
        loop_s = _f(np.broadcast_to(timing.expert_loop_s, np.shape(timing.step_s))[i])
        if loop_s > 0:  # transformers' eager experts loop (assumptions.experts_implementation), busy time too
            breakdown["expert_loop"] = loop_s
    fetch_s = _f(np.broadcast_to(timing.module_fetch_s, np.shape(timing.step_s))[i])
    if fetch_s > 0:  # DeepSpeed ZeRO-3's per-module fetches (physics/zero3_hooks.py), busy time too
        breakdown["zero3_fetch"] = fetch_s
    launch_s = _f(np.broadcast_to(timing.launch_host_s, np.shape(timing.step_s))[i])
    if launch_s > 0:  # eager operators the host issues beyond the GPU's work (physics/host_launch.py), busy time too
        breakdown["host_launch"] = launch_s
    if ctx.train.quantized_base:  # QLoRA: the NF4 dequantisation kernels, a part of the busy time
        breakdown["dequant"] = _f(np.broadcast_to(timing.dequant_s, np.shape(timing.step_s))[i])
    if ctx.train.lora_targets:  # LoRA: its low-rank branches' kernels (physics/adapters.py), busy time too
        breakdown["adapters"] = _f(np.broadcast_to(timing.adapter_s, np.shape(timing.step_s))[i])
    if ctx.job.attention == "eager":  # the s x s scores' element-wise kernels (physics/eager_attention.py), busy too
        breakdown["eager_attention"] = _f(np.broadcast_to(timing.eager_attention_s, np.shape(timing.step_s))[i])
    loss_s = _f(np.broadcast_to(timing.loss_s, np.shape(timing.step_s))[i])
    if loss_s > 0:  # the cross-entropy's kernels over the logits (physics/loss_time.py), busy time too
        breakdown["loss"] = loss_s
    if ctx.job.precision in LOW_PRECISIONS:  # FP8/NVFP4: the operand casts (physics/precision.py), busy time too
        breakdown["casts"] = _f(np.broadcast_to(timing.cast_s, np.shape(timing.step_s))[i])
    return Plan(
        sku=row.sku.name,
        offer=(row.offer.name + (SPOT_SUFFIX if row.spot else "")) if row.offer else None,
        spot=row.spot,
        provider=row.offer.provider if row.offer else None,
        nodes=row.nodes,
        gpus_per_node=row.gpus_per_node,
        gpus_per_host=row.gpus_per_host if row.gpus_per_host < row.gpus_per_node else None,
        host_memory_gib=_f(ev.host_bytes[i]) / GIB,
        host_capacity_gib=_f(ev.host_capacity_bytes[i]) / GIB,
        gpus=row.gpus,
        strategy=ev.strategy(i),
        memory_gib=MemoryGiB(
            weights=_f(mem.weights[i]) / GIB,
            gradients=_f(mem.gradients[i]) / GIB,
            optimizer=_f(mem.optimizer[i]) / GIB,
            activations=_f(mem.activations[i]) / GIB,
            reserve=_f(mem.reserve[i]) / GIB,
            optimizer_step=_f(mem.optimizer_step[i]) / GIB,
            not_concurrent=_f(mem.not_concurrent[i]) / GIB,
            total=_f(mem.total[i]) / GIB,
            capacity=capacity / GIB,
            basis=basis,
        ),
        fits=bool(ev.fits[i]),
        tokens_per_s=tokens_per_s,
        mfu=mfu,
        scaling_efficiency=_f(timing.scaling_efficiency[i]),
        bound=timing.bound_at(i),
        step_s=_f(timing.step_s[i]),
        time_breakdown_s=breakdown,
        hours=Quantiles(p50=hours_p50, p90=hours_p90),
        gpu_hours=hours_p50 * row.gpus,
        price_usd_per_gpu_hour=price,
        cost_usd=cost,
        meets_deadline=meets,
        within_budget=within,
        spread_source=sources(ctx, row),
    )


def headroom_gib(setting: str | float | None, capacity_gib: float) -> float:
    """The GiB per GPU a plan of ``capacity_gib`` must leave free under ``constraints.memory_headroom``."""
    return float(headroom_bytes(setting, capacity_gib * GIB)) / GIB


def memory_left_gib(plan: Plan, setting: str | float | None) -> float:
    """GiB per GPU a plan leaves free beyond its peak and the headroom (negative: short by that much)."""
    m = plan.memory_gib
    return m.capacity - m.total - headroom_gib(setting, m.capacity)


def at_the_edge(plan: Plan, setting: str | float | None) -> bool:
    """A plan that fits with less than ``MEMORY_EDGE_SHARE`` of its GPU's memory left beyond the headroom."""
    left = memory_left_gib(plan, setting)
    return plan.fits and 0.0 <= left < MEMORY_EDGE_SHARE * plan.memory_gib.capacity


def headroom_text(setting: str | float | None) -> str:
    """``10% of each GPU's usable memory`` or ``8.0 GB (7.5 GiB) per GPU`` (None: the default's)."""
    setting = MEMORY_HEADROOM_DEFAULT if setting is None else setting
    return f"{setting} of each GPU's usable memory" if isinstance(setting, str) else f"{fmt_bytes(setting)} per GPU"


def headroom_note(setting: str | float | None, plan: Plan | None) -> str:
    """The memory headroom in force (``constraints.memory_headroom``; None: the default), always stated (an
    assumption every fit depends on), and whether ``plan`` sits at the edge of its GPU's memory."""
    source = "default" if setting is None else "constraints.memory_headroom"
    note = (
        f"memory headroom {headroom_text(setting)} ({source}; --headroom 10% or 8GiB): a plan fits only if its peak "
        "plus the headroom is within the usable capacity"
    )
    if plan is not None and at_the_edge(plan, setting):
        m = plan.memory_gib
        note += (
            f"; this plan is at the edge: {m.total:,.1f} of {m.capacity:,.1f} GiB per GPU leaves "
            f"{memory_left_gib(plan, setting):,.1f} GiB beyond the headroom, under {MEMORY_EDGE_SHARE:.0%} of its "
            "memory (an allocator spike or a longer batch can stop the run; a larger --headroom plans with more free)"
        )
    return note
