"""Input schema: hardware SKUs, offers, catalogs, models, jobs, assumptions, constraints, strategies.

Pydantic v2 models. YAML keys are what people type (``memory: 180GB``, ``price: $5.50/h``); each
is parsed by ``units`` on the way in and stored in a field whose name carries its unit
(``memory_bytes``, ``price_usd_per_gpu_hour``). Cross-field rules are small validators with
one-sentence messages. Results (plans, verdicts) live in ``results``.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializationInfo,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    computed_field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ..errors import JobError, UnitError, printable
from ..physics.constants import (
    FAILURES_PER_GPU_HOUR,
    FITTED_OVERLAP,
    HOST_LINK_GB_PER_S_PER_GPU,
    HOST_MEMORY_GB_PER_S_PER_GPU,
    NEAR_TIE_FRACTION,
    NEAR_TIE_MIN_USD,
    budget_cents,
)
from . import units
from .roles import RolesSpec

# A model's params may differ from what its shapes hold by at most this factor either way. The shapes
# count the language model alone, so a vision tower or a multi-token-prediction head as large as it still
# passes (DeepSeek-V3's published 685B against 671B counted), while a typo of ten (7B shapes, 70B
# params) or a units slip (M for B) is refused.
PARAMS_SHAPES_RATIO_MAX = 2.0

# A GPU's memory as nvidia-smi / rocm-smi reports it (a SKU's memory_reported), or as a provider's VM delivers it
# (an offer's memory_delivered), may exceed the vendor's label by at most this factor. Labels are nominal, and
# often GiB written as GB (2^30 / 10^9 = 1.074): the bundled figures run up to 1.074 x their label (A100-80GB
# 81,920 MiB = 85.9 GB; H100 80GB 81,559 MiB = 85.5 GB; H200 143,771 MiB = 150.8 GB for 141 GB; B200 183,359 MiB
# = 192.3 GB for 180 GB; MI300X 205.8 GB for 192 GB). More is another unit (40 GiB on an 8 GB card) or another
# quantity (2 TB, a node's memory, on one B200), and would plan models the GPU cannot hold.
MEMORY_ABOVE_LABEL_MAX = 1.1
# Any memory figure is at least 1 GiB, and a reported or delivered one at least a tenth of the label: below
# 1 GiB no GPU holds the CUDA context and NCCL buffers gpuplan reserves before any model (1.5 GiB,
# physics/constants.py FRAMEWORK_RESERVE_*), and the smallest share of a GPU anyone rents is a MIG 1g slice,
# an eighth of its memory (A100-40GB 1g.5gb, H100 1g.10gb, H200 1g.18gb, B200 1g.23gb: 12.5-12.8 %). Less is a
# units slip (1e-9GB, MB for GB).
MEMORY_MIN_BYTES = 2.0**30
MEMORY_OF_LABEL_MIN = 0.1


def _memory_text(n_bytes: float) -> str:
    if n_bytes >= 1e8:
        return f"{n_bytes / units.GB:,.1f} GB = {n_bytes / units.GIB:,.1f} GiB"
    return f"{n_bytes:,.4g} byte{'' if n_bytes == 1 else 's'}"


def memory_figure_problem(field: str, value: float, label: float, reference: float, against: str) -> str | None:
    """What is wrong with a reported or delivered memory figure ``value`` (bytes) of a GPU labelled ``label``,
    checked against ``reference`` (the label, or what the GPU reports), which ``against`` names with a ``{}``
    for the figure ('the label (memory {})'); None if nothing is."""
    if value > MEMORY_ABOVE_LABEL_MAX * reference:
        return (
            f"{field} {_memory_text(value)} is {value / reference:,.3g} x {against.format(_memory_text(reference))}; "
            f"a GPU's memory is at most {MEMORY_ABOVE_LABEL_MAX:g} x its label (a B200 labelled 180 GB reports "
            "183,359 MiB = 192.3 GB), and no VM gets more than its GPU has: give the per-GPU figure in its unit "
            "(MiB, GiB, GB), not a node's total"
        )
    floor = max(MEMORY_MIN_BYTES, MEMORY_OF_LABEL_MIN * label)
    if value < floor:
        which = "1 GiB" if floor == MEMORY_MIN_BYTES else f"a tenth of the label ({_memory_text(label)})"
        return (
            f"{field} {_memory_text(value)} is less than {which}: less than any GPU has, or a MIG slice of one "
            "(an eighth of it); check its unit (MiB, GiB, GB)"
        )
    return None


def _unit(example: str) -> WithJsonSchema:
    """JSON Schema for a field that takes a number or a string with a unit."""
    return WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}], "examples": [example]})


Bytes = Annotated[float, BeforeValidator(lambda v: units.parse_bytes(v, "a memory size")), _unit("180GB")]


def _seconds_by_alias(value: float, info: SerializationInfo) -> float | str:
    """Durations are stored in seconds but read as hours when bare: dumped by alias (the file's own
    names), they are written with their unit, so the dump reads back as the same model."""
    if info.by_alias:
        return f"{value:.6f}".rstrip("0").rstrip(".") + "s"
    return value


Seconds = Annotated[
    float,
    BeforeValidator(lambda v: units.parse_duration_s(v, "a duration")),
    PlainSerializer(_seconds_by_alias),
    _unit("5d"),
]
Usd = Annotated[float, BeforeValidator(lambda v: units.parse_usd(v, "an amount in USD")), _unit("$20,000")]
UsdPerHour = Annotated[float, BeforeValidator(lambda v: units.parse_price_per_hour(v)), _unit("$5.50/h")]
Count = Annotated[float, BeforeValidator(lambda v: units.parse_count(v)), _unit("70B")]


def _cost_tolerance(value: Any) -> str | float:
    """``auto``, a share of the cheapest plan's cost (``2%``) or an amount in USD (``$5``, 0 for none)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            percent = float(value.strip()[:-1].replace(",", ""))
        except ValueError:
            percent = math.nan
        if not 0 <= percent <= 100:
            raise ValueError(f"{value!r} is not a share of the cost; give a percentage from 0% to 100%, e.g. 1%")
        return f"{percent:g}%"
    negative = (isinstance(value, str) and value.strip().startswith("-")) or (
        isinstance(value, int | float) and value < 0
    )
    usd = math.nan if negative else units.parse_usd(value, "an amount in USD")
    if negative:
        raise ValueError(f"{value!r} is negative; give an amount such as $5, a share such as 1%, or 0 for none")
    return usd


CostTolerance = Annotated[str | float, BeforeValidator(_cost_tolerance), _unit("1%")]


def memory_headroom(value: Any) -> str | float:
    """A share of each GPU's usable memory (``10%``, or a bare fraction below 1) as ``"10%"``, or a size
    (``8GiB``, ``8GB``) in bytes: the memory a plan leaves free beyond its modelled peak."""
    # (its own error type: the field's size range is no help with a share or a word)
    forms = "a share of the GPU's usable memory from 0% to below 100% (10%), a size (8GiB, 8GB), or 0 for none"
    text = value.strip() if isinstance(value, str) else None
    if text is not None and text.endswith("%"):
        try:
            percent = float(text[:-1].replace(",", ""))
        except ValueError:
            percent = math.nan
        if not 0 <= percent < 100:
            raise PydanticCustomError("memory_headroom", f"{value!r} is no memory headroom; give {forms}")
        return f"{percent:g}%"
    try:
        size = units.parse_bytes_or_fraction(value, "a memory headroom")
    except UnitError:
        size = math.nan
    if not size >= 0:
        raise PydanticCustomError("memory_headroom", f"{value!r} is no memory headroom; give {forms}")
    return f"{100.0 * size:g}%" if 0 < size < 1 else size


MemoryHeadroom = Annotated[str | float, BeforeValidator(memory_headroom), _unit("10%")]


