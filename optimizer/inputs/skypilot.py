"""Prices from SkyPilot's public catalogs (github.com/skypilot-org/skypilot-catalog, ``catalogs/vN/CLOUD/vms.csv``),
as every SkyPilot user has them cached under ``~/.sky/catalogs/vN/``: one row per instance type, region and zone,
with ``InstanceType, AcceleratorName, AcceleratorCount, Price, SpotPrice, Region`` (and vCPUs, MemoryGiB,
GpuInfo, AvailabilityZone), the columns in any order (each cloud's file has its own).

``read_offers`` turns the rows into gpuplan offers: the accelerator mapped to a SKU of the hardware file
(``ACCELERATORS``; instance-type hints where one name covers two SKUs, as Lambda's ``H100`` does for SXM and
PCIe), per instance type its cheapest region unless regions are asked for, prices per GPU-hour, the spot
price where one is published, GPUs per instance as the node. Rows it cannot use are counted with the reason
(no accelerator, an accelerator no SKU matches, a fractional GPU, no price), never guessed at.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ArgumentError, CatalogError

# SkyPilot's accelerator names (sky/catalog/common.py canonical names as the catalog files write them) -> gpuplan
# SKU. A name SkyPilot uses for two form factors is resolved from the instance type (``_HINTS``).
ACCELERATORS = {
    "a100": "A100-40GB",  # SkyPilot's A100 is the 40 GB SXM4 (AWS p4d, GCP a2-highgpu, Lambda gpu_8x_a100)
    "a100-80gb": "A100-80GB",
    "a100-80gb-sxm": "A100-80GB",
    "h100": "H100-SXM",
    "h100-sxm": "H100-SXM",
    "h100-mega": "H100-SXM",
    "h100-pcie": "H100-PCIe",
    "h200": "H200",
    "h200-sxm": "H200",
    "b200": "B200",
    "b300": "B300",
    "gb200": "GB200",
    "gb300": "GB300",
    "l40s": "L40S",
    "rtxpro6000": "RTX-PRO-6000",
    "rtx-pro-6000": "RTX-PRO-6000",
    "mi300x": "MI300X",
}
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
    return found


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
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
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise CatalogError(
                f"not a SkyPilot vms.csv: no {', '.join(missing)} column (it has {', '.join(reader.fieldnames or [])})",
                source=str(path),
            )
        for line, row in enumerate(reader, start=2):
            accelerator, instance = (row.get("AcceleratorName") or "").strip(), (row.get("InstanceType") or "").strip()
            if not accelerator:
                continue  # a CPU instance
            if regions and (row.get("Region") or "") not in regions:
                continue
            count, price = _number(row.get("AcceleratorCount")), _number(row.get("Price"))
            sku = _sku(cloud, accelerator, instance)
            why = None
            if sku is None:
                why = f"{accelerator} ({_NO_SKU.get((cloud, accelerator.lower()), 'no SKU in the hardware file')})"
            elif count is None or count < 1 or count != int(count):
                why = f"{accelerator}: a fractional or missing GPU count ({row.get('AcceleratorCount')!r})"
            elif price is None or price <= 0:
                why = f"{accelerator}: no on-demand price"
            if why or count is None or price is None:
                out.left_out[why or accelerator] += 1
                continue
            spot = _number(row.get("SpotPrice"))
            yield instance, sku, int(count), row.get("Region") or "", price, spot if spot and spot > 0 else None, line


def read_offers(files: dict[str, Path], regions: list[str] | None = None) -> Imported:
    """One offer per (cloud, instance type) (and region, when regions are asked for): its cheapest region's
    price, with the spot price of that region where it publishes one."""
    out = Imported(files=[str(p) for p in files.values()])
    for cloud, path in files.items():
        best: dict[tuple, tuple] = {}
        for instance, sku, count, region, price, spot, line in _rows(cloud, path, regions, out):
            key = (instance, region) if regions else (instance,)
            if key not in best or price < best[key][4]:
                best[key] = (instance, sku, count, region, price, spot, line)
        checked = dt.date.fromtimestamp(os.path.getmtime(path))
        for instance, sku, count, region, price, spot, line in best.values():
            name = re.sub(r"[^a-z0-9.-]+", "-", f"{cloud}-{instance}{'-' + region if regions else ''}".lower())
            offer = {
                "name": name.strip("-"),
                "sku": sku,
                "provider": cloud,
                "price": round(price / count, 6),
                "gpus_per_node": count,
                "gpu_counts": [count],
                "checked": checked.isoformat(),
                "source": f"SkyPilot catalog {cloud}/vms.csv line {line}: {instance} in {region}, ${price:g}/h for "
                f"{count} GPU(s)" + (f", spot ${spot:g}/h" if spot else ""),
            }
            if spot is not None and spot <= price:
                offer["spot_price"] = round(spot / count, 6)
            elif spot is not None:
                out.left_out[f"{instance}: a spot price above on-demand (spot left out)"] += 1
            out.offers.append(offer)
    out.offers.sort(key=lambda o: (o["sku"], o["price"], o["name"]))
    return out


def catalog_document(imported: Imported, name: str, max_nodes: int, today: dt.date) -> dict:
    """The imported offers as a catalog file's content (on the bundled hardware file's SKUs)."""
    clouds = sorted({o["provider"] for o in imported.offers})
    return {
        "name": name,
        "description": f"SkyPilot catalog prices ({', '.join(clouds) or 'no cloud'}), imported {today.isoformat()}",
        "hardware": "hardware",
        "offers": [{**offer, "max_nodes": max_nodes} for offer in imported.offers],
    }


def default_source() -> Path:
    """Where SkyPilot caches its catalogs: ``~/.sky/catalogs``."""
    return Path.home() / ".sky" / "catalogs"


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
    key = hashlib.sha256(f"{stamp}|{max_nodes}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpuplan"
    path = cache / f"skypilot-{key}.yaml"
    if not path.is_file():
        today = dt.date.today()
        document = catalog_document(read_offers(files), f"skypilot-{today.isoformat()}", max_nodes, today)
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        os.replace(tmp, path)  # concurrent commands write the same content; the last rename wins
    return path
