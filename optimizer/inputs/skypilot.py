"""Prices from SkyPilot's public catalogs (github.com/skypilot-org/skypilot-catalog, ``catalogs/vN/CLOUD/vms.csv``),
as every SkyPilot user has them cached under ``~/.sky/catalogs/vN/``: one row per instance type, region and zone,
with ``InstanceType, AcceleratorName, AcceleratorCount, Price, SpotPrice, Region`` (and vCPUs, MemoryGiB,
GpuInfo, AvailabilityZone), the columns in any order (each cloud's file has its own).

``read_offers`` turns the rows into gpuplan offers: the accelerator mapped to a SKU of the hardware file
(``ACCELERATORS``, from ``launch_names``; instance-type hints where one name covers two SKUs, as Lambda's
``H100`` does for SXM and PCIe), per instance type its cheapest region unless regions are asked for, prices per GPU-hour, the spot
price where one is published, GPUs per instance as the node. Rows it cannot use are counted with the reason
(no accelerator, an accelerator no SKU matches, a fractional GPU, no price), never guessed at.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import hashlib
import io
import math
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..errors import ArgumentError, CatalogError, GpuplanError, printable
from . import units
from .launch_names import bundled_skus, skypilot_catalog_skus
from .schema import Offer, sku_key

# SkyPilot's accelerator names (sky/catalog/common.py canonical names as the catalog files write them) -> gpuplan
# SKU: each SKU's ``skypilot_catalog`` names in ``launch_names``. A name SkyPilot uses for two form factors is
# resolved from the instance type (``_HINTS``).
ACCELERATORS = skypilot_catalog_skus()
# (cloud, accelerator) -> (instance-type pattern, SKU): the form factor the instance name states
_HINTS = {
    ("lambda", "h100"): (re.compile(r"pcie", re.I), "H100-PCIe"),
}
# (cloud, accelerator) pairs whose form factor has no SKU here: RunPod's A100-80GB is the PCIe card (its SXM
# one is A100-80GB-SXM), and the hardware file's A100-80GB is the SXM4 module.
_NO_SKU = {("runpod", "a100-80gb"): "RunPod's A100-80GB is the PCIe card; the hardware file has the SXM4 A100 only"}
REQUIRED = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price")


@dataclass
class Imported:
    """Offers read from SkyPilot's files, and what was left out, counted by reason."""

    offers: list[dict] = field(default_factory=list)
    left_out: Counter = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how the files were read (an encoding other than UTF-8)


def catalog_files(source: Path, clouds: list[str] | None) -> dict[str, Path]:
    """``CLOUD -> vms.csv`` under ``source``: a SkyPilot catalog folder (``~/.sky/catalogs/v7``, or the newest
    ``vN`` inside the folder above it), one cloud's folder, or one vms.csv (its folder names the cloud)."""
    if source.is_file():
        return {source.parent.name.lower(): source}
    if not source.is_dir():
        raise ArgumentError(f"{source} is not a folder of SkyPilot catalogs or a vms.csv", field="from_dir")
    versions = sorted(
        (p for p in source.glob("v*") if p.is_dir() and p.name[1:].isdigit()), key=lambda p: int(p.name[1:])
    )
    root = versions[-1] if versions else source
    if (root / "vms.csv").is_file():
        found = {root.name.lower(): root / "vms.csv"}
    else:
        found = {p.parent.name.lower(): p for p in sorted(root.glob("*/vms.csv"))}
    if clouds:
        missing = [c for c in clouds if c not in found]
        if missing:
            raise ArgumentError(
                f"no vms.csv for {', '.join(missing)} under {root} (it has {', '.join(sorted(found)) or 'none'}); "
                "run 'sky show-gpus' once to fetch SkyPilot's catalogs, or point --from at a folder that has them",
                field="clouds",
            )
        found = {c: found[c] for c in clouds}
    if not found:
        raise ArgumentError(f"no CLOUD/vms.csv under {root}: not a SkyPilot catalog folder", field="from_dir")
    for path in found.values():
        if not path.is_file():  # a folder, a FIFO, a device, a dangling link
            raise CatalogError(
                "not a regular file, so no SkyPilot vms.csv: remove it, or read a folder whose CLOUD/vms.csv are files",
                source=str(path),
            )
    return found


