"""``capacity``: the largest model that fits on some GPUs.

Without a job, training state only (plus a reserve): the seed's arithmetic (seed 000), capacity /
bytes-per-param, e.g. 180 GB / 16 = 11.25B parameters per B200, x 8 fully sharded = 90B per node; with
the HGX B300 board's 2.1 TB, 131B. With a job, the job's own model made deeper or shallower (its widths
kept) until ``check``'s verdict flips: the same code path as ``check``, activations, reserve, adapters and
the best layout included, so the two always agree on the job itself (docs/design.md section 4.8).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import ArgumentError, GpuplanError
from ..inputs.catalog import offers_for, sku_for
from ..inputs.schema import Catalog
from ..inputs.units import parse_bytes_or_fraction
from ..physics.constants import GIB, OPTIMIZER_BYTES, QLORA_BYTES_PER_PARAM
from ..physics.memory import max_params_fitting
from ..results import CapacityResult
from .check import Fixed, check_row
from .context import HardwareRow, JobContext, build_context, capacity_bytes

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
    hw = sku_for(catalog, sku)
    offers = offers_for(catalog, sku)
    row = HardwareRow(hw, offers[0] if offers else None, 1, 1)
    per_gpu, basis = capacity_bytes(row, memory_basis)
    try:
        reserve_bytes = parse_bytes_or_fraction(reserve, "a memory size")
    except GpuplanError as exc:
        raise ArgumentError(exc.reason, field="reserve") from None
    if reserve_bytes < 0:
        raise ArgumentError("must not be negative", field="reserve")
    if reserve_bytes < 1:  # a fraction of the GPU's memory, as activation_reserve in a job file
        reserve_bytes *= per_gpu
    bpp = bytes_per_param or METHOD_BYTES[method]
    # LoRA and QLoRA hold only the frozen base weights (the adapters are ignored): only ZeRO-3 shards them,
    # below it every GPU holds them all (8 B200 at ZeRO-0 held 720B LoRA parameters where each GPU holds 90B)
    stage = zero if method == "full" else (3 if zero == 3 else 0)
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


def job_capacity(ctx: JobContext, sku: str, gpus: int, nodes: int | None = None) -> CapacityResult:
    """The largest depth of the job's model whose best layout on ``gpus`` x ``sku`` fits, as parameters."""
    model = ctx.job.model
    shape = ctx.shape
    if not model.layers or not shape.has_shapes:
        raise ArgumentError(
            "capacity for a job needs the model's shapes (layers, hidden, heads, ffn_hidden, vocab) or a preset",
            field="job",
        )
    per_layer = shape.layer_params
    rest = shape.params - per_layer * shape.layers
    active_per_layer = per_layer * shape.active_params / shape.params

    def fits(layers: int) -> bool:
        scaled = model.model_copy(
            update={
                "layers": layers,
                "params": rest + per_layer * layers,
                "active_params": (rest + active_per_layer * layers) if model.active_params else None,
            }
        )
        problem = ctx.problem.model_copy(update={"job": ctx.job.model_copy(update={"model": scaled})})
        scaled_ctx = replace(build_context(problem, ctx.catalog), calibration=ctx.calibration)
        checked = check_row(scaled_ctx, sku, gpus, nodes, False, Fixed())
        return checked.plan.fits and checked.runnable

    lo, hi = 0, max(1, int(model.layers))  # fits(lo) holds (or lo == 0); find the largest depth that fits
    while fits(hi):
        lo, hi = hi, 2 * hi
        if hi > 64 * model.layers:
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    row = check_row(ctx, sku, gpus, nodes, False, Fixed()).plan
    train = ctx.train
    return CapacityResult(
        sku=row.sku,
        gpus=gpus,
        zero_stage=row.strategy.zero_stage,
        method=ctx.job.method,
        bytes_per_param=(
            train.weights_total(shape.params)
            + (train.grad_bytes + float(train.optimizer_bytes_at(row.strategy.zero_stage))) * train.trainable_params
        )
        / shape.params,
        memory_per_gpu_gb=row.memory_gib.capacity * GIB / 1e9,
        memory_per_gpu_gib=row.memory_gib.capacity,
        memory_basis=row.memory_gib.basis,
        reserve_gb=row.memory_gib.reserve * GIB / 1e9,
        max_params=rest + per_layer * lo if lo else 0.0,
        max_layers=lo,
        job_fits=lo >= model.layers,
        includes_activations=True,
    )
