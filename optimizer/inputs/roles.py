"""A job's ``roles:`` section (issue 52, docs/roles.md): GPUs split between a frozen model running forward and a
trained model learning from its output, with what crosses between them per token.

Two workloads are wired. ``drafter`` (a speculative-decoding drafter, EAGLE-3 / DFlash): the target model's
forward pass on the *producer* GPUs, hidden states of a few of its layers handed over a link to the *consumer*
GPUs that train the drafter. ``distill``: a frozen teacher's forward pass on the producers, its top-k logits (or
hidden states) handed to the consumers that train the student on every teacher token; the file names them
``teacher:`` and ``student:``, read here into the same two slots (``target``, ``drafter``) the pipeline plans.
The trained model is the job's own ``model`` (its shapes), and the job's tokens and ``seq_len`` are the
producer's; this section adds the frozen model, the trained one's recipe, what passes between them and the
link. A job without ``roles:`` is planned exactly as before.

``--role NAME=GPUSxSKU`` (``gpuplan check``) is read here too: a hand-picked split of the job's roles
(``teacher``/``student`` name a distill job's two, as ``target``/``drafter`` a drafter job's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_serializer,
    model_validator,
)

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
NOT_YET: dict[str, str] = {}
ROLE_NAMES = ("target", "drafter")  # the producer's and the consumer's role, as --role names them
# Each workload's names for those two roles (a drafter job's are ROLE_NAMES).
WORKLOAD_ROLE_NAMES = {"distill": ("teacher", "student"), "grpo": ("rollout", "policy")}
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0}
# Distillation's default k: Gemma 3's recipe keeps 256 logits per token ("We sample 256 logits per token,
# weighted by teacher probabilities", Gemma Team 2025, Gemma 3 Technical Report, arXiv:2503.19786, section 2.2);
# sampled or top-k, k values and k indices cross per token.
DEFAULT_TOP_K = 256


# Every numeric field of ``job.roles`` -> its range in ``units.LIMITS``, as schema/base.py's ``_RANGES`` holds the
# job's own (this module's models are not that base's, so its table missed them: a drafter's anchors and block
# at 1e9 planned a 10-trillion-day run, rollout.steps at 1e12 one of 379 million days).
_RANGES: dict[str, str] = {
    "MeasuredMfu.value": "fraction",
    "TargetSpec.params": "params",
    "TargetSpec.hidden": "width",
    "TargetSpec.attention_layers": "dense_layers",
    "TargetSpec.attention_width": "attention_width",
    "DrafterSpec.anchors": "seq_len",
    "DrafterSpec.block": "seq_len",
    "DrafterSpec.micro_batch": "global_batch",
    "DrafterSpec.grad_accum": "global_batch",
    "StudentSpec.micro_batch": "global_batch",
    "StudentSpec.grad_accum": "global_batch",
    "HiddenStates.layers": "layers",
    "TopKLogits.k": "vocab",
    "TopKLogits.value_bytes": "element_bytes",
    "TopKLogits.index_bytes": "element_bytes",
    "Passes.bytes_per_token": "bytes_per_token",
    "RolloutSpec.prompts_per_step": "global_batch",
    "RolloutSpec.samples_per_prompt": "global_batch",
    "RolloutSpec.prompt_tokens": "seq_len",
    "RolloutSpec.response_tokens": "seq_len",
    "RolloutSpec.max_response_tokens": "seq_len",
    "RolloutSpec.tp": "gpus_per_node",
    "RolloutSpec.memory_utilization": "fraction",
    "RolloutSpec.max_num_seqs": "global_batch",
    "RolloutSpec.steps": "rl_steps",
    "RolesSpec.batch_tokens": "tokens",
    "RolesSpec.forward_passes": "forward_passes",
    "RolesSpec.micro_batch": "global_batch",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @field_validator("*", mode="after")
    @classmethod
    def _in_range(cls, value: Any, info: ValidationInfo) -> Any:
        """A numeric field within its ``units.LIMITS`` range (``_RANGES``), the message stating the range and why."""
        kind = _RANGES.get(f"{cls.__name__}.{info.field_name}")
        if kind is not None and isinstance(value, (int, float)) and not units.LIMITS[kind].allows(value):
            raise ValueError(units.LIMITS[kind].text())
        return value


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
    mfu: MeasuredMfu | None = Field(
        None,
        description="Its measured MFU; unset: each GPU's training efficiency (the same GEMMs run forward).",
    )

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


class TopKLogits(_Model):
    """A teacher's k largest (or k sampled) logits per token: k values and k vocabulary indices."""

    k: int = Field(DEFAULT_TOP_K, ge=1, description="Logits kept per token (Gemma 3's distillation: 256).")
    value_bytes: float = Field(2.0, gt=0, description="Bytes a value: 2 (the teacher's bf16 logits), 4 (fp32).")
    index_bytes: float = Field(
        8.0, gt=0, description="Bytes an index: 8 (torch.topk's int64 indices), 4 where cast to int32."
    )


