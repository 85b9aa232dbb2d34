"""Launcher configurations for a chosen plan, each carrying the plan's exact layout and batch arithmetic.

Kinds, one module each: ``skypilot`` (task YAML), ``kubernetes`` (headless Service + Indexed ``batch/v1``
Job, one pod per node), ``nodus`` (the seed's job spec, ``spec.resources.gpu``), ``deepspeed`` (config JSON),
``megatron`` (Megatron-LM ``pretrain_gpt.py`` arguments), ``torchtitan`` (job TOML plus the equivalent
flags), ``accelerate`` (FSDP config) and ``torchrun`` (a command line). What they share (the job's facts,
the header, the plan's numbers) is in ``common``; what the framework exports refuse, in ``gaps``. Each export
starts the run (issue 51): its steps, checkpoints and disk, the model and the named placeholders are in
``run``, Megatron-LM's model and run flags in ``megatron_run``, and the framework command that Slurm and
SkyPilot run (the same as the framework's export) in ``command``.

``export(plan, kind, job=...)`` writes one: the plan and its job (a JobSpec, or its ``ExportJob`` facts:
name, sequence length, precision, layer count, method, optimizer, which a Plan does not carry). A tool that
cannot express a layout raises ``ArgumentError(field="export")`` naming the exports that can; a framework's
export (deepspeed, megatron, torchtitan) also refuses every layout its planner rules refuse
(``runnable.why_not_runnable``). Where accelerate's nearest setting needs no more GPU memory than planned
(FSDP's SHARD_GRAD_OP for ZeRO-1, FSDP CPU offload for optimizer offload), its export writes it and says so
in a ``note:`` line. The section and argument builders (``torchtitan_sections``, ``megatron_args``) still map
every layout.

The registry: each launcher module declares ``LAUNCHER = Launcher(kind, write, ...)`` with its kind, aliases,
file suffix and summary; a tenth launcher is one new module and one ``register`` line below. Every list of
the kinds reads ``LAUNCHERS`` when it is shown: the CLI's ``--export`` help (``kinds_text``), the service's
export body schema and ``GET /v1/info``, its downloads' file names (the suffix) and the refusal of an unknown
kind (``unknown_kind``). ``register(..., roles_only=True)`` keeps a kind only a job with roles has apart
(``ROLE_LAUNCHERS``: ``nemo-rl`` and ``verl``, a GRPO job's NeMo RL or verl launch, ``nemo_rl`` and ``verl``): ``find_launcher`` finds it and
``kinds_text`` names it after the others, and its ``write`` refuses a one-model plan.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...errors import ArgumentError
from ...inputs.schema import JobSpec, ModelSpec
from ...results import Plan
from . import accelerate, deepspeed, kubernetes, megatron, nemo_rl, nodus, skypilot, slurm, torchrun, torchtitan, verl
from .common import (
    DEFAULT_SEQ_LEN,
    PRECISIONS,
    ExportJob,
    Launcher,
    check_layout,
    check_names,
    check_numbers,
    describe,
    job_facts,
)
from .gaps import refuse
from .megatron import megatron_args, uneven_pipeline_ends
from .skypilot import skypilot_accelerator
from .torchrun import MASTER_PORT, layout_env
from .torchtitan import torchtitan_flags, torchtitan_sections

__all__ = [
    "DEFAULT_SEQ_LEN",
    "KINDS",
    "LAUNCHERS",
    "MASTER_PORT",
    "PRECISIONS",
    "ROLE_LAUNCHERS",
    "ExportJob",
    "Launcher",
    "describe",
    "export",
    "find_launcher",
    "job_facts",
    "kinds_text",
    "layout_env",
    "megatron_args",
    "register",
    "skypilot_accelerator",
    "torchtitan_flags",
    "torchtitan_sections",
    "uneven_pipeline_ends",
    "unknown_kind",
]

LAUNCHERS: dict[str, Launcher] = {}
# Kinds only a job with roles has (``roles_only``): a GRPO job's RL framework launch (exports/nemo_rl.py), which
# ``find_launcher`` finds and ``kinds_text`` names, apart from the kinds every plan has
ROLE_LAUNCHERS: dict[str, Launcher] = {}


def register(launcher: Launcher, roles_only: bool = False) -> Launcher:
    """Add an export kind (its module's ``LAUNCHER``; ``roles_only``: a kind of jobs with roles alone); a kind or
    alias already taken is a ValueError."""
    known_launchers = [*LAUNCHERS.values(), *ROLE_LAUNCHERS.values()]
    taken = {name for known in known_launchers for name in (known.kind, *known.aliases)}
    if clash := taken & {launcher.kind, *launcher.aliases}:
        raise ValueError(f"export kind {', '.join(sorted(clash))} is registered already")
    (ROLE_LAUNCHERS if roles_only else LAUNCHERS)[launcher.kind] = launcher
    return launcher


register(skypilot.LAUNCHER)
register(kubernetes.LAUNCHER)
register(nodus.LAUNCHER)
register(deepspeed.LAUNCHER)
register(megatron.LAUNCHER)
register(torchtitan.LAUNCHER)
register(accelerate.LAUNCHER)
register(torchrun.LAUNCHER)
register(slurm.LAUNCHER)
register(nemo_rl.LAUNCHER, roles_only=True)
register(verl.LAUNCHER, roles_only=True)

KINDS = tuple(LAUNCHERS)


def _facts(job: JobSpec | ExportJob | None, **given: Any) -> ExportJob:
    """The job's facts (defaults without a job), each keyword given (not None) in place of its fact: the one
    place the keyword form of ``export`` meets ``ExportJob``."""
    facts = job_facts(job) if isinstance(job, JobSpec) else job or ExportJob()
    return dataclasses.replace(facts, **{key: value for key, value in given.items() if value is not None})


def find_launcher(kind: str) -> Launcher | None:
    """The launcher of an export kind or one of its aliases, in any case; None for a kind none has."""
    kind = kind.lower()
    every = [*LAUNCHERS.values(), *ROLE_LAUNCHERS.values()]
    return next((lc for lc in every if kind == lc.kind or kind in lc.aliases), None)


def kinds_text() -> str:
    """Every registered kind with its aliases and summary, as the lists naming them all say it: ``skypilot (a
    task YAML), kubernetes (also k8s: an Indexed Job + headless Service), ... or slurm (...)``."""

    def one(launcher: Launcher) -> str:
        also = f"also {', '.join(launcher.aliases)}" if launcher.aliases else ""
        said = ": ".join(part for part in (also, launcher.summary) if part)
        return f"{launcher.kind} ({said})" if said else launcher.kind

    named = [one(launcher) for launcher in LAUNCHERS.values()]
    text = ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else "".join(named)
    roles_only = ", ".join(one(launcher) for launcher in ROLE_LAUNCHERS.values())
    return f"{text}; for a GRPO job: {roles_only}" if roles_only else text


def unknown_kind(kind: str) -> str:
    """The sentence refusing an export kind no launcher has."""
    return f"unknown export {kind!r}; choose one of {', '.join(LAUNCHERS)}"


def _launcher(kind: str) -> Launcher:
    launcher = find_launcher(kind)
    if launcher is None:
        raise ArgumentError(unknown_kind(kind), field="export")
    return launcher


def export(
    plan: Plan,
    kind: str,
    name: str | None = None,
    seq_len: int | None = None,
    *,
    job: JobSpec | ExportJob | None = None,
    precision: str | None = None,
    num_layers: int | None = None,
    method: str | None = None,
    optimizer: str | None = None,
    tokens: float | None = None,
    model: ModelSpec | None = None,
    checkpoint_bytes: float | None = None,
    finetune: bool | None = None,
    moe_dispatcher: str | None = None,
    vendor: str | None = None,
    compile: bool | None = None,
    gradient_dtype: str | None = None,
    context_parallel: str | None = None,
) -> str:
    """The launcher config ``kind`` (one of ``KINDS``, or a kind registered since) for ``plan``, as text to
    write to a file.

    ``job``: the plan's job (a JobSpec, or its ``ExportJob`` facts), which says what a Plan does not: the
    name, sequence length, precision, layer count, method and optimizer, and the run's tokens, model,
    checkpoint size, fine-tune or not, MoE dispatcher, the SKU's vendor, torch.compile, the gradients' dtype and
    the context-parallel exchange (``ExportJob``). Without it, the keywords give them
    one by one (each defaulting as ``ExportJob`` does); with it, a keyword given replaces the job's fact."""
    facts = _facts(
        job,
        name=name,
        seq_len=seq_len,
        precision=precision,
        num_layers=num_layers,
        method=method,
        optimizer=optimizer,
        tokens=tokens,
        model=model,
        checkpoint_bytes=checkpoint_bytes,
        finetune=finetune,
        moe_dispatcher=moe_dispatcher,
        vendor=vendor,
        compile=compile,
        gradient_dtype=gradient_dtype,
        context_parallel=context_parallel,
    )
    if facts.precision not in PRECISIONS:
        raise ArgumentError(
            f"unknown precision {facts.precision!r}; choose one of {', '.join(PRECISIONS)}", field="export"
        )
    launcher = _launcher(kind.lower())
    check_layout(plan)
    check_names(plan, facts)
    check_numbers(plan)
    refuse(plan, launcher, facts, LAUNCHERS.values())
    return launcher.write(plan, facts)
