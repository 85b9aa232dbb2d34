"""Looking things up in a loaded catalog: a SKU by name or alias, the offers a name selects."""

from __future__ import annotations

from ..errors import CatalogError, did_you_mean
from .schema import Catalog, Offer, Sku


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
