"""The notes under an answer: how a check compares with a measured configuration, what its precision, MoE
dispatch, calibration and batch assume, the layouts outside the search, and the fixes and sentences the API
adds for what the user gave."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..inputs import units
from ..inputs.catalog import find_sku
from ..inputs.schema import Sku, Strategy
from ..inputs.units import YEAR_S, fmt_bytes, parse_count
from ..physics.attention import KERNEL_NAMES
from ..physics.constants import (
    DEFAULT_COMPUTE_EFFICIENCY,
    FALLBACK_COMPUTE_EFFICIENCY,
    GIB,
    LOW_PRECISION_GEMM_CEILING_RATIO,
    ZERO3_MODULE_FETCH_S,
)
from ..physics.efficiency import COMPILED_RATIO, FITTED_BASE, family_of
from ..physics.host_launch import HOST_S_PER_OP
from ..physics.precision import LOW_PRECISIONS
from ..planning.calibration import predict, resolve_row
from ..planning.candidates import CandidateTable, not_rentable
from ..planning.context import Calibration, JobContext
from ..planning.frameworks import CODES, FRAMEWORKS
from ..planning.labels import grouped_gemm_per_expert
from ..planning.layout_grid import (
    CONTEXT_PARALLEL_MIN_SEQ_LEN,
    CP_CHOICES,
    MICRO_BATCH_CHOICES,
    PP_CHOICES,
    VIRTUAL_STAGE_CHOICES,
)
from ..planning.plans import SPOT_SUFFIX, headroom_note
from ..results import MeasuredComparison, Plan
from ..solver.model import solver_rows
from .setting_notes import context_parallel_notes, gradient_notes, optimizer_step_notes


def measured_summary(ctx: JobContext, mine: Sku, base: Sku, cmp: MeasuredComparison) -> str:
    """One sentence: faster or slower than the measured configuration, cheaper or dearer, and which
    hardware ratio carries it (with the efficiency class and the exposed communication where they matter)."""
    money = ""
    if cmp.cost_ratio is not None:
        money = f" and {'cheaper' if cmp.cost_ratio < 1 else 'dearer'} ({cmp.cost_ratio:.2f}x the cost)"
    r = cmp.ratios
    text = (
        f"vs the measured {cmp.measured} ({cmp.measured_tokens_per_s:,.0f} tokens/s, {cmp.measured_bound}-bound): "
        f"{cmp.speedup:.2f}x {'faster' if cmp.speedup > 1 else 'slower'}{money}; carried by the "
        f"{cmp.carried_by.replace('_', ' ')} ratio {r[cmp.carried_by]:.2f}x (compute {r['dense_compute']:.2f}x, "
        f"HBM {r['hbm_bandwidth']:.2f}x, link {r['intra_node_link']:.2f}x)"
    )
    if cmp.carried_by == "dense_compute" and abs(cmp.efficiency_class_ratio - 1) > 0.01:
        scale = ctx.calibration.compute
        text += (
            f"; x{cmp.efficiency_class_ratio:.2f} for the efficiency class ({mine.form_factor} "
            f"{ctx.compute_efficiency(mine) / scale:.2f} vs {base.form_factor} {ctx.compute_efficiency(base) / scale:.2f}"
            f" default, both scaled by the measured x{scale:.2f})"
        )
    link = r["intra_node_link"]
    if cmp.exposed_network_share > 0.02 and abs(link - 1) > 0.01:
        text += (
            f"; {cmp.exposed_network_share:.0%} of the measured step is exposed communication, which the "
            f"{'faster' if link > 1 else 'slower'} link {'shrinks' if link > 1 else 'grows'}"
        )
    if cmp.layout_differences:
        text += f"; the layouts differ ({'; '.join(cmp.layout_differences)}), which no hardware ratio carries"
    return text


def check_notes(ctx: JobContext, plan: Plan) -> list[str]:
    """Caveats of a check: the memory headroom in force, no price, a verdict that flips between GB and GiB, a
    fixed activation reserve."""
    notes = [headroom_note(ctx.constraints.memory_headroom, plan)]
    sku = find_sku(ctx.catalog, plan.sku)
    if plan.offer is None:
        notes.append(
            f"no offer in catalog '{ctx.catalog.name}' prices {sku.name}: cost is null; "
            "pass --catalog with a price sheet that lists it"
        )
    label, reported = sku.memory_label_bytes, sku.memory_reported_bytes
    need = plan.memory_gib.total * GIB
    if reported and (need <= label) != (need <= reported):
        notes.append(
            f"the verdict depends on the memory unit: the {sku.name} label reads {fmt_bytes(label)}, the "
            f"device reports {fmt_bytes(reported)}; this check used the {plan.memory_gib.basis} figure "
            f"({fmt_bytes(plan.memory_gib.capacity * GIB)})"
        )
    if ctx.activation_reserve != "auto":
        notes.append("activations are the fixed job.activation_reserve, not computed from shapes")
    if ctx.recipe_batch_sequences is not None:  # (a batch it rounded up to the GPUs, said)
        notes += batch_notes(ctx, plan)
    notes += measurement_notes(ctx) + precision_notes(ctx) + gradient_notes(ctx, plan) + optimizer_step_notes(ctx, plan)
    if plan.hours.p50 * 3600.0 > units.LIMITS["duration"].high:
        notes.append(
            f"this configuration runs {_years(plan.hours.p50 * 3600.0)}, past the {LIMIT_YEARS} any GPU rental is "
            "planned for: solve leaves such plans out"
        )
    for point, m in zip(ctx.calibration.points, ctx.job.measured):
        peak = m.peak_memory_bytes
        if (
            peak
            and point == (plan.sku, plan.gpus, plan.nodes)
            and need > peak * 1.02
            and plan.memory_gib.reserve < 0.01
        ):
            notes.append(
                f"the measured peak {fmt_bytes(peak)} is below what gpuplan counts for this layout's state and "
                f"activations ({fmt_bytes(need)}) with no reserve left to take off: the verdict keeps "
                f"{fmt_bytes(need)}; if the run used another layout or activation checkpointing, give it with "
                "the check flags"
            )
    offer = next((o for o in ctx.catalog.offers if plan.offer and o.name == plan.offer.removesuffix(SPOT_SUFFIX)), None)
    if offer is not None and (why := not_rentable(offer, plan.nodes, plan.gpus_per_node)):
        # a verdict on hardware the offer does not rent, which solve never plans (a cost below its optimum)
        notes.append(f"offer {offer.name} {why}: it cannot be rented there as it stands")
    notes += _tp_across_nodes_notes(plan) + moe_notes(ctx, plan) + kernel_notes(ctx, plan)
    return notes + zero3_fetch_notes(plan) + host_launch_notes(plan) + context_parallel_notes(ctx, plan)


def _tp_across_nodes_notes(plan: Plan) -> list[str]:
    """A hand-picked TP wider than a node: its per-layer collectives leave NVLink (solve keeps TP in a node)."""
    tp, g = plan.strategy.tp, plan.gpus_per_node
    if tp <= g:
        return []
    return [
        f"TP {tp} spans {tp // g} nodes of {g} GPUs: its all-reduces (4 per layer and micro-batch, 6 with full "
        "recompute) cross the network, at the nodes' network bandwidth rather than NVLink's; solve keeps TP "
        "inside a node"
    ]


def _noticeable_part(plan: Plan | None, part: str) -> tuple[float, float] | None:
    """(seconds, share of the step) of ``time_breakdown_s[part]`` where it is 5 % of the step or more, else None."""
    if plan is None or not plan.step_s:
        return None
    part_s = plan.time_breakdown_s.get(part, 0.0)
    share = part_s / plan.step_s
    return (part_s, share) if share >= 0.05 else None


def zero3_fetch_notes(plan: Plan | None) -> list[str]:
    """DeepSpeed ZeRO-3's per-module fetches when they take a noticeable share of the step (physics/zero3_hooks.py):
    per module and micro-batch, so larger micro-batches, ZeRO-2 or FSDP's one gather per layer remove most."""
    if plan is None or (part := _noticeable_part(plan, "zero3_fetch")) is None:
        return []
    fetch_s, share = part
    return [
        f"DeepSpeed ZeRO-3 fetches each module's parameters in a hook of its own, {ZERO3_MODULE_FETCH_S * 1e3:g} ms "
        f"a module and pass (DeepSpeed PR 1188): {fetch_s:,.1f} s of the {plan.step_s:,.1f} s step ({share:.0%}) at micro-batch "
        f"{plan.strategy.micro_batch}; a larger micro-batch, ZeRO-2 or FSDP (one gather per layer) shrink it"
    ]


