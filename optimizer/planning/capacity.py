"""``capacity``: the largest model whose training state (plus a reserve) fits on some GPUs.

The seed's arithmetic (seed 000): capacity / bytes-per-param, e.g. 180 GB / 16 = 11.25B parameters
per B200, x 8 fully sharded = 90B per node; with the HGX B300 board's 2.1 TB, 131B.
"""

from __future__ import annotations

from ..errors import ArgumentError, GpuplanError
from ..inputs.catalog import find_sku, offers_for
from ..inputs.schema import Catalog
from ..inputs.units import parse_bytes
from ..physics.constants import GIB, OPTIMIZER_BYTES, QLORA_BYTES_PER_PARAM
from ..physics.memory import max_params_fitting
from ..results import CapacityResult
from .context import HardwareRow, capacity_bytes

METHOD_BYTES = {"full": 4.0 + OPTIMIZER_BYTES["adamw"], "lora": 2.0, "qlora": QLORA_BYTES_PER_PARAM}


def capacity(
    sku: str,
    gpus: int = 1,
    *,
    zero: int = 3,
    method: str = "full",
    bytes_per_param: float | None = None,
    reserve: str | float = 0,
    memory_basis: str = "delivered",
    catalog: Catalog,
) -> CapacityResult:
    """Largest parameter count whose state fits on ``gpus`` GPUs of ``sku`` (adapters ignored for LoRA)."""
    if gpus < 1:
        raise ArgumentError("must be at least 1", field="gpus")
    if method not in METHOD_BYTES:
        raise ArgumentError(f"unknown method {method!r}; use full, lora or qlora", field="method")
    if bytes_per_param is not None and bytes_per_param <= 0:
        raise ArgumentError("must be positive, e.g. 16 for mixed-precision AdamW", field="bytes_per_param")
    hw = find_sku(catalog, sku)
    offers = offers_for(catalog, sku)
    row = HardwareRow(hw, offers[0] if offers else None, 1, 1)
    per_gpu, basis = capacity_bytes(row, memory_basis)
    try:
        reserve_bytes = parse_bytes(reserve, "a memory size")
    except GpuplanError as exc:
        raise ArgumentError(exc.reason, field="reserve") from None
    if reserve_bytes < 0:
        raise ArgumentError("must not be negative", field="reserve")
    bpp = bytes_per_param or METHOD_BYTES[method]
    stage = zero if method == "full" else 3
    params = max_params_fitting(per_gpu, gpus, bpp, reserve_bytes, stage)
    return CapacityResult(
        sku=hw.name,
        gpus=gpus,
        zero_stage=zero,
        method=method,
        bytes_per_param=bpp,
        memory_per_gpu_gb=per_gpu / 1e9,
        memory_per_gpu_gib=per_gpu / GIB,
        memory_basis=basis,
        reserve_gb=reserve_bytes / 1e9,
        max_params=params,
    )