class Passes(_Model):
    """What crosses from a producer to a consumer per token: hidden states of N layers (N x hidden x 2 bytes,
    bf16), top-k logits (k x (value + index) bytes) or a byte count."""

    hidden_states: HiddenStates | None = None
    top_k_logits: TopKLogits | None = None
    bytes_per_token: Count | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _one_of(self) -> Passes:
        given = [v for v in (self.hidden_states, self.top_k_logits, self.bytes_per_token) if v is not None]
        if len(given) != 1:
            raise ValueError("give hidden_states: {layers: N}, top_k_logits: {k: 256} or bytes_per_token, one of them")
        return self

    @property
    def words(self) -> str:
        """What crosses, as a sentence names it: 'hidden states', 'top-256 logits', 'a tensor'."""
        if self.hidden_states is not None:
            return "hidden states"
        if self.top_k_logits is not None:
            return f"top-{self.top_k_logits.k} logits"
        return "its tensors"


@dataclass(frozen=True)
class _GrpoWithFrozen:
    """A grpo section that also names a drafter or distill job's fields (set by ``_grpo_slots``)."""

    fields: tuple[str, ...]


def _workload(value: Any) -> Any:
    if isinstance(value, _GrpoWithFrozen):
        given = ", ".join(f"{f}:" for f in value.fields)
        raise ValueError(
            f"workload grpo with {given} (a frozen model beside the policy) is not planned yet: a grpo job's policy "
            "is job.model, and rollout: and placement: say how it generates and trains (docs/roles.md)"
        )
    if isinstance(value, str) and value.strip().lower() in NOT_YET:
        name = value.strip().lower()
        raise ValueError(
            f"workload {name} ({NOT_YET[name]}) is not planned yet (docs/roles.md); workload: drafter or distill "
            "plans a frozen model's forward pass feeding a trained one"
        )
    return value


class RolloutSpec(_Model):
    """A GRPO step's batch and its inference engines (verl / NeMo RL config names in the descriptions)."""

    prompts_per_step: int = Field(ge=1, description="Prompts a step (verl data.train_batch_size).")
    samples_per_prompt: int = Field(ge=1, description="Responses a prompt, the group (verl rollout.n).")
    prompt_tokens: Count = Field(gt=0, description="Mean prompt length, tokens.")
    response_tokens: Count = Field(gt=0, description="Mean response length, tokens.")
    max_response_tokens: Count | None = Field(
        None, gt=0, description="The longest response a step waits for (rollout.response_length); unset: none."
    )
    tp: int | None = Field(
        None,
        ge=1,
        description="Tensor parallel GPUs an engine (rollout.tensor_model_parallel_size); unset: on each GPU the "
        "smallest power of two within a node whose share of the weights leaves KV cache for one whole sequence.",
    )
    memory_utilization: float = Field(
        0.5, gt=0, le=1, description="Share of a GPU's memory the engine takes (gpu_memory_utilization; verl: 0.5)."
    )
    max_num_seqs: int = Field(
        256, ge=1, description="Sequences an engine decodes at once at most (vLLM: 256, verl: 1024)."
    )
    steps: int | None = Field(None, ge=1, description="GRPO steps; unset: job.dataset_tokens x epochs of tokens.")

    @model_validator(mode="after")
    def _mean_within_longest(self) -> RolloutSpec:
        """The mean response no longer than the longest (a max of 1 beside a mean of 860 planned a step that
        waited for one token), and a step's sequences within a global batch's range."""
        if self.max_response_tokens is not None and self.response_tokens > self.max_response_tokens:
            raise ValueError(
                f"response_tokens (the mean, {self.response_tokens:,.0f}) is more than max_response_tokens (the "
                f"longest, {self.max_response_tokens:,.0f}); raise max_response_tokens or lower the mean"
            )
        limit = units.LIMITS["global_batch"]
        if not limit.allows(self.prompts_per_step * self.samples_per_prompt):
            raise ValueError(f"prompts_per_step x samples_per_prompt, the sequences of a step, {limit.text()}")
        return self