def host_launch_notes(plan: Plan | None) -> list[str]:
    """A step bound by the host's issuing of eager PyTorch operators (physics/host_launch.py), when that wait is a
    noticeable share of it: torch.compile's fused kernels, a larger micro-batch or CUDA graphs shrink it."""
    if plan is None or (part := _noticeable_part(plan, "host_launch")) is None:
        return []
    launch_s, share = part
    scale, unit = (1e3, "ms") if plan.step_s < 1.0 else (1.0, "s")
    return [
        f"host-bound: eager PyTorch issues its operators one by one, about {HOST_S_PER_OP * 1e6:.0f} us each on the "
        f"host, and the GPU waits {launch_s * scale:,.1f} {unit} of the {plan.step_s * scale:,.1f} {unit} step "
        f"({share:.0%}) at micro-batch {plan.strategy.micro_batch}; torch.compile (--compile: fewer, fused "
        "kernels), a larger micro-batch or CUDA graphs shrink it"
    ]


def precision_notes(ctx: JobContext) -> list[str]:
    """What a low precision's speed rests on, and how far the time model has been checked at it."""
    if ctx.job.precision not in LOW_PRECISIONS or ctx.job.measured:  # a measurement calibrates the speed
        return []
    if ctx.job.precision == "fp8":
        # physics/precision.py; bench/precision_pairs.py (BENCHMARKS.md) for the published pairs
        return [
            f"fp8: only the GEMM kernels run faster, at most {2 * LOW_PRECISION_GEMM_CEILING_RATIO:.2f}x (the "
            "published largest FP8 over BF16 GEMM rates: 1.77x H100 to 1.97x B200), on their share of the BF16 "
            "step; attention, norms, activations and communication run as in BF16 and the operand casts add "
            "HBM traffic. Published FP8 gains on one layout: 1.00-1.62x over 23 pairs, which gpuplan predicts "
            "within 5 % (median)"
        ]
    # validation/throughput_runs.yaml, mb260401-llama3-70b-gb200-nvfp4 (bench/throughput.py): the one
    # published NVFP4 layout gpuplan runs; its 405B NVFP4 row splits layers as gpuplan's pipelines do not
    return [
        "nvfp4: the GEMM kernels are timed at the FP4 peak with the FP8 kernels' share of it; the one published "
        "NVFP4 layout gpuplan can run (Llama 3 70B pre-training on 64 GB200, Megatron-Bridge 26.04) ran 12 % "
        "slower than this predicts, 1.31x its MXFP8 speed where the peaks differ 2x: expect the time to run longer"
    ]


