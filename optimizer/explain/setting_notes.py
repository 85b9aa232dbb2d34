"""Notes on what a plan assumed of the job's settings where a framework's own default differs: the gradients' dtype
under Megatron, the optimizer step's implementation under a PyTorch stack, the context-parallel exchange."""

from __future__ import annotations

from ..planning.context import JobContext
from ..planning.frameworks import FRAMEWORKS
from ..planning.labels import gradient_dtype_of
from ..results import MEMORY_SHOWN_MIN_GIB, Plan


def gradient_notes(ctx: JobContext, plan: Plan | None) -> list[str]:
    """What a plan assumed of its gradients: when they exist, where that makes its peak (physics/memory_terms.py
    not_concurrent_bytes); and under Megatron their dtype (job.gradient_dtype), where Megatron-LM's own default
    differs: bf16, as the export launches it, against fp32 accumulation and reduce under --bf16."""
    if plan is None:
        return []
    notes = []
    apart = plan.memory_gib.not_concurrent
    if apart >= MEMORY_SHOWN_MIN_GIB:
        notes.append(
            f"memory: {apart:,.1f} GiB of the parts are never held at once (the activations are freed before the "
            "optimizer step"
            + (
                "; the loop frees the gradients after each step, zero_grad(), so the forward holds none; "
                "accumulating micro-batches would keep them through it)"
                if plan.strategy.grad_accum <= 1
                else ")"
            )
        )
    return notes + _reduce_dtype_notes(ctx, plan)


def _reduce_dtype_notes(ctx: JobContext, plan: Plan) -> list[str]:
    """The dtype a plan's data-parallel gradients reduce in where it is not what the user might take for granted:
    fp32 by the framework's own default (job.gradient_dtype auto), bf16 under torchtitan where the job states it,
    and under Megatron bf16 as the export launches it against Megatron-LM's fp32 default."""
    s = plan.strategy
    fw = FRAMEWORKS.get(s.framework)
    if fw is None:
        return []
    stated = ctx.job.gradient_dtype
    dtype = gradient_dtype_of(s.framework, s.zero_stage, stated, ctx.job.master_weights)
    reduced = s.dp * s.cp > 1  # a data-parallel reduce exists
    if reduced and stated == "auto" and dtype == "fp32":
        return [
            f"gradients: reduced in fp32 over the data-parallel ranks, as {fw.title} does ({fw.reduce_source}): twice "
            "a bf16 reduce's traffic (job.gradient_dtype: bf16 plans a bf16 reduce)"
        ]
    if reduced and s.framework == "torchtitan" and stated == "bf16":
        return [
            f"gradients: reduced in bf16 as job.gradient_dtype states, though {fw.reduce_source}: torchtitan's "
            "own config reduces in fp32, twice this plan's reduce traffic"
        ]
    if s.framework != "megatron" or dtype != "bf16":
        return []
    return [
        "gradients: bf16, as the Megatron export launches it (--grad-reduce-in-bf16); Megatron-LM's own default "
        f"under --bf16 accumulates and reduces them in fp32: {plan.memory_gib.gradients:,.1f} GiB more per GPU and "
        "twice the data-parallel reduce (job.gradient_dtype: fp32 plans that)"
    ]


def optimizer_step_notes(ctx: JobContext, plan: Plan | None) -> list[str]:
    """How a full fine-tune's optimizer step was timed under a PyTorch stack (job.optimizer_implementation), where a
    plain torch.optim.AdamW differs: one fused kernel, against its foreach default (physics/optimizer_step.py)."""
    if plan is None or ctx.job.method != "full" or plan.strategy.framework not in ("fsdp", "torchtitan"):
        return []
    if ctx.job.optimizer_implementation == "foreach":
        return [
            "optimizer step: foreach, torch.optim.AdamW's default (a kernel per operation, about 2.5x a fused step's "
            "memory traffic; job.optimizer_implementation: fused plans fused=True)"
        ]
    return [
        "optimizer step: one fused kernel (fused=True, the HF Trainer's adamw_torch_fused, torchtitan, torchtune); "
        "a plain torch.optim.AdamW runs foreach, about 2.5x its memory traffic (job.optimizer_implementation: "
        "foreach plans that)"
    ]


def context_parallel_notes(ctx: JobContext, plan: Plan | None) -> list[str]:
    """The context-parallel exchange a CP > 1 plan's time assumed (job.context_parallel)."""
    if plan is None or plan.strategy.cp <= 1:
        return []
    exchange = ctx.job.context_parallel
    how = {
        "ring": "ring attention: K and V passed around the CP ranks, overlapped with attention",
        "all_to_all": "Ulysses all-to-alls of q, k, v and the output around attention, not overlapped",
        "all_to_all_repeat_kv": "Ulysses all-to-alls with K and V repeated to every query head (XTuner), not overlapped",
    }[exchange]
    return [f"context parallelism: CP {plan.strategy.cp} as {exchange} ({how}; job.context_parallel sets it)"]
