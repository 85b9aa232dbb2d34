"""What every export shares: the job's facts, the plan's numbers, the header and the YAML writer.

A Plan carries no job: ``ExportJob`` holds the facts an export needs (name, sequence length, precision,
layer count, method, optimizer), ``job_facts`` reads them off a JobSpec. Each launcher module declares a
``Launcher`` (its ``write(plan, job)``, and for the framework exports its ``gaps``) for the registry in
``__init__.py``.

The numbers: GPUs = nodes x GPUs per node = TP x PP x CP x DP, and the global batch (sequences per
optimizer step) = DP x micro-batch x gradient accumulation; ``check_layout`` refuses a plan where they do not
add up. Every export starts with ``header``: the plan (``describe``), the gpuplan version, the batch and GPU
arithmetic, in the format's comment syntax (``comment``; DeepSpeed's JSON: a top-level ``_comment`` key,
which DeepSpeed's config reader ignores). Read back by tests/exports/test_exports.py
test_every_export_starts_with_a_header_naming_the_plan and test_the_header_reads_like_the_issue.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from importlib import metadata
from typing import Any

import yaml

from ...errors import ArgumentError, GpuplanError, printable
from ...inputs.launch_names import vendor_of
from ...inputs.schema import Assumptions, JobSpec, ModelSpec, Strategy
from ...physics.constants import COMPUTE_OPTIMAL_TOKENS_PER_PARAM
from ...planning.model_state import model_shape, training_state
from ...results import Plan

PRECISIONS = ("bf16", "fp16", "fp8", "nvfp4")  # JobSpec.precision
DEFAULT_SEQ_LEN = 4096  # the Plan carries no sequence length; JobSpec.seq_len's default
MOE_DISPATCHER = Assumptions.model_fields["moe_dispatcher"].default  # the plan's time assumes it unless told


@dataclasses.dataclass(frozen=True)
class ExportJob:
    """The job's facts an export needs, which a Plan does not carry (``job_facts`` reads them off a JobSpec).

    ``seq_len`` (None: 4096, with a note saying to set it), ``precision`` (bf16, fp16, fp8, nvfp4),
    ``num_layers`` (the model's; torchtitan needs it for more than 2 interleaved stages, Megatron for
    activation offload and uneven pipeline stages), ``method`` (full, lora, qlora: the Megatron and torchtitan
    exports write full training only) and ``optimizer`` (job.optimizer: a framework that has no such optimizer
    is refused). The run's facts (``run``): ``tokens`` (the job's total: the run's steps), ``model`` (its
    name and shapes: the framework exports' model flags), ``checkpoint_bytes`` (bf16 weights plus optimizer
    state, as ``planning.reliability.checkpoint_hours`` counts them: the checkpoint interval and disk),
    ``finetune`` (a pretrained model trained further: the exports load its weights) and ``moe_dispatcher``
    (the token dispatcher the plan's time assumed; gpuplan's default where only the job is given). ``vendor``:
    the plan's SKU's (``Sku.vendor``) as the caller's catalog gives it; None: the bundled hardware file's.
    ``compile``: job.compile, the run under torch.compile the plan's speed assumed. ``gradient_dtype``:
    job.gradient_dtype, the gradients' dtype the plan's memory and reduce traffic assumed. ``context_parallel``:
    job.context_parallel, the CP exchange (ring or Ulysses' all-to-all) the plan's time assumed."""

    name: str = "gpuplan-job"
    seq_len: int | None = None
    precision: str = "bf16"
    num_layers: int | None = None
    method: str = "full"
    optimizer: str = "adamw"
    tokens: float | None = None
    model: ModelSpec | None = None
    checkpoint_bytes: float | None = None
    finetune: bool = False
    moe_dispatcher: str = MOE_DISPATCHER
    vendor: str | None = None
    compile: bool = False
    gradient_dtype: str = "auto"
    context_parallel: str = "ring"


def _checkpoint_bytes(job: JobSpec) -> float | None:
    """bf16 weights plus optimizer state (``planning.reliability.checkpoint_hours``'s count); None where the
    training state cannot be sized (adapters of a params-only model)."""
    try:
        shape = model_shape(job.model)
        train = training_state(job, shape)
    except GpuplanError:
        return None
    return float(
        train.weights_total(shape.params) - 2.0 * train.teacher_params + train.optimizer_bytes * train.trainable_params
    )


def is_finetune(job: JobSpec) -> bool:
    """``JobContext.is_finetune``'s rule on the job alone: adapters, a teacher, or full training on fewer tokens
    than compute-optimal pre-training takes (``COMPUTE_OPTIMAL_TOKENS_PER_PARAM``)."""
    if job.method != "full" or job.teacher_params:
        return True
    return job.total_tokens < COMPUTE_OPTIMAL_TOKENS_PER_PARAM * float(job.model.params)


def job_facts(job: JobSpec) -> ExportJob:
    """The export's facts of a job (what ``gpuplan solve --export`` passes)."""
    return ExportJob(
        name=job.name,
        seq_len=job.seq_len,
        precision=job.precision,
        num_layers=job.model.layers,
        method=job.method,
        optimizer=job.optimizer,
        tokens=job.total_tokens,
        model=job.model,
        checkpoint_bytes=_checkpoint_bytes(job),
        finetune=is_finetune(job),
        compile=job.compile,
        gradient_dtype=job.gradient_dtype,
        context_parallel=job.context_parallel,
    )


@dataclasses.dataclass(frozen=True)
class Command:
    """What a framework's export runs under torchrun, for a launcher (Slurm) to run the same: ``target``, the
    script or module and its arguments (one argument with its value each); ``env``, the variables it exports;
    ``files``, the files it reads, by name (written beside the launcher's script)."""

    target: list[str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    files: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Launcher:
    """One export kind, as its module declares it (``LAUNCHER``) and ``exports.register`` lists it.

    ``write(plan, job)``: the file's text, for a plan whose layout adds up and that ``gaps`` does not refuse.
    ``gaps(plan, job)``: only for exports that can refuse a plan (the frameworks'): what the tool's config
    cannot express, to which ``gaps.export_gaps`` adds the planner's rules for the framework of the same name
    and the LoRA plans it does not write; a refusal names the other exports with ``gaps`` that can write the
    plan. ``reads_seq_len``: False where the config has no sequence length, whose refusal then checks no
    sequence-length rule (its own or, naming the exports that can, the others'). ``aliases``: other names
    ``export`` takes for it (``KINDS`` lists ``kind`` only). ``suffix``: the file's, as its tool names it (the
    service's downloads are named with it). ``summary``: what the file is, in a few words, after the kind in
    the lists that name every kind (the CLI's ``--export`` help, the service's schema). ``command``: for a
    framework's export, the ``Command`` its file runs, which the Slurm export runs for a plan of that
    framework."""

    kind: str
    write: Callable[[Plan, ExportJob], str]
    gaps: Callable[[Plan, ExportJob], list[str]] | None = None
    reads_seq_len: bool = True
    aliases: tuple[str, ...] = ()
    suffix: str = "txt"
    summary: str = ""
    command: Callable[[Plan, ExportJob], Command] | None = None


def _version() -> str:
    try:
        return metadata.version("gpuplan")
    except metadata.PackageNotFoundError:
        return "unknown"


def ep(s: Strategy) -> int:
    """Expert-parallel ranks (carved out of the DP x CP ranks; 1 for dense models and older Strategies)."""
    return int(getattr(s, "ep", 1))


def hybrid(s: Strategy) -> bool:
    """ZeRO-3 sharded over a group smaller than the ranks that hold the same weights (DP x CP)."""
    return s.zero_stage >= 3 and s.shard_degree < s.dp * s.cp


def check_layout(plan: Plan) -> None:
    s = plan.strategy
    if plan.nodes * plan.gpus_per_node != plan.gpus or s.tp * s.pp * s.cp * s.dp != plan.gpus:
        raise ArgumentError(
            f"the plan's layout does not add up: {plan.nodes} nodes x {plan.gpus_per_node} GPUs, "
            f"TP {s.tp} x PP {s.pp} x CP {s.cp} x DP {s.dp}, against {plan.gpus} GPUs",
            field="export",
        )


def describe(plan: Plan) -> str:
    """One line naming the plan, e.g. '4 x 8 B200 (offer), TP 8 PP 4 DP 1, ZeRO-1, global batch 256'."""
    s = plan.strategy
    degrees = (
        f"TP {s.tp} PP {s.pp} DP {s.dp}" + (f" CP {s.cp}" if s.cp > 1 else "") + (f" EP {ep(s)}" if ep(s) > 1 else "")
    )
    zero = f"ZeRO-{s.zero_stage}" + (f" hybrid-sharded over {s.shard_degree} GPUs" if hybrid(s) else "")
    return f"{plan.label()}, {degrees}, {zero}, global batch {s.global_batch}"


def header(plan: Plan, precision: str, lines: list[str] | None = None, notes: list[str] | None = None) -> list[str]:
    s = plan.strategy
    details = [f"recompute {s.recompute_label}", precision]
    if s.virtual_stages > 1:
        details.append(f"{s.virtual_stages} virtual pipeline stages per GPU")
    if s.offload != "none":
        details.append("optimizer state offloaded to CPU")
    out = [
        f"gpuplan {_version()}: {describe(plan)}",
        f"global batch {s.global_batch} = DP {s.dp} x micro-batch {s.micro_batch} x gradient accumulation "
        f"{s.grad_accum}; {plan.gpus} GPUs = TP {s.tp} x PP {s.pp} x CP {s.cp} x DP {s.dp}; " + ", ".join(details),
    ]
    cost = f", ${plan.cost_usd.p50:,.0f}" if plan.cost_usd is not None else ""
    out.append(f"planned: p50 {plan.hours.p50:.1f} h{cost} (labelled framework: {s.framework})")
    if plan.gpus_per_host:
        out.append(
            f"NVLink joins the {plan.gpus_per_node} GPUs of each node; launched as {plan.hosts} hosts of "
            f"{plan.gpus_per_host} GPUs, which must share that NVLink domain (one rack: Slurm --segment; Kubernetes: "
            "NVIDIA's DRA driver ComputeDomain), or TP and the collectives the plan times there cross the network"
        )
    # each line one line, whatever the plan's names hold (comments, DeepSpeed's _comment strings)
    return [one_line(line) for line in out + (lines or []) + [f"note: {n}" for n in notes or []]]


# Characters that end a line in some format an export is read as (YAML 1.1: NEL, LS, PS; Python's
# str.splitlines: VT, FF, FS, GS, RS too): beside the C0 and C1 controls (errors.printable), written as escapes
_LINE_ENDS = {0x2028: "\\u2028", 0x2029: "\\u2029"}


def one_line(text: str) -> str:
    """``text`` with its control characters and line separators written as escapes (``\\x0a``): a name from
    a plan quoted in a comment can neither start a line (a foreign ``#SBATCH``, a command, a YAML key or a
    TOML table) nor send escape sequences to a terminal."""
    return printable(text).translate(_LINE_ENDS)


def comment(lines: list[str]) -> str:
    """The lines as comments (``# ``), each one line whatever its text holds (``one_line``)."""
    return "".join(f"# {one_line(line)}\n" if line else "#\n" for line in lines)


def check_numbers(plan: Plan) -> None:
    """An ArgumentError for a plan number an export writes that is no finite, non-negative number (NaN or
    Infinity in a plan from a request body): a time limit, a cost or a memory size cannot be written from it."""
    numbers = {
        "hours.p50": plan.hours.p50,
        "hours.p90": plan.hours.p90,
        "memory_gib.total": plan.memory_gib.total,
        "memory_gib.capacity": plan.memory_gib.capacity,
    }
    if plan.cost_usd is not None:
        numbers.update({"cost_usd.p50": plan.cost_usd.p50, "cost_usd.p90": plan.cost_usd.p90})
    for field, value in numbers.items():
        if not math.isfinite(value) or value < 0:
            raise ArgumentError(
                f"the plan's {field} is {value}, and an export writes it: give a finite number of at least 0 "
                "(export the plan gpuplan wrote)",
                field=f"plan.{field}",
            )


def check_names(plan: Plan, job: ExportJob) -> None:
    """An ArgumentError for a name an export cannot write to a file: text that is no Unicode (a lone surrogate,
    as a JSON body may spell it), which no UTF-8 file holds."""
    names = {"job name": job.name, "SKU": plan.sku, "offer": plan.offer or "", "provider": plan.provider or ""}
    for what, text in names.items():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ArgumentError(
                f"the plan's {what} {one_line(text.encode('utf-8', 'backslashreplace').decode())!r} holds a lone "
                "surrogate, which no UTF-8 file can hold: give it as text",
                field="export",
            ) from None


def sku_vendor(plan: Plan, job: ExportJob) -> str:
    """The vendor of the plan's SKU (``Sku.vendor``): the job's where its caller read it off the catalog, else
    the bundled hardware file's (``launch_names.vendor_of``)."""
    return job.vendor or vendor_of(plan.sku)


def adapter_line(method: str) -> list[str]:
    """For DeepSpeed and accelerate, whose configs have no setting for adapters: what the script must add
    for the plan's memory to hold (a LoRA or QLoRA plan fits where training every weight would not)."""
    if method == "lora":
        return ["method lora: the plan trains LoRA adapters on a frozen bf16 model; wrap the model with "
                "peft.get_peft_model(model, peft.LoraConfig(...)) in your script (this config trains what the model "
                "leaves trainable)"]  # fmt: skip
    if method == "qlora":
        return ["method qlora: the plan trains LoRA adapters on a 4-bit NF4 base; load the model with "
                "BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type='nf4') and wrap it with "
                "peft.get_peft_model(model, peft.LoraConfig(...)) in your script (this config trains what the model "
                "leaves trainable)"]  # fmt: skip
    return []


class _Dumper(yaml.SafeDumper):
    """Safe YAML with multi-line strings as literal blocks (readable shell scripts) and no anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str_block(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str_block)


def yaml_text(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
