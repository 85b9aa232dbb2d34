"""Reading files into the schema: catalogs (bundled or by path, with includes), jobs, portfolios.

Every failure becomes a ``GpuplanError`` naming the file, the field and the fix: malformed YAML,
missing files, unknown catalogs or SKUs, and pydantic validation errors (translated here, so a
user never sees a pydantic traceback). Model presets and ``hf_config`` references are expanded
here, before validation, so the schema itself reads no files.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ArgumentError, CatalogError, GpuplanError, JobError, did_you_mean, printable
from . import skypilot, units
from .bundled import bundled_catalog_names, bundled_dir
from .catalog import find_sku, sku_key
from .hf_models import resolve
from .reader import link_problem, read_bundled_yaml, read_yaml_file, resolved
from .schema import Assumptions, Catalog, CatalogFile, Offer, Portfolio, Problem, Sku, a_name, memory_figure_problem


def read_yaml(path: Path, what: str) -> Any:
    """A YAML file, read with the bounds and strictness of ``inputs.reader`` (no duplicate keys, no
    base-60 numbers, no alias bombs, regular files of at most 16 MiB); gpuplan's own bundled files with the
    fast loader (``reader.read_bundled_yaml``)."""
    if _is_bundled(path):
        return read_bundled_yaml(path, what)
    return read_yaml_file(path, what)


def _is_bundled(path: Path) -> bool:
    """Whether ``path`` is one of gpuplan's bundled catalog files (a path it cannot resolve, with a NUL byte
    say, is not: the strict reader names what is wrong with it)."""
    try:
        return resolved(path, "catalog").parent == bundled_dir("catalogs").resolve()
    except (GpuplanError, OSError, ValueError):
        return False


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
        if isinstance(value, (dt.date, dt.datetime)):  # as the file wrote it, not Python's repr
            message += f" (got {value.isoformat()})"
        elif not isinstance(value, (dict, list)):
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
    # os.path.isfile, not Path.is_file: False for a name no file can have (too long), which is_file raises for
    candidate = Path(name_or_path)
    if relative_to is not None and not candidate.is_absolute():
        near = relative_to / candidate
        if os.path.isfile(near):
            return near
    if os.path.isfile(candidate):
        return candidate
    if link_problem(candidate, "catalog"):  # a link loop or a dangling link: say which, not "not found"
        raise CatalogError(f"{name_or_path!r}: {link_problem(candidate, 'catalog')}")
    looks_like_a_path = candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path
    if looks_like_a_path and os.path.exists(candidate):  # a stat, which a FIFO does not block
        raise CatalogError(
            f"catalog path {name_or_path!r} is not a regular file (a folder, FIFO or device); give the path of "
            "a catalog YAML file"
        )
    if candidate.suffix in (".yaml", ".yml"):
        raise CatalogError(
            f"catalog file {name_or_path!r} not found; give a path or one of {', '.join(bundled_catalog_names())}"
        )
    bundled = bundled_dir("catalogs") / f"{name_or_path}.yaml"
    if os.path.isfile(bundled):
        return bundled
    if name_or_path == skypilot.CATALOG_NAME:
        return skypilot.cached_catalog()
    names = bundled_catalog_names()
    raise CatalogError(
        f"unknown catalog {name_or_path!r}; bundled catalogs are {', '.join(names)}, 'skypilot' plans on "
        f"SkyPilot's cached prices, or give a path to a YAML file.{did_you_mean(name_or_path, names)}"
    )


def _load_skus(path: Path) -> list[Sku]:
    data = read_yaml(path, "hardware")
    if not isinstance(data, dict) or not isinstance(data.get("skus"), list):
        raise CatalogError("a hardware file needs a top-level 'skus:' list", source=str(path))
    skus = [parse_model(Sku, row, str(path), f"skus[{i}]") for i, row in enumerate(data["skus"])]
    _one_sku_per_name(skus, [(str(path), f"skus[{i}]") for i in range(len(skus))])
    return skus


def _one_sku_per_name(skus: list[Sku], origins: list[tuple[str, str]]) -> None:
    """Every GPU name and alias (case-insensitively, as ``find_sku`` reads them) names one SKU: where two
    share one, an offer's ``sku:`` would bind to whichever comes first. ``origins``: each SKU's (file, field);
    a clash is located as ``_blame_earlier`` says."""
    seen: dict[str, int] = {}
    for i, sku in enumerate(skus):
        for name in dict.fromkeys(sku_key(n) for n in (sku.name, *sku.aliases)):
            j = seen.setdefault(name, i)
            if j != i:
                here, there = (j, i) if _blame_earlier(origins[i], origins[j]) else (i, j)
                elsewhere = f" ({' '.join(origins[there])})" if origins[there][0] != origins[here][0] else ""
                raise CatalogError(
                    f"the GPU name {name!r} names two SKUs ({skus[there].name}{elsewhere} and {skus[here].name}), "
                    "as a name or an alias; offers select SKUs by these names, so each must name one: rename or "
                    "remove one",
                    source=origins[here][0],
                    field=origins[here][1],
                )


def _sku_differences(a: Sku, b: Sku) -> str:
    """Where two definitions of a SKU differ, as 'memory 180 GB vs 80 GB, dense_bf16_tflops 2250 vs 900'."""

    def shown(name: str, value: Any) -> str:
        if name.endswith("_bytes") and isinstance(value, (int, float)):
            return f"{value / 1e9:,.4g} GB"
        return "none" if value is None else str(value)

    # the figures plans are made of first, then names and notes
    words = {"aliases", "vendor", "architecture", "interconnect", "checked", "sources", "notes"}
    fields = sorted(Sku.model_fields.items(), key=lambda item: item[0] in words)
    diffs = []
    for name, info in fields:
        if getattr(a, name) != getattr(b, name):
            diffs.append(f"{info.alias or name} {shown(name, getattr(a, name))} vs {shown(name, getattr(b, name))}")
    return ", ".join(diffs[:3]) + (f" and {len(diffs) - 3} more" if len(diffs) > 3 else "")


class _SkuDefinitions:
    """The SKUs of a catalog, its hardware file and the catalogs it includes, each with where it was written.

    One name has one definition across all of them: an offer's ``sku:`` binds by name, so a second definition
    (a catalog's inline ``B200`` at 80 GB beside the hardware file's 180 GB one) would re-bind every offer of
    that name, those of included catalogs too, without a word. The same definition reached twice (two
    included catalogs that both use the bundled hardware file) is one definition."""

    def __init__(self) -> None:
        self.skus: dict[str, Sku] = {}
        self.origins: dict[str, tuple[str, str]] = {}

    def add(self, sku: Sku, origin: tuple[str, str]) -> None:
        """Add one definition; a different one of the same name is refused (located as ``_blame_earlier`` says)."""
        key = sku_key(sku.name)
        known = self.skus.setdefault(key, sku)
        self.origins.setdefault(key, origin)
        if known != sku:
            (here, mine), (there, theirs) = (origin, sku), (self.origins[key], known)
            if _blame_earlier(here, there):
                (here, mine), (there, theirs) = (there, theirs), (here, mine)
            rename = f"{mine.name}-{mine.memory_label_bytes / 1e9:.0f}GB"
            raise CatalogError(
                f"{mine.name} is already defined in {there[0]} {there[1]}, and differently "
                f"({_sku_differences(theirs, mine)}); offers select a SKU by its name, so one name has one "
                "definition across a catalog, its hardware file and the catalogs it includes: give your SKU "
                f"another name (e.g. {rename}) and point your offers at it, or remove it to use the one in {there[0]}",
                source=here[0],
                field=here[1],
            )

    def add_all(self, skus: list[Sku], origins: list[tuple[str, str]]) -> None:
        for sku, origin in zip(skus, origins):
            self.add(sku, origin)


def _blame_earlier(later: tuple[str, str], earlier: tuple[str, str]) -> bool:
    """Which of two clashing SKU definitions (their file, field) an error is located at: the one written in
    the user's own file rather than in a bundled catalog, else the later."""
    bundled = str(bundled_dir("catalogs").resolve()) + os.sep

    def is_bundled(origin: tuple[str, str]) -> bool:
        return str(Path(origin[0]).resolve()).startswith(bundled)

    return is_bundled(later) and not is_bundled(earlier)


