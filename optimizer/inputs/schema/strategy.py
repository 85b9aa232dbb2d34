"""How a job runs on its GPUs (``Strategy``): the layout the solver emits and ``check`` accepts."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    computed_field,
    model_validator,
)

from .base import _Model
from .types import (
    Framework,
    Recompute,
)


class Strategy(_Model):
    """How a job runs on its GPUs. dp x micro_batch x grad_accum = global batch (sequences)."""

    tp: int = Field(1, ge=1)
    pp: int = Field(1, ge=1)
    dp: int = Field(1, ge=1)
    zero_stage: int = Field(0, ge=0, le=3)
    shard_degree: int = Field(1, ge=1, description="GPUs one ZeRO shard group spans (dp = full shard).")
    micro_batch: int = Field(1, ge=1)
    grad_accum: int = Field(1, ge=1)
    recompute: Recompute = "none"
    recompute_layers: int | None = Field(
        None,
        ge=1,
        description="Under full recompute, the layers of each pipeline stage that re-run their forward pass "
        "(Megatron's --recompute-method block, per stage, all its chunks together); None: all of them.",
    )
    virtual_stages: int = Field(1, ge=1, description="Interleaved pipeline chunks per GPU (1 = plain 1F1B).")
    offload: Literal["none", "optimizer"] = Field("none", description="ZeRO-Offload: optimizer state in CPU memory.")
    optimizer_in_backward: bool = Field(False, description="Optimizer step fused into backward (job field).")
    activation_offload: bool = Field(False, description="Saved activations offloaded to CPU memory (job field).")
    cp: int = Field(1, ge=1, description="Context parallelism: ranks that split each sequence (ring attention).")
    ep: int = Field(1, ge=1, description="Expert parallelism: ranks that split the routed experts of an MoE model.")
    expert_tp: int | None = Field(
        None,
        ge=1,
        description="Tensor parallelism inside each routed expert under Megatron-Core's parallel folding "
        "(EP x expert TP over the TP x DP x CP ranks); None: the experts are split by tp.",
    )
    framework: Framework | Literal["none"] = Field(
        "fsdp",
        description="The framework that runs this layout (its rules: docs/design.md 3.5); none: no framework runs it.",
    )

    @model_validator(mode="before")
    @classmethod
    def _derived_keys_are_not_inputs(cls, data):
        # ``global_batch`` is written out for readers; reading a written strategy back derives it again.
        if isinstance(data, dict) and "global_batch" in data:
            data = {k: v for k, v in data.items() if k != "global_batch"}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def global_batch(self) -> int:
        """Sequences per optimizer step: dp x micro_batch x grad_accum."""
        return self.dp * self.micro_batch * self.grad_accum

    @model_validator(mode="after")
    def _layers_under_full_recompute(self) -> Strategy:
        if self.recompute_layers is not None and self.recompute != "full":
            raise ValueError(
                f"recompute_layers counts fully recomputed layers: set recompute: full (got {self.recompute})"
            )
        return self

    @property
    def partial_layers(self) -> int | None:
        """The layers of each stage fully recomputed when not all of them are (None: every layer, or no full
        recompute; a strategy copied with another recompute keeps no stale count)."""
        return self.recompute_layers if self.recompute == "full" else None

    @property
    def recompute_label(self) -> str:
        """As --recompute takes it: none, selective, full (every layer), op or layers:N."""
        return f"layers:{self.partial_layers}" if self.partial_layers else self.recompute

    @property
    def recompute_text(self) -> str:
        """'full recompute', 'full recompute of 5 layers per stage'."""
        if self.partial_layers:
            return f"full recompute of {self.partial_layers} layers{' per stage' if self.pp > 1 else ''}"
        return "per-op selective recompute" if self.recompute == "op" else f"{self.recompute} recompute"
