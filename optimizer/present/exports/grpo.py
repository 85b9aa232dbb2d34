"""What a GRPO job's RL framework launches share (issue 52, docs/roles.md): the plan as they need it (``GrpoExport``:
where it runs, host by host, and the job's recipe), the refusals every framework makes alike, and the header.

The RL frameworks (NeMo RL: exports/nemo_rl.py; verl: exports/verl.py) run the rollout engines and the trainer in one
Ray job over hosts of equal GPU counts, as ``cluster.num_nodes`` x ``cluster.gpus_per_node`` (NeMo RL) or
``trainer.nnodes`` x ``trainer.n_gpus_per_node`` (verl) name them: a host is an operating-system host (a Ray node),
a GB200 NVL72 rack's tray of 4 where the plan's node is the rack (``gpus_per_host``). Each splits a step's sequences
evenly over the policy's data-parallel ranks and each rank's share into micro-batches (``shard_gaps``), and trains
the policy gpuplan planned: bf16 weights, every parameter, AdamW (``job_gaps``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from ...errors import ArgumentError
from ...planning.grpo import shards_evenly
from ...results import Plan
from .common import ExportJob, _version

POLICY_MODEL = "/path/to/POLICY_MODEL"  # the placeholder where the job names no Hub model


@dataclass(frozen=True)
class GrpoPlacement:
    """Where the plan runs, as the framework's Ray cluster sees it: ``hosts`` of ``gpus_per_host`` GPUs;
    ``rollout_gpus`` generate and ``policy_gpus`` train (both all of them where ``colocated``)."""

    hosts: int
    gpus_per_host: int
    rollout_gpus: int
    policy_gpus: int
    colocated: bool
    asynchronous: bool  # disaggregated only: the rollout one step ahead of training

    @property
    def gpus(self) -> int:
        return self.rollout_gpus if self.colocated else self.rollout_gpus + self.policy_gpus


@dataclass(frozen=True)
class GrpoSettings:
    """A step's batch, its engines and the policy, as the job gives them (job.roles.rollout and the job)."""

    model_name: str | None  # a Hub id; None: the export writes POLICY_MODEL
    params: float
    prompts_per_step: int
    samples_per_prompt: int
    max_total_sequence_length: int  # prompt + the longest response
    max_new_tokens: int | None  # rollout.max_response_tokens; None: not given
    rollout_tp: int
    memory_utilization: float
    max_num_seqs: int
    micro_batch: int
    forward_passes: int
    steps: int
    precision: str
    method: str
    optimizer: str

    @property
    def sequences(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    @property
    def max_response_length(self) -> int:
        """The longest response: max_new_tokens, else what the sequence leaves after a one-token prompt."""
        return self.max_new_tokens or self.max_total_sequence_length - 1


@dataclass(frozen=True)
class GrpoExport:
    """A GRPO plan as its launch needs it: the job's name, the SKU and offer, where it runs, the recipe and what
    the plan gives (tokens/s, hours, cost, what binds)."""

    job: str
    sku: str
    offer: str
    placement: GrpoPlacement
    recipe: GrpoSettings
    tokens_per_s: float
    hours: float
    cost_usd: float
    binding: str


def whole_hosts_gaps(p: GrpoPlacement, framework: str, keys: str) -> list[str]:
    """A plan whose GPUs are not whole hosts beyond one host: the framework's cluster (``keys``) cannot hold it."""
    if p.gpus == p.hosts * p.gpus_per_host:
        return []
    return [
        f"{framework}'s cluster is hosts of the same GPU count ({keys}), and the plan's {p.gpus} GPUs are not whole "
        f"hosts of {p.gpus_per_host}: check a count of whole hosts"
    ]


def shard_gaps(g: GrpoExport, framework: str, source: str) -> list[str]:
    """A step's sequences that do not split evenly over the policy's ranks and their micro-batches (``source``:
    where the framework asserts it)."""
    r, p = g.recipe, g.placement
    if shards_evenly(r.sequences, p.policy_gpus, r.micro_batch):
        return []
    ranks = p.policy_gpus * r.micro_batch
    count = "--role rollout=NxSKU --role policy=NxSKU" if p.colocated else "--role policy=NxSKU"
    return [
        f"{framework} shards a step's {r.sequences} sequences ({r.prompts_per_step} prompts x {r.samples_per_prompt}) "
        f"evenly over its {p.policy_gpus} policy ranks, each in micro-batches of {r.micro_batch} ({source}), and "
        f"{r.sequences} is not a multiple of {ranks}: check a policy GPU count that divides it ({count}), or change "
        "job.roles.rollout.prompts_per_step or job.roles.micro_batch"
    ]


def job_gaps(r: GrpoSettings, framework: str, optimizer_key: str) -> list[str]:
    """The job's precision, method and optimizer where the launch does not train the policy as planned."""
    gaps = []
    if r.precision != "bf16":
        gaps.append(
            f"job.precision is {r.precision}, and gpuplan's GRPO plan holds the policy's weights in bf16 (what the "
            "engines load and the weight sync moves): set job.precision: bf16"
        )
    if r.method != "full":
        gaps.append(
            f"job.method is {r.method}: the launch trains the whole policy ({framework}'s LoRA is not written from a "
            "GRPO plan yet); set job.method: full"
        )
    if r.optimizer != "adamw":
        gaps.append(
            f"job.optimizer is {r.optimizer}, and the {framework} configs train with AdamW ({optimizer_key}), whose "
            "state the plan sized: set job.optimizer: adamw"
        )
    return gaps


def refuse(g: GrpoExport, kind: str, gaps: list[str]) -> None:
    """One paragraph naming what the framework cannot run as planned, and the fix."""
    if gaps:
        raise ArgumentError(
            f"the {kind} export cannot run this plan as planned ({split_words(g)}): {'; '.join(gaps)}", field="export"
        )


def split_words(g: GrpoExport) -> str:
    """The split and where it runs: '8 x H100-SXM, rollout and policy colocated, on one host (lambda-h100-sxm)'."""
    p = g.placement
    where = f"on {p.hosts} hosts of {p.gpus_per_host} ({g.offer})" if p.hosts > 1 else f"on one host ({g.offer})"
    if p.colocated:
        return f"{p.rollout_gpus} x {g.sku}, rollout and policy colocated, {where}"
    mode = "asynchronous (one step stale)" if p.asynchronous else "synchronous"
    return f"{p.rollout_gpus} x {g.sku} rollout + {p.policy_gpus} x {g.sku} policy, {mode}, {where}"


def plan_lines(g: GrpoExport) -> list[str]:
    """The header's first lines: the plan and what it gives; the placeholder where the job names no Hub model."""
    lines = [
        f"gpuplan {_version()}: {g.job}: {split_words(g)}",
        f"planned: {g.tokens_per_s:,.0f} tokens/s, bound by the {g.binding}; {g.hours:,.1f} h, ${g.cost_usd:,.0f}",
    ]
    if g.recipe.model_name is None:
        lines.append(f"placeholder to fill: {POLICY_MODEL} (the policy's Hugging Face model: the job names no Hub id)")
    return lines


def continued(args: list[str], head: int) -> str:
    """A command, its first ``head`` words on one line and then one argument a line, continued with backslashes."""
    first = " ".join(shlex.quote(a) for a in args[:head])
    return " \\\n  ".join([first, *(shlex.quote(a) for a in args[head:])]) + "\n"


def one_model_refused(kind: str, what: str) -> Callable[[Plan, ExportJob], str]:
    """A launcher's ``write`` for a one-model plan, which has no rollout: refused, naming the exports it has."""

    def write(plan: Plan, job: ExportJob) -> str:
        raise ArgumentError(
            f"--export {kind} writes a GRPO job's launch (job.roles.workload: grpo: {what}), and {job.name} trains "
            "one model on all its GPUs: choose skypilot, kubernetes, slurm, torchrun or a framework's export "
            "(deepspeed, megatron, torchtitan, accelerate) for it",
            field="export",
        )

    return write
