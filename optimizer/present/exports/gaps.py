"""What the framework exports cannot write, and the refusal that says so.

An export whose ``Launcher`` has ``gaps`` (deepspeed, megatron, torchtitan, accelerate) refuses a plan where
``export_gaps`` finds any: the tool's own (its module's ``gaps``), among them ``memory_option_gaps`` (the
fine-tune memory options its config cannot carry); every rule by which gpuplan's planner says the framework
of that name refuses the layout (``runnable.why_not_runnable``); and the LoRA plans it does not write
(``frameworks.LORA_EXPORT_GAPS``). ``refuse`` raises ``ArgumentError(field="export")`` naming the other
exports that can write the plan. Read back by tests/exports/test_exports.py (``exported`` checks every refusal,
test_deepspeed_refuses_what_it_cannot_run_and_names_what_can, test_accelerate_refuses_tensor_and_pipeline_
parallelism, test_torchtitan_needs_the_layer_count_for_more_than_two_virtual_stages), tests/planning/test_frameworks.py
and tests/physics/test_finetune_memory.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ...errors import ArgumentError
from ...planning.frameworks import FRAMEWORKS, LORA_EXPORT_GAPS
from ...planning.runnable import why_not_runnable
from ...results import Plan
from .common import ExportJob, Launcher, describe


def memory_option_gaps(plan: Plan, tool: str, in_backward: bool, offload: bool) -> list[str]:
    """The job's fine-tune memory options a tool's config cannot carry (``in_backward`` / ``offload``: it can)."""
    s = plan.strategy
    gaps = []
    if s.optimizer_in_backward and not in_backward:
        gaps.append(
            f"{tool} has no optimizer step in backward (the plan's gradient memory assumes torchtune's "
            "optimizer_in_bwd or torchtitan's optimizer.early_step_in_backward)"
        )
    if s.activation_offload and not offload:
        gaps.append(
            f"{tool}'s config has no activation offload to CPU (the plan assumes torchtune's "
            "enable_activation_offloading or Megatron-Core's cpu_offloading_activations)"
        )
    return gaps


def export_gaps(plan: Plan, launcher: Launcher, job: ExportJob) -> list[str]:
    """What the export ``launcher`` cannot write for this plan and the job's fine-tuning method, optimizer,
    sequence (where given) and precision (none for an export without ``gaps``)."""
    if launcher.gaps is None:
        return []
    kind = launcher.kind
    gaps = launcher.gaps(plan, job)
    if kind in FRAMEWORKS:
        # every rule by which gpuplan's planner says the framework refuses the layout (the layer counts'
        # rules only where the layers are known: a split into PP x chunks stands for them otherwise)
        layers = job.num_layers or plan.strategy.pp * plan.strategy.virtual_stages
        gaps += [
            rule
            for rule in why_not_runnable(
                kind, plan.strategy, layers, job.method, job.optimizer, job.seq_len, job.precision, job.context_parallel
            )
            if rule not in gaps
        ]
    if job.method == "lora" and kind in LORA_EXPORT_GAPS:
        gaps.append(LORA_EXPORT_GAPS[kind])
    return gaps


def refuse(plan: Plan, launcher: Launcher, job: ExportJob, launchers: Iterable[Launcher]) -> None:
    """Raise where ``launcher`` cannot write the plan, naming those of ``launchers`` (the registry's) that can."""
    if not launcher.reads_seq_len:
        job = dataclasses.replace(job, seq_len=None)
    gaps = export_gaps(plan, launcher, job)
    if not gaps:
        return
    kind = launcher.kind
    others = [
        other.kind
        for other in launchers
        if other.gaps is not None and other.kind != kind and not export_gaps(plan, other, job)
    ]
    instead = (
        f"the {' or '.join(others)} export{'s' if len(others) > 1 else ''} can"
        if others
        else "no framework export expresses it; use torchrun, skypilot or kubernetes with your own script"
    )
    raise ArgumentError(
        f"the {kind} export cannot express this plan ({describe(plan)}): {'; '.join(gaps)}; {instead}",
        field="export",
    )
