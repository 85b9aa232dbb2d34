"""The base of every input model: unknown keys refused, choices in any case, and every numeric field
checked against its range in ``units.LIMITS`` (``_RANGES``) with a message that states the range and why."""

from __future__ import annotations

import math
from typing import Any, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from ...errors import UnitError
from .. import units

# Every numeric input field -> its range in ``units.LIMITS`` (by attribute name, or ``Class.attribute``
# where one name means different things). tests/hostile/test_hostile.py checks that none is missing.
_RANGES: dict[str, str] = {
    # Sku, Offer
    "memory_label_bytes": "memory",
    "memory_reported_bytes": "memory",
    "board_memory_bytes": "memory",
    "memory_delivered_bytes": "memory",
    "hbm_bandwidth_gb_per_s": "bandwidth",
    "intra_node_bandwidth_gb_per_s": "bandwidth",
    "network_gb_per_s_per_gpu": "bandwidth",
    "host_link_gb_per_s": "bandwidth",
    "dense_bf16_tflops": "tflops",
    "dense_fp8_tflops": "tflops",
    "dense_fp4_tflops": "tflops",
    "gpus_per_node": "gpus_per_node",
    "gpus_per_host": "gpus_per_node",
    "default_mfu": "fraction",
    "price_usd_per_gpu_hour": "price",
    "spot_price_usd_per_gpu_hour": "price",
    "spot_preemptions_per_node_hour": "preemptions",
    "Offer.max_nodes": "offer_nodes",
    "max_nodes": "nodes",
    "billing_increment_s": "billing_increment",
    # ModelSpec
    "params": "params",
    "active_params": "params",
    "layers": "layers",
    "hidden": "width",
    "heads": "heads",
    "kv_heads": "heads",
    "head_dim": "width",
    "v_head_dim": "width",
    "q_lora_rank": "width",
    "kv_lora_rank": "width",
    "sliding_window": "seq_len",
    "window_layers": "dense_layers",
    "ffn_hidden": "width",
    "moe_ffn_hidden": "width",
    "dense_layers": "dense_layers",
    "vocab": "vocab",
    "experts": "experts",
    "experts_per_token": "experts",
    "shared_experts": "shared_experts",
    "linear_modules": "linear_modules",
    "swiglu_limit": "activation_clamp",
    # Measurement, JobSpec
    "Measurement.gpus": "gpus",
    "nodes": "nodes",
    "tokens_per_s": "rate",
    "peak_memory_bytes": "memory",
    "lora_rank": "lora_rank",
    "lora_dropout": "share",
    "trainable_params": "params",
    "teacher_params": "params",
    "tokens": "tokens",
    "dataset_tokens": "tokens",
    "epochs": "epochs",
    "seq_len": "seq_len",
    "global_batch": "global_batch",
    "bytes_per_param": "bytes_per_param",
    "activation_reserve": "reserve",
    # Assumptions
    "mfu": "fraction",
    "matmul_efficiency": "fraction",
    "overlap": "share",
    "moe_overlap": "share",
    "moe_host_ms_per_layer": "host_ms",
    "moe_host_ms_per_local_expert": "host_ms",
    "link_efficiency": "fraction",
    "framework_overhead": "reserve",
    "startup_s": "overhead",
    "restart_s": "overhead",
    "failure_rate_per_gpu_hour": "failure_rate",
    "checkpoint_gb_per_s_per_node": "bandwidth",
    "host_memory_per_node_bytes": "memory",
    "host_link_gb_per_s_per_gpu": "bandwidth",
    "host_memory_gb_per_s_per_gpu": "bandwidth",
    # GpuFilter, Constraints
    "min_memory_bytes": "memory",
    "count": "gpus_per_node",
    "deadline_s": "duration",
    "budget_usd": "budget",
    "cost_tolerance": "cost_tolerance",
    "memory_headroom": "reserve",
    "max_gpus": "gpus",
    # portfolio
    "start_s": "offset",
    "end_s": "duration",
    "PoolWindow.gpus": "pool_gpus",
    "Pool.gpus": "pool_gpus",
    "release_s": "offset",
    "weight": "priority",
    "horizon_s": "duration",
    "time_step_s": "duration",
}

# Fields that also take text: how the text reads as a number, and that number's range.
_TEXT_FORMS = {
    "global_batch": (lambda v: units.parse_count(v, "a global batch in tokens"), "tokens"),
    "activation_reserve": (lambda v: units.parse_bytes_or_fraction(v, "a memory size"), "reserve"),
    "framework_overhead": (lambda v: units.parse_bytes(v, "a memory size"), "reserve"),
}

# pydantic's own bound checks (and its "too large for an integer"), replaced by the range with its reason.
_BOUND_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number", "int_parsing_size"}
)


def _lowercase_choices(annotation: Any) -> frozenset[str]:
    """The choices of a Literal of lowercase words (job.precision, job.method, ...), else none."""
    if get_origin(annotation) is not Literal:
        return frozenset()
    choices = get_args(annotation)
    if not all(isinstance(c, str) and c == c.lower() for c in choices):
        return frozenset()
    return frozenset(choices)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("*", mode="before")
    @classmethod
    def _choice_in_any_case(cls, value: Any, info: ValidationInfo) -> Any:
        """``precision: NVFP4`` or ``method: LoRA`` as their lowercase choice, as SKU and model names match in any
        case; anything else is left to the field's own validation (and its message)."""
        if isinstance(value, str) and info.field_name in cls.model_fields:
            choices = _lowercase_choices(cls.model_fields[info.field_name].annotation)
            if value not in choices and value.strip().lower() in choices:
                return value.strip().lower()
        return value

    @field_validator("*", mode="wrap")
    @classmethod
    def _sensible_number(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """A numeric field's value within its ``units.LIMITS`` range: no booleans read as 1, no NaN, no
        infinities, no magnitudes that would overflow the solver; the message states the range and why."""
        kind = _RANGES.get(f"{cls.__name__}.{info.field_name}") or _RANGES.get(info.field_name or "")
        if kind is None:
            return handler(value)
        limit = units.LIMITS[kind]
        if isinstance(value, bool):
            raise ValueError(f"expected a number, not {str(value).lower()}; it {limit.text()}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(limit.text())
        try:
            result = handler(value)
        except ValidationError as exc:
            errors = exc.errors()
            if {e["type"] for e in errors} <= _BOUND_ERRORS:
                raise ValueError(limit.text()) from None
            if len(errors) == 1 and errors[0]["type"] == "value_error":  # text that reads as no number
                raise ValueError(f"{errors[0]['msg'].removeprefix('Value error, ')}; it {limit.text()}") from None
            raise
        number = result
        free = info.field_name == "global_batch" and isinstance(result, str) and result.strip().lower() == "free"
        if isinstance(result, str) and info.field_name in _TEXT_FORMS and result != "auto" and not free:
            parse, text_kind = _TEXT_FORMS[info.field_name]
            limit = units.LIMITS[text_kind]
            try:
                number = parse(result)
            except UnitError as exc:
                raise ValueError(f"{exc.reason}; it {limit.text()}") from None
        if isinstance(number, (int, float)) and not isinstance(number, bool) and not limit.allows(number):
            raise ValueError(limit.text())
        return result
