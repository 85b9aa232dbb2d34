"""Numbers the physics needs about a model and a training method, resolved once from the schema.

``ModelShape`` holds the transformer's sizes as floats (0 where unknown) and ``TrainingState`` the
bytes per parameter of weights, gradients and optimizer state, split the way the ZeRO paper splits
them (Rajbhandari et al. 2020, section 3: mixed-precision Adam keeps 2 + 2 + 12 = 16 bytes per
parameter: bf16 weights, bf16 gradients, fp32 master weights + momentum + variance).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import JobError
from ..schema import JobSpec, ModelSpec

# Optimizer state bytes per trainable parameter, with an fp32 master copy (Transformer Math 101,
# EleutherAI 2023: AdamW 12 = 4 master + 4 m + 4 v; bitsandbytes 8-bit Adam 6 = 4 master + 1 + 1;
# SGD with momentum 8 = 4 master + 4 momentum; Adafactor ~4 = master copy + factored second moment).
OPTIMIZER_BYTES = {"adamw": 12.0, "adamw8bit": 6.0, "sgd": 8.0, "adafactor": 4.0}

# QLoRA stores frozen weights in NF4 with double quantisation: 4 bits + 0.127 bits of constants per
# parameter (Dettmers et al. 2023, "QLoRA", section 3: 0.127 bits after double quantisation).
QLORA_BYTES_PER_PARAM = (4.0 + 0.127) / 8.0


@dataclass(frozen=True)
class ModelShape:
    params: float
    active_params: float
    layers: float = 0.0
    hidden: float = 0.0
    heads: float = 0.0
    kv_width: float = 0.0  # kv_heads * head_dim: the width of K and V under GQA
    q_width: float = 0.0  # heads * head_dim (equals hidden for most models)
    ffn_active: float = 0.0  # MLP width one token passes through (x experts per token for MoE)
    vocab: float = 0.0
    gated_mlp: bool = True
    has_shapes: bool = False

    @property
    def layer_params(self) -> float:
        """Parameters of one transformer block (total, all experts): what ZeRO-3 gathers at once."""
        if not self.has_shapes:
            return 0.0
        return max(self.params - 2 * self.vocab * self.hidden, self.params * 0.5) / self.layers


def model_shape(model: ModelSpec) -> ModelShape:
    active = float(model.active_params or model.params)
    if not model.has_shapes:
        return ModelShape(params=float(model.params), active_params=active)
    head_dim = model.head_dim or model.hidden // model.heads
    kv_heads = model.kv_heads or model.heads
    per_token_experts = (model.experts_per_token or 1) + model.shared_experts if model.experts else 1
    return ModelShape(
        params=float(model.params),
        active_params=active,
        layers=float(model.layers),
        hidden=float(model.hidden),
        heads=float(model.heads),
        kv_width=float(kv_heads * head_dim),
        q_width=float(model.heads * head_dim),
        ffn_active=float(model.ffn_hidden * per_token_experts),
        vocab=float(model.vocab),
        gated_mlp=model.gated_mlp,
        has_shapes=True,
    )


@dataclass(frozen=True)
class TrainingState:
    """Bytes per parameter. Base weights are all parameters; the rest count trainable ones only."""

    trainable_params: float
    weight_bytes: float  # per base parameter (frozen weights for LoRA: 2, or NF4 for QLoRA)
    adapter_weight_bytes: float  # per trainable adapter parameter (0 for full fine-tuning)
    grad_bytes: float  # per trainable parameter
    optimizer_bytes: float  # per trainable parameter
    lora: bool = False
    quantized_base: bool = False
    teacher_params: float = 0.0  # frozen teacher in bf16, forward only (distillation, drafter training)

    def weights_total(self, params: float) -> float:
        return params * self.weight_bytes + self.trainable_params * self.adapter_weight_bytes + 2.0 * self.teacher_params


def lora_adapter_params(shape: ModelShape, rank: int) -> float:
    """LoRA on every linear layer of every block: r * (d_in + d_out) per matrix (Hu et al. 2021, eq. 3).

    Attention q, k, v, o contribute (h + q) + 2 (h + kv) + (q + h); the MLP 3 (h + f) when gated
    (gate, up, down) or 2 (h + f) otherwise. For MoE the routed experts are not adapted.
    """
    h, q, kv, f = shape.hidden, shape.q_width, shape.kv_width, shape.ffn_active
    attention = (h + q) + 2 * (h + kv) + (q + h)
    mlp = (3 if shape.gated_mlp else 2) * (h + f)
    return shape.layers * rank * (attention + mlp)


def training_state(job: JobSpec, shape: ModelShape) -> TrainingState:
    from dataclasses import replace

    state = _training_state(job, shape)
    return replace(state, teacher_params=float(job.teacher_params or 0.0))


def _training_state(job: JobSpec, shape: ModelShape) -> TrainingState:
    optimizer = OPTIMIZER_BYTES[job.optimizer]
    if job.method == "full":
        if job.bytes_per_param is not None:
            # Keep the ZeRO split (2 : 2 : 12) so sharding still divides the right parts.
            scale = job.bytes_per_param / 16.0
            return TrainingState(shape.params, 2.0 * scale, 0.0, 2.0 * scale, 12.0 * scale)
        return TrainingState(shape.params, 2.0, 0.0, 2.0, optimizer)
    if job.trainable_params is not None:
        adapters = float(job.trainable_params)
    elif shape.has_shapes:
        adapters = lora_adapter_params(shape, job.lora_rank)
    else:
        raise JobError(
            f"{job.method} needs the model's shapes (layers, hidden, heads, ffn_hidden, vocab) to size the "
            "adapters, or job.trainable_params (e.g. 40M)",
            field="job.model",
        )
    base = QLORA_BYTES_PER_PARAM if job.method == "qlora" else 2.0
    per_adapter = job.bytes_per_param if job.bytes_per_param is not None else 4.0 + optimizer
    scale = per_adapter / (4.0 + optimizer)
    return TrainingState(
        trainable_params=adapters,
        weight_bytes=base,
        adapter_weight_bytes=2.0 * scale,
        grad_bytes=2.0 * scale,
        optimizer_bytes=optimizer * scale,
        lora=True,
        quantized_base=job.method == "qlora",
    )