def check_out(out: Path | None, files: dict[str, Path]) -> None:
    """An ArgumentError when ``out`` (through links too) is one of the vms.csv files an import reads: writing
    the catalog there would destroy its input."""
    if out is None or str(out) == "-":
        return
    written = Path(os.path.realpath(out))
    for path in files.values():
        if written == Path(os.path.realpath(path)) or (written.exists() and _same_file(written, path)):
            raise ArgumentError(
                f"{printable(str(out))} is {printable(str(path))}, a file this import reads; writing the catalog "
                "there would destroy it: choose another file name",
                field="out",
            )


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def read_csv_text(path: Path, out: Imported) -> str:
    """A vms.csv's text: its bytes as UTF-8 (with or without the BOM Excel writes), else as latin-1 (said in
    ``out.notes``); the csv module's field limit raised to the file's size, so no long field is refused."""
    if not path.is_file():
        raise CatalogError("not a regular file, so no SkyPilot vms.csv: remove it or replace it", source=str(path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CatalogError(
            f"cannot be read ({exc.strerror or exc.__class__.__name__}); check its permissions", source=str(path)
        ) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = data.decode("latin-1")
        out.notes.append(f"{printable(str(path))} is not UTF-8 (byte {exc.start + 1}): read as latin-1")
    csv.field_size_limit(min(sys.maxsize, max(csv.field_size_limit(), len(data) + 1)))
    return text


def _number(text: str | None) -> float | None:
    """A number of the CSV, or None: blank, not a number, not finite, or in another script's digits (float()
    read '٩٨' as a $98 price; every other quantity gpuplan reads is 0-9, units._NUMBER)."""
    try:
        value = float(text) if text not in (None, "") and str(text).isascii() else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _sku(cloud: str, accelerator: str, instance: str) -> str | None:
    key = accelerator.strip().lower()
    hint = _HINTS.get((cloud, key))
    if hint and hint[0].search(instance):
        return hint[1]
    if (cloud, key) in _NO_SKU:
        return None
    return ACCELERATORS.get(key)


def _rows(cloud: str, path: Path, regions: list[str] | None, out: Imported):
    """The usable GPU rows of one vms.csv: (instance type, SKU, GPUs, region, price, spot price, row)."""
    with io.StringIO(read_csv_text(path, out), newline="") as handle:
        reader = csv.DictReader(handle)
        try:
            fieldnames = reader.fieldnames or []
            repeated = sorted({c for c in fieldnames if fieldnames.count(c) > 1})
            if repeated:  # csv.DictReader keeps the last of a repeated column: a second Price column priced it
                raise CatalogError(
                    f"not a SkyPilot vms.csv: the column {printable(', '.join(repeated))[:200]} is given twice, and "
                    "which one holds the prices cannot be told; keep one",
                    source=str(path),
                )
            missing = [c for c in REQUIRED if c not in fieldnames]
            if missing:
                raise CatalogError(
                    f"not a SkyPilot vms.csv: no {', '.join(missing)} column (it has "
                    f"{printable(', '.join(fieldnames))[:500]})",
                    source=str(path),
                )
            for line, row in enumerate(reader, start=2):
                usable = _usable(cloud, row, line, regions, out)
                if usable is not None:
                    yield usable
        except csv.Error as exc:
            raise CatalogError(
                f"not a CSV file gpuplan can read, line {reader.line_num}: {exc}; check that it is SkyPilot's vms.csv",
                source=str(path),
            ) from None


def _usable(cloud: str, row: dict, line: int, regions: list[str] | None, out: Imported) -> tuple | None:
    """One vms.csv row as (instance type, SKU, GPUs, region, price, spot price, line), or None (left out,
    counted with why in ``out``, or a CPU instance or another region)."""
    accelerator, instance = str(row.get("AcceleratorName") or "").strip(), str(row.get("InstanceType") or "").strip()
    if not accelerator:
        return None  # a CPU instance
    if regions and (row.get("Region") or "") not in regions:
        return None
    count, price = _number(row.get("AcceleratorCount")), _number(row.get("Price"))
    sku = _sku(cloud, accelerator, instance)
    why = None
    if sku is None:
        why = f"{accelerator} ({_NO_SKU.get((cloud, accelerator.lower()), 'no SKU in the hardware file')})"
    elif count is None or count < 1 or count != int(count):
        why = f"{accelerator}: a fractional or missing GPU count ({row.get('AcceleratorCount')!r})"
    elif price is None or price <= 0:
        why = f"{accelerator}: no on-demand price"
    elif not instance:  # its offer was named after the cloud alone ('aws')
        why = f"{accelerator}: no instance type"
    if why or count is None or price is None or sku is None:
        _leave_out(out, why or accelerator)
        return None
    spot = _number(row.get("SpotPrice"))
    if str(row.get("SpotPrice") or "").strip() and not (spot and spot > 0):  # '-1', 'nan': dropped unsaid
        _leave_out(out, f"{instance}: a spot price that is no price ({row.get('SpotPrice')!r}; spot left out)")
        spot = None
    return instance, sku, int(count), str(row.get("Region") or ""), price, spot, line


def _checked(path: Path) -> dt.date | None:
    """The day the file was written (its modification time), or None where the system cannot say one."""
    try:
        return dt.date.fromtimestamp(os.path.getmtime(path))
    except (OverflowError, OSError, ValueError):  # a time past year 9999 or before the epoch's range
        return None


@functools.cache
def _node_sizes() -> dict[str, int]:
    """GPUs per node of each SKU of the bundled hardware file, which an imported catalog plans on."""
    return {sku.name: sku.gpus_per_node for sku in bundled_skus()}


def loader_refusal(offer: dict) -> str | None:
    """Why the catalog loader would refuse ``offer`` (its Offer schema: a price of $0 or above the loader's
    limit, a GPU count beyond a node, a date in the future; and more GPUs on a node than the SKU's node holds,
    as ``files._load_catalog`` checks), or None where it loads."""
    try:
        Offer.model_validate(offer)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "offer"
        return f"{where}: {error['msg']}"
    except GpuplanError as exc:
        return exc.reason
    node = _node_sizes().get(offer["sku"])
    if node is not None and offer["gpus_per_node"] > node:
        return f"gpus_per_node: {offer['gpus_per_node']} GPUs on a node, but a {offer['sku']} node holds {node}"
    return None


def _offer(cloud: str, row: tuple, regions: list[str] | None, checked: dt.date | None) -> dict:
    instance, sku, count, region, price, spot, line = row
    name = re.sub(r"[^a-z0-9.-]+", "-", f"{cloud}-{instance}{'-' + region if regions else ''}".lower())
    offer = {
        "name": name.strip("-"),
        "sku": sku,
        "provider": cloud,
        "price": round(price / count, 6),
        "gpus_per_node": count,
        "gpu_counts": [count],
        **({"checked": checked.isoformat()} if checked else {}),
        "source": (
            f"SkyPilot catalog {cloud}/vms.csv line {line}: {instance} in {region}, ${price:g}/h for {count} GPU(s)"
            + (f", spot ${spot:g}/h" if spot else "")
        ).translate(_ONE_LINE),
    }
    if spot is not None and spot <= price:
        offer["spot_price"] = round(spot / count, 6)
    return offer


def read_offers(files: dict[str, Path], regions: list[str] | None = None) -> Imported:
    """One offer per (cloud, instance type) (and region, when regions are asked for): its cheapest region's
    price, with the spot price of that region where it publishes one. An offer the catalog loader would refuse
    (``loader_refusal``), or whose name another one has in any case or punctuation (offer names select offers,
    as ``sku_key`` matches them), is left out and counted with why."""
    out = Imported(files=[printable(str(p)) for p in files.values()])  # one line each: written in comments
    candidates = []
    for cloud, path in files.items():
        best: dict[tuple, tuple] = {}
        for row in _rows(cloud, path, regions, out):
            instance, region, price = row[0], row[3], row[4]
            key = (instance, region) if regions else (instance,)
            if key not in best or price < best[key][4]:
                best[key] = row
        checked = _checked(path)
        for row in best.values():
            offer = _offer(cloud, row, regions, checked)
            if row[5] is not None and "spot_price" not in offer:
                _leave_out(out, f"{row[0]}: a spot price above on-demand (spot left out)")
            candidates.append((row[1], offer))
    # the cheapest first: it keeps a name two instance types share, and a place under the loader's node counts
    candidates.sort(key=lambda c: (c[1]["price"], c[1]["sku"], c[1]["name"]))
    names: set[str] = set()
    for sku, offer in candidates:
        if len(out.offers) >= units.MAX_CATALOG_NODES:  # each offer is at least one node count: no room left
            _leave_out(out, TOO_MANY)
            continue
        why = loader_refusal(offer)
        if why:
            _leave_out(out, f"{sku} ({why}: the catalog loader would refuse it)")
        elif sku_key(offer["name"]) in names:
            _leave_out(out, "an instance type whose offer name another has, in another case or punctuation")
        else:
            names.add(sku_key(offer["name"]))
            out.offers.append(offer)
    out.offers.sort(key=lambda o: (o["sku"], o["price"], o["name"]))
    return out


# Control characters (C0, DEL, C1) as \\xNN, as errors.printable writes them; one table for a million rows.
_ONE_LINE = {c: f"\\x{c:02x}" for c in [*range(0x20), *range(0x7F, 0xA0)]}
# Why the dearest offers are left out of a large import.
TOO_MANY = (
    f"past the {units.MAX_CATALOG_NODES:,} node counts a catalog takes (max_nodes per offer, twice with a spot "
    "price; the dearest left out): choose --clouds or --regions, or lower --max-nodes"
)


def _leave_out(out: Imported, why: str) -> None:
    """Count a row left out, its reason one printable line (it is written into a catalog's comment)."""
    out.left_out[why[:300].translate(_ONE_LINE)] += 1


def catalog_document(imported: Imported, name: str, max_nodes: int, today: dt.date) -> dict:
    """The imported offers as a catalog file's content (on the bundled hardware file's SKUs): the cheapest
    offers up to the node counts the catalog loader takes (``units.MAX_CATALOG_NODES``), the rest left out and
    counted in ``imported.left_out``."""
    clouds = sorted({o["provider"] for o in imported.offers})
    why = loader_refusal({**imported.offers[0], "max_nodes": max_nodes}) if imported.offers else None
    if why and why.startswith("max_nodes"):  # the loader's own bound on an offer's supply
        raise ArgumentError(f"the catalog loader refuses {why.removeprefix('max_nodes: ')}", field="max_nodes")
    rows, offers = 0, []
    for offer in sorted(imported.offers, key=lambda o: o["price"]):
        rows += max_nodes * (2 if "spot_price" in offer else 1)
        if rows > units.MAX_CATALOG_NODES:
            _leave_out(imported, TOO_MANY)
            continue
        offers.append(offer)
    kept = {id(o) for o in offers}
    read_as = f"; {'; '.join(imported.notes)}" if imported.notes else ""
    return {
        "name": name,
        "description": printable(
            f"SkyPilot catalog prices ({', '.join(clouds) or 'no cloud'}), imported {today.isoformat()}{read_as}"
        ),
        "hardware": "hardware",
        "offers": [{**offer, "max_nodes": max_nodes} for offer in imported.offers if id(offer) in kept],
    }


def default_source() -> Path:
    """Where SkyPilot caches its catalogs: ``~/.sky/catalogs``."""
    return Path.home() / ".sky" / "catalogs"


# The version of what cached_catalog writes: a change in how rows are read makes a new cache file.
CACHE_FORMAT = 2
# The catalog name that stands for SkyPilot's cached catalogs (``--catalog skypilot``, ``catalog: skypilot``).
CATALOG_NAME = "skypilot"


def cached_catalog(source: Path | None = None, max_nodes: int = 1) -> Path:
    """A catalog file of SkyPilot's cached prices, written once per state of its files into gpuplan's cache
    (``$XDG_CACHE_HOME/gpuplan`` or ``~/.cache/gpuplan``, keyed by each vms.csv's path, size and time), so
    that ``--catalog skypilot`` plans on them without reading the CSVs every time."""
    root = source or default_source()
    try:
        files = catalog_files(root, None)
    except ArgumentError:
        raise CatalogError(
            f"catalog 'skypilot' plans on SkyPilot's cached catalogs, and {root} has none: run 'sky show-gpus' "
            "once (SkyPilot fetches them), or write a catalog from a folder of them with 'gpuplan catalog import "
            "skypilot --from DIR --out FILE'"
        ) from None
    stamp = "|".join(f"{p}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files.values())
    key = hashlib.sha256(f"{CACHE_FORMAT}|{stamp}|{max_nodes}|{dt.date.today()}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuplan"
    path = cache / f"skypilot-{key}.yaml"
    if not path.is_file():
        today = dt.date.today()
        imported = read_offers(files)
        if not imported.offers:
            raise CatalogError(
                f"catalog 'skypilot': no row of {', '.join(imported.files)} maps to a GPU gpuplan knows; write a "
                "catalog of the clouds you want with 'gpuplan catalog import skypilot --out FILE'"
            )
        document = catalog_document(imported, f"skypilot-{today.isoformat()}", max_nodes, today)
        try:
            cache.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
            os.replace(tmp, path)  # concurrent commands write the same content; the last rename wins
        except OSError as exc:
            raise CatalogError(
                f"catalog 'skypilot' is written once into gpuplan's cache, {printable(str(cache))}, which cannot be "
                f"written ({exc.strerror or exc.__class__.__name__}): point XDG_CACHE_HOME at a folder you can write"
            ) from None
    return path
