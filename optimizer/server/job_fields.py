"""The job settings the page asks, each as the CLI asks it: the job fields a ``gpuplan solve`` flag sets
(``inputs.question.JOB_FLAGS``, the registry the CLI's job flags are declared from, and the two constraint flags
that land under ``job:``: --framework and --compile), each with its kind of control, its choices, its default,
its unit and its help, read from the job file's schema (``inputs/schema/job.py``, the truth the CLI's flags
check against). ``GET /v1/job-fields`` serves them and the page builds the controls it has no hand-made one for
from them, so that a job flag added to the CLI is a control of the page with no HTML to keep."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import cache
from typing import Any, Literal

from ..inputs.question import JOB_FLAGS
from ..present.jsonschema import json_schema

# the constraint flags (``question._FLAG_FIELDS``) that set a job field: --framework, --compile
JOB_SECTION_FLAGS = ("framework", "compile")
PAGE_JOB_FIELDS = (*JOB_FLAGS, *JOB_SECTION_FLAGS)

Kind = Literal["choice", "switch", "count", "number", "text"]


@dataclass(frozen=True)
class Unit:
    """What a field's value counts and how it is written, as the CLI's --help says it; ``empty``: what a field
    left empty means where the schema's default is none (its default is the planner's own reading)."""

    unit: str
    example: str
    empty: str | None = None


# the units and examples of the fields that take a quantity, as their flags' --help gives them
# (cli_options.py, cli/job_options.py)
UNITS: dict[str, Unit] = {
    "model": Unit(
        "a preset or a Hugging Face Hub id (owner/name)", "llama-3.1-70b, meta-llama/Llama-3.1-8B", "none: required"
    ),
    "tokens": Unit("tokens to train on in all", "20B, 500M", "--dataset-tokens x --epochs"),
    "dataset_tokens": Unit(
        "tokens in the data set, trained on epochs times", "500M, 2T", "none: tokens gives the total"
    ),
    "epochs": Unit("passes over the data set", "2, 1.5", "1"),
    "seq_len": Unit("tokens per sequence", "4096, 8k (8,192)"),
    "global_batch": Unit(
        "sequences per step, or tokens with their unit",
        "256, '4M tokens', free",
        "a fine-tune's recipe batch (131,072 tokens a step), a pre-training's free batch",
    ),
    "lora_rank": Unit("LoRA rank", "16"),
}


@dataclass(frozen=True)
class JobField:
    """One job setting as a page control: the job field ``name``, its CLI ``flag``, the ``kind`` of control
    (a choice, an on/off switch, a whole number, a number, text), the ``choices`` of a choice, the ``default``
    (as the CLI's --help states it), the ``unit`` and an ``example`` of a quantity, and the ``help``."""

    name: str
    flag: str
    kind: Kind
    choices: tuple[str, ...]
    default: str
    unit: str
    example: str
    help: str
    minimum: float | None  # the least value (inclusive), where the schema bounds it


def _kind(spec: dict[str, Any]) -> Kind:
    if "enum" in spec:
        return "choice"
    types = {spec.get("type")} | {alt.get("type") for alt in spec.get("anyOf", [])}
    types -= {None, "null"}
    if types == {"boolean"}:
        return "switch"
    if types == {"integer"}:
        return "count"
    if types == {"number"}:
        return "number"
    return "text"


def _default(spec: dict[str, Any], kind: Kind, unit: Unit | None) -> str:
    value = spec.get("default")
    if kind == "switch":
        return "on" if value else "off"
    if value is None:
        return unit.empty if unit is not None and unit.empty else "none"
    return str(value)


def _minimum(spec: dict[str, Any]) -> float | None:
    """The least value the field takes (an inclusive bound: lora_rank's 1), or None."""
    for part in (spec, *spec.get("anyOf", [])):
        if "minimum" in part:
            return float(part["minimum"])
    return None


@cache
def job_fields() -> tuple[JobField, ...]:
    """Every job setting a ``gpuplan solve`` flag sets, in the CLI's order, as the page asks it."""
    schema = json_schema("job")
    properties = schema["$defs"]["JobSpec"]["properties"]
    fields = []
    for name in PAGE_JOB_FIELDS:
        spec = properties[name]
        kind = _kind(spec)
        unit = UNITS.get(name)
        help_text = spec.get("description") or (unit.unit if unit else spec.get("title", name))
        fields.append(
            JobField(
                name=name,
                flag=f"--{name.replace('_', '-')}",
                kind=kind,
                choices=tuple(str(c) for c in spec.get("enum", ())),
                default=_default(spec, kind, unit),
                unit=unit.unit if unit else "",
                example=unit.example if unit else "",
                help=help_text,
                minimum=_minimum(spec),
            )
        )
    return tuple(fields)


def job_fields_data() -> dict:
    """``GET /v1/job-fields``: every job setting, as ``job_fields`` gives it."""
    return {"fields": [asdict(field) | {"choices": list(field.choices)} for field in job_fields()]}


# the keys of a job.measured entry that --measured writes ('16xB200@2:45k tok/s,150GiB': inputs/overrides.py)
_MEASURED_KEYS = {"sku", "gpus", "nodes", "tokens_per_s", "peak_memory"}


def measured_words(entries: Any) -> list[str] | None:
    """``job.measured``'s entries as the --measured flags that say them (GPUS x SKU [@NODES]: RATE [, PEAK], as
    ``overrides.parse_measurement`` reads them), or None where an entry says what the flag cannot (a field the
    flag has none for, a value with a separator of the flag's own in it)."""
    words: list[str] = []
    for entry in entries or []:
        if (
            not isinstance(entry, dict)
            or set(entry) - _MEASURED_KEYS
            or not {"sku", "gpus", "tokens_per_s"} <= set(entry)
        ):
            return None
        values = {key: str(value).strip() for key, value in entry.items()}
        if any(mark in value for value in values.values() for mark in ",:@"):
            return None
        text = f"{values['gpus']}x{values['sku']}" + (f"@{values['nodes']}" if "nodes" in values else "")
        text += f":{values['tokens_per_s']}" + (f",{values['peak_memory']}" if "peak_memory" in values else "")
        words += ["--measured", text]
    return words