# transformers 4's expert loop, published: modelscope/ms-swift examples/train/megatron/moe/qwen3_moe.sh
MS_SWIFT_LOOP = "ms-swift, Qwen3-30B-A3B on 16 A800: DeepSpeed ZeRO-3 91.2 s/it, Megatron 9.6 s/it"


def moe_notes(ctx: JobContext, plan: Plan | None) -> list[str]:
    """For a mixture of experts: how the experts are split and the share of the step their all-to-all takes,
    and where the plan's framework trains transformers' own expert modules (EP 1), which experts
    implementation its time assumed (assumptions.experts_implementation; physics/moe.py expert_loop_s)."""
    if plan is None or not ctx.shape.experts:
        return []
    s = plan.strategy
    framework = FRAMEWORKS[s.framework]
    if not (framework.hf_experts and s.ep == 1):
        return _expert_split_notes(ctx, plan)
    loop_s = plan.time_breakdown_s.get("expert_loop", 0.0)
    if loop_s > 0:
        fetched = framework.zero3_module_fetch and s.zero_stage >= 3  # physics/moe.py: DeepSpeed's hooks only
        note = (
            f"experts under {s.framework}: transformers 4's loop (assumptions.experts_implementation: eager), one "
            "expert after another with a host sync each"
            + (", each expert's linears fetched one at a time by ZeRO-3" if fetched else "")
            + f": {loop_s:,.1f} s of each {plan.step_s:,.1f} s step. Published: {MS_SWIFT_LOOP}; transformers 5's "
            "grouped_mm or --framework megatron / torchtitan remove it"
        )
    else:
        note = (
            f"experts under {s.framework}: transformers' grouped_mm experts assumed (transformers 5's default, "
            "assumptions.experts_implementation); on transformers 4 they run as a loop, one expert after another "
            f"(published about 10x slower than Megatron-Core's grouped GEMMs: {MS_SWIFT_LOOP}): set "
            "experts_implementation: eager to time it"
        )
    return [note, *_expert_split_notes(ctx, plan)]


