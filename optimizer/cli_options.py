"""The command line's shared choices and options (the commands of ``optimizer/cli/`` take them): the output
format, the choice enums and the flags several commands share, each declared once with its help text and default
stated."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any

import typer
from typer.models import OptionInfo

from .api import MEMORY_HEADROOM_DEFAULT
from .inputs import units
from .inputs.layout_fields import LAYOUT, LAYOUT_FIELDS, LayoutField
from .present.exports import kinds_text


class Format(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


class Objective(str, Enum):
    cost = "cost"
    time = "time"


class MethodOpt(str, Enum):
    full = "full"
    lora = "lora"
    qlora = "qlora"


class BasisOpt(str, Enum):
    delivered = "delivered"
    reported = "reported"
    label = "label"
    board = "board"


class RegistryOption(OptionInfo):
    """An option whose help is ``text()`` when the command is built (typer reads ``help`` each time it makes
    the click command: every ``gpuplan`` run and every ``CliRunner.invoke``), so that a list it names, such as
    the exports registry's kinds, is the registry's at that moment and never a copy kept by hand."""

    def __init__(self, text: Callable[[], str], *decls: str) -> None:
        self._text = text
        super().__init__(default=None, param_decls=decls)

    @property  # type: ignore[override]
    def help(self) -> str:
        return self._text()

    @help.setter
    def help(self, value: str | None) -> None:  # OptionInfo.__init__ sets it; the text is the registry's
        pass


ExportOpt: Any = RegistryOption(lambda: f"Write a launcher config for the plan: {kinds_text()}.", "--export")
OutOpt = typer.Option(None, "--out", help="File for --export (default, or -: print it).")
FormatOpt = typer.Option(Format.table, "--format", "-f", help="table (for people), json or yaml (for scripts).")
# --quiet after the command as well as before it (gpuplan solve job.yaml -q was "No such option")
QuietOpt = typer.Option(False, "--quiet", "-q", help="Tables: print only the one-line answer.")
CatalogOpt = typer.Option(
    None,
    "--catalog",
    "-c",
    help="Bundled catalog name (default, nodus-2026-11, ...) or a YAML path; overrides the job or portfolio file's.",
)


def choice_enum(field: LayoutField) -> Any:
    """The choices of a layout field as a flag lists them (``--offload <none|optimizer|auto>``)."""
    return Enum(field.name, [(choice, choice) for choice in field.choices or ()], type=str)


def layout_option(field: LayoutField) -> tuple[Any, Any]:
    """A layout field of ``gpuplan check`` (inputs/layout_fields.py) as its flag: its type and its option. Its range
    is checked after parsing (``cli.checks.check_flags``), as the service checks it, so that an error states the
    range and why; a closed range of its own (``--zero 0-3``) is the option's."""
    kind: Any = field.kind
    if field.choices and field.choices_on_flag:
        kind = choice_enum(field)
    low, high = field.bounds or (None, None)
    text = field.help
    if field.limit is not None:  # the range as click states a range it checks itself (--zero's [0<=x<=3])
        limit = units.LIMITS[field.limit]
        text += f"  [{int(limit.low):,}<=x<={int(limit.high):,}]"
    return kind | None, typer.Option(None, field.flag, min=low, max=high, help=text)


