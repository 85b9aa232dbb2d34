"""Request bodies -> the documents and problems the planner takes, as ``load_job`` and ``load_portfolio`` make
them from files, with the service's own bounds.

A body is the text of a job or portfolio file (JSON or YAML), read by ``inputs.reader`` with its bounds
(nesting depth, values, alias expansion, duplicate keys, YAML 1.2 numbers), models expanded by
``inputs.files.expand_models`` and validated by the schema's ``Problem`` / ``Portfolio``: a bad body fails
with the message and field path ``gpuplan`` prints for the same file, located at ``request body``.

What a file may do that a body may not: name files of the machine the service runs on. A body's catalog is
one the service offers (bundled, or given to ``gpuplan serve --catalog``), a model is a preset, a Hub id or
its shapes (no ``hf_config`` path), and a portfolio's ``file:`` entries name the bundled job files alone.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, create_model, field_validator

from ..errors import ArgumentError, GpuplanError, JobError, printable
from ..inputs import units
from ..inputs.bundled import bundled_dir
from ..inputs.files import expand_models, parse_model, validation_error
from ..inputs.layout_fields import LAYOUT_FIELDS, LayoutField, layout_ranges
from ..inputs.reader import load_json, load_yaml
from ..inputs.schema import BIDI_CONTROLS, Portfolio, Problem, a_name
from ..present.exports import kinds_text
from ..results import Plan

SOURCE = "request body"

# The largest body read, in bytes: a job is under 2 KiB, the bundled portfolio 3 KiB; a 1 MiB portfolio holds
# thousands of inline jobs, more than one request should make a shared service plan.
MAX_BODY_BYTES = 2**20

_BUNDLED_JOB = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.ya?ml")


def media_kind(content_type: str | None, text: str) -> Literal["json", "yaml"]:
    """JSON or YAML: as the Content-Type says (application/json, application/yaml, text/yaml), else by the
    first character (a JSON document opens with ``{``)."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media.endswith("json"):
        return "json"
    if media.endswith("yaml") or media.endswith("yml"):
        return "yaml"
    return "json" if text.lstrip().startswith(("{", "[")) else "yaml"


def read_document(raw: bytes, content_type: str | None = None) -> Any:
    """The data of a body: UTF-8 JSON or YAML, read with the bounds of ``inputs.reader``."""
    if len(raw) > MAX_BODY_BYTES:  # the app refuses this first (413); here for callers of this module alone
        raise JobError(f"the body is {len(raw):,} bytes, more than the {MAX_BODY_BYTES:,} this service reads")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobError(
            f"the body is not UTF-8 text (byte {exc.start}); send the job file's JSON or YAML as UTF-8", source=SOURCE
        ) from None
    if not text.strip():
        raise JobError("the body is empty; send a job document (JSON or YAML), as in problems/*.yaml", source=SOURCE)
    data = load_json(text, SOURCE) if media_kind(content_type, text) == "json" else load_yaml(text, SOURCE)
    _finite(data, "")
    return data


def _at(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _finite(data: Any, path: str) -> None:
    """No NaN or infinity anywhere in a body (YAML's ``.nan``, ``.inf``): each number is a quantity the planner
    computes with or an export writes (a plan's ``hours.p90`` NaN made the Slurm export fail with a 500)."""
    if isinstance(data, float) and not math.isfinite(data):
        raise JobError(
            f"{'NaN' if math.isnan(data) else 'an infinity'} is not a number the planner can use; give a finite number (NaN and infinities are refused "
            "in every field of a body)",
            source=SOURCE,
            field=path or None,
        )
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        _finite(value, _at(path, key))


def _no_config_paths(job: Any, prefix: str) -> None:
    """A model given as ``{hf_config: PATH}`` reads a file of the server's machine: refused."""
    if isinstance(job, dict) and isinstance(job.get("model"), dict) and "hf_config" in job["model"]:
        raise JobError(
            "the service reads no files of its machine, so a model is not given by its config.json path: give a "
            "preset (GET /v1/models), a Hugging Face Hub id (owner/name) or the shapes (params, layers, hidden, ...)",
            source=SOURCE,
            field=f"{prefix}.model.hf_config",
        )


def _no_source_path(data: dict) -> None:
    if "source_path" in data:  # a field of the loaded model, never of a file: where the file was read from
        raise JobError(
            "unknown field; check its spelling against the README's job file format", source=SOURCE, field="source_path"
        )


def check_catalog(name: str | None, offered: list[str], field: str = "catalog") -> None:
    """A body's catalog is one the service offers (bundled or given to ``gpuplan serve``), named, not a path."""
    if name is not None and name not in offered:
        raise JobError(
            f"unknown catalog {name!r}; this service offers {', '.join(offered)} (GET /v1/catalogs): a body names "
            "one of them, not a file of the server's machine",
            source=SOURCE,
            field=field,
        )


def job_problem(data: Any, offered: list[str], extra: str | None = None) -> tuple[Problem, Any]:
    """A job document as the ``Problem`` ``load_job`` makes of the same file, and the route's own key
    (``extra``: ``check``, ``export``), taken out before the job is validated."""
    if not isinstance(data, dict) or "job" not in data:
        raise JobError(
            "a job document needs a top-level 'job:' mapping (see problems/ for examples)", source=SOURCE, field=None
        )
    data = copy.deepcopy(data)  # expand_models writes into it; the caller keeps the document as sent
    options = data.pop(extra, None) if extra else None
    _no_source_path(data)
    _no_config_paths(data["job"], "job")
    check_catalog(data.get("catalog"), offered)
    expand_models(data, base=None, source=SOURCE)
    return parse_model(Problem, data, SOURCE), options


def portfolio_document(data: Any, offered: list[str]) -> Portfolio:
    """A portfolio document as ``load_portfolio`` makes it; ``file:`` entries name bundled job files alone
    (``problems/*.yaml``: the service reads no other file), resolved in that folder."""
    if not isinstance(data, dict) or "jobs" not in data:
        raise JobError(
            "a portfolio document needs a top-level 'jobs:' list (see problems/portfolio-*.yaml)", source=SOURCE
        )
    data = copy.deepcopy(data)
    _no_source_path(data)
    check_catalog(data.get("catalog"), offered)
    bundled = bundled_dir("problems")
    for i, entry in enumerate(data["jobs"] if isinstance(data["jobs"], list) else []):
        if not isinstance(entry, dict):
            continue
        _no_config_paths(entry.get("job"), f"jobs[{i}].job")
        name = entry.get("file")
        if name is not None and not (
            isinstance(name, str) and _BUNDLED_JOB.fullmatch(name) and (bundled / name).is_file()
        ):
            known = ", ".join(sorted(p.name for p in bundled.glob("*.yaml") if not p.name.startswith("portfolio")))
            raise JobError(
                f"the service reads only its bundled job files ({known}), not {name!r}: give this job inline "
                "under 'job:'",
                source=SOURCE,
                field=f"jobs[{i}].file",
            )
    expand_models(data, base=None, source=SOURCE)
    portfolio = parse_model(Portfolio, data, SOURCE)
    portfolio.source_path = str(bundled / PORTFOLIO_PLACE)  # file: entries resolve beside the bundled jobs
    return portfolio


# The name a portfolio body has as its ``source_path`` (the folder its ``file:`` entries resolve in): errors
# located there are the body's (``located``).
PORTFOLIO_PLACE = "(request body)"


def located(exc: GpuplanError, fields: dict[str, str] | None = None) -> GpuplanError:
    """The error with the body as its source where it names none (or the portfolio body's placeholder), and
    a library parameter (``ArgumentError``: ``gpus``) as the body's field that gave it (``fields``: ``check.gpus``)."""
    if exc.source is not None and Path(exc.source).name != PORTFOLIO_PLACE:
        return exc
    field = exc.field
    if isinstance(exc, ArgumentError):
        field = (fields or {}).get(field or "", field)
    return GpuplanError(exc.reason, source=SOURCE, field=field)


# --------------------------------------------------------------------------- check and export


def _field_spec(field: LayoutField) -> tuple[Any, Any]:
    """A layout field as the body takes it: a strict int (the JSON number as given, no "8" for 8), a choice
    of its job field's Literal, or text; every one optional, with its help as its description."""
    if field.kind is int:
        low, high = field.bounds or (None, None)
        return int | None, Field(None, strict=True, ge=low, le=high, description=field.help)
    choices = field.choices
    kind = Literal[choices] if choices else str  # type: ignore[valid-type]
    return kind | None, Field(None, description=field.help)


def _parsed(field: LayoutField) -> Callable[[Any], Any]:
    def read(value: str | None) -> str | None:
        try:
            return None if value is None or field.parse is None else field.parse(value)
        except GpuplanError as exc:
            raise ValueError(exc.reason) from None  # validation_error names the field

    return read


class _CheckHead(BaseModel):
    """The ``check:`` mapping's first field, the GPU; its layout fields follow (``check_layout_model``)."""

    model_config = ConfigDict(extra="forbid")

    sku: str | None = Field(
        None, description="GPU by name or alias, or an offer by name ('nodus-b200 (spot)': its spot price)."
    )


def check_layout_model(fields: Sequence[LayoutField] = LAYOUT_FIELDS) -> type[BaseModel]:
    """The layout part of the ``check:`` mapping, made from the declarations (inputs/layout_fields.py): each
    field as ``_field_spec`` types it, its text read by its ``parse`` and its number held to its range."""
    ranges = layout_ranges(fields)

    def in_range(value: int | None, info: ValidationInfo) -> int | None:
        limit = units.LIMITS[ranges[info.field_name or ""]]
        if value is not None and not limit.allows(value):
            raise ValueError(limit.text())  # validation_error adds "(got ...)", as the CLI's flag error says it
        return value

    validators: dict[str, Any] = {f"_parse_{f.name}": field_validator(f.name)(_parsed(f)) for f in fields if f.parse}
    if ranges:
        validators["_in_range"] = field_validator(*ranges)(in_range)
    return create_model(  # type: ignore[call-overload]
        "CheckLayout",
        __base__=_CheckHead,
        __validators__=validators,
        **{f.name: _field_spec(f) for f in fields},
    )


if TYPE_CHECKING:
    _CheckLayout = _CheckHead
else:
    _CheckLayout = check_layout_model()


# its layout fields are the declared ones (inputs/layout_fields.py), made by check_layout_model
class CheckFields(_CheckLayout):
    """The ``check:`` mapping of a ``POST /v1/check`` body: the flags of ``gpuplan check``."""

    roles: dict[str, str] | None = Field(
        None,
        description="A job with roles (job.roles): each role's GPUs as GPUSxSKU, in place of sku and gpus, as "
        "gpuplan check --role takes them: {target: 3xRTX-PRO-6000, drafter: 1xRTX-PRO-6000}.",
    )
    spot: bool = Field(False, strict=True, description="Use the offer's spot price.")
    compare: bool = Field(True, strict=True, description="Compare with the best plan under the same constraints.")

    if TYPE_CHECKING:  # the layout fields, made at import (check_layout_model)

        def __getattr__(self, name: str) -> Any: ...


def _kinds_described(schema: dict[str, Any]) -> None:
    """``export.kind``'s schema names the registry's kinds as they are when the schema is written, not when
    this module loaded (a launcher registered since is one of them)."""
    schema["description"] = f"One of the exports registry's kinds: {kinds_text()}."


class ExportFields(BaseModel):
    """The ``export:`` mapping of a ``POST /v1/export`` body: the launcher kind, and the plan (one of a solve's
    answer: ``best``, a frontier point or a runner-up); without a plan, the best plan of the job."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description="One of the exports registry's kinds.", json_schema_extra=_kinds_described)
    plan: dict | None = Field(None, description="A plan as a solve answers it; default the job's best plan.")
    roles: dict[str, str] | None = Field(
        None,
        description="A job with roles: the split to launch, as check.roles gives it; default the best split.",
    )


def route_fields(model: type[BaseModel], data: Any, key: str) -> Any:
    """The route's own mapping (``check:``, ``export:``) validated, located under its key."""
    if data is None:
        example = {
            "check": "check: {sku: B200, gpus: 8}; a job with roles: check: {roles: {target: 3xRTX-PRO-6000, "
            "drafter: 1xRTX-PRO-6000}}",
            "export": "export: {kind: skypilot}",
        }.get(key, f"{key}: {{...}}")
        raise JobError(
            f"POST /v1/{key} takes the job document with a '{key}:' mapping beside 'job:' ({example})",
            source=SOURCE,
            field=key,
        )
    return parse_model(model, data, SOURCE, key)


# the plan's names an export writes into scripts and configs: the schema's rules for a name (not blank either)
PLAN_NAMES = ("sku", "offer", "provider")


def plan_of(data: dict) -> Plan:
    """A plan of an ``export:`` body: as a solve answers it, its names by the schema's rules for a name and every
    other text without control characters (an offer named 'x\n#SBATCH --wrap=...' wrote its own line into
    the Slurm script)."""
    _plain_texts(data, "export.plan")
    for key in PLAN_NAMES:
        value = data.get(key) if isinstance(data, dict) else None
        if isinstance(value, str):
            try:
                a_name(value)
            except ValueError as exc:
                raise JobError(
                    f"{exc}; give the name as the solve answered it", source=SOURCE, field=f"export.plan.{key}"
                ) from None
    try:
        return Plan.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, SOURCE, "export.plan") from None


def _plain_texts(data: Any, path: str) -> None:
    if isinstance(data, str) and (printable(data) != data or any(c in BIDI_CONTROLS for c in data)):
        raise JobError(
            "text of a plan cannot hold control characters such as a line break, nor bidirectional text controls; "
            "give the plan as the solve answered it",
            source=SOURCE,
            field=path,
        )
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        if isinstance(key, str):
            _plain_texts(key, path)
        _plain_texts(value, _at(path, key))