def _expert_split_notes(ctx: JobContext, plan: Plan) -> list[str]:
    s = plan.strategy
    a2a_s = plan.time_breakdown_s.get("all_to_all", 0.0)
    experts = int(ctx.shape.experts)
    if s.ep <= 1:
        return [
            f"experts: all {experts} routed experts on every GPU (EP 1), no all-to-all; "
            "expert parallelism did not pay here (try --ep to compare)"
        ]
    where = "across nodes" if s.ep * (s.expert_tp or s.tp) > plan.gpus_per_node else "inside a node"
    dispatcher = ctx.assumptions.moe_dispatcher
    overlap = ctx.assumptions.moe_overlap
    share = a2a_s / plan.step_s if plan.step_s else 0.0
    return [
        f"experts: EP {s.ep}, {experts // s.ep} routed experts per GPU; expert all-to-all {where} "
        f"({dispatcher} dispatcher, {overlap:.0%} overlapped): {a2a_s:.2f} s of the {plan.step_s:.2f} s step "
        f"({share:.0%}) exposed",
        *_host_note(ctx, plan),
    ]


def _host_note(ctx: JobContext, plan: Plan) -> list[str]:
    """The MoE layers' host launch waits when they take a noticeable share of the step: they are per
    micro-batch, so larger micro-batches or full-iteration CUDA graphs remove most of them."""
    host_s = plan.time_breakdown_s.get("moe_host", 0.0)
    share = host_s / plan.step_s if plan.step_s else 0.0
    if share < 0.05:
        return []
    s = ctx.settings
    per_layer = f"{s.moe_host_s_per_layer * 1e3:g} ms per MoE layer and micro-batch of {plan.strategy.micro_batch}"
    code = np.array([CODES.get(plan.strategy.framework, -1)])  # the physics' own per-layout rule
    looped = bool(grouped_gemm_per_expert(code, ctx.job.framework, np.array([plan.strategy.ep]))[0])
    if looped and s.moe_host_s_per_local_expert > 0:
        local = int(ctx.shape.experts or 0) // plan.strategy.ep
        per_layer += (
            f" plus {s.moe_host_s_per_local_expert * 1e3:g} ms for each of its {local} local experts (under "
            f"{plan.strategy.framework} the expert GEMMs loop over them on the host: fewer with more EP)"
        )
    return [
        f"MoE host time: {host_s:.2f} s of the step ({share:.0%}) waiting for kernel launches, {per_layer} "
        "(docs/design.md 5.11); with full-iteration CUDA graphs set assumptions.moe_host_ms_per_layer: 0 and "
        "moe_host_ms_per_local_expert: 0"
    ]


# The efficiency a measurement calibrates, per bound (planning/calibration.py), in the answer's words.
_CALIBRATED = {
    "compute": "compute efficiency",
    "memory": "achieved HBM bandwidth",
    "network": "link efficiency",
}