def a_name(value: str) -> str:
    """A name people select things by and read in tables: not blank, and without control characters (a
    line break in a job or offer name splits its table row and cuts the one-line answer short)."""
    if not value.strip():
        raise ValueError("a name cannot be blank")
    if printable(value) != value:
        raise ValueError("a name cannot hold control characters such as a line break or a tab")
    if any(c in BIDI_CONTROLS for c in value):
        # U+202E shows 'evil' as 'live' in every table the name appears in
        raise ValueError("a name cannot hold bidirectional text controls (U+200E/F, U+202A-E, U+2066-9)")
    return value


# Unicode's explicit directional formatting characters (UAX #9, "Explicit Directional Formatting")
BIDI_CONTROLS = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


Name = Annotated[str, AfterValidator(a_name)]

Precision = Literal["bf16", "fp16", "fp8", "nvfp4"]
Method = Literal["full", "lora", "qlora"]
Recompute = Literal["none", "selective", "full", "op"]
MemoryBasis = Literal["delivered", "reported", "label", "board"]
Framework = Literal["megatron", "deepspeed", "torchtitan", "fsdp"]


# Every numeric input field -> its range in ``units.LIMITS`` (by attribute name, or ``Class.attribute``
# where one name means different things). tests/test_hostile.py checks that none is missing.
_RANGES: dict[str, str] = {
    # Sku, Offer
    "memory_label_bytes": "memory",
    "memory_reported_bytes": "memory",
    "board_memory_bytes": "memory",
    "memory_delivered_bytes": "memory",
    "hbm_bandwidth_gb_per_s": "bandwidth",
    "intra_node_bandwidth_gb_per_s": "bandwidth",
    "network_gb_per_s_per_gpu": "bandwidth",
    "host_link_gb_per_s": "bandwidth",
    "dense_bf16_tflops": "tflops",
    "dense_fp8_tflops": "tflops",
    "dense_fp4_tflops": "tflops",
    "gpus_per_node": "gpus_per_node",
    "gpus_per_host": "gpus_per_node",
    "default_mfu": "fraction",
    "price_usd_per_gpu_hour": "price",
    "spot_price_usd_per_gpu_hour": "price",
    "spot_preemptions_per_node_hour": "preemptions",
    "Offer.max_nodes": "offer_nodes",
    "max_nodes": "nodes",
    "billing_increment_s": "billing_increment",
    # ModelSpec
    "params": "params",
    "active_params": "params",
    "layers": "layers",
    "hidden": "width",
    "heads": "heads",
    "kv_heads": "heads",
    "head_dim": "width",
    "v_head_dim": "width",
    "q_lora_rank": "width",
    "kv_lora_rank": "width",
    "sliding_window": "seq_len",
    "window_layers": "dense_layers",
    "ffn_hidden": "width",
    "moe_ffn_hidden": "width",
    "dense_layers": "dense_layers",
    "vocab": "vocab",
    "experts": "experts",
    "experts_per_token": "experts",
    "shared_experts": "shared_experts",
    "swiglu_limit": "activation_clamp",
    # Measurement, JobSpec
    "Measurement.gpus": "gpus",
    "nodes": "nodes",
    "tokens_per_s": "rate",
    "peak_memory_bytes": "memory",
    "lora_rank": "lora_rank",
    "trainable_params": "params",
    "teacher_params": "params",
    "tokens": "tokens",
    "dataset_tokens": "tokens",
    "epochs": "epochs",
    "seq_len": "seq_len",
    "global_batch": "global_batch",
    "bytes_per_param": "bytes_per_param",
    "activation_reserve": "reserve",
    # Assumptions
    "mfu": "fraction",
    "matmul_efficiency": "fraction",
    "overlap": "share",
    "moe_overlap": "share",
    "moe_host_ms_per_layer": "host_ms",
    "link_efficiency": "fraction",
    "framework_overhead": "reserve",
    "startup_s": "overhead",
    "restart_s": "overhead",
    "failure_rate_per_gpu_hour": "failure_rate",
    "checkpoint_gb_per_s_per_node": "bandwidth",
    "host_memory_per_node_bytes": "memory",
    "host_link_gb_per_s_per_gpu": "bandwidth",
    "host_memory_gb_per_s_per_gpu": "bandwidth",
    # GpuFilter, Constraints
    "min_memory_bytes": "memory",
    "count": "gpus_per_node",
    "deadline_s": "duration",
    "budget_usd": "budget",
    "cost_tolerance": "cost_tolerance",
    "memory_headroom": "reserve",
    "max_gpus": "gpus",
    # portfolio
    "start_s": "offset",
    "end_s": "duration",
    "PoolWindow.gpus": "pool_gpus",
    "Pool.gpus": "pool_gpus",
    "release_s": "offset",
    "weight": "priority",
    "horizon_s": "duration",
    "time_step_s": "duration",
}

# Fields that also take text: how the text reads as a number, and that number's range.
_TEXT_FORMS = {
    "global_batch": (lambda v: units.parse_count(v, "a global batch in tokens"), "tokens"),
    "activation_reserve": (lambda v: units.parse_bytes_or_fraction(v, "a memory size"), "reserve"),
    "framework_overhead": (lambda v: units.parse_bytes(v, "a memory size"), "reserve"),
}

# pydantic's own bound checks (and its "too large for an integer"), replaced by the range with its reason.
_BOUND_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number", "int_parsing_size"}
)


