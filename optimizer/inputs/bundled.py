"""Where the bundled catalogs and problems live: inside the wheel, or beside the source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent
MODEL_PRESETS = "models"  # catalogs/models.yaml holds model presets, not GPUs: not a catalog


def bundled_dir(kind: str) -> Path:
    """The bundled ``catalogs`` or ``problems`` folder."""
    inside = _PACKAGE / "_bundled" / kind
    return inside if inside.is_dir() else _PACKAGE.parent / kind


def bundled_catalog_names() -> list[str]:
    return sorted(p.stem for p in bundled_dir("catalogs").glob("*.yaml") if p.stem != MODEL_PRESETS)