def calibration_note(ctx: JobContext) -> list[str]:
    """That the answer is calibrated from measurements, and by how much: per measured configuration what
    gpuplan's model alone predicts there, and the factor on each efficiency the fit set."""
    c = ctx.calibration
    if not c.active:
        return []
    model = replace(ctx, calibration=Calibration())
    points = []
    for m in ctx.job.measured:
        row = resolve_row(model, m.sku, m.gpus, m.nodes)
        predicted = predict(model, row)[0]
        points.append(
            f"{m.gpus} x {row.sku.name} measured {m.tokens_per_s:,.0f} tokens/s where the model alone predicts "
            f"{predicted:,.0f} ({m.tokens_per_s / predicted - 1:+.0%})"
        )
    factors = [
        f"{what} x{getattr(c, bound):.3g}" for bound, what in _CALIBRATED.items() if abs(getattr(c, bound) - 1) > 1e-9
    ]
    if c.reserve_delta_bytes:
        sign = "+" if c.reserve_delta_bytes > 0 else "-"
        peaks = sum(1 for m in ctx.job.measured if m.peak_memory_bytes)
        whose = "the measured peak" if peaks == 1 else "the measured peaks' mean; each measured GPU keeps its own"
        factors.append(f"framework reserve {sign}{fmt_bytes(abs(c.reserve_delta_bytes))} ({whose})")
    scaled = "; ".join(factors) or "no factor (the model already reproduces it)"
    anchored = ""
    if len(ctx.job.measured) > 1:
        anchored = (
            "; each measured configuration predicts its own measurement, and a plan on a measured GPU (or its "
            "architecture) leans on the nearest measurement (its p90 spread says which)"
        )
    return [f"calibrated from job.measured: {'; '.join(points)}; so every plan here has {scaled}{anchored}"]


def measurement_notes(ctx: JobContext) -> list[str]:
    """Calibration from measurements, said (``calibration_note``), and a measured configuration gpuplan's
    memory model says cannot run: every projection is anchored to it."""
    return calibration_note(ctx) + [
        f"the measured {gpus} x {sku} does not fit gpuplan's memory model ({fmt_bytes(need)} per GPU for its "
        f"least-memory layout, of {fmt_bytes(capacity)}): the run saved memory in a way gpuplan does not model, "
        "and the throughput calibrated from it is anchored to a layout that cannot run here; check the "
        "measurement's GPU count and the job's model, method and sequence length"
        for (sku, gpus, _nodes), need, capacity in ctx.calibration.unfit
    ]


def _years(seconds: float) -> str:
    return f"{seconds / YEAR_S:,.2f} years"


LIMIT_YEARS = f"{units.LIMITS['duration'].high / YEAR_S:.0f} years"  # the years a rental may be planned for


def aeons_notes(table: CandidateTable, best: Plan | None) -> list[str]:
    """Plans past the years a rental is planned for are left out of solve: say so where one of them would
    have been cheaper than the answer (a 10.04-year plan $0.76 cheaper had been left out silently)."""
    limit = units.LIMITS["duration"].high
    if best is None or best.cost_usd is None:
        return []
    left_out = [
        c
        for c in solver_rows(table)
        if c.time_s > limit and c.fits and c.rejected_by is None and c.cost_usd < best.cost_usd.p50
    ]
    if not left_out:
        return []
    cheapest = min(left_out, key=lambda c: c.cost_usd)
    return [
        f"plans running past {LIMIT_YEARS} are left out, as no rental is planned that far ahead: the cheapest of "
        f"them, {cheapest.row.gpus} x {cheapest.row.sku.name}, would cost ${cheapest.cost_usd:,.2f} over "
        f"{_years(cheapest.time_s)}"
    ]


def outside_search_notes(ctx: JobContext, strategy: Strategy) -> list[str]:
    """Choices ``check`` accepts by hand that solve does not search (its time model is not validated there):
    the comparison with the best plan cannot say that plan beats this one (a CP 2 layout at 4k tokens was
    $4.38 cheaper than solve's optimum, which had never tried it)."""
    outside = []
    if strategy.cp > 1 and ctx.job.seq_len < CONTEXT_PARALLEL_MIN_SEQ_LEN:
        outside.append(f"context parallelism below {CONTEXT_PARALLEL_MIN_SEQ_LEN:,} tokens")
    if strategy.cp not in CP_CHOICES:
        outside.append(f"CP {strategy.cp} (solve tries {', '.join(map(str, CP_CHOICES))})")
    if strategy.expert_tp and strategy.expert_tp != strategy.tp:
        outside.append("an expert TP other than the attention TP (parallel folding)")
    if strategy.virtual_stages > max(VIRTUAL_STAGE_CHOICES):
        outside.append(f"more than {max(VIRTUAL_STAGE_CHOICES)} pipeline chunks per GPU")
    if strategy.pp not in PP_CHOICES:
        outside.append(f"PP {strategy.pp} (solve tries {', '.join(map(str, PP_CHOICES))})")
    if strategy.micro_batch not in MICRO_BATCH_CHOICES:
        choices = ", ".join(map(str, MICRO_BATCH_CHOICES))
        outside.append(f"a micro-batch of {strategy.micro_batch} (solve tries {choices})")
    if not outside:
        return []
    return [
        f"this layout uses {' and '.join(outside)}, which solve does not search (gpuplan's time model is not "
        "validated there): its best plan below is the best of the layouts it searches, and this one is not "
        "compared with them"
    ]


