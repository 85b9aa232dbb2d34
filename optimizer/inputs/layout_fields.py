"""The layout vocabulary of ``gpuplan check``: one declaration per dimension a user may pin (the GPU count, the
nodes, TP, PP, ZeRO ... the framework), from which every face reads it.

Each ``LayoutField`` names the dimension once (the request's field, the service body's JSON key and, with
dashes, the command-line flag), the ``Strategy`` field it pins, its type, its range (a kind of ``units.LIMITS``,
or a closed interval of its own), its choices (a job field's ``Literal``), the word sentences name it by, and
its help text. Derived from it: ``LAYOUT_RANGES`` (the CLI's flag check and the service's body check),
the ``check`` command's options (``cli_options.layout_option``), the ``check:`` body model
(``server.bodies.check_layout_model``) and ``api.check``'s mapping of a ``CheckRequest`` onto the job and the
fixed layout. ``CheckRequest`` and ``planning.check.Fixed`` keep their typed fields (a type checker reads
them); tests/cli/test_layout_vocabulary.py holds them to this list.

A new layout dimension is one declaration here, its field in ``CheckRequest`` and ``Fixed``, and its physics.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import Field, create_model

from . import units
from .schema import JobSpec, Strategy

# Where a pinned value goes: the hardware row (``check_row``'s GPU and node counts), the job (a field of
# ``JobSpec`` the request overrides) or the fixed layout (``planning.check.Fixed``).
Pins = Literal["hardware", "job", "layout"]


@dataclass(frozen=True)
class LayoutField:
    """One layout dimension of ``gpuplan check``, as every face names and bounds it."""

    name: str  # the request's field and the body's key; the flag is --name with dashes
    pins: Pins
    help: str  # the flag's help and the body field's description
    word: str  # how a sentence names it ("TP", "chunks per GPU")
    strategy: str | None = None  # the Strategy field it pins (None: none holds it by this name)
    kind: type = int
    limit: str | None = None  # its range: a kind of ``units.LIMITS``
    bounds: tuple[int, int] | None = None  # a closed range of its own, where no kind of LIMITS fits
    job_field: str | None = None  # the JobSpec field whose Literal gives its choices
    choices_on_flag: bool = True  # the flag lists the choices (else it reads text, checked where it is used)
    parse: Callable[..., str] | None = None  # text (and the flag, for its errors) -> the value the planner takes

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The values the job field's ``Literal`` allows, or None for a number or free text."""
        if self.job_field is None:
            return None
        return tuple(a for a in get_args(JobSpec.model_fields[self.job_field].annotation) if isinstance(a, str))