def _lowercase_choices(annotation: Any) -> frozenset[str]:
    """The choices of a Literal of lowercase words (job.precision, job.method, ...), else none."""
    if get_origin(annotation) is not Literal:
        return frozenset()
    choices = get_args(annotation)
    if not all(isinstance(c, str) and c == c.lower() for c in choices):
        return frozenset()
    return frozenset(choices)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _choice_in_any_case(cls, value: Any, info: ValidationInfo) -> Any:
        """``precision: NVFP4`` or ``method: LoRA`` as their lowercase choice, as SKU and model names match in any
        case; anything else is left to the field's own validation (and its message)."""
        if isinstance(value, str) and info.field_name in cls.model_fields:
            choices = _lowercase_choices(cls.model_fields[info.field_name].annotation)
            if value not in choices and value.strip().lower() in choices:
                return value.strip().lower()
        return value

    @field_validator("*", mode="wrap")
    @classmethod
    def _sensible_number(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """A numeric field's value within its ``units.LIMITS`` range: no booleans read as 1, no NaN, no
        infinities, no magnitudes that would overflow the solver; the message states the range and why."""
        kind = _RANGES.get(f"{cls.__name__}.{info.field_name}") or _RANGES.get(info.field_name or "")
        if kind is None:
            return handler(value)
        limit = units.LIMITS[kind]
        if isinstance(value, bool):
            raise ValueError(f"expected a number, not {str(value).lower()}; it {limit.text()}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(limit.text())
        try:
            result = handler(value)
        except ValidationError as exc:
            errors = exc.errors()
            if {e["type"] for e in errors} <= _BOUND_ERRORS:
                raise ValueError(limit.text()) from None
            if len(errors) == 1 and errors[0]["type"] == "value_error":  # text that reads as no number
                raise ValueError(f"{errors[0]['msg'].removeprefix('Value error, ')}; it {limit.text()}") from None
            raise
        number = result
        free = info.field_name == "global_batch" and isinstance(result, str) and result.strip().lower() == "free"
        if isinstance(result, str) and info.field_name in _TEXT_FORMS and result != "auto" and not free:
            parse, text_kind = _TEXT_FORMS[info.field_name]
            limit = units.LIMITS[text_kind]
            try:
                number = parse(result)
            except UnitError as exc:
                raise ValueError(f"{exc.reason}; it {limit.text()}") from None
        if isinstance(number, (int, float)) and not isinstance(number, bool) and not limit.allows(number):
            raise ValueError(limit.text())
        return result


# --------------------------------------------------------------------------- hardware and offers


def _checked_not_ahead(value: dt.date | None) -> dt.date | None:
    """A ``checked`` date is when someone read the figures, so not later than tomorrow (a day of slack for
    time zones): a later one is a typo (2062 for 2026) that would show stale prices as fresh."""
    if value is not None and value > dt.date.today() + dt.timedelta(days=1):
        raise ValueError("the date is in the future: give the day the figures were read (YYYY-MM-DD)")
    return value


class Sku(_Model):
    """One accelerator model with sourced, dated specs (dense, never sparse, TFLOPS)."""

    name: Name = Field(description="Canonical name, e.g. B200; matched case-insensitively.")
    aliases: list[Name] = Field(default_factory=list, description="Other names: H100, b200-hgx, ...")
    vendor: str = "NVIDIA"
    architecture: str = ""
    form_factor: str = Field("sxm", description="sxm, pcie or oam: decides the default efficiency class.")
    memory_label_bytes: Bytes = Field(alias="memory", gt=0, description="Vendor label, e.g. 180GB.")
    memory_reported_bytes: Bytes | None = Field(
        None, alias="memory_reported", description="What nvidia-smi/rocm-smi reports, e.g. 183359MiB."
    )
    board_memory_bytes: Bytes | None = Field(
        None, alias="board_memory", description="Board total as the vendor's HGX table states it (e.g. 2.1TB)."
    )
    hbm_bandwidth_gb_per_s: float = Field(gt=0, description="Memory bandwidth per GPU, GB/s (10^9).")
    dense_bf16_tflops: float = Field(gt=0, description="Dense BF16 tensor TFLOPS (vendors quote sparse: halve).")
    dense_fp8_tflops: float | None = Field(None, gt=0)
    dense_fp4_tflops: float | None = Field(None, gt=0)
    interconnect: str = Field("", description="Intra-node link, e.g. NVLink 5 or PCIe Gen5 x16.")
    intra_node_bandwidth_gb_per_s: float = Field(
        gt=0, description="Per-GPU intra-node bandwidth, bidirectional (vendor convention), GB/s."
    )
    network_gb_per_s_per_gpu: float | None = Field(None, gt=0, description="Scale-out network per GPU, GB/s.")
    host_link_gb_per_s: float | None = Field(None, gt=0, description="GPU-host link per GPU per direction, GB/s.")
    gpus_per_node: int = Field(8, ge=1, le=72)
    gpus_per_host: int | None = Field(
        None,
        description="GPUs one operating-system host holds where NVLink joins several hosts into one node "
        "(GB200/GB300 NVL72: compute trays of 4); default: gpus_per_node.",
    )
    default_mfu: float | None = Field(None, gt=0, le=1, description="Compute efficiency default for this SKU.")
    checked: dt.date | None = None
    sources: list[str] = Field(default_factory=list)
    notes: str = ""

    _checked = field_validator("checked")(_checked_not_ahead)

    @field_validator("memory_label_bytes")
    @classmethod
    def _a_gpu_memory(cls, value: float) -> float:
        if value < MEMORY_MIN_BYTES:
            raise ValueError(
                f"memory {_memory_text(value)} is less than 1 GiB, less than any GPU has (the CUDA context alone "
                "takes about that); check its unit (GB, GiB)"
            )
        return value

    @field_validator("memory_reported_bytes")
    @classmethod
    def _reported_near_label(cls, value: float | None, info: ValidationInfo) -> float | None:
        label = info.data.get("memory_label_bytes")
        if value is not None and label:
            problem = memory_figure_problem("memory_reported", value, label, label, "the label (memory {})")
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _host_fits_node(self) -> Sku:
        if self.gpus_per_host is not None and self.gpus_per_node % self.gpus_per_host:
            raise ValueError(
                f"gpus_per_host {self.gpus_per_host} does not divide gpus_per_node {self.gpus_per_node}: a node (the "
                "GPUs NVLink joins) holds whole hosts (an NVL72 rack: 18 trays of 4)"
            )
        return self

    def dense_tflops(self, precision: str) -> float | None:
        return {
            "bf16": self.dense_bf16_tflops,
            "fp16": self.dense_bf16_tflops,
            "fp8": self.dense_fp8_tflops,
            "nvfp4": self.dense_fp4_tflops,
        }[precision]


class Offer(_Model):
    """A row of a provider's price sheet."""

    name: Name = Field(description="Unique offer id within the catalog, e.g. nodus-b200.")
    sku: str = Field(description="Name or alias of a SKU in the hardware file.")
    provider: str = ""
    aliases: list[Name] = Field(default_factory=list, description="Names users select it by (type: B200).")
    price_usd_per_gpu_hour: UsdPerHour = Field(alias="price", gt=0)
    spot_price_usd_per_gpu_hour: UsdPerHour | None = Field(None, alias="spot_price", gt=0)
    spot_preemptions_per_node_hour: float = Field(
        0.02, ge=0, description="Expected preemptions per node-hour on spot capacity (assumed 0.02 when not stated)."
    )
    gpus_per_node: int = Field(8, ge=1, le=72)
    gpu_counts: list[int] | None = Field(
        None, description="GPU counts rentable on one node; default: the divisors-of-two up to gpus_per_node."
    )
    max_nodes: int = Field(1, ge=1, description="Supply: most nodes one job can get.")
    memory_delivered_bytes: Bytes | None = Field(None, alias="memory_delivered", description="Memory delivered a GPU.")
    billing_increment_s: Seconds = Field(60.0, alias="billing_increment", gt=0)
    whole_nodes: bool = Field(True, description="Multi-node jobs rent whole nodes.")
    checked: dt.date | None = None
    source: str = ""
    illustrative: bool = False

    _checked = field_validator("checked")(_checked_not_ahead)

    @model_validator(mode="after")
    def _spot_below_on_demand(self) -> Offer:
        spot = self.spot_price_usd_per_gpu_hour
        if spot is not None and spot > self.price_usd_per_gpu_hour:
            # AWS caps a spot bid at the on-demand price; Google, Azure and the GPU clouds sell spot at a
            # discount: a spot price above on-demand is a swapped or mistyped column, and would plan the
            # dearer, preemptible capacity as if it were the bargain
            raise ValueError(
                f"spot_price ${spot:,.2f}/h is above price ${self.price_usd_per_gpu_hour:,.2f}/h: spot capacity is sold "
                "below on-demand; check whether the two are swapped"
            )
        return self

    @model_validator(mode="after")
    def _counts_fit_node(self) -> Offer:
        if self.gpu_counts is not None and not self.gpu_counts:
            raise ValueError(
                "gpu_counts is empty: list the GPU counts one node rents, or leave it out for the powers of two "
                "up to gpus_per_node"
            )
        for count in self.gpu_counts or []:
            if count < 1 or count > self.gpus_per_node:
                raise ValueError(f"gpu_counts entry {count} is outside 1..gpus_per_node ({self.gpus_per_node})")
        return self

    def single_node_counts(self) -> list[int]:
        if self.gpu_counts:
            return sorted(set(self.gpu_counts))
        counts, n = [], 1
        while n < self.gpus_per_node:
            counts.append(n)
            n *= 2
        return counts + [self.gpus_per_node]


class CatalogFile(_Model):
    """A catalog file as written: SKUs, offers, or includes of other catalogs."""

    name: str | None = None
    description: str = ""
    include: list[str] = Field(default_factory=list, description="Other catalogs (names or paths) to merge in.")
    hardware: str | None = Field(None, description="The hardware file the offers' SKUs come from.")
    skus: list[Sku] = Field(default_factory=list)
    offers: list[Offer] = Field(default_factory=list)


class Catalog(_Model):
    name: str
    description: str = ""
    skus: list[Sku]
    offers: list[Offer] = Field(default_factory=list)
    source_files: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- model and job


class ModelSpec(_Model):
    """A transformer, by total parameters alone or by its shapes (which the physics prefers).

    In files, ``preset: llama-3.1-70b`` / ``hf_config: path/to/config.json`` / ``hub: meta-llama/Llama-3.1-70B``
    (or the bare name or id) stand for these fields:
    ``inputs.files`` expands them before validation (``inputs.hf_models.resolve``), so this schema
    reads no files."""

    @model_validator(mode="before")
    @classmethod
    def _presets_are_expanded_first(cls, data):
        if isinstance(data, str) or (isinstance(data, dict) and {"preset", "hf_config", "hub"} & set(data)):
            raise ValueError(
                "a preset, hf_config or hub id is expanded when a file is read: use optimizer.load_job, "
                "or optimizer.inputs.files.expand_models on the mapping first"
            )
        return data

    name: str | None = None
    params: Count = Field(gt=0, description="Total parameters (70B, 14e9).")
    active_params: Count | None = Field(None, gt=0, description="Parameters used per token (MoE).")
    layers: int | None = Field(None, ge=1)
    hidden: int | None = Field(None, ge=1)
    heads: int | None = Field(None, ge=1)
    kv_heads: int | None = Field(None, ge=1, description="Key/value heads (GQA); default heads.")
    head_dim: int | None = Field(None, ge=1, description="Default hidden / heads.")
    v_head_dim: int | None = Field(
        None, ge=1, description="Value head width where it differs from head_dim (DeepSeek MLA: 128 vs 192)."
    )
    q_lora_rank: int | None = Field(
        None, ge=1, description="MLA query compression rank (DeepSeek-V3: 1536): more activations kept per token."
    )
    kv_lora_rank: int | None = Field(
        None, ge=1, description="MLA key/value latent rank (DeepSeek-V3: 512): more activations kept per token."
    )
    sliding_window: int | None = Field(
        None, ge=1, description="Tokens a windowed layer attends to (GPT-OSS: 128, Mistral 7B v0.1: 4096)."
    )
    window_layers: int | None = Field(
        None, ge=0, description="Layers with the sliding window (GPT-OSS: every other one); default all of them."
    )
    ffn_hidden: int | None = Field(
        None,
        ge=1,
        description="MLP width: of the dense layers, or per expert for MoE when moe_ffn_hidden is not given.",
    )
    moe_ffn_hidden: int | None = Field(None, ge=1, description="Width of one routed (and shared) expert (MoE).")
    dense_layers: int = Field(0, ge=0, description="Layers with a dense MLP instead of experts (DeepSeek's first 3).")
    vocab: int | None = Field(None, ge=1)
    gated_mlp: bool = Field(True, description="SwiGLU-style gate+up+down (Llama, Qwen, Mistral).")
    tied_embeddings: bool = Field(
        False, description="The LM head shares the input embedding's matrix (config.json tie_word_embeddings)."
    )
    qk_norm: bool = Field(
        False, description="Per-head RMSNorm on queries and keys (Qwen3): more activations saved for backward."
    )
    sandwich_norms: bool = Field(
        False, description="RMSNorms after attention and after the MLP as well as before them (Gemma 2 and 3)."
    )
    norm_fp32_weight: bool = Field(
        False,
        description="The RMSNorm multiplies its weight in fp32 before casting back (Gemma's 1 + w, GPT-OSS): it "
        "keeps the normalised input in fp32 for backward.",
    )
    router_fp32: bool = Field(
        False,
        description="The MoE router's GEMM runs in fp32 (DeepSeek-V3; Megatron --moe-router-dtype fp32): it keeps "
        "an fp32 copy of each token's hidden state for backward.",
    )
    swiglu_limit: float | None = Field(
        None, gt=0, description="Clamped SwiGLU (GPT-OSS: gate and up clamped at this value; config.json swiglu_limit)."
    )
    experts: int | None = Field(None, ge=1)
    experts_per_token: int | None = Field(None, ge=1)
    shared_experts: int = Field(0, ge=0)
    config_path: str | None = Field(None, exclude=True)  # the config.json read for ``hf_config`` (an input)

    @model_validator(mode="after")
    def _shapes_consistent(self) -> ModelSpec:
        if self.active_params is not None and self.active_params > self.params:
            raise ValueError("active_params is larger than params; active parameters are a subset of the total")
        if self.heads and self.kv_heads and self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.experts_per_token and self.experts and self.experts_per_token > self.experts:
            raise ValueError(
                f"experts_per_token ({self.experts_per_token}) is larger than experts ({self.experts}): each token "
                "visits some of a layer's routed experts; give the counts the model was trained with"
            )
        if (self.experts is None) != (self.experts_per_token is None):
            given, missing = ("experts", "experts_per_token") if self.experts else ("experts_per_token", "experts")
            raise ValueError(
                f"{given} is given without {missing}; a mixture of experts needs both: how many routed experts "
                "each MoE layer has (experts) and how many of them each token visits (experts_per_token)"
            )
        if self.experts is None:
            # fields of a mixture of experts that a dense model would drop without a word
            moe_only = {"shared_experts": self.shared_experts, "dense_layers": self.dense_layers}
            moe_only["moe_ffn_hidden"] = self.moe_ffn_hidden or 0
            moe_given = [f"{k} ({v})" for k, v in moe_only.items() if v]
            if moe_given:
                raise ValueError(
                    f"{' and '.join(moe_given)} {'describes' if len(moe_given) == 1 else 'describe'} a mixture of experts, "
                    "but no experts are given: give experts and experts_per_token, or leave these out for a dense model"
                )
        if self.q_lora_rank is not None and self.kv_lora_rank is None:
            raise ValueError(
                f"q_lora_rank ({self.q_lora_rank}) is given without kv_lora_rank: query compression is part of "
                "multi-head latent attention (DeepSeek-V3: q_lora_rank 1536, kv_lora_rank 512); give kv_lora_rank "
                "too, or leave q_lora_rank out"
            )
        if self.layers is not None and self.dense_layers > self.layers:
            raise ValueError(f"dense_layers ({self.dense_layers}) is more than layers ({self.layers})")
        if self.layers is not None and self.window_layers is not None and self.window_layers > self.layers:
            raise ValueError(f"window_layers ({self.window_layers}) is more than layers ({self.layers})")
        if self.has_shapes:
            counted = self.shape_params()
            if not 1 / PARAMS_SHAPES_RATIO_MAX <= self.params / counted <= PARAMS_SHAPES_RATIO_MAX:
                raise ValueError(
                    f"params is {units.fmt_count(self.params)}, but the shapes given (layers {self.layers}, hidden "
                    f"{self.hidden}, ffn_hidden {self.ffn_hidden}, vocab {self.vocab}"
                    + (f", {self.experts} experts" if self.experts else "")
                    + f") hold {units.fmt_count(counted)} parameters, and memory and time would be planned for "
                    "the wrong model: give the params of these shapes, or fix the shapes (a preset or hf_config "
                    "fills in both)"
                )
        return self

    def shape_params(self) -> float:
        """The parameters the shapes hold, counted as ``hf_models.count_params`` counts a config.json (the
        same within 0.03 % for every bundled preset; biases and norms are left out here)."""
        assert self.layers and self.hidden and self.heads and self.ffn_hidden and self.vocab
        h, heads = self.hidden, self.heads
        head_dim = self.head_dim or h // heads
        v_head_dim = self.v_head_dim or head_dim
        if self.kv_lora_rank:  # multi-head latent attention (DeepSeek-V2/V3)
            q_rank = self.q_lora_rank or 0
            q = h * q_rank + q_rank * heads * head_dim if q_rank else h * heads * head_dim
            attention = q + h * self.kv_lora_rank + self.kv_lora_rank * heads * (head_dim + v_head_dim)
        else:
            attention = h * heads * head_dim + 2 * h * (self.kv_heads or heads) * head_dim
        attention += heads * v_head_dim * h
        matrices = 3 if self.gated_mlp else 2
        if self.experts:
            width = self.moe_ffn_hidden or self.ffn_hidden
            moe_layers = self.layers - self.dense_layers
            per_moe_layer = (self.experts + self.shared_experts) * matrices * h * width + h * self.experts
            mlp = self.dense_layers * matrices * h * self.ffn_hidden + moe_layers * per_moe_layer
        else:
            mlp = self.layers * matrices * h * self.ffn_hidden
        return float(self.layers * attention + mlp + (1 if self.tied_embeddings else 2) * self.vocab * h)

    @property
    def has_shapes(self) -> bool:
        return all(v is not None for v in (self.layers, self.hidden, self.heads, self.ffn_hidden, self.vocab))


Rate = Annotated[float, BeforeValidator(lambda v: units.parse_rate(v, "a throughput in tokens/s")), _unit("14.8k")]


class Measurement(_Model):
    """A short run's throughput (and peak memory) on one configuration."""

    sku: str = Field(description="GPU name or alias, as check --sku.")
    gpus: int = Field(ge=1)
    nodes: int | None = Field(None, ge=1, description="Default: the fewest nodes that hold the GPUs.")
    tokens_per_s: Rate = Field(gt=0, description="Measured training throughput, e.g. 14.8k.")
    peak_memory_bytes: Bytes | None = Field(None, alias="peak_memory", gt=0, description="Peak per GPU, e.g. 71GiB.")
    # the --measured text this came from (None: the job file), so that an error names the flag
    _flag: str | None = PrivateAttr(None)

    def from_flag(self, text: str) -> Measurement:
        self._flag = text
        return self

    @property
    def flag(self) -> str | None:
        return self._flag


class JobSpec(_Model):
    name: Name = "job"
    model: ModelSpec
    method: Method = "full"
    lora_rank: int = Field(16, ge=1)
    trainable_params: Count | None = Field(None, gt=0, description="Adapter parameters without shapes (LoRA/QLoRA).")
    teacher_params: Count | None = Field(
        None, gt=0, description="A frozen teacher/target run forward-only each step (distillation, drafters)."
    )
    tokens: Count | None = Field(None, gt=0, description="Tokens to process in total.")
    dataset_tokens: Count | None = Field(None, gt=0)
    epochs: float | None = Field(None, gt=0)
    seq_len: int = Field(4096, ge=1)
    global_batch: int | str | None = Field(
        None,
        description="Sequences per optimizer step (an int) or tokens ('4M tokens'); default: a fine-tune's "
        "recipe batch (131,072 tokens a step), a pre-training's free batch; 'free': any batch gpuplan finds "
        "cheapest up to twice the compute-optimal one.",
    )
    precision: Precision = "bf16"
    optimizer: Literal["adamw", "adamw8bit", "paged_adamw", "paged_adamw8bit", "sgd", "adafactor"] = Field(
        "adamw",
        description="paged_*: bitsandbytes paged optimizers, whose state pages to CPU memory when the GPU runs "
        "out (Dettmers et al. 2023, QLoRA), so it is not counted in GPU memory.",
    )
    bytes_per_param: float | None = Field(None, gt=0, description="Training-state bytes per parameter.")
    activation_reserve: Literal["auto"] | float | str = Field(
        "auto", description="auto (from shapes), a size per GPU (40GB) or a fraction of capacity (0.2)."
    )
    attention: Literal["flash", "cudnn", "eager"] = Field(
        "flash",
        description="Attention kernels: flash (fused, the framework's own: PyTorch SDPA's FlashAttention-2, "
        "Transformer Engine's cuDNN attention under Megatron-Core), cudnn (cuDNN's fused attention whatever the "
        "framework: Transformer Engine's attention in a PyTorch stack, SDPA's cuDNN backend), eager (the s x s "
        "scores materialised). Their speed: physics/attention.py.",
    )
    lora_targets: Literal["all_linear", "attention", "qkv"] = Field(
        "all_linear",
        description="LoRA on every linear layer, on q, k, v and o only (attention), or on the fused query-key-value "
        "projection only (qkv: Megatron's linear_qkv, as NeMo's and Megatron-Bridge's performance recipes).",
    )
    loss: Literal["standard", "chunked", "flash", "fused"] = Field(
        "standard",
        description="Cross-entropy memory: standard (the framework's own: PyTorch's fp32 log-softmax and "
        "gradients, Megatron-Core's in place), chunked (bf16 logits, fp32 per chunk: torchtune), flash "
        "(flash-attn's Triton cross-entropy: bf16 logits and their gradient; llm-foundry's default), fused (no "
        "full logits: Liger's fused linear cross-entropy).",
    )
    kernels: Literal["auto", "fused", "eager"] = Field(
        "auto",
        description="Kernels: fused (Transformer Engine's norms and SwiGLU, Megatron-Core's or a PyTorch stack's) keep "
        "fewer activations than eager PyTorch (Hugging Face, torchtitan) and, without compile, run at its speed; "
        "auto: the framework's each layout is labelled with (fused for megatron or under compile, else eager).",
    )
    compile: bool = Field(
        False,
        description="The model runs under torch.compile (torchtitan compile.enable, torchtune compile, HF "
        "Trainer torch_compile): an eager PyTorch stack's element-wise kernels fused, at the published compiled "
        "over eager speed-up (physics/efficiency.py COMPILE_SPEEDUPS) and with fused kernels' activations under "
        "kernels: auto. Megatron-Core layouts keep Transformer Engine's fused kernels. Default false, as the "
        "frameworks ship it (torchtitan CompileConfig.enable = False).",
    )
    framework: Literal["auto", "megatron", "deepspeed", "torchtitan", "fsdp"] = Field(
        "auto",
        description="The framework the team runs: only layouts it can run are planned (auto: the best over all, "
        "each labelled with a framework that runs it).",
    )
    # set by check where it pins a framework on a framework-auto question (never read from a file): the layout's
    # framework is the pin's, its efficiency auto's (planning/context.py fused_efficiency_ratio)
    framework_pinned: bool = Field(False, exclude=True)
    offload: Literal["none", "optimizer", "auto"] = Field(
        "none", description="Optimizer state in CPU memory (ZeRO-Offload): never, always, or where it pays."
    )
    optimizer_in_backward: bool = Field(
        False,
        description="Optimizer step fused into the backward pass, each parameter updated and its gradient freed as "
        "soon as it is computed, so no full set of gradients is held (torchtune optimizer_in_bwd, torchtitan "
        "optimizer.early_step_in_backward; PyTorch tutorial 'How to save memory by fusing the optimizer step into "
        "the backward pass'). No gradient accumulation and no pipeline parallelism with it.",
    )
    master_weights: bool = Field(
        True,
        description="Mixed precision with an fp32 master copy (AdamW 12 B/param of state: Megatron, DeepSpeed, "
        "HF Trainer). false: pure bf16 as torchtune's dtype: bf16, the optimizer state in the parameters' dtype "
        "(AdamW 4 B, 8-bit AdamW 2 B, SGD 2 B).",
    )
    activation_offload: bool = Field(
        False,
        description="Activations saved for backward moved to pinned CPU memory during forward and brought back "
        "during backward, on a side stream (torchtune enable_activation_offloading, OffloadActivations; "
        "Megatron-Core cpu_offloading_activations). Costs PCIe time where the transfer outlasts the compute.",
    )
    measured: list[Measurement] = Field(default_factory=list, description="Short-run measurements to calibrate from.")
    roles: RolesSpec | None = Field(None, description="GPUs split between roles (docs/roles.md); unset: one model.")

    @model_validator(mode="after")
    def _tokens_given_once(self) -> JobSpec:
        if self.tokens is None and self.dataset_tokens is None:
            raise ValueError("give job.tokens, or job.dataset_tokens with job.epochs")
        if self.tokens is not None and self.dataset_tokens is not None:
            raise ValueError("give job.tokens or job.dataset_tokens + job.epochs, not both")
        if self.tokens is not None and self.epochs is not None:
            # tokens is the total; epochs would be ignored without a word
            raise ValueError(
                "job.epochs goes with job.dataset_tokens (tokens = dataset_tokens x epochs); with job.tokens, "
                "give the total tokens and drop epochs"
            )
        batch = self.global_batch_sequences
        if batch is not None and batch * self.seq_len > self.total_tokens:
            raise ValueError(
                f"one optimizer step of global_batch {batch:,} x seq_len {self.seq_len:,} = "
                f"{units.fmt_count(batch * self.seq_len)} tokens is more than the job's "
                f"{units.fmt_count(self.total_tokens)} tokens; lower global_batch or check the tokens"
            )
        return self

    @property
    def free_batch(self) -> bool:
        """``global_batch: free``: any batch up to the scaling-law cap, whatever the method."""
        return isinstance(self.global_batch, str) and self.global_batch.strip().lower() == "free"

    @property
    def total_tokens(self) -> float:
        if self.tokens is not None:
            return float(self.tokens)
        return float(self.dataset_tokens or 0.0) * float(self.epochs or 1.0)

    @property
    def global_batch_sequences(self) -> int | None:
        """The batch the job file gives, in sequences (None: not given, or free)."""
        if self.global_batch is None or self.free_batch:
            return None
        if isinstance(self.global_batch, int):
            return self.global_batch
        return units.batch_sequences(units.parse_count(self.global_batch, "job.global_batch"), self.seq_len)


class Assumptions(_Model):
    mfu: Literal["auto"] | float = Field(
        "auto",
        description="Compute efficiency of the whole step when compute-bound, attention included (0-1); auto: per SKU.",
    )
    matmul_efficiency: Literal["auto"] | float = Field(
        "auto",
        description="Share of the 16-bit peak the linear layers' GEMMs reach (0-1), as run (compiled or fused); "
        "attention keeps its kernels' own (physics/attention.py). auto: the fitted model per GPU family "
        "(physics/efficiency.py). mfu, when given, replaces both.",
    )
    overlap: float = Field(FITTED_OVERLAP, ge=0, le=1, description="Share of compute hiding data-parallel traffic.")
    moe_overlap: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Share of expert-parallel all-to-all hidden behind compute: 0 for Megatron's default "
        "dispatcher, up to 1 with DeepEP / DualPipe (DeepSeek-V3 report, section 3.2.1).",
    )
    moe_dispatcher: Literal["auto", "alltoall", "deepep", "hybridep"] = Field(
        "auto",
        description="Expert-parallel token dispatcher: alltoall (a copy per routed expert), deepep or hybridep (a "
        "copy per destination rank and remote node; HybridEP permutes in its kernels); auto: deepep where the "
        "expert-parallel group spans nodes, alltoall inside one (Megatron-Core's MoE README).",
    )
    moe_host_ms_per_layer: float | None = Field(
        None,
        description="Host time per MoE layer and micro-batch (forward + backward, ms) that the GPU waits for: kernel "
        "launches after the dispatcher's host-device sync of the token counts. None = gpuplan's default "
        "(docs/design.md 5.11); 0 where full-iteration CUDA graphs remove it.",
    )
    lora_branch_traffic: bool = Field(True, description="Count LoRA's branch kernels (physics/adapters.py).")
    zero3_gathers: Literal["auto", "micro_batch", "step"] = Field(
        "auto",
        description="When ZeRO-3 / FSDP gathers weights and reduce-scatters gradients under gradient accumulation: "
        "micro_batch (FSDP2's default: gathered for forward and again for backward, gradients reduced after each "
        "micro-batch), step (weights held unsharded and gradients accumulated unsharded over the step, reduced "
        "once: torch.distributed.pipelining with FSDP2, NeMo AutoModel's enable_fsdp_optimizations), auto (the "
        "framework's rule, planning/frameworks.py).",
    )
    link_efficiency: float = Field(0.8, gt=0, le=1, description="Achieved / nominal bandwidth for collectives.")
    framework_overhead: Literal["auto"] | float | str = Field(
        "auto", description="CUDA context, NCCL buffers, fragmentation: auto, a size or a fraction of capacity."
    )
    scaling_efficiency: dict[int, float] = Field(
        default_factory=dict, description="Explicit efficiency by node count; replaces the derived one there."
    )
    startup_s: Seconds = Field(600.0, alias="startup", ge=0, description="Start-up and final checkpoint time.")
    failure_rate_per_gpu_hour: float = Field(
        FAILURES_PER_GPU_HOUR, ge=0, description="Interruptions per GPU-hour (Llama 3: 419 in 54 days on 16,384 GPUs)."
    )
    checkpoint_gb_per_s_per_node: float = Field(2.0, gt=0, description="Checkpoint write bandwidth per node, GB/s.")
    host_memory_per_node_bytes: Bytes = Field(
        2e12,
        alias="host_memory_per_node",
        gt=0,
        description="CPU memory per host for optimizer offload (2TB; unset, an NVL72 tray of 4 GPUs gets half).",
    )
    host_link_gb_per_s_per_gpu: float = Field(
        HOST_LINK_GB_PER_S_PER_GPU, gt=0, description="GPU-host PCIe bandwidth per GPU, GB/s."
    )
    host_memory_gb_per_s_per_gpu: float = Field(
        HOST_MEMORY_GB_PER_S_PER_GPU,
        gt=0,
        description="CPU DRAM bandwidth share per GPU for the offloaded optimizer step, GB/s.",
    )
    restart_s: Seconds = Field(600.0, alias="restart", ge=0, description="Time to restart after an interruption.")
    memory_basis: MemoryBasis = Field(
        "delivered", description="Capacity used for fit: delivered (offer) > reported (nvidia-smi) > label."
    )

    @field_validator("scaling_efficiency", mode="before")
    @classmethod
    def _node_counts_are_numbers(cls, value: Any) -> Any:
        """``{true: 0.5}`` is not node count 1 (pydantic would read it so)."""
        if isinstance(value, dict):
            for key, eff in value.items():
                if isinstance(key, bool) or isinstance(eff, bool):
                    raise ValueError(
                        f"scaling_efficiency maps node counts to efficiencies ({{2: 0.95, 4: 0.9}}); got {key!r}: {eff!r}"
                    )
        return value

    @model_validator(mode="after")
    def _efficiency_range(self) -> Assumptions:
        fraction = units.LIMITS["fraction"]
        for name, value in (("mfu", self.mfu), ("matmul_efficiency", self.matmul_efficiency)):
            if isinstance(value, float) and not fraction.allows(value):
                raise ValueError(f"{name} {value} {fraction.text()}: it is a fraction of dense peak")
        for nodes, eff in self.scaling_efficiency.items():
            if nodes < 1 or not fraction.allows(eff):
                raise ValueError(
                    f"scaling_efficiency {{{nodes}: {eff}}} needs nodes >= 1 and an efficiency that {fraction.text()}"
                )
        return self


class GpuFilter(_Model):
    min_memory_bytes: Bytes | None = Field(None, alias="min_memory", gt=0)
    types: list[str] | None = None
    providers: list[str] | None = None

    @field_validator("types", "providers")
    @classmethod
    def _names_something(cls, value: list[str] | None, info: ValidationInfo) -> list[str] | None:
        if value is not None and not value:  # as --gpu-types '' is refused: an empty filter is a slip
            example = "[B200, B300]" if info.field_name == "types" else "[RunPod, Lambda]"
            raise ValueError(f"an empty list names nothing; give one or more ({example}) or leave the key out")
        return value

    count: int | None = Field(None, ge=1, description="GPUs per node (the seed's spec.resources.gpu.count).")


class Constraints(_Model):
    deadline_s: Seconds | None = Field(None, alias="deadline", gt=0)
    budget_usd: Usd | None = Field(None, alias="budget", gt=0)
    max_nodes: int | None = Field(None, ge=1)
    max_gpus: int | None = Field(None, ge=1)
    gpu: GpuFilter = Field(default_factory=GpuFilter)
    deadline_quantile: Literal["p50", "p90"] = "p50"
    spot: Literal["allow", "never", "only"] = Field(
        "allow", description="Spot capacity: allow (default), never (on-demand only) or only (spot only)."
    )
    cost_tolerance: CostTolerance = Field(
        "auto",
        description="Under the cost objective, a faster plan costing at most this much more than the cheapest "
        "is chosen over it: auto (1 % of the cheapest plan's cost or $1, whichever is larger), a share "
        "(2%), an amount ($5), or 0 for the cheapest plan whatever its time.",
    )
    memory_headroom: MemoryHeadroom | None = Field(
        None,
        description="Memory each GPU keeps free beyond the plan's modelled peak (weights, gradients, optimizer, "
        "activations and the framework reserve): a plan fits only if peak + headroom <= the usable capacity. A "
        "share of the usable capacity (10%) or a size (8GiB, 8GB); unset: gpuplan's default "
        "(physics/memory.py MEMORY_HEADROOM_DEFAULT, stated in every answer).",
    )

    def cost_tolerance_cents(self, cheapest_cents: int) -> int:
        """How many cents above ``cheapest_cents`` a faster plan may cost and still be chosen."""
        tolerance = self.cost_tolerance
        if tolerance == "auto":
            usd = max(NEAR_TIE_FRACTION * cheapest_cents / 100.0, NEAR_TIE_MIN_USD)
        elif isinstance(tolerance, str):
            usd = float(tolerance[:-1]) / 100.0 * cheapest_cents / 100.0
        else:
            usd = tolerance
        return budget_cents(usd)


class Problem(_Model):
    """A job file: the job plus its catalog, assumptions, constraints and objective."""

    catalog: str | None = None
    objective: Literal["cost", "time"] = "cost"
    job: JobSpec
    assumptions: Assumptions = Field(default_factory=Assumptions)
    constraints: Constraints = Field(default_factory=Constraints)
    source_path: str | None = Field(None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _kubernetes_gpu_spec(cls, data):
        """Accept the seed's job spec block ``spec.resources.gpu: {minMemory, count, type}`` as GPU filters."""
        if not isinstance(data, dict) or "spec" not in data:
            return data
        data = dict(data)
        spec = data.pop("spec")
        shape = "spec takes resources.gpu: {minMemory, count, type} (e.g. spec: {resources: {gpu: {count: 8}}})"
        # each level a mapping with only the key that leads on: a typo (resource:) or a stray key would
        # otherwise drop the GPU filter without a word, and the plan would run on any GPU
        if not isinstance(spec, dict) or set(spec) != {"resources"}:
            raise JobError(f"{shape}; got {spec!r}", field="spec")
        resources = spec["resources"]
        if not isinstance(resources, dict) or set(resources) != {"gpu"}:
            raise JobError(f"{shape}; got {resources!r}", field="spec.resources")
        gpu = resources["gpu"]
        if not isinstance(gpu, dict) or not gpu or set(gpu) - {"minMemory", "count", "type"}:
            raise JobError(f"{shape}; got {gpu!r}", field="spec.resources.gpu")
        constraints = data.get("constraints") or {}
        if not isinstance(constraints, dict) or not isinstance(constraints.get("gpu") or {}, dict):
            return data  # left for Constraints' and GpuFilter's own messages
        constraints = dict(constraints)
        filters = dict(constraints.get("gpu") or {})
        # where both blocks give a filter they must agree: either winning would plan on a GPU the other excludes
        if "minMemory" in gpu:
            _same_filter(gpu["minMemory"], filters, "min_memory", "minMemory", _same_memory)
        if "type" in gpu:
            types = filters.get("types")
            if isinstance(types, list) and all(isinstance(t, str) for t in types):
                _same_filter(gpu["type"], filters, "types", "type", _type_among)
                filters["types"] = [gpu["type"]]  # the one type both blocks allow
        if "count" in gpu:
            _same_filter(gpu["count"], filters, "count", "count", _same_number)
        for key, spec_key in (("min_memory", "minMemory"), ("types", "type"), ("count", "count")):
            if spec_key in gpu and filters.get(key) is None:
                filters[key] = [gpu[spec_key]] if key == "types" else gpu[spec_key]
        constraints["gpu"] = filters
        data["constraints"] = constraints
        return data


def _same_filter(spec_value: Any, filters: dict, key: str, spec_key: str, agree) -> bool:
    """Whether ``constraints.gpu.<key>`` is given and agrees with ``spec.resources.gpu.<spec_key>``; refused
    naming both where it disagrees."""
    given = filters.get(key)
    if given is None:
        return False
    if not agree(spec_value, given):
        raise JobError(
            f"spec.resources.gpu.{spec_key} ({_shown(spec_value)}) and constraints.gpu.{key} ({_shown(given)}) "
            "disagree: both filter the GPUs a plan may use, and either one winning would plan what the other "
            "excludes; give the filter in one of the two places, or make them agree",
            field=f"spec.resources.gpu.{spec_key}",
        )
    return True


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _same_memory(spec: Any, given: Any) -> bool:
    try:
        x = units.parse_bytes(spec, "a memory size")
    except UnitError as exc:
        raise JobError(exc.reason, field="spec.resources.gpu.minMemory") from None
    try:
        y = units.parse_bytes(given, "a memory size")
    except UnitError:
        return True  # left for GpuFilter's message on constraints.gpu.min_memory
    return math.isclose(x, y, rel_tol=1e-9)


def _same_number(a: Any, b: Any) -> bool:
    def number(v: Any) -> Any:
        if isinstance(v, bool):
            return v
        try:
            return float(v)
        except (TypeError, ValueError):
            return v

    return number(a) == number(b)


def sku_key(name: str) -> str:
    """How GPU and offer names are matched: case-insensitively, ``_`` and spaces read as ``-`` (``h100_sxm``
    is H100-SXM)."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def _type_among(spec_type: Any, types: Any) -> bool:
    """Whether the spec's GPU type is one of the constraints' (names as ``catalog.sku_key`` matches them: in any
    case, ``_`` and spaces as ``-``; an alias of another spelling is not resolved here, without the catalog)."""
    return isinstance(spec_type, str) and any(sku_key(t) == sku_key(spec_type) for t in types)


# --------------------------------------------------------------------------- strategy


class Strategy(_Model):
    """How a job runs on its GPUs. dp x micro_batch x grad_accum = global batch (sequences)."""

    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    zero_stage: int = Field(0, ge=0, le=3)
    shard_degree: int = Field(1, ge=1, description="GPUs one ZeRO shard group spans (dp = full shard).")
    micro_batch: int = Field(1, ge=1)
    grad_accum: int = Field(1, ge=1)
    recompute: Recompute = "none"
    recompute_layers: int | None = Field(
        None,
        ge=1,
        description="Under full recompute, the layers of each pipeline stage that re-run their forward pass "
        "(Megatron's --recompute-method block, per stage, all its chunks together); None: all of them.",
    )
    virtual_stages: int = Field(1, ge=1, description="Interleaved pipeline chunks per GPU (1 = plain 1F1B).")
    offload: Literal["none", "optimizer"] = Field("none", description="ZeRO-Offload: optimizer state in CPU memory.")
    optimizer_in_backward: bool = Field(False, description="Optimizer step fused into backward (job field).")
    activation_offload: bool = Field(False, description="Saved activations offloaded to CPU memory (job field).")
    cp: int = Field(1, ge=1, description="Context parallelism: ranks that split each sequence (ring attention).")
    ep: int = Field(1, ge=1, description="Expert parallelism: ranks that split the routed experts of an MoE model.")
    expert_tp: int | None = Field(
        None,
        ge=1,
        description="Tensor parallelism inside each routed expert under Megatron-Core's parallel folding "
        "(EP x expert TP over the TP x DP x CP ranks); None: the experts are split by tp.",
    )
    framework: Framework | Literal["none"] = Field(
        "fsdp",
        description="The framework that runs this layout (its rules: docs/design.md 3.5); none: no framework runs it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _derived_keys_are_not_inputs(cls, data):
        # ``global_batch`` is written out for readers; reading a written strategy back derives it again.
        if isinstance(data, dict) and "global_batch" in data:
            data = {k: v for k, v in data.items() if k != "global_batch"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: dp x micro_batch x grad_accum."""
        return self.dp * self.micro_batch * self.grad_accum

    @model_validator(mode="after")
    def _layers_under_full_recompute(self) -> Strategy:
        if self.recompute_layers is not None and self.recompute != "full":
            raise ValueError(
                f"recompute_layers counts fully recomputed layers: set recompute: full (got {self.recompute})"
            )
        return self

    @property
    def partial_layers(self) -> int | None:
        """The layers of each stage fully recomputed when not all of them are (None: every layer, or no full
        recompute; a strategy copied with another recompute keeps no stale count)."""
        return self.recompute_layers if self.recompute == "full" else None

    @property
    def recompute_label(self) -> str:
        """As --recompute takes it: none, selective, full (every layer), op or layers:N."""
        return f"layers:{self.partial_layers}" if self.partial_layers else self.recompute

    @property
    def recompute_text(self) -> str:
        """'full recompute', 'full recompute of 5 layers per stage'."""
        if self.partial_layers:
            return f"full recompute of {self.partial_layers} layers{' per stage' if self.pp > 1 else ''}"
        return "per-op selective recompute" if self.recompute == "op" else f"{self.recompute} recompute"


# --------------------------------------------------------------------------- portfolio


class PoolWindow(_Model):
    start_s: Seconds = Field(alias="from", ge=0, description="Offset from the portfolio start, e.g. 0d.")
    end_s: Seconds = Field(alias="to", gt=0, description="Offset from the portfolio start, e.g. 14d.")
    gpus: int = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> PoolWindow:
        if self.end_s <= self.start_s:
            raise ValueError("a window's 'to' must be after its 'from'")
        return self


class Pool(_Model):
    """GPUs of one offer available at once, optionally different inside time windows."""

    offer: Name = Field(description="Offer name, offer alias or SKU name/alias (as check --sku).")
    gpus: int = Field(ge=0, description="GPUs available concurrently outside any window.")
    windows: list[PoolWindow] = Field(default_factory=list)

    @model_validator(mode="after")
    def _windows_apart(self) -> Pool:
        ordered = sorted(self.windows, key=lambda w: w.start_s)
        for a, b in zip(ordered, ordered[1:]):
            if b.start_s < a.end_s:
                raise ValueError(
                    f"two windows overlap (from {units.fmt_duration(a.start_s)} to {units.fmt_duration(a.end_s)}, "
                    f"and from {units.fmt_duration(b.start_s)}); each time has one supply: make them not overlap"
                )
        return self


class PortfolioJob(_Model):
    name: Name
    file: str | None = Field(None, description="A job file (relative to the portfolio file).")
    job: JobSpec | None = None
    assumptions: Assumptions | None = None
    gpu: GpuFilter | None = None
    deadline_s: Seconds | None = Field(None, alias="deadline", gt=0, description="From the portfolio start.")
    release_s: Seconds = Field(0.0, alias="release", ge=0, description="Earliest start, from the portfolio start.")
    weight: float = Field(1.0, alias="priority", gt=0)
    required: bool = True
    after: list[Name] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _not_both_sources(cls, data: Any) -> Any:
        # before the inline job is validated on its own: a partial 'job:' beside 'file:' reads as an
        # override, and 'job.model: required field is missing' would point at the wrong fix
        if isinstance(data, dict) and data.get("file") is not None and data.get("job") is not None:
            raise ValueError(
                "give either 'file:' (a job file) or an inline 'job:', not both: to change a job file's fields, "
                "copy it and edit the copy, or write the whole job inline"
            )
        return data

    @model_validator(mode="after")
    def _one_source(self) -> PortfolioJob:
        if (self.file is None) == (self.job is None):
            raise ValueError("give either 'file:' (a job file) or an inline 'job:', not both or neither")
        if self.deadline_s is not None and self.deadline_s <= self.release_s:
            raise ValueError(
                f"job {self.name!r}: its deadline ({self.deadline_s / 3600:g}h from the portfolio start) is not after "
                f"its release ({self.release_s / 3600:g}h); both count from the portfolio start: move the deadline "
                "later or the release earlier"
            )
        return self


class Portfolio(_Model):
    catalog: str | None = None
    start: dt.date | None = None

    @field_validator("start", mode="before")
    @classmethod
    def _a_day(cls, value: Any) -> Any:
        if isinstance(value, dt.datetime) and value.timetz().replace(tzinfo=None) != dt.time():
            raise ValueError(
                "the portfolio's start is a day (its calendar counts from that midnight), not a time of day: "
                "write the date alone (2027-01-04) and give jobs a release (release: 10h) to start them later"
            )
        return value

    horizon_s: Seconds = Field(alias="horizon", gt=0)
    budget_usd: Usd | None = Field(None, alias="budget", gt=0)
    objective: Literal["cost", "makespan", "weighted_lateness"] = "cost"
    spot: Literal["allow", "never", "only"] = Field(
        "allow", description="Spot capacity for every job: allow (default), never or only."
    )
    time_step_s: Seconds = Field(3600.0, alias="time_step", gt=0, description="Schedule granularity (1h).")
    pools: list[Pool] = Field(default_factory=list)
    jobs: list[PortfolioJob] = Field(min_length=1)
    source_path: str | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _names_and_dependencies(self) -> Portfolio:
        names = [j.name for j in self.jobs]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValueError(f"job names must be unique; repeated: {', '.join(dup)}")
        for job in self.jobs:
            for dep in job.after:
                if dep not in names:
                    raise ValueError(f"job {job.name!r} is 'after' unknown job {dep!r}")
                if dep == job.name:
                    raise ValueError(f"job {job.name!r} cannot come after itself")
        cycle = _after_cycle(self.jobs)
        if cycle:
            first = names.index(cycle[0])
            raise JobError(
                f"the 'after:' dependencies form a cycle ({' -> '.join(cycle)}), so none of these jobs could "
                "ever start; remove one of them from another's 'after:'",
                field=f"jobs[{first}].after",
            )
        return self

    @model_validator(mode="after")
    def _time_steps(self) -> Portfolio:
        """The horizon holds at least one time step and at most ``units.MAX_TIME_STEPS`` of them."""
        steps = self.horizon_s / self.time_step_s
        if steps < 1:
            raise JobError(
                f"time_step ({units.fmt_duration(self.time_step_s)}) is longer than the horizon "
                f"({units.fmt_duration(self.horizon_s)}), which leaves no step to schedule in; use a time_step "
                "of at most the horizon (1h is the default)",
                field="time_step",
            )
        if steps > units.MAX_TIME_STEPS:
            coarsest = units.fmt_duration(self.horizon_s / units.MAX_TIME_STEPS)
            raise JobError(
                f"horizon / time_step is {steps:,.0f} time steps, more than the {units.MAX_TIME_STEPS:,} the "
                f"scheduler takes (each step is a point it reasons about); use a time_step of at least {coarsest} "
                "(1h is the default)",
                field="time_step",
            )
        return self

    @model_validator(mode="after")
    def _calendar_holds_the_horizon(self) -> Portfolio:
        """Every date in the schedule (start + horizon) is one the calendar has (year 9999 at most)."""
        if self.start is not None:
            last = dt.datetime.combine(dt.date.max, dt.time())
            if self.horizon_s > (last - dt.datetime.combine(self.start, dt.time())).total_seconds():
                raise JobError(
                    f"start {self.start.isoformat()} plus the horizon ({units.fmt_duration(self.horizon_s)}) runs "
                    f"past {dt.date.max.isoformat()}, the last date there is; give a start date that leaves room "
                    "for the horizon",
                    field="start",
                )
        return self


def _after_cycle(jobs: list[PortfolioJob]) -> list[str]:
    """A cycle of ``after:`` dependencies as job names (first repeated last), or [] when there is none."""
    after = {job.name: job.after for job in jobs}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in after:
        if state.get(root):
            continue
        path, stack = [root], [iter(after[root])]
        state[root] = 1
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            elif not state.get(dep) and dep in after:
                state[dep] = 1
                path.append(dep)
                stack.append(iter(after[dep]))
    return []