def kernel_notes(ctx: JobContext, plan: Plan | None) -> list[str]:
    """The kernels the plan's speed assumes (docs/design.md section 5.10): Transformer Engine's or eager
    PyTorch's, the attention kernel and its share of the peak, and torch.compile; nothing where the job states
    the whole step's efficiency (assumptions.mfu) or the SKU's catalog row does."""
    if plan is None or ctx.assumptions.mfu != "auto":
        return []
    sku = find_sku(ctx.catalog, plan.sku)
    if sku.default_mfu:
        return []
    framework = FRAMEWORKS.get(plan.strategy.framework)
    fused = bool(framework and framework.fused_kernels and ctx.framework_named)
    efficiency = ctx.attention_efficiency(sku, fused)
    if ctx.job.attention == "eager":
        attention = "eager attention (the s x s scores materialised) at the matmul efficiency"
    else:
        kernel = KERNEL_NAMES[ctx.attention_kernel(fused)]
        share = "the matmul efficiency" if efficiency is None else f"{efficiency:.0%} of the 16-bit peak"
        attention = f"attention in {kernel} at {share} on {sku.name}"
    if fused:
        stack = "Transformer Engine's fused layers"
    elif framework and framework.fused_kernels and ctx.job.framework_pinned:  # check --framework on an auto job
        stack = (
            f"costed as eager PyTorch: the job's framework is auto, and check's --framework {plan.strategy.framework} "
            "pins the layout's framework, costed as the auto question's solve costs it (job.framework: "
            f"{plan.strategy.framework} in the job file, or solve --framework {plan.strategy.framework}, costs "
            "Transformer Engine's fused layers)"
        )
    elif framework and framework.fused_kernels:  # a Megatron label under framework auto: costed as eager
        stack = (
            f"costed as eager PyTorch under framework auto (--framework {plan.strategy.framework} costs "
            "Transformer Engine's fused layers)"
        )
    elif ctx.job.compile:
        stack = f"eager PyTorch under torch.compile (the matmuls at {COMPILED_RATIO:.2f}x the eager efficiency)"
    else:
        stack = "eager PyTorch, torch.compile off (--compile or job.compile: true for a compiled run)"
    hint = (
        ""
        if fused or ctx.job.attention != "flash"
        else " (job.attention: cudnn for Transformer Engine's attention; efficient for padded batches through "
        "transformers' SDPA, which then runs its memory-efficient kernel over every block)"
    )
    return [f"kernels: {stack}; {attention}{hint}", *_default_efficiency_note(ctx, sku)]


def _default_efficiency_note(ctx: JobContext, sku: Sku) -> list[str]:
    """Where no efficiency is fitted for the GPU's family (physics/efficiency.py FITTED_BASE) and none is stated,
    the matmuls run at the per-form-factor default: say so, and how to plan at another. On Ampere, whose base
    is fitted on today's benchmark tables, say what whole published runs of older stacks reached."""
    family = family_of(sku.architecture, sku.form_factor)
    if ctx.stated_efficiency(sku):
        return []
    if family in FITTED_BASE and not ctx.shape.experts:
        if family != "ampere":
            return []
        return [  # bench/validate.py against bench/throughput.py (BENCHMARKS.md, whole published runs)
            f"matmul efficiency: {FITTED_BASE[family]:.0%} of the 16-bit peak at hidden 8,192, fitted on today's "
            "A100 benchmark tables (llm-foundry, torchtune, Qwen, Hugging Face); whole runs of 2022-23 stacks "
            "(LLaMA, BLOOM, MPT-7B) averaged 0.7-0.8x their speed; assumptions.matmul_efficiency plans at another"
        ]
    default = DEFAULT_COMPUTE_EFFICIENCY.get(sku.form_factor, FALLBACK_COMPUTE_EFFICIENCY)
    why = "a mixture of experts" if ctx.shape.experts else f"no efficiency fitted for {family} GPUs"
    return [
        f"matmul efficiency: the {sku.form_factor.upper()} default, {default:.0%} of the 16-bit peak ({why}; "
        "BENCHMARKS.md); assumptions.matmul_efficiency plans at another"
    ]