def load_catalog(name_or_path: str = "default", relative_to: Path | None = None) -> Catalog:
    """A bundled catalog by name (``default``, ``nodus-2026-11``, ``hardware``) or a YAML path.

    Includes are merged depth-first. A catalog that includes itself (directly or through others) is
    refused naming the cycle; one reached twice (``include: [default, nodus-2026-11]``) is refused
    naming both includers, as are two offers of the same name: either would list offers twice. A SKU name
    has one definition across the catalog, its hardware file and its includes (``_SkuDefinitions``)."""
    return _load_catalog(_catalog_path(name_or_path, relative_to), (), {})[0]


def _a_type(value: Any) -> str:
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _aliases_select_their_own(offers: list, origins: list[tuple[str, str]], first: dict[str, int], skus: list) -> None:
    """An offer's name or alias may not be a GPU other than the offer's own, nor an alias another offer's name: a
    name selects offers (``--sku``, ``--gpu-types``, a pool's ``offer``), and such a name made ``--sku H200``
    pick a B200 offer, or one name select two offers."""
    sku_of = {sku_key(n): sku.name for sku in skus for n in (sku.name, *sku.aliases)}
    for k, offer in enumerate(offers):
        own = sku_of.get(sku_key(offer.sku))
        named = sku_of.get(sku_key(offer.name))
        if named is not None and named != own:  # an offer named H200 selected as --sku H200, a B200 planned
            file, field = origins[k]
            raise CatalogError(
                f"offer name {offer.name!r} is the GPU {named}, while this offer is a {own or offer.sku}; a name "
                "selects this offer wherever it is given (--sku, --gpu-types, a pool's offer), so it must not name "
                "another GPU: rename it",
                source=file,
                field=f"{field}.name",
            )
        for a, alias in enumerate(offer.aliases):
            key = sku_key(alias)
            clash = None
            if first.get(key, k) != k:
                clash = f"the name of offer {offers[first[key]].name!r}"
            elif key in sku_of and sku_of[key] != own:
                clash = f"the GPU {sku_of[key]}, while this offer is a {own or offer.sku}"
            if clash:
                file, field = origins[k]
                raise CatalogError(
                    f"offer alias {alias!r} is {clash}; an alias selects this offer wherever that name is "
                    "given, so it must not name another offer or GPU: rename or remove it",
                    source=file,
                    field=f"{field}.aliases[{a}]",
                )


