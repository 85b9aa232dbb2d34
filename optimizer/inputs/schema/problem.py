"""A job file (``Problem``): the job with its catalog, assumptions, constraints and objective, and the
Kubernetes-style ``spec.resources.gpu`` block read as GPU filters that must agree with ``constraints.gpu``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

from pydantic import (
    Field,
    model_validator,
)

from ...errors import JobError, UnitError
from .. import units
from .assumptions import Assumptions, Constraints
from .base import _Model
from .job import JobSpec
from .types import (
    sku_key,
)


def _given(name: str) -> Callable[[Problem], bool]:
    """Whether a problem's job sets field ``name`` away from the job schema's default."""
    default = JobSpec.model_fields[name].default
    return lambda p: getattr(p.job, name) != default


# One-model settings that a job with roles is not planned with (planning/role_jobs.py, solver/roles.py read none:
# each role's GPUs at on-demand prices, its memory against the usable capacity, the expected time): answered as if
# absent, they planned what the user had excluded (spot: only, on a catalog without spot prices, priced the split
# on demand; a 99% memory headroom left 27B target weights on B200s as before). Each: (field, the flag that sets
# it, whether the problem gives it, why it is refused).
ROLE_UNREAD: tuple[tuple[str, str, Callable[[Problem], bool], str], ...] = (
    (
        "constraints.spot",
        "spot",
        lambda p: p.constraints.spot == "only",
        "a job with roles is priced on demand: spot capacity is not weighed for its roles yet",
    ),
    (
        "constraints.memory_headroom",
        "headroom",
        lambda p: p.constraints.memory_headroom not in (None, 0, 0.0, "0%"),
        "a job with roles holds each role's memory to the GPU's usable capacity, with no headroom yet",
    ),
    (
        "constraints.deadline_quantile",
        "deadline_quantile",
        lambda p: p.constraints.deadline_quantile != "p50",
        "a job with roles is answered at its expected time, with no p90 yet",
    ),
    (
        "job.framework",
        "framework",
        _given("framework"),
        "a job with roles is planned role by role (docs/roles.md), not as one framework's layouts",
    ),
    (
        "job.compile",
        "compile",
        _given("compile"),
        "a job with roles is not planned under torch.compile yet",
    ),
    (
        "job.method",
        "method",
        lambda p: p.job.roles is not None and p.job.roles.workload == "drafter" and p.job.method != "full",
        "a drafter is trained whole beside its frozen LM head (EAGLE-3 / DFlash: planning/role_jobs.py), not by "
        "LoRA or QLoRA",
    ),
    (
        "job.precision",
        "precision",
        lambda p: p.job.roles is not None and p.job.roles.workload == "drafter" and p.job.precision != "bf16",
        "a drafter's training is planned in bf16 (its weights, gradients and matmuls), not in a low precision yet",
    ),
    (
        "job.context_parallel",
        "context_parallel",
        _given("context_parallel"),
        "a job with roles plans no context parallelism for its roles yet",
    ),
    (
        "job.optimizer_implementation",
        "optimizer_implementation",
        _given("optimizer_implementation"),
        "a job with roles times each role's optimizer step as a fused one, not by job.optimizer_implementation yet",
    ),
    (
        "job.loss",
        "loss",
        _given("loss"),
        "a job with roles counts each role's memory as planning/role_jobs.py does, not by job.loss yet",
    ),
    (
        "job.attention",
        "attention",
        _given("attention"),
        "a job with roles is timed at each role's own attention figures (planning/role_jobs.py), not by "
        "job.attention yet",
    ),
    (
        "job.variable_lengths",
        "variable_lengths",
        _given("variable_lengths"),
        "a job with roles counts no allocator gap for unpacked samples yet",
    ),
    (
        "job.activation_offload",
        "activation_offload",
        _given("activation_offload"),
        "a job with roles keeps each role's activations on its GPUs, with no activation offload yet",
    ),
    (
        "job.offload",
        "offload",
        _given("offload"),
        "a job with roles keeps each role's optimizer state on its GPUs, with no ZeRO-Offload yet",
    ),
)


def unread_by_roles(problem: Problem) -> tuple[str, str, str] | None:
    """The first setting a job with roles gives that its planning does not read: (field, flag parameter, why)."""
    if problem.job.roles is None:
        return None
    for field, flag, given, why in ROLE_UNREAD:
        if given(problem):
            return field, flag, f"{why}; drop it, or plan the job without roles: (docs/roles.md)"
    return None


class Problem(_Model):
    """A job file: the job plus its catalog, assumptions, constraints and objective."""

    catalog: str | None = None
    objective: Literal["cost", "time"] = "cost"
    job: JobSpec
    assumptions: Assumptions = Field(default_factory=Assumptions)
    constraints: Constraints = Field(default_factory=Constraints)
    source_path: str | None = Field(None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _kubernetes_gpu_spec(cls, data):
        """Accept the seed's job spec block ``spec.resources.gpu: {minMemory, count, type}`` as GPU filters."""
        if not isinstance(data, dict) or "spec" not in data:
            return data
        data = dict(data)
        spec = data.pop("spec")
        shape = "spec takes resources.gpu: {minMemory, count, type} (e.g. spec: {resources: {gpu: {count: 8}}})"
        # each level a mapping with only the key that leads on: a typo (resource:) or a stray key would
        # otherwise drop the GPU filter without a word, and the plan would run on any GPU
        if not isinstance(spec, dict) or set(spec) != {"resources"}:
            raise JobError(f"{shape}; got {spec!r}", field="spec")
        resources = spec["resources"]
        if not isinstance(resources, dict) or set(resources) != {"gpu"}:
            raise JobError(f"{shape}; got {resources!r}", field="spec.resources")
        gpu = resources["gpu"]
        if not isinstance(gpu, dict) or not gpu or set(gpu) - {"minMemory", "count", "type"}:
            raise JobError(f"{shape}; got {gpu!r}", field="spec.resources.gpu")
        constraints = data.get("constraints") or {}
        if not isinstance(constraints, dict) or not isinstance(constraints.get("gpu") or {}, dict):
            return data  # left for Constraints' and GpuFilter's own messages
        constraints = dict(constraints)
        filters = dict(constraints.get("gpu") or {})
        # where both blocks give a filter they must agree: either winning would plan on a GPU the other excludes
        if "minMemory" in gpu:
            _same_filter(gpu["minMemory"], filters, "min_memory", "minMemory", _same_memory)
        if "type" in gpu:
            types = filters.get("types")
            if isinstance(types, list) and all(isinstance(t, str) for t in types):
                _same_filter(gpu["type"], filters, "types", "type", _type_among)
                filters["types"] = [gpu["type"]]  # the one type both blocks allow
        if "count" in gpu:
            _same_filter(gpu["count"], filters, "count", "count", _same_number)
        for key, spec_key in (("min_memory", "minMemory"), ("types", "type"), ("count", "count")):
            if spec_key in gpu and filters.get(key) is None:
                filters[key] = [gpu[spec_key]] if key == "types" else gpu[spec_key]
        constraints["gpu"] = filters
        data["constraints"] = constraints
        return data

    @model_validator(mode="after")
    def _roles_read_it(self) -> Problem:
        """A job with roles gives none of the settings its planning does not read (``ROLE_UNREAD``)."""
        unread = unread_by_roles(self)
        if unread is not None:
            raise JobError(unread[2], field=unread[0])
        return self