def plan_notes(ctx: JobContext, best: Plan | None) -> list[str]:
    """What gpuplan decided for the user: the global batch when free or given in tokens, the spot
    policy and the framework (docs/design.md sections 3.2 and 3.5)."""
    job, notes = ctx.job, [headroom_note(ctx.constraints.memory_headroom, best)]
    notes += batch_notes(ctx, best)
    notes.append(spot_note(ctx.constraints.spot, "constraints.spot"))
    notes += measurement_notes(ctx) + precision_notes(ctx)
    notes += moe_notes(ctx, best) + kernel_notes(ctx, best) + zero3_fetch_notes(best) + gradient_notes(ctx, best)
    notes += host_launch_notes(best)
    notes += optimizer_step_notes(ctx, best)
    notes += context_parallel_notes(ctx, best)
    if job.framework == "auto" and best is not None:
        notes.append(
            f"framework: any; the plan runs in {best.strategy.framework} (set job.framework or --framework to plan "
            "for the one your team uses)"
        )
    return notes


def batch_notes(ctx: JobContext, best: Plan | None) -> list[str]:
    """The global batch gpuplan chose, and why: a fine-tune's recipe batch, a free batch under its cap, or a
    batch in tokens as the sequences it became."""
    job, notes = ctx.job, []
    if best is not None and ctx.recipe_batch_sequences is not None:
        s = best.strategy
        recipe = ctx.recipe_batch_sequences
        made = "" if s.global_batch == recipe else f", the least at or above the recipe's {recipe:,} this layout makes"
        notes.append(
            f"global batch: {s.global_batch:,} sequences ({s.global_batch * job.seq_len:,} tokens) a step{made}, "
            "as published fine-tuning recipes set it (Megatron-Bridge's Llama 3 SFT and LoRA recipes: 32 x 4,096 "
            "tokens), since job.global_batch is not set; set job.global_batch to fix another, or "
            "'global_batch: free' to let gpuplan choose any"
        )
    elif best is not None and (job.global_batch is None or job.free_batch):
        s = best.strategy
        why = "job.global_batch is free" if job.free_batch else "job.global_batch is not set (a pre-training)"
        notes.append(
            f"global batch chosen: {s.global_batch:,} sequences ({s.global_batch * job.seq_len / 1e6:,.2f}M tokens), "
            f"since {why}; at most {ctx.max_free_batch_sequences:,} sequences, twice the "
            "compute-optimal batch of DeepSeek's scaling law for this job; set job.global_batch to fix it"
        )
    elif isinstance(job.global_batch, str) and not job.free_batch:
        exact = parse_count(job.global_batch, "job.global_batch") / job.seq_len
        notes.append(
            f"global batch {job.global_batch} at {job.seq_len:,} tokens per sequence is {exact:,.1f} sequences, "
            f"rounded to {job.global_batch_sequences:,} so data-parallel layouts divide it"
        )
    return notes


# How a configuration's fixed values read: "ZeRO-3", "micro-batch 2", "full recompute".
_GIVEN = {
    "tp": "TP {}",
    "pp": "PP {}",
    "cp": "CP {}",
    "ep": "EP {}",
    "expert_tp": "expert TP {}",
    "zero": "ZeRO-{}",
    "shard_degree": "shard degree {}",
    "micro_batch": "micro-batch {}",
    "grad_accum": "{} micro-batches per step",
    "recompute": "{} recompute",
    "virtual_stages": "{} chunks/GPU",
}