@dataclass
class _Gathered:
    """What a catalog and its includes hold so far: the SKU definitions, the offers with where each was
    written (file, field), and the files read."""

    definitions: _SkuDefinitions
    offers: list[Offer]
    origins: list[tuple[str, str]]
    files: list[str]


def _load_catalog(
    path: Path, chain: tuple[Path, ...], included_by: dict[Path, Path]
) -> tuple[Catalog, list[tuple[str, str]], list[tuple[str, str]]]:
    """The catalog at ``path`` and, per offer and per SKU, where it was written (file, field).

    ``chain`` is the resolved paths of the catalogs including this one (outermost first);
    ``included_by`` maps every catalog included so far in this load to the file that included it."""
    data = _catalog_data(path)
    gathered = _Gathered(_SkuDefinitions(), [], [], [str(path)])
    _gather_includes(data, path, chain, included_by, gathered)
    _gather_skus(data, path, gathered)
    skus, sku_origins = gathered.definitions.skus, list(gathered.definitions.origins.values())
    offers, origins = gathered.offers, gathered.origins
    for i, row in enumerate(data.get("offers") or []):
        offers.append(parse_model(Offer, row, str(path), f"offers[{i}]"))
        origins.append((str(path), f"offers[{i}]"))
    first = _one_offer_per_name(offers, origins)
    _aliases_select_their_own(offers, origins, first, list(skus.values()))
    _node_counts_within_bounds(offers, path)
    _one_sku_per_name(list(skus.values()), sku_origins)
    _check_catalog_name(data, path)
    catalog = Catalog(
        name=str(data.get("name") or path.stem),
        description=str(data.get("description") or ""),
        skus=list(skus.values()),
        offers=offers,
        source_files=gathered.files,
    )
    for i, offer in enumerate(catalog.offers):
        _offer_fits_its_sku(catalog, offer, origins[i])
    return catalog, origins, sku_origins