# The layout flags of check (the job's framework is solve's and options' too), each made from its declaration.
LAYOUT_OPTIONS: dict[str, tuple[Any, Any]] = {field.name: layout_option(field) for field in LAYOUT_FIELDS}
OffloadOpt: Any = choice_enum(LAYOUT["offload"])
FrameworkOpt = LAYOUT_OPTIONS["framework"][1]
CompileOpt = typer.Option(
    None,
    "--compile/--no-compile",
    help="--compile: the model runs under torch.compile (eager PyTorch layouts at the published compiled speed-up, "
    "1.2x on the matmuls); default: the job file's job.compile, else off, as frameworks ship it.",
)
SpotOpt = typer.Option(
    None,
    "--spot/--no-spot",
    help="--spot: spot capacity only; --no-spot: never spot; default: the file's own (a job's constraints.spot, a "
    "portfolio's spot; allow when unset).",
)
# The constraint flags several planning commands take (catalog takes --min-memory too).
DeadlineOpt = typer.Option(None, "--deadline", help="Finish within, e.g. 5d, 36h.")
BudgetOpt = typer.Option(None, "--budget", help="Spend at most, e.g. 20000, $20k.")
DeadlineQuantileOpt = typer.Option(None, "--deadline-quantile", help="p50 or p90: which time must meet the deadline.")
MaxNodesOpt = typer.Option(None, "--max-nodes", help="At most this many nodes.")
GpuTypesOpt = typer.Option(None, "--gpu-types", help="Only these GPUs, comma-separated: B200,B300.")
MinMemoryOpt = typer.Option(None, "--min-memory", help="Only GPUs with at least this memory (160Gi).")
JobArg = typer.Argument(
    None,
    help="Job file (YAML); see problems/ for examples. Or none, and the job from --model and --tokens.",
    show_default=False,
)
# The job flags (inputs/question.py): a question without a file, or fields over the file's.
ModelOpt = typer.Option(
    None,
    "--model",
    help="A config.json or the model folder holding it (a path that exists comes first, as in 'gpuplan model'), "
    "else a preset (gpuplan models), else a Hugging Face Hub id (meta-llama/Llama-3.1-8B).",
)
MethodJobOpt = typer.Option(None, "--method", help="full, lora or qlora (default full).")
TokensOpt = typer.Option(None, "--tokens", help="Tokens to train on in all: 2B, 500M.")
SeqLenOpt = typer.Option(None, "--seq-len", help="Tokens per sequence: 4096, 8k (8,192) (default 4096).")
GlobalBatchOpt = typer.Option(
    None,
    "--global-batch",
    help="Sequences per step, a whole number (256, 1e3, 1,024), or tokens with their unit ('4M tokens'); default: "
    "a fine-tune's recipe batch (131,072 tokens a step), a pre-training's free batch; 'free': gpuplan chooses.",
)
PrecisionOpt = typer.Option(None, "--precision", help="bf16, fp16, fp8 or nvfp4 (default bf16).")
OptimizerOpt = typer.Option(None, "--optimizer", help="adamw (default), adamw8bit, paged_adamw, sgd, adafactor...")
LoraRankOpt = typer.Option(None, "--lora-rank", min=1, help="LoRA rank (default 16).")
LoraTargetsOpt = typer.Option(
    None,
    "--lora-targets",
    help="The linears LoRA adapts: all_linear (default: attention and MLP), attention (q, k, v, o) or qkv.",
)
MasterWeightsOpt = typer.Option(
    None,
    "--master-weights/--no-master-weights",
    help="An fp32 master copy beside 16-bit weights (AdamW: 12 bytes a parameter). Default: the job file's "
    "job.master_weights, else on. "
    "--no-master-weights: pure bf16 training (torchtune's dtype bf16), AdamW's moments in bf16, 4 bytes.",
)
GradientDtypeOpt = typer.Option(
    None,
    "--gradient-dtype",
    help="auto, bf16 or fp32: the dtype gradients accumulate and reduce in. Default: the job file's "
    "job.gradient_dtype, else auto (each framework's own: fp32 under torchtitan and DDP with autocast, bf16 under "
    "Megatron as exported, DeepSpeed and FSDP). fp32 doubles the data-parallel reduce traffic and under Megatron "
    "(its own default under --bf16) holds 4 bytes a gradient.",
)
HeadroomOpt = typer.Option(
    None,
    "--headroom",
    help="Memory each GPU keeps free beyond the plan's modelled peak (weights, gradients, optimizer, activations, "
    "framework reserve): a share of its usable memory (10%) or a size (8GiB, 8GB); a plan fits only if peak + "
    f"headroom is within the capacity. Default: the file's constraints.memory_headroom, else {MEMORY_HEADROOM_DEFAULT} "
    "(the framework reserve, 1.5 GiB + the allocator's fragmentation, is already counted; torchtune aims at 85-90% "
    "of memory reserved: --headroom 10% plans so). Every table answer states it.",
)
SaveOpt = typer.Option(
    None,
    "--save",
    help="Write the whole question this command planned (the job file, the job and constraint flags, the catalog, "
    "paths made relative to the saved file) as a job file that asks it again.",
)
