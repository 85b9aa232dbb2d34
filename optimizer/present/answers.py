"""The answers as JSON: what ``--format json`` prints and what ``gpuplan serve`` returns, from one place.

``answer_data`` is a result as plain data (pydantic's JSON mode), ``json_text`` that data as JSON text
(a NaN or infinity, which JSON lacks, goes out as null: unknown), ``model_rows`` the rows of
``gpuplan models``."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

from ..inputs.hf_models import model_fields, presets


def answer_data(result: Any) -> Any:
    """A result model as JSON-ready data; plain data (a dict of rows) as it is."""
    return result.model_dump(mode="json") if isinstance(result, BaseModel) else result


def nulled(data: Any) -> Any:
    """``data`` with every non-finite float as None, as pydantic writes them in JSON."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, dict):
        return {k: nulled(v) for k, v in data.items()}
    if isinstance(data, list):
        return [nulled(v) for v in data]
    return data


def json_text(data: Any, indent: int | None = 2) -> str:
    """``data`` as JSON text; NaN and infinities as null."""
    try:
        return json.dumps(data, indent=indent, allow_nan=False)
    except ValueError:  # NaN or infinity somewhere: JSON has neither, so they go out as null (unknown)
        return json.dumps(nulled(data), indent=indent, allow_nan=False)


def model_rows(table: dict | None = None) -> list[dict]:
    """The model presets (``table``, default the bundled ``presets()``), one row each: parameters, shapes,
    experts and where they come from."""
    rows = []
    for name, entry in (presets() if table is None else table).items():
        fields = model_fields(entry["config"], name)
        rows.append(
            {
                "name": name,
                "params": fields["params"],
                "active_params": fields.get("active_params", fields["params"]),
                "layers": fields["layers"],
                "hidden": fields["hidden"],
                "experts": fields.get("experts", 0),
                "experts_per_token": fields.get("experts_per_token", 0),
                "source": entry["published"]["source"],
            }
        )
    return rows