def _same_filter(spec_value: Any, filters: dict, key: str, spec_key: str, agree) -> bool:
    """Whether ``constraints.gpu.<key>`` is given and agrees with ``spec.resources.gpu.<spec_key>``; refused
    naming both where it disagrees."""
    given = filters.get(key)
    if given is None:
        return False
    if not agree(spec_value, given):
        raise JobError(
            f"spec.resources.gpu.{spec_key} ({_shown(spec_value)}) and constraints.gpu.{key} ({_shown(given)}) "
            "disagree: both filter the GPUs a plan may use, and either one winning would plan what the other "
            "excludes; give the filter in one of the two places, or make them agree",
            field=f"spec.resources.gpu.{spec_key}",
        )
    return True


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _same_memory(spec: Any, given: Any) -> bool:
    try:
        x = units.parse_bytes(spec, "a memory size")
    except UnitError as exc:
        raise JobError(exc.reason, field="spec.resources.gpu.minMemory") from None
    try:
        y = units.parse_bytes(given, "a memory size")
    except UnitError:
        return True  # left for GpuFilter's message on constraints.gpu.min_memory
    return math.isclose(x, y, rel_tol=1e-9)


def _same_number(a: Any, b: Any) -> bool:
    def number(v: Any) -> Any:
        if isinstance(v, bool):
            return v
        try:
            return float(v)
        except (TypeError, ValueError):
            return v

    return number(a) == number(b)


def _type_among(spec_type: Any, types: Any) -> bool:
    """Whether the spec's GPU type is one of the constraints' (names as ``catalog.sku_key`` matches them: in any
    case, ``_`` and spaces as ``-``; an alias of another spelling is not resolved here, without the catalog)."""
    return isinstance(spec_type, str) and any(sku_key(t) == sku_key(spec_type) for t in types)