LAYOUT_FIELDS: tuple[LayoutField, ...] = (
    LayoutField("gpus", "hardware", "Total GPUs.", "GPUs", limit="gpus"),
    LayoutField("nodes", "hardware", "Nodes; default the fewest that hold the GPUs.", "nodes", limit="nodes"),
    LayoutField("tp", "layout", "Tensor-parallel degree (inside a node).", "TP", "tp", limit="gpus_per_node"),
    LayoutField("pp", "layout", "Pipeline-parallel degree.", "PP", "pp", limit="layers"),
    LayoutField(
        "zero",
        "layout",
        "ZeRO stage 0-3 over every data-parallel rank (FSDP no-shard .. full-shard).",
        "ZeRO",
        "zero_stage",
        bounds=(0, 3),
    ),
    LayoutField(
        "shard_degree",
        "layout",
        "Hybrid shard: ZeRO-3 inside groups of N GPUs (HSDP, ZeRO++ hpZ).",
        "shard degree",
        "shard_degree",
        limit="gpus",
    ),
    LayoutField("cp", "layout", "Context parallelism: GPUs that split each sequence.", "CP", "cp", limit="gpus"),
    LayoutField("ep", "layout", "Expert parallelism (MoE): GPUs that split the experts.", "EP", "ep", limit="gpus"),
    LayoutField(
        "expert_tp",
        "layout",
        "Tensor parallelism inside each expert when it differs from TP (Megatron-Core parallel folding: "
        "EP x expert TP over the TP x DP x CP GPUs).",
        "expert TP",
        "expert_tp",
        limit="gpus_per_node",
    ),
    LayoutField(
        "virtual_stages",
        "layout",
        "Interleaved pipeline chunks per GPU (1 = plain 1F1B).",
        "chunks per GPU",
        "virtual_stages",
        limit="layers",
    ),
    LayoutField(
        "micro_batch", "layout", "Sequences per micro-batch (any).", "micro-batch", "micro_batch", limit="global_batch"
    ),
    LayoutField(
        "grad_accum",
        "layout",
        "Micro-batches per optimizer step (gradient accumulation); with job.global_batch it must give that "
        "batch (DP x micro-batch x accumulation), without it at most the batch cap gpuplan chooses within.",
        "accumulation",
        "grad_accum",
        limit="global_batch",
    ),
    LayoutField(
        "recompute",
        "layout",
        "Activation recompute: none, selective, full (every layer), op (per-op selective: torchtitan's SAC "
        "saves every other matmul's output) or layers:N (full recompute of N layers of each pipeline stage, the "
        "rest keep their activations; Megatron's block method, torchtune's every k-th layer); default: gpuplan "
        "chooses, the fewest layers that fit where the framework recomputes some only.",
        "recompute",
        "recompute",
        kind=str,
        parse=units.parse_recompute,
    ),
    LayoutField(
        "offload",
        "job",
        "Optimizer state in CPU memory: none, optimizer, or auto (gpuplan decides); default: the job file's.",
        "offload",
        "offload",
        kind=str,
        job_field="offload",
    ),
    LayoutField(
        "framework",
        "job",
        "Plan only layouts this framework runs: megatron, deepspeed, torchtitan, fsdp, or auto (any; the default).",
        "framework",
        "framework",
        kind=str,
        job_field="framework",
        choices_on_flag=False,  # a name read as text: 'must be one of ...' where the job takes it
    ),
)

LAYOUT: dict[str, LayoutField] = {f.name: f for f in LAYOUT_FIELDS}


def layout_ranges(fields: Iterable[LayoutField] = LAYOUT_FIELDS) -> dict[str, str]:
    """Each bounded number's name -> its kind of ``units.LIMITS`` (the CLI's flags and the service's fields)."""
    return {f.name: f.limit for f in fields if f.limit is not None}


# check's layout fields (the CLI's flags, the service's check fields) -> the range of ``LIMITS`` each must fall in
LAYOUT_RANGES = layout_ranges()


def strategy_model(fields: Iterable[LayoutField] = LAYOUT_FIELDS) -> type[Strategy]:
    """``Strategy`` with a field for each layout dimension ``fields`` declare that it does not hold yet (None: not
    set), described by the declaration's help, so a new dimension reaches the plan and its JSON from its
    declaration. Over gpuplan's own declarations it is ``Strategy`` itself: each names a field Strategy has
    (tests/cli/test_layout_vocabulary.py)."""
    missing = {
        f.strategy: (f.kind | None, Field(None, description=f.help))
        for f in fields
        if f.pins == "layout" and f.strategy and f.strategy not in Strategy.model_fields
    }
    return create_model("Strategy", __base__=Strategy, **missing) if missing else Strategy  # type: ignore[call-overload]


def pinned(pins: Pins, fields: Iterable[LayoutField] = LAYOUT_FIELDS) -> tuple[str, ...]:
    """The names of the dimensions that pin ``pins`` (the hardware, the job or the fixed layout), in order."""
    return tuple(f.name for f in fields if f.pins == pins)


def words(*names: str) -> dict[str, str]:
    """The Strategy field of each named dimension -> the word a sentence names it by."""
    return {LAYOUT[n].strategy or n: LAYOUT[n].word for n in names}
