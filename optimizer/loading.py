"""Reading YAML files into the schema: catalogs (bundled or by path), job files, and name lookup.

Every failure becomes a ``GpuplanError`` naming the file, the field and the fix: malformed YAML,
missing files, unknown catalogs or SKUs, and pydantic validation errors (translated here, so a
user never sees a pydantic traceback).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import BaseModel, ValidationError

from . import units
from .errors import CatalogError, GpuplanError, JobError, did_you_mean
from .schema import Assumptions, Catalog, CatalogFile, Measurement, Offer, Portfolio, Problem, Sku

_HERE = Path(__file__).resolve().parent


def bundled_dir(kind: str) -> Path:
    """The bundled ``catalogs`` or ``problems`` folder: inside the wheel, or the source checkout."""
    inside = _HERE / "_bundled" / kind
    return inside if inside.is_dir() else _HERE.parent / kind


def bundled_catalog_names() -> list[str]:
    return sorted(p.stem for p in bundled_dir("catalogs").glob("*.yaml") if p.stem != "models")


def read_yaml(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GpuplanError(f"{what} file not found; check the path", source=str(path)) from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise GpuplanError(f"cannot read this {what} file ({exc.__class__.__name__})", source=str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise GpuplanError(
            f"malformed YAML{where}: {problem}; fix the indentation or quoting there", source=str(path)
        ) from None


def validation_error(exc: ValidationError, source: str, prefix: str = "") -> GpuplanError:
    """The first pydantic error as one sentence with its dotted field path."""
    first = exc.errors()[0]
    field = ""
    for part in first["loc"]:
        field += f"[{part}]" if isinstance(part, int) else f".{part}"
    field = (prefix + field).strip(".") or None
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown field; check its spelling against the README's job file format"
    elif first["type"] == "missing":
        message = "required field is missing"
    elif message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if first["type"] not in ("missing", "extra_forbidden") and "input" in first:
        value = first["input"]
        if not isinstance(value, (dict, list)):
            message += f" (got {value!r})"
    return GpuplanError(message, source=source, field=field)


def parse_model(model: type[BaseModel], data: Any, source: str, prefix: str = ""):
    if not isinstance(data, dict):
        raise GpuplanError(f"expected a mapping of fields, got {type(data).__name__}", source=source, field=prefix or None)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source, prefix) from None
    except GpuplanError as exc:
        raise exc.located(source, prefix or None) from None


# --------------------------------------------------------------------------- catalogs


def _catalog_path(name_or_path: str, relative_to: Optional[Path] = None) -> Path:
    candidate = Path(name_or_path)
    if relative_to is not None and not candidate.is_absolute():
        near = relative_to / candidate
        if near.is_file():
            return near
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        if candidate.is_file():
            return candidate
        raise CatalogError(f"catalog file {name_or_path!r} not found; give a path or one of "
                           f"{', '.join(bundled_catalog_names())}")
    bundled = bundled_dir("catalogs") / f"{name_or_path}.yaml"
    if bundled.is_file():
        return bundled
    names = bundled_catalog_names()
    raise CatalogError(
        f"unknown catalog {name_or_path!r}; bundled catalogs are {', '.join(names)}, or give a path to a "
        f"YAML file.{did_you_mean(name_or_path, names)}"
    )


def _load_skus(path: Path) -> list[Sku]:
    data = read_yaml(path, "hardware")
    if not isinstance(data, dict) or not isinstance(data.get("skus"), list):
        raise CatalogError("a hardware file needs a top-level 'skus:' list", source=str(path))
    return [parse_model(Sku, row, str(path), f"skus[{i}]") for i, row in enumerate(data["skus"])]


def load_catalog(name_or_path: str = "default", relative_to: Optional[Path] = None) -> Catalog:
    """A bundled catalog by name (``default``, ``nodus-2026-11``, ``hardware``) or a YAML path."""
    path = _catalog_path(name_or_path, relative_to)
    data = read_yaml(path, "catalog")
    if not isinstance(data, dict):
        raise CatalogError("a catalog file is a mapping with 'offers:' (and 'hardware:') or 'skus:'", source=str(path))
    unknown = sorted(set(data) - set(CatalogFile.model_fields))
    if unknown:
        raise CatalogError(f"unknown field; a catalog file takes {', '.join(CatalogFile.model_fields)}",
                           source=str(path), field=unknown[0])
    skus: dict[str, Sku] = {}
    offers: list[Offer] = []
    files = [str(path)]
    for included in data.get("include") or []:
        sub = load_catalog(str(included), relative_to=path.parent)
        skus.update({s.name: s for s in sub.skus})
        offers.extend(sub.offers)
        files.extend(sub.source_files)
    if "skus" in data:
        skus.update({s.name: s for s in _load_skus(path)})
    if data.get("hardware"):
        hardware = _catalog_path(str(data["hardware"]), path.parent)
        for sku in _load_skus(hardware):
            skus.setdefault(sku.name, sku)
        files.append(str(hardware))
    for i, row in enumerate(data.get("offers") or []):
        offers.append(parse_model(Offer, row, str(path), f"offers[{i}]"))
    catalog = Catalog(
        name=str(data.get("name") or path.stem),
        description=str(data.get("description") or ""),
        skus=list(skus.values()),
        offers=offers,
        source_files=files,
    )
    for i, offer in enumerate(catalog.offers):
        try:
            find_sku(catalog, offer.sku)
        except CatalogError as exc:
            raise exc.located(str(path), f"offers[{i}].sku") from None
    return catalog


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-").replace(" ", "-")


def find_sku(catalog: Catalog, name: str) -> Sku:
    """A SKU by canonical name or alias, case-insensitively (``h100`` -> H100-SXM)."""
    key = _norm(name)
    for sku in catalog.skus:
        if key == _norm(sku.name) or key in (_norm(a) for a in sku.aliases):
            return sku
    names = [s.name for s in catalog.skus]
    raise CatalogError(
        f"unknown GPU {name!r}; known SKUs: {', '.join(names)}.{did_you_mean(name, names + sum((s.aliases for s in catalog.skus), []))}"
    )


def offers_for(catalog: Catalog, name: str) -> list[Offer]:
    """Offers selected by an offer name, an offer alias (``type: B200``) or a SKU name/alias."""
    key = _norm(name)
    direct = [o for o in catalog.offers if key == _norm(o.name) or key in (_norm(a) for a in o.aliases)]
    if direct:
        return direct
    sku = find_sku(catalog, name)
    return [o for o in catalog.offers if find_sku(catalog, o.sku).name == sku.name]


# --------------------------------------------------------------------------- jobs


def load_job(path: str | Path) -> Problem:
    """A job file: ``job:`` plus optional ``catalog``, ``objective``, ``assumptions``, ``constraints``."""
    path = Path(path)
    data = read_yaml(path, "job")
    if not isinstance(data, dict) or "job" not in data:
        raise JobError("a job file needs a top-level 'job:' mapping (see problems/ for examples)", source=str(path))
    _anchor_hf_config(data.get("job"), path.parent)
    problem = parse_model(Problem, data, str(path))
    problem.source_path = str(path)
    return problem


def _anchor_hf_config(job, base: Path) -> None:
    """A relative ``hf_config`` path is relative to the file that names it."""
    model = job.get("model") if isinstance(job, dict) else None
    if isinstance(model, dict) and isinstance(model.get("hf_config"), str) and not Path(model["hf_config"]).is_absolute():
        model["hf_config"] = str(base / model["hf_config"])


def problem_catalog(problem: Problem | Portfolio, override: Optional[str] = None) -> Catalog:
    """The catalog a job or portfolio file names (relative to the file), a command-line override, or the default."""
    name = override or problem.catalog or "default"
    base = Path(problem.source_path).parent if problem.source_path and not override else None
    try:
        return load_catalog(name, relative_to=base)
    except CatalogError as exc:
        raise exc.located(problem.source_path if not override else None, "catalog" if not override else "--catalog")


def _quantile(value: str) -> str:
    if value not in ("p50", "p90"):
        raise GpuplanError(f"must be p50 or p90 (got {value!r})")
    return value


def apply_overrides(problem: Problem, **overrides) -> Problem:
    """Command-line flags over the file: ``deadline='5d'``, ``budget='20k'``, ``max_nodes=2``,
    ``gpu_types='B200,B300'``, ``min_memory='160Gi'``, ``objective='time'``. None leaves a field alone."""
    flags = {"deadline": ("deadline_s", "--deadline", lambda v: units.parse_duration_s(v, "a deadline")),
             "budget": ("budget_usd", "--budget", lambda v: units.parse_usd(v, "a budget")),
             "max_nodes": ("max_nodes", "--max-nodes", int),
             "max_gpus": ("max_gpus", "--max-gpus", int),
             "deadline_quantile": ("deadline_quantile", "--deadline-quantile", _quantile)}
    constraints: dict = {}
    gpu: dict = {}
    objective = problem.objective
    job = problem.job
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "objective":
            objective = value
            continue
        if key == "measured":
            job = job.model_copy(update={"measured": job.measured + [parse_measurement(v) for v in value]})
            continue
        try:
            if key == "gpu_types":
                gpu["types"] = [t.strip() for t in str(value).split(",") if t.strip()]
            elif key == "min_memory":
                gpu["min_memory_bytes"] = units.parse_bytes(value, "a memory size")
                if gpu["min_memory_bytes"] <= 0:
                    raise GpuplanError("must be positive, e.g. 160Gi")
            else:
                field, flag, parse = flags[key]
                constraints[field] = parse(value)
                if isinstance(constraints[field], (int, float)) and constraints[field] <= 0:
                    raise GpuplanError(f"must be positive (got {value!r})")
        except GpuplanError as exc:
            flag = flags[key][1] if key in flags else "--" + key.replace("_", "-")
            raise GpuplanError(exc.reason, source="command line", field=flag) from None
    new_gpu = problem.constraints.gpu.model_copy(update=gpu)
    new_constraints = problem.constraints.model_copy(update={**constraints, "gpu": new_gpu})
    return problem.model_copy(update={"constraints": new_constraints, "objective": objective, "job": job})


def parse_measurement(text: str) -> Measurement:
    """``4xRTX-PRO-6000:14.8k tok/s`` or ``16xB200@2:45k tok/s,150GiB`` (GPUs x SKU [@nodes]: rate [, peak])."""
    match = re.fullmatch(r"\s*(\d+)\s*[xX*]\s*([A-Za-z0-9._-]+)\s*(?:@\s*(\d+))?\s*:\s*([^,]+?)\s*(?:,\s*(.+))?", text)
    if not match:
        raise GpuplanError(f"cannot read {text!r}; write it like '4xRTX-PRO-6000:14.8k tok/s' or "
                           "'16xB200@2:45k tok/s,150GiB' (GPUs x SKU [@nodes]: throughput [, peak memory])",
                           source="command line", field="--measured")
    gpus, sku, nodes, rate, peak = match.groups()
    data = {"sku": sku, "gpus": int(gpus), "tokens_per_s": rate}
    if nodes:
        data["nodes"] = int(nodes)
    if peak:
        data["peak_memory"] = peak
    try:
        return Measurement.model_validate(data)
    except ValidationError as exc:
        err = validation_error(exc, "command line")
        raise GpuplanError(err.reason, source="command line", field="--measured") from None


def load_portfolio(path: str | Path) -> Portfolio:
    """A portfolio file: catalog, start, horizon, budget, pools, objective and jobs."""
    path = Path(path)
    data = read_yaml(path, "portfolio")
    if not isinstance(data, dict) or "jobs" not in data:
        raise JobError("a portfolio file needs a top-level 'jobs:' list (see problems/portfolio-*.yaml)",
                       source=str(path))
    for entry in data.get("jobs") or []:
        if isinstance(entry, dict):
            _anchor_hf_config(entry.get("job"), path.parent)
    portfolio = parse_model(Portfolio, data, str(path))
    portfolio.source_path = str(path)
    return portfolio


def portfolio_job_problem(portfolio, index: int) -> Problem:
    """The Problem of one portfolio job: its file, or its inline job with assumptions and GPU filter."""
    entry = portfolio.jobs[index]
    base = Path(portfolio.source_path).parent if portfolio.source_path else Path(".")
    if entry.file is not None:
        problem = load_job(base / entry.file)
    else:
        problem = Problem(job=entry.job, assumptions=entry.assumptions or Assumptions())
        problem.source_path = portfolio.source_path
    updates = {}
    if entry.gpu is not None:
        updates["gpu"] = entry.gpu
    # Deadlines are the portfolio's (from its start), not a per-row filter of the job's table.
    constraints = problem.constraints.model_copy(update={**updates, "deadline_s": None, "budget_usd": None})
    return problem.model_copy(update={"constraints": constraints})
