"""A job's ``roles:`` section (issue 52, docs/roles.md): GPUs split between a frozen model running forward and a
trained model learning from its output, with what crosses between them per token.

The one workload wired so far is ``drafter`` (a speculative-decoding drafter, EAGLE-3 / DFlash): the target
model's forward pass on the *producer* GPUs, hidden states of a few of its layers handed over a link to the
*consumer* GPUs that train the drafter. The drafter is the job's own ``model`` (its shapes), and the job's
tokens and ``seq_len`` are the target's; this section adds the target, the drafter's training recipe, what
passes between them and the link. A job without ``roles:`` is planned exactly as before.

``--role NAME=GPUSxSKU`` (``gpuplan check``) is read here too: a hand-picked split of the job's roles.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from ..errors import ArgumentError
from . import units

# a number, or a string with a unit (27B), as schema.py's Count (which imports this module, so cannot be imported)
Count = Annotated[
    float,
    BeforeValidator(lambda v: units.parse_count(v)),
    WithJsonSchema({"anyOf": [{"type": "number"}, {"type": "string"}], "examples": ["27B"]}),
]
Peak = Literal["bf16", "fp8"]
# Where a workload is named that is not wired yet, what the job file can say instead.
NOT_YET = {
    "distill": "a teacher's forward pass feeding a student",
    "grpo": "rollouts generated, reference and reward forward passes, policy training",
}
ROLE_NAMES = ("target", "drafter")  # the drafter workload's roles, as --role names them
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class MeasuredMfu(_Model):
    """The forward role's achieved share of a GPU's peak, and where it was measured (it moves to another GPU
    with the roofline's ridge: physics/roles.py ``moved_mfu``)."""

    value: float = Field(gt=0, le=1, description="Achieved FLOPs over the peak named by ``peak`` (0-1], e.g. 0.27.")
    sku: str | None = Field(None, description="The GPU it was measured on; unset: taken as it is on every GPU.")
    peak: Peak = Field("bf16", description="The dense peak it is a share of: bf16, or fp8 (as the seed quotes it).")
    counts_attention: bool = Field(True, description="Whether its FLOPs count the attention scores (4 L w s).")


class TargetSpec(_Model):
    """The frozen model run forward on the producer GPUs, each holding all of it."""

    name: str = "target"
    params: Count = Field(gt=0, description="Parameters (27B); all active (a dense model).")
    hidden: int = Field(ge=1, description="Width of the hidden states it hands on.")
    attention_layers: int = Field(0, ge=0, description="Layers with softmax attention (a hybrid's linear ones: none).")
    attention_width: int = Field(0, ge=0, description="Heads x head_dim of those layers.")
    precision: Peak = Field("bf16", description="Weight precision: bf16 (2 bytes a parameter) or fp8 (1).")
    mfu: MeasuredMfu

    @property
    def weight_bytes(self) -> float:
        return float(self.params) * WEIGHT_BYTES[self.precision]


class DrafterSpec(_Model):
    """How the drafter trains on the target's tokens (DFlash, SpecForge's OnlineDFlashModel defaults)."""

    name: str = "drafter"
    anchors: int = Field(512, ge=1, description="Anchor positions drawn per target sequence.")
    block: int = Field(16, ge=1, description="Tokens drafted per anchor: anchors x block tokens trained a sequence.")
    micro_batch: int = Field(1, ge=1)
    grad_accum: int = Field(1, ge=1)


class HiddenStates(_Model):
    layers: int = Field(ge=1, description="Target layers tapped (DFlash target_layer_ids: 5).")


class Passes(_Model):
    """What crosses from a producer to a consumer per token: hidden states of N layers (N x hidden x 2 bytes,
    bf16) or a byte count."""

    hidden_states: HiddenStates | None = None
    bytes_per_token: Count | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_of(self) -> Passes:
        if (self.hidden_states is None) == (self.bytes_per_token is None):
            raise ValueError("give hidden_states: {layers: N} or bytes_per_token, one of them")
        return self


def _workload(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() in NOT_YET:
        name = value.strip().lower()
        raise ValueError(
            f"workload {name} ({NOT_YET[name]}) is not planned yet (docs/roles.md); workload: drafter plans a "
            "frozen model's forward pass feeding a trained one"
        )
    return value


class RolesSpec(_Model):
    """``job.roles``: the job's GPUs split between the target's forward pass and the drafter's training."""

    workload: Annotated[Literal["drafter"], BeforeValidator(_workload)] = Field(
        description="drafter: a frozen target's forward pass (producers) feeding a drafter's training (consumers)."
    )
    target: TargetSpec
    drafter: DrafterSpec = Field(default_factory=DrafterSpec)
    passes: Passes
    link: Literal["auto", "peer", "host"] = Field(
        "auto",
        description="peer (NVLink), host (through host memory, two PCIe hops); auto: peer where there is NVLink.",
    )
    batch_tokens: Count | None = Field(None, gt=0, description="Target tokens a batch hands on; default job.seq_len.")

    @property
    def bytes_per_token(self) -> float:
        if self.passes.hidden_states is not None:
            return self.passes.hidden_states.layers * self.target.hidden * 2.0
        return float(self.passes.bytes_per_token or 0.0)


def parse_role_flag(text: str) -> tuple[str, int, str]:
    """``target=3xRTX-PRO-6000``: (role, GPUs, SKU or offer)."""
    match = re.fullmatch(rf"\s*([A-Za-z][\w.-]*)\s*=\s*{units.GPUS_X_SKU}\s*", text)
    if not match:
        raise ArgumentError(
            f"cannot read {text!r}; write each role as NAME=GPUSxSKU, e.g. --role target=3xRTX-PRO-6000 "
            "--role drafter=1xRTX-PRO-6000",
            field="role",
        )
    name, gpus, sku = match.groups()
    if name.lower() not in ROLE_NAMES:
        raise ArgumentError(
            f"no role {name!r} in a drafter job; its roles are {' and '.join(ROLE_NAMES)} "
            "(--role target=3xRTX-PRO-6000 --role drafter=1xRTX-PRO-6000)",
            field="role",
        )
    return name.lower(), int(gpus), sku
