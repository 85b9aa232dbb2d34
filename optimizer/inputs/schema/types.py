"""The input files' value types: sizes, durations and amounts read with their unit (``180GB``, ``5d``,
``$5.50/h``), names, and the choices (precision, method, recompute, framework) that several models share."""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    PlainSerializer,
    SerializationInfo,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from ...errors import UnitError, printable
from .. import units


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
            percent = float(value.strip()[:-1].replace(",", "")) if value.isascii() else math.nan
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
            percent = float(text[:-1].replace(",", "")) if text.isascii() else math.nan  # not '١٠%'
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


def sku_key(name: str) -> str:
    """How GPU and offer names are matched: case-insensitively, ``_`` and spaces read as ``-`` (``h100_sxm``
    is H100-SXM)."""
    return name.strip().lower().replace("_", "-").replace(" ", "-")
