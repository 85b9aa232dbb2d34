"""Reading files into the schema: catalogs (bundled or by path, with includes), jobs, portfolios.

Every failure becomes a ``GpuplanError`` naming the file, the field and the fix: malformed YAML,
missing files, unknown catalogs or SKUs, and pydantic validation errors (translated here, so a
user never sees a pydantic traceback). Model presets and ``hf_config`` references are expanded
here, before validation, so the schema itself reads no files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ArgumentError, CatalogError, GpuplanError, JobError, did_you_mean
from .bundled import bundled_catalog_names, bundled_dir
from .catalog import find_sku
from .hf_models import resolve
from .reader import read_yaml_file
from .schema import Assumptions, Catalog, CatalogFile, Offer, Portfolio, Problem, Sku


def read_yaml(path: Path, what: str) -> Any:
    """A YAML file, read with the bounds and strictness of ``inputs.reader`` (no duplicate keys, no
    base-60 numbers, no alias bombs, regular files of at most 16 MiB)."""
    return read_yaml_file(path, what)


def validation_error(exc: ValidationError, source: str, prefix: str = "") -> GpuplanError:
    """The first pydantic error as one sentence with its dotted field path."""
    first = exc.errors()[0]
    path = ""
    for part in first["loc"]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    field = (prefix + path).strip(".") or None
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown field; check its spelling against the README's job file format"
    elif first["type"] == "missing":
        message = "required field is missing"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    if first["type"] not in ("missing", "extra_forbidden") and "input" in first:
        value = first["input"]
        if not isinstance(value, (dict, list)):
            message += f" (got {value!r})"
    return GpuplanError(message, source=source, field=field)


def parse_model(model: type[BaseModel], data: Any, source: str, prefix: str = ""):
    if not isinstance(data, dict):
        raise GpuplanError(
            f"expected a mapping of fields, got {type(data).__name__}", source=source, field=prefix or None
        )
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, source, prefix) from None
    except GpuplanError as exc:
        raise exc.located(source, prefix or None) from None


# --------------------------------------------------------------------------- catalogs


def _catalog_path(name_or_path: str, relative_to: Path | None = None) -> Path:
    candidate = Path(name_or_path)
    if relative_to is not None and not candidate.is_absolute():
        near = relative_to / candidate
        if near.is_file():
            return near
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        if candidate.is_file():
            return candidate
        raise CatalogError(
            f"catalog file {name_or_path!r} not found; give a path or one of {', '.join(bundled_catalog_names())}"
        )
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


def load_catalog(name_or_path: str = "default", relative_to: Path | None = None) -> Catalog:
    """A bundled catalog by name (``default``, ``nodus-2026-11``, ``hardware``) or a YAML path."""
    path = _catalog_path(name_or_path, relative_to)
    data = read_yaml(path, "catalog")
    if not isinstance(data, dict):
        raise CatalogError("a catalog file is a mapping with 'offers:' (and 'hardware:') or 'skus:'", source=str(path))
    unknown = sorted(set(data) - set(CatalogFile.model_fields))
    if unknown:
        raise CatalogError(
            f"unknown field; a catalog file takes {', '.join(CatalogFile.model_fields)}",
            source=str(path),
            field=unknown[0],
        )
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


# --------------------------------------------------------------------------- jobs


def load_job(path: str | Path) -> Problem:
    """A job file: ``job:`` plus optional ``catalog``, ``objective``, ``assumptions``, ``constraints``."""
    path = Path(path)
    data = read_yaml(path, "job")
    if not isinstance(data, dict) or "job" not in data:
        raise JobError("a job file needs a top-level 'job:' mapping (see problems/ for examples)", source=str(path))
    expand_models(data, base=path.parent, source=str(path))
    problem = parse_model(Problem, data, str(path))
    problem.source_path = str(path)
    return problem


def expand_models(data: Any, base: Path | None = None, source: str | None = None) -> Any:
    """Expand ``model: PRESET`` / ``{preset: ...}`` / ``{hf_config: ...}`` in a job or portfolio mapping,
    in place, before validation (a relative ``hf_config`` is relative to ``base``, the file's folder)."""
    if not isinstance(data, dict):
        return data
    entries = [("job", data.get("job"))]
    if isinstance(data.get("jobs"), list):
        entries += [
            (f"jobs[{i}].job", entry.get("job")) for i, entry in enumerate(data["jobs"]) if isinstance(entry, dict)
        ]
    for prefix, job in entries:
        if isinstance(job, dict) and "model" in job:
            try:
                job["model"] = resolve(job["model"], base)
            except GpuplanError as exc:
                field = (exc.field or "job.model").replace("job.", prefix + ".", 1)
                raise type(exc)(exc.reason, source=exc.source or source, field=field) from None
    return data


def problem_catalog(problem: Problem | Portfolio, override: str | None = None) -> Catalog:
    """The catalog a job or portfolio file names (relative to the file), a command-line override, or the default."""
    name = override or problem.catalog or "default"
    base = Path(problem.source_path).parent if problem.source_path and not override else None
    try:
        return load_catalog(name, relative_to=base)
    except CatalogError as exc:
        if override and exc.source is None:  # the name itself is wrong; an error inside the file names the file
            raise ArgumentError(exc.reason, field="catalog") from None
        raise exc.located(problem.source_path, "catalog") from None


def load_portfolio(path: str | Path) -> Portfolio:
    """A portfolio file: catalog, start, horizon, budget, pools, objective and jobs."""
    path = Path(path)
    data = read_yaml(path, "portfolio")
    if not isinstance(data, dict) or "jobs" not in data:
        raise JobError(
            "a portfolio file needs a top-level 'jobs:' list (see problems/portfolio-*.yaml)", source=str(path)
        )
    expand_models(data, base=path.parent, source=str(path))
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
    updates["spot"] = portfolio.spot
    constraints = problem.constraints.model_copy(update={**updates, "deadline_s": None, "budget_usd": None})
    return problem.model_copy(update={"constraints": constraints})