class StudentSpec(_Model):
    """How the student (the job's model) trains: on every teacher token, data-parallel."""

    name: str = "student"
    micro_batch: int = Field(1, ge=1)
    grad_accum: int = Field(1, ge=1)


GRPO_FIELDS = ("rollout", "placement", "async", "forward_passes", "micro_batch")


def _grpo_slots(data: Any) -> Any:
    """A grpo job's two roles in the pipeline's slots: the rollout (the producers' slot, the job's model
    generating) and the policy (the consumers', trained); the model's shapes are job.model's, so the slots
    carry names only, and what crosses is the weights once a step (planning/grpo.py), not a per-token tensor."""
    if not isinstance(data, dict) or str(data.get("workload", "")).strip().lower() != "grpo":
        if isinstance(data, dict) and any(k in data for k in GRPO_FIELDS):
            given = ", ".join(k for k in GRPO_FIELDS if k in data)
            raise ValueError(f"{given}: only a grpo job's (workload: grpo); a drafter or distill job has none")
        return data
    frozen = tuple(k for k in ("target", "drafter", "teacher", "student", "passes") if k in data)
    if frozen:  # refused on job.roles.workload (``_workload``), the field that disagrees with the rest
        return {**data, "workload": _GrpoWithFrozen(frozen)}
    if "rollout" not in data:
        raise ValueError("a grpo job needs rollout: {prompts_per_step, samples_per_prompt, prompt_tokens, ...}")
    out = dict(data)
    # names the slot (the least parameters a model may have); shapes from job.model
    out["target"] = {"name": "rollout", "params": units.LIMITS["params"].low, "hidden": 1}
    out["drafter"] = {"name": "policy"}
    out["passes"] = {"bytes_per_token": 1}  # unused: the weights cross once a step
    return out


def _distill_names(data: Any) -> Any:
    """A distill job's ``teacher:`` and ``student:`` read into the producer's and consumer's slots."""
    if not isinstance(data, dict) or str(data.get("workload", "")).strip().lower() != "distill":
        return data
    for own, slot in (("teacher", "target"), ("student", "drafter")):
        if slot in data:
            raise ValueError(f"a distill job names its roles teacher: and student:, not {slot}: (write {own}:)")
    out = {k: v for k, v in data.items() if k not in ("teacher", "student")}
    if "teacher" not in data:
        raise ValueError("a distill job needs teacher: the frozen model run forward (name, params, hidden, ...)")
    teacher = data["teacher"]
    out["target"] = {"name": "teacher", **teacher} if isinstance(teacher, dict) else teacher
    try:
        student = StudentSpec.model_validate(data.get("student") or {})
    except ValidationError as exc:  # named from job.roles: 'student.grad_accum', not 'grad_accum' alone
        first = exc.errors()[0]
        where = ".".join(str(p) for p in ("student", *first["loc"]))
        raise ValueError(
            f"{where}: {first['msg'].removeprefix('Value error, ')} (got {first.get('input')!r})"
        ) from None
    out["drafter"] = {"name": student.name, "micro_batch": student.micro_batch, "grad_accum": student.grad_accum}
    return out


def _own_names_schema(schema: dict[str, Any]) -> None:
    """The JSON schema of ``job.roles`` as each workload writes it: a distill job's teacher: and student:, a grpo
    job's rollout: alone (the validator fills the pipeline's slots), so target: and passes: are not required."""
    props = schema["properties"]
    props["teacher"] = {"$ref": props["target"]["$ref"], "description": "distill: the frozen teacher."}
    props["student"] = {**StudentSpec.model_json_schema(), "description": "distill: how the student trains."}
    schema["required"] = ["workload"]