def added_sentence(
    given: dict[str, object], added: dict[str, int], without: Plan | None, without_runs: bool, plan: Plan
) -> str | None:
    """What check added to the layout the user gave, and why: 'gpuplan added TP 4 to your ZeRO-3, micro-batch
    2: without it the fastest layout that fits takes 41% longer, with full recompute'."""
    if not added:
        return None
    yours = ", ".join(_GIVEN[name].format(value) for name, value in given.items() if value is not None)
    head = "gpuplan added " + " and ".join(f"{name.upper()} {degree}" for name, degree in added.items())
    head += f" to your {yours}"
    it = "it" if len(added) == 1 else "them"
    if without is None:
        return f"{head}: without {it} no layout of these GPUs keeps what you gave"
    if not without.fits:
        m = without.memory_gib
        return f"{head}: without {it} nothing fits ({m.total:,.1f} of {m.capacity:,.1f} GiB per GPU at best)"
    if not without_runs:
        return f"{head}: without {it} no framework the job allows runs the layout"
    slower = without.hours.p50 / plan.hours.p50 - 1.0
    how = (
        ""
        if without.strategy.recompute_label == plan.strategy.recompute_label
        else f", with {without.strategy.recompute_text}"
    )
    return f"{head}: without {it} the fastest layout that fits takes {slower:.0%} longer{how}"


def export_label_note(best: Plan, gap: str, alternative: Plan | None, frameworks: tuple[str, ...]) -> str:
    """Under framework auto, a LoRA plan labelled with a framework whose export gpuplan cannot write: what
    the best plan that an export writes costs instead."""
    where = " or ".join(frameworks)
    head = f"the plan runs in {best.strategy.framework}, but gpuplan cannot export it ({gap})"
    if alternative is None or alternative.cost_usd is None or best.cost_usd is None:
        return f"{head}; no plan in {where}, whose exports gpuplan writes, meets the constraints"
    extra = alternative.cost_usd.p50 / best.cost_usd.p50 - 1.0
    return (
        f"{head}; the best plan in {where}, which it exports, is {alternative.label()} ({alternative.strategy.framework}) "
        f"at ${alternative.cost_usd.p50:,.2f} ({extra:+.1%}) in {alternative.hours.p50:,.1f} h: set --framework "
        f"{alternative.strategy.framework} to plan it"
    )


def fix_notes(fixes: list[tuple[str, Plan]]) -> list[str]:
    """The nearest fixes of a configuration that does not fit, with their numbers."""
    if not fixes:
        return [
            "does not fit, and neither full recompute, micro-batch 1, optimizer or activation offload, the optimizer "
            "step in backward nor 8x the GPUs makes it fit"
        ]
    parts = [
        f"{label}: {p.memory_gib.total:,.1f} of {p.memory_gib.capacity:,.1f} GiB per GPU, {p.hours.p50:,.1f} h"
        + (f", ${p.cost_usd.p50:,.2f}" if p.cost_usd else "")
        for label, p in fixes
    ]
    return ["does not fit; nearest fixes: " + "; ".join(parts)]


def _reserve_text(reserve: str | float) -> str:
    """A fixed activation reserve as written: bytes per GPU, or a fraction (< 1) of the GPU's memory."""
    value = float(reserve)
    return f"{value:.0%} of each GPU's memory" if value < 1 else f"{fmt_bytes(value)} per GPU"


def recompute_note(ctx: JobContext, requested: str | None) -> list[str]:
    """Selective recompute under FlashAttention changes nothing: say so instead of listing it as a choice."""
    if requested in ("selective", "full") and ctx.activation_reserve != "auto":
        return [
            f"--recompute {requested} changes nothing here: job.activation_reserve fixes the activations "
            f"({_reserve_text(ctx.activation_reserve)}) instead of computing them from the shapes, so there is "
            "nothing for recompute to drop and no extra forward pass is counted: checked as none; remove "
            "activation_reserve to model recompute"
        ]
    if requested == "selective" and ctx.job.tiled_attention:
        return [
            "selective recompute changes nothing under fused attention, which never stores the s x s attention "
            "scores that selective recompute would drop (Korthikanti et al. 2022, section 5): checked as none"
        ]
    return []


def spot_note(policy: str, field: str) -> str:
    """The spot policy in force, always shown: spot wins long jobs on price, so say whether it was allowed."""
    verb = {"allow": "allowed", "never": "excluded", "only": "required"}[policy]
    return f"spot capacity {verb} ({field}: {policy}; --spot for spot only, --no-spot for none)"