def _catalog_data(path: Path) -> dict:
    """A catalog file's mapping, its fields known and ``include`` and ``offers`` lists."""
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
    for key, kind in (("include", "a list of catalog names or paths, e.g. [nodus-2026-11]"), ("offers", "a list")):
        value = data.get(key)
        if value is not None and not (
            isinstance(value, list) and (key != "include" or all(isinstance(v, str) for v in value))
        ):
            shown = f"the text {value!r}" if isinstance(value, str) else _a_type(value)
            raise CatalogError(f"'{key}' takes {kind}, got {shown}", source=str(path), field=key)
    return data


def _gather_includes(
    data: dict, path: Path, chain: tuple[Path, ...], included_by: dict[Path, Path], gathered: _Gathered
) -> None:
    """Load the catalogs ``path`` includes, depth-first, into ``gathered``; a cycle or a catalog included twice
    is refused."""
    here = resolved(path, "catalog")
    for i, included in enumerate(data.get("include") or []):
        try:
            sub_path = _catalog_path(included, relative_to=path.parent)
        except CatalogError as exc:
            raise exc.located(str(path), f"include[{i}]") from None
        sub = resolved(sub_path, "catalog")
        if sub in (*chain, here):
            cycle = [p.name for p in (*chain, here)][list((*chain, here)).index(sub) :] + [sub.name]
            raise CatalogError(
                f"the includes form a cycle ({' -> '.join(cycle)}), so this catalog would never finish "
                "loading; remove one of these includes",
                source=str(path),
                field=f"include[{i}]",
            )
        if sub in included_by:
            by = f"by {path}" if included_by[sub] == path else f"by {included_by[sub]} and by {path}"
            raise CatalogError(
                f"catalog {sub_path} is included twice ({by}), which would list its offers twice; include it once",
                source=str(path),
                field=f"include[{i}]",
            )
        included_by[sub] = path
        sub_catalog, sub_origins, sub_sku_origins = _load_catalog(sub_path, (*chain, here), included_by)
        gathered.definitions.add_all(sub_catalog.skus, sub_sku_origins)
        gathered.offers.extend(sub_catalog.offers)
        gathered.origins.extend(sub_origins)
        gathered.files.extend(sub_catalog.source_files)


def _gather_skus(data: dict, path: Path, gathered: _Gathered) -> None:
    """The catalog's own ``skus:`` and its ``hardware:`` file's, into ``gathered``."""
    if "skus" in data:
        own = _load_skus(path)
        gathered.definitions.add_all(own, [(str(path), f"skus[{i}]") for i in range(len(own))])
    if data.get("hardware"):
        if not isinstance(data["hardware"], str):
            raise CatalogError(
                f"'hardware' takes the name or path of a hardware file (e.g. hardware), got {_a_type(data['hardware'])}",
                source=str(path),
                field="hardware",
            )
        try:
            hardware = _catalog_path(data["hardware"], path.parent)
        except CatalogError as exc:
            raise exc.located(str(path), "hardware") from None
        hardware_skus = _load_skus(hardware)
        gathered.definitions.add_all(hardware_skus, [(str(hardware), f"skus[{i}]") for i in range(len(hardware_skus))])
        gathered.files.append(str(hardware))


def _one_offer_per_name(offers: list[Offer], origins: list[tuple[str, str]]) -> dict[str, int]:
    """Each offer name (``sku_key``) given once; the index of the offer of each name."""
    first: dict[str, int] = {}
    for k, offer in enumerate(offers):
        j = first.setdefault(sku_key(offer.name), k)
        if j != k:
            (file_a, field_a), (file_b, field_b) = origins[j], origins[k]
            raise CatalogError(
                f"offer name {offer.name!r} is given twice ({file_a} {field_a} and {file_b} {field_b}); offer "
                "names select offers, so each must be unique: rename or remove one",
                source=file_b,
                field=f"{field_b}.name",
            )
    return first


def _node_counts_within_bounds(offers: list[Offer], path: Path) -> None:
    """The offers' node counts (max_nodes, twice with a spot price) within what the candidate search takes."""
    rows = sum(o.max_nodes * (2 if o.spot_price_usd_per_gpu_hour else 1) for o in offers)
    if rows > units.MAX_CATALOG_NODES:
        raise CatalogError(
            f"the offers add up to {rows:,} node counts (max_nodes over all offers, twice with a spot price), "
            f"more than the {units.MAX_CATALOG_NODES:,} the candidate search takes (each is a row to plan); "
            "lower max_nodes where the supply is not real",
            source=str(path),
            field="offers",
        )