class RolesSpec(_Model):
    """``job.roles``: the job's GPUs split between a frozen model's forward pass and a trained model's training
    (drafter: target and drafter; distill: teacher and student, held in the same two fields)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, json_schema_extra=_own_names_schema)

    workload: Annotated[Literal["drafter", "distill", "grpo"], BeforeValidator(_workload)] = Field(
        description="drafter: a frozen target's forward pass (producers) feeding a drafter's training (consumers); "
        "distill: a frozen teacher's forward pass feeding the student's training on every token; grpo: the "
        "policy (job.model) generating rollouts, scored by forward passes and trained (docs/roles.md)."
    )
    target: TargetSpec
    drafter: DrafterSpec = Field(default_factory=DrafterSpec)
    passes: Passes
    link: Literal["auto", "peer", "host"] = Field(
        "auto",
        description="peer (NVLink), host (through host memory, two PCIe hops); auto: peer where there is NVLink.",
    )
    batch_tokens: Count | None = Field(None, gt=0, description="Target tokens a batch hands on; default job.seq_len.")
    across_offers: bool = Field(
        False,
        description="Let each role sit on its own offer's node (its own GPU and price), what crosses going over the "
        "network between the two nodes: solve weighs those splits beside one node's (drafter and distill, link auto).",
    )
    rollout: RolloutSpec | None = Field(None, description="grpo: a step's batch and its engines.")
    placement: Literal["colocated", "disaggregated"] = Field(
        "colocated", description="grpo: every GPU generates then trains (colocated), or some generate and others train."
    )
    asynchronous: bool = Field(
        False,
        alias="async",
        description="grpo, disaggregated: generate step k + 1 while step k trains (one step of staleness).",
    )
    forward_passes: int = Field(
        2, ge=0, description="grpo: forward passes a sequence besides training (reference + recomputed old log-probs)."
    )
    micro_batch: int = Field(1, ge=1, description="grpo: sequences a training micro-batch.")

    @model_validator(mode="before")
    @classmethod
    def _names(cls, data: Any) -> Any:
        return _grpo_slots(_distill_names(data))

    @model_serializer(mode="wrap")
    def _own_names(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Written back under the workload's own names, so a dumped job reads back as the same job: grpo's
        fields only in a grpo job, a distill job's slots as teacher: and student:, a grpo job's slots not at all."""
        out = handler(self)
        if not self.across_offers:  # a job that does not ask for splits across offers dumps as before
            out.pop("across_offers", None)
        if self.workload != "grpo":
            out = {k: v for k, v in out.items() if k not in GRPO_FIELDS and k != "asynchronous"}
        if self.workload == "distill":
            out["teacher"] = out.pop("target")
            drafter = out.pop("drafter")
            out["student"] = {k: drafter[k] for k in StudentSpec.model_fields if k in drafter}
        if self.workload == "grpo":
            out = {k: v for k, v in out.items() if k not in ("target", "drafter", "passes")}
        return out

    @property
    def bytes_per_token(self) -> float:
        if self.passes.hidden_states is not None:
            return self.passes.hidden_states.layers * self.target.hidden * 2.0
        top_k = self.passes.top_k_logits
        if top_k is not None:
            return top_k.k * (top_k.value_bytes + top_k.index_bytes)
        return float(self.passes.bytes_per_token or 0.0)


def role_names(workload: str | None = None) -> tuple[str, str]:
    """The producer's and consumer's role names as ``--role`` takes them: target and drafter, for a distill
    job teacher and student, for a grpo job rollout and policy."""
    return WORKLOAD_ROLE_NAMES.get(workload or "drafter", ROLE_NAMES)


def parse_role_flag(text: str, workload: str | None = None) -> tuple[str, int, str]:
    """``target=3xRTX-PRO-6000``: (role, GPUs, SKU or offer), the role in the pipeline's slot names (a distill
    job's ``teacher`` is ``target``, its ``student`` ``drafter``); ``workload`` unset: a drafter job's names."""
    match = re.fullmatch(rf"\s*([A-Za-z][\w.-]*)\s*=\s*{units.GPUS_X_SKU}\s*", text)
    names = role_names(workload)
    if not match:
        raise ArgumentError(
            f"cannot read {text!r}; write each role as NAME=GPUSxSKU, e.g. --role {names[0]}=3xRTX-PRO-6000 "
            f"--role {names[1]}=1xRTX-PRO-6000",
            field="role",
        )
    name, gpus, sku = match.groups()
    if name.lower() not in names:
        raise ArgumentError(
            f"no role {name!r} in a {workload or 'drafter'} job; its roles are {' and '.join(names)} "
            f"(--role {names[0]}=3xRTX-PRO-6000 --role {names[1]}=1xRTX-PRO-6000)",
            field="role",
        )
    return ROLE_NAMES[names.index(name.lower())], int(gpus), sku
