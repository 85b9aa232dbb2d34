"""Input schema: hardware SKUs, offers, catalogs, models, jobs, assumptions, constraints, strategies.

Pydantic v2 models. YAML keys are what people type (``memory: 180GB``, ``price: $5.50/h``); each
is parsed by ``units`` on the way in and stored in a field whose name carries its unit
(``memory_bytes``, ``price_usd_per_gpu_hour``). Cross-field rules are small validators with
one-sentence messages. Results (plans, verdicts) live in ``results``.

One module per kind of input, each importing only those before it:
- ``types``: value types read with their unit, names, shared choices;
- ``base``: ``_Model``, every numeric field's range;
- ``hardware``: ``Sku``, ``Offer``, ``CatalogFile``, ``Catalog``;
- ``model``: ``ModelSpec``;
- ``job``: ``JobSpec``, ``Measurement``;
- ``assumptions``: ``Assumptions``, ``GpuFilter``, ``Constraints``;
- ``problem``: ``Problem`` (a job file);
- ``strategy``: ``Strategy``;
- ``portfolio``: ``PoolWindow``, ``Pool``, ``PortfolioJob``, ``Portfolio``.
Every name is importable from ``optimizer.inputs.schema`` as before the split.
"""

from __future__ import annotations

from .assumptions import Assumptions, Constraints, GpuFilter
from .base import _BOUND_ERRORS, _RANGES, _TEXT_FORMS, _Model
from .hardware import (
    MEMORY_ABOVE_LABEL_MAX,
    MEMORY_MIN_BYTES,
    MEMORY_OF_LABEL_MIN,
    Catalog,
    CatalogFile,
    Offer,
    Sku,
    memory_figure_problem,
)
from .job import JobSpec, Measurement, Rate
from .model import PARAMS_SHAPES_RATIO_MAX, ModelSpec
from .portfolio import Pool, PoolWindow, Portfolio, PortfolioJob
from .problem import Problem
from .strategy import Strategy
from .types import (
    BIDI_CONTROLS,
    Bytes,
    CostTolerance,
    Count,
    Framework,
    MemoryBasis,
    MemoryHeadroom,
    Method,
    Name,
    Precision,
    Recompute,
    Seconds,
    Usd,
    UsdPerHour,
    a_name,
    memory_headroom,
    sku_key,
)

__all__ = [
    "BIDI_CONTROLS",
    "MEMORY_ABOVE_LABEL_MAX",
    "MEMORY_MIN_BYTES",
    "MEMORY_OF_LABEL_MIN",
    "PARAMS_SHAPES_RATIO_MAX",
    "Assumptions",
    "Bytes",
    "Catalog",
    "CatalogFile",
    "Constraints",
    "CostTolerance",
    "Count",
    "Framework",
    "GpuFilter",
    "JobSpec",
    "Measurement",
    "MemoryBasis",
    "MemoryHeadroom",
    "Method",
    "ModelSpec",
    "Name",
    "Offer",
    "Pool",
    "PoolWindow",
    "Portfolio",
    "PortfolioJob",
    "Precision",
    "Problem",
    "Rate",
    "Recompute",
    "Seconds",
    "Sku",
    "Strategy",
    "Usd",
    "UsdPerHour",
    "_BOUND_ERRORS",
    "_RANGES",
    "_TEXT_FORMS",
    "_Model",
    "a_name",
    "memory_figure_problem",
    "memory_headroom",
    "sku_key",
]
