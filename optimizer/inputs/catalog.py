"""Looking things up in a loaded catalog: a SKU by name or alias, the offers a name selects."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CatalogError, did_you_mean
from .schema import Catalog, GpuFilter, Offer, Sku, sku_key


def find_sku(catalog: Catalog, name: str) -> Sku:
    """A SKU by canonical name or alias, case-insensitively (``h100`` -> H100-SXM)."""
    key = sku_key(name)
    for sku in catalog.skus:
        if key == sku_key(sku.name) or key in (sku_key(a) for a in sku.aliases):
            return sku
    names = [s.name for s in catalog.skus]
    raise CatalogError(
        f"unknown GPU {name!r}; known SKUs: {', '.join(names)}.{did_you_mean(name, names + sum((s.aliases for s in catalog.skus), []))}"
    )


def vendor_in(catalog: Catalog, name: str) -> str | None:
    """The vendor (``Sku.vendor``) of the catalog's SKU of that name or alias; None where it has no such SKU
    (a plan from a request body may name any)."""
    try:
        return find_sku(catalog, name).vendor
    except CatalogError:
        return None


def offers_for(catalog: Catalog, name: str) -> list[Offer]:
    """Offers selected by an offer name, an offer alias (``type: B200``) or a SKU name/alias."""
    key = sku_key(name)
    direct = [o for o in catalog.offers if key == sku_key(o.name) or key in (sku_key(a) for a in o.aliases)]
    if direct:
        return direct
    try:
        sku = find_sku(catalog, name)
    except CatalogError as exc:
        offer_names = [o.name for o in catalog.offers]
        raise CatalogError(
            f"unknown GPU {name!r} (no SKU or offer of that name); known SKUs: {', '.join(s.name for s in catalog.skus)}; offers: "
            f"{', '.join(offer_names)}.{did_you_mean(name, offer_names + [s.name for s in catalog.skus])}"
        ) from exc
    return [o for o in catalog.offers if find_sku(catalog, o.sku).name == sku.name]


def sku_for(catalog: Catalog, name: str) -> Sku:
    """The SKU a name selects as ``check --sku`` takes it: a SKU's name or alias, or an offer's name or alias."""
    offers = offers_for(catalog, name)
    return find_sku(catalog, offers[0].sku if offers else name)


def host_gpus(gpus_per_node: int, sku_gpus_per_host: int | None) -> int:
    """GPUs an operating-system host (a Ray node, a Slurm node) runs: the SKU's (an NVL72 rack's compute tray of 4),
    else the node's; the largest divisor of the node's GPUs at most that."""
    most = min(sku_gpus_per_host or gpus_per_node, gpus_per_node)
    return max(d for d in range(1, most + 1) if gpus_per_node % d == 0)


def usable_memory_bytes(sku: Sku, offer: Offer | None) -> tuple[float, str]:
    """The memory per GPU a plan counts on by default, and its basis: what the offer delivers where it says
    so, else what the device reports (nvidia-smi), else the label."""
    if offer is not None and offer.memory_delivered_bytes:
        return offer.memory_delivered_bytes, "delivered"
    if sku.memory_reported_bytes:
        return sku.memory_reported_bytes, "reported"
    return sku.memory_label_bytes, "label"


@dataclass(frozen=True)
class CatalogEntry:
    """One line of a catalog listing: a SKU on one of its offers (or bare), with the memory it offers."""

    sku: Sku
    offer: Offer | None

    @property
    def memory_bytes(self) -> float:
        """What the offer delivers where it says so, else the SKU's label."""
        if self.offer is not None and self.offer.memory_delivered_bytes:
            return self.offer.memory_delivered_bytes
        return self.sku.memory_label_bytes

    @property
    def usable_bytes(self) -> float:
        """What plans count on (``usable_memory_bytes``), which ``--min-memory`` filters on in every command."""
        return usable_memory_bytes(self.sku, self.offer)[0]


def catalog_entries(
    catalog: Catalog, types: list[str] | None = None, min_memory_bytes: float | None = None
) -> list[CatalogEntry]:
    """Every SKU with each of its offers, optionally only some GPU types or at least some memory."""
    skus = catalog.skus
    if types:
        wanted = {find_sku(catalog, t).name for t in types}
        skus = [s for s in skus if s.name in wanted]
    offers_by_sku: dict[str, list[Offer | None]] = {}
    for offer in catalog.offers:
        offers_by_sku.setdefault(find_sku(catalog, offer.sku).name, []).append(offer)
    entries = [CatalogEntry(sku, offer) for sku in skus for offer in (offers_by_sku.get(sku.name) or [None])]
    if min_memory_bytes:  # as the planner's filter (planning/candidates.py: row_rejection) reads it
        entries = [e for e in entries if e.usable_bytes >= min_memory_bytes]
    return entries


def passes_gpu_names(gpu: GpuFilter, sku: Sku, offer: Offer | None) -> bool:
    """Whether a SKU (on an offer, or alone) passes the job's GPU type and provider filters
    (constraints.gpu.types: the SKU's or the offer's name or an alias, matched as ``sku_key`` reads names;
    constraints.gpu.providers: the offer's provider, case-insensitively)."""
    if gpu.types:
        names = {sku.name, *sku.aliases, *((offer.name, *offer.aliases) if offer is not None else ())}
        if not {sku_key(t) for t in gpu.types} & {sku_key(n) for n in names}:
            return False
    if gpu.providers:
        return offer is not None and offer.provider.lower() in {p.lower() for p in gpu.providers}
    return True
