"""What the command-line flags mean for a problem, as data: ``apply_overrides`` and ``parse_measurement``.

Errors name the override by its keyword (``deadline``, ``measured``) with no file: the CLI maps a
keyword to the flag the user typed; a Python caller sees the keyword it passed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, get_args

from pydantic import ValidationError

from ..errors import ArgumentError, GpuplanError
from . import units
from .files import validation_error
from .schema import Constraints, JobSpec, Measurement, Problem


def _quantile(value: str) -> str:
    if value not in ("p50", "p90"):
        raise GpuplanError(f"must be p50 or p90 (got {value!r})")
    return value


# keyword -> (Constraints field, parser); every parsed number must be positive.
_CONSTRAINTS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "deadline": ("deadline_s", lambda v: units.parse_duration_s(v, "a deadline")),
    "budget": ("budget_usd", lambda v: units.parse_usd(v, "a budget")),
    "max_nodes": ("max_nodes", int),
    "max_gpus": ("max_gpus", int),
    "deadline_quantile": ("deadline_quantile", _quantile),
}


FRAMEWORK_CHOICES: tuple[str, ...] = get_args(JobSpec.model_fields["framework"].annotation)
SPOT_CHOICES: tuple[str, ...] = get_args(Constraints.model_fields["spot"].annotation)


def _one_of(key: str, value: str, choices: tuple[str, ...]) -> str:
    """``value`` as one of ``choices``, in any case as a job file's choice is read (--framework MEGATRON)."""
    chosen = value.strip().lower() if isinstance(value, str) else value
    if chosen not in choices:
        raise ArgumentError(f"must be one of {', '.join(choices)} (got {value!r})", field=key)
    return chosen


def apply_overrides(problem: Problem, **overrides) -> Problem:
    """Command-line flags over the file: ``deadline='5d'``, ``budget='20k'``, ``max_nodes=2``,
    ``gpu_types='B200,B300'``, ``min_memory='160Gi'``, ``objective='time'``. None leaves a field alone."""
    constraints: dict = {}
    gpu: dict = {}
    objective = problem.objective
    job = problem.job
    for key, value in overrides.items():
        if value is None:
            continue
        if key == "objective":
            objective = value
        elif key == "framework":
            job = job.model_copy(update={"framework": _one_of(key, value, FRAMEWORK_CHOICES)})
        elif key == "compile":
            job = job.model_copy(update={"compile": bool(value)})
        elif key == "spot":
            constraints["spot"] = _one_of(key, value, SPOT_CHOICES)
        elif key == "measured":
            job = job.model_copy(update={"measured": job.measured + [parse_measurement(v) for v in value]})
        else:
            try:
                _override(key, value, constraints, gpu)
            except GpuplanError as exc:
                raise ArgumentError(exc.reason, field=key) from None
    new_gpu = problem.constraints.gpu.model_copy(update=gpu)
    new_constraints = problem.constraints.model_copy(update={**constraints, "gpu": new_gpu})
    return problem.model_copy(update={"constraints": new_constraints, "objective": objective, "job": job})


def _override(key: str, value, constraints: dict, gpu: dict) -> None:
    if key == "gpu_types":
        gpu["types"] = [t.strip() for t in str(value).split(",") if t.strip()]
    elif key == "min_memory":
        gpu["min_memory_bytes"] = units.parse_bytes(value, "a memory size")
        if gpu["min_memory_bytes"] <= 0:
            raise GpuplanError("must be positive, e.g. 160Gi")
    elif key in _CONSTRAINTS:
        field, parse = _CONSTRAINTS[key]
        constraints[field] = parse(value)
        if isinstance(constraints[field], (int, float)) and constraints[field] <= 0:
            raise GpuplanError(f"must be positive (got {value!r})")
    else:
        raise GpuplanError(
            f"unknown override; use one of objective, measured, framework, compile, spot, gpu_types, min_memory, {', '.join(_CONSTRAINTS)}"
        )


def parse_measurement(text: str) -> Measurement:
    """``4xRTX-PRO-6000:14.8k tok/s`` or ``16xB200@2:45k tok/s,150GiB`` (GPUs x SKU [@nodes]: rate [, peak])."""
    match = re.fullmatch(rf"\s*{units.GPUS_X_SKU}\s*(?:@\s*([0-9]{{1,30}}))?\s*:\s*([^,]+?)\s*(?:,\s*(.+))?", text)
    if not match:
        raise ArgumentError(
            f"cannot read {text!r}; write it like '4xRTX-PRO-6000:14.8k tok/s' or "
            "'16xB200@2:45k tok/s,150GiB' (GPUs x SKU [@nodes]: throughput [, peak memory])",
            field="measured",
        )
    gpus, sku, nodes, rate, peak = match.groups()
    data = {"sku": sku, "gpus": int(gpus), "tokens_per_s": rate}
    if nodes:
        data["nodes"] = int(nodes)
    if peak:
        data["peak_memory"] = peak
    try:
        return Measurement.model_validate(data).from_flag(text)
    except ValidationError as exc:
        raise ArgumentError(validation_error(exc, "").reason, field="measured") from None