def _check_catalog_name(data: dict, path: Path) -> None:
    """A catalog's ``name``, where it gives one, is a short name (``schema.a_name``)."""
    if data.get("name") is not None:
        try:
            if not isinstance(data["name"], str):
                raise ValueError(f"a catalog's name is text, got {_a_type(data['name'])}")
            a_name(data["name"])
        except ValueError as exc:
            raise CatalogError(f"{exc}; give the catalog a short name", source=str(path), field="name") from None


def _offer_fits_its_sku(catalog: Catalog, offer: Offer, origin: tuple[str, str]) -> None:
    """An offer names a SKU of the catalog, delivers at most the memory it has and puts at most its node's
    GPUs on a node."""
    try:
        sku = find_sku(catalog, offer.sku)
    except CatalogError as exc:
        raise exc.located(origin[0], f"{origin[1]}.sku") from None
    if offer.memory_delivered_bytes is not None:  # at most what the GPU has (schema.MEMORY_ABOVE_LABEL_MAX)
        if sku.memory_reported_bytes:
            reference, against = sku.memory_reported_bytes, f"what a {sku.name} reports (its memory_reported {{}})"
        else:
            reference, against = sku.memory_label_bytes, f"a {sku.name}'s label (its memory {{}})"
        problem = memory_figure_problem(
            "memory_delivered", offer.memory_delivered_bytes, sku.memory_label_bytes, reference, against
        )
        if problem:
            raise CatalogError(problem, source=origin[0], field=f"{origin[1]}.memory_delivered")
    if offer.gpus_per_node > sku.gpus_per_node:
        raise CatalogError(
            f"offer {offer.name!r} puts {offer.gpus_per_node} GPUs on a node, but a {sku.name} node holds "
            f"{sku.gpus_per_node} (the SKU's gpus_per_node): give gpus_per_node {sku.gpus_per_node} or fewer, "
            "and the node count in max_nodes",
            source=origin[0],
            field=f"{origin[1]}.gpus_per_node",
        )


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
    # a name given blank ('--catalog ""', 'catalog: ""') names no catalog: refused as unknown, not read as none given
    name = next((n for n in (override, problem.catalog) if n is not None), "default")
    base = Path(problem.source_path).parent if problem.source_path and override is None else None
    try:
        return load_catalog(name, relative_to=base)
    except CatalogError as exc:
        if (
            override is not None and exc.source is None
        ):  # the name itself is wrong; an error inside the file names the file
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
        path = base / entry.file
        try:
            problem = load_job(path)
        except GpuplanError as exc:
            if exc.field is not None or exc.source != str(path):
                raise
            # the file itself (missing, unreadable, not a job file): the message names the entry that gave it
            raise type(exc)(
                f"{printable(str(path))}: {exc.reason}", source=portfolio.source_path, field=f"jobs[{index}].file"
            ) from None
    else:
        problem = Problem(job=entry.job, assumptions=entry.assumptions or Assumptions())
        problem.source_path = portfolio.source_path
    if problem.job.roles is not None:  # scheduled as one model, a GRPO job ran 1 h for $0.00 on 2 GPUs
        raise JobError(
            f"job {entry.name!r} has roles (job.roles: its GPUs split between two models), and a portfolio schedules "
            "each job as one model on its GPUs, an answer to another question: plan it with gpuplan solve "
            "(docs/roles.md), or give the portfolio a job without roles",
            source=portfolio.source_path,
            field=f"jobs[{index}].file" if entry.file is not None else f"jobs[{index}].job.roles",
        )
    updates = {}
    if entry.gpu is not None:
        updates["gpu"] = entry.gpu
    # Deadlines are the portfolio's (from its start), not a per-row filter of the job's table. The spot policy
    # is the portfolio's where it gives one (or --spot/--no-spot does), else the job file's own (a job file's
    # 'spot: never' had been scheduled on spot under the portfolio's unset default)
    if "spot" in portfolio.model_fields_set or entry.file is None:
        updates["spot"] = portfolio.spot
    constraints = problem.constraints.model_copy(update={**updates, "deadline_s": None, "budget_usd": None})
    return problem.model_copy(update={"constraints": constraints})
