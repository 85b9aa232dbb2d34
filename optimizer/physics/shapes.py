"""Numbers the physics needs about a model and a training method (built from the job by ``planning.model_state``).

``ModelShape`` holds the transformer's sizes as floats (0 where unknown) and ``TrainingState`` the
bytes per parameter of weights, gradients and optimizer state, split the way the ZeRO paper splits
them (Rajbhandari et al. 2020, section 3: mixed-precision Adam keeps 2 + 2 + 12 = 16 bytes per
parameter: bf16 weights, bf16 gradients, fp32 master weights + momentum + variance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constants import MIN_BLOCK_SHARE_OF_PARAMS


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
    experts: float = 0.0  # routed experts per MoE layer (0: dense)
    experts_per_token: float = 0.0
    expert_params: float = 0.0  # all routed experts' parameters: what expert parallelism splits
    expert_ffn: float = 0.0  # one expert's MLP width
    moe_layers: float = 0.0  # layers with routed experts (0 with experts: every layer)
    # Attention scores and values: heads x (qk head dim + v head dim) / 2, q_width unless they differ (MLA)
    attention_width: float = 0.0
    sliding_window: float = 0.0  # tokens a windowed layer attends to (0: none)
    window_layers: float = 0.0  # layers with the window
    qk_norm: bool = False  # per-head RMSNorm on queries and keys (Qwen3)
    sandwich_norms: bool = False  # RMSNorms after attention and the MLP too (Gemma 2 and 3)
    linear_modules: float = 0.0  # linear modules of a dense block as the model's code has them (0: unfused default)
    norm_fp32_weight: bool = False  # the RMSNorm weight multiplies in fp32 (Gemma, GPT-OSS)
    clamped_swiglu: bool = False  # GPT-OSS's SwiGLU with clamps and (up + 1)
    mla_ranks: float = 0.0  # MLA q and kv compression ranks together (DeepSeek-V3: 1536 + 512)
    router_fp32: bool = False  # the MoE router runs in fp32 on an fp32 copy of the hidden state
    tied_embeddings: bool = False  # one V x h matrix for the input embedding and the LM head

    @property
    def embedding_params(self) -> float:
        """The input embedding plus, unless tied, the LM head: V h each."""
        return (1.0 if self.tied_embeddings else 2.0) * self.vocab * self.hidden

    @property
    def expert_share(self) -> float:
        """Share of the parameters held by routed experts."""
        return self.expert_params / self.params if self.params > 0 else 0.0

    def attention_span(self, seq_len: float) -> float:
        """Keys per query the attention FLOPs count, averaged over the layers: the sequence length in full
        layers (the 12 L h s convention of PaLM, appendix B); in a layer with a causal window of w tokens a
        query sees min(i, w) keys instead of i, on average w - w^2 / (2 s) instead of s / 2, so the same
        convention counts 2 w - w^2 / s."""
        w = self.sliding_window
        if w <= 0 or w >= seq_len or self.layers <= 0:
            return seq_len
        windowed = 2.0 * w - w * w / seq_len
        share = min(1.0, self.window_layers / self.layers) if self.window_layers > 0 else 1.0
        return share * windowed + (1.0 - share) * seq_len

    @property
    def moe_layer_share(self) -> float:
        """Share of the layers that route tokens to experts (DeepSeek-V3: 58 of 61)."""
        if not self.experts or self.layers <= 0:
            return 0.0
        return self.moe_layers / self.layers if self.moe_layers > 0 else 1.0

    @property
    def largest_tensor_params(self) -> float:
        """Parameters of the largest single weight matrix: the embedding or LM head (V x h), else an MLP
        matrix (h x f, one expert's for MoE). What optimizer-in-backward holds as gradient at a time."""
        if not self.has_shapes:
            return 0.0
        mlp_width = self.expert_ffn if self.experts else self.ffn_active
        return max(self.vocab * self.hidden, self.hidden * mlp_width, self.hidden * self.q_width)

    @property
    def layer_params(self) -> float:
        """Parameters of one transformer block (total, all experts): what ZeRO-3 gathers at once."""
        if not self.has_shapes:
            return 0.0
        return max(self.params - self.embedding_params, self.params * MIN_BLOCK_SHARE_OF_PARAMS) / self.layers


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
    bf16_base_params: float = 0.0  # base parameters kept in 16 bits under QLoRA (embeddings and LM head)
    paged_optimizer: bool = False  # optimizer state pages to CPU memory (bitsandbytes paged optimizers)
    optimizer_in_backward: bool = False  # each parameter stepped and its gradient freed during backward
    # optimizer bytes per trainable parameter added where ZeRO >= 1 hands the optimizer flattened shards
    # (Adafactor's second moment is then not factored)
    flat_optimizer_extra_bytes: float = 0.0
    # the 4-bit base is bitsandbytes' Linear4bit (QLoRA through transformers/PEFT, Accelerate's FSDP, DeepSpeed,
    # Lightning), which keeps every quantised linear's input for backward and, unsharded, holds the unquantised
    # base parameters in fp32 (physics/memory_terms.py)
    bnb_saved_inputs: bool = False
    # the linears LoRA adapts ("all_linear", "attention" or "qkv"; "" where no adapter runs or the shapes are unknown):
    # their low-rank branches' HBM traffic (physics/adapters.py)
    lora_targets: str = ""
    # bytes of an adapter element in the branch kernels: 4 for PEFT's fp32 adapters on a 16-bit model without autocast
    # (planning/model_state.py lora_adapter_element_bytes), else 2
    lora_adapter_bytes: float = 2.0
    # LoRA dropout > 0: a dropout kernel and its mask on each adapted linear's input (physics/adapters.py)
    lora_dropout: bool = False
    # how the pipeline stages divide the layers (job.pipeline_split): "layers" evenly, "compute" by cumulative matmul
    # cost with the LM head as a block (nanotron; physics/memory_terms.py compute_split_stage_layers)
    pipeline_split: str = "layers"
    # where backward writes the gradients (job.gradient_accumulator): "in_place" into the counted buffer, or
    # "after_backward" (nanotron's FP32GradientAccumulator; physics/memory_terms.py after_backward_gradient_bytes)
    gradient_accumulator: str = "in_place"
    # the optimizer step's HBM traffic over a fused step's (job.optimizer_implementation foreach:
    # physics/optimizer_step.py foreach_traffic_ratio)
    update_traffic_ratio: float = 1.0
    # bytes per trainable parameter the optimizer step allocates beside the state and frees when it returns
    # (physics/optimizer_step.py foreach_temporary_bytes)
    step_temporary_bytes: float = 0.0
    # parameters every TP rank holds whole (job.embedding_parallel false: the token embedding, memory_terms.py
    # tp_replicated_state_bytes)
    tp_replicated_params: float = 0.0

    def optimizer_bytes_at(self, zero) -> np.ndarray:
        """Optimizer bytes per trainable parameter at ZeRO stage ``zero`` (flattened shards from stage 1)."""
        return self.optimizer_bytes + np.where(np.asarray(zero) >= 1, self.flat_optimizer_extra_bytes, 0.0)

    def weights_total(self, params: float) -> float:
        base = (params - self.bf16_base_params) * self.weight_bytes + 2.0 * self.bf16_base_params
        return base + self.trainable_params * self.adapter_weight_bytes + 2.0 * self.teacher_params


def lora_adapter_params(shape: ModelShape, rank: int, targets: str = "all_linear") -> float:
    """LoRA on the linear layers of every block: r * (d_in + d_out) per matrix (Hu et al. 2021, eq. 3).

    Attention q, k, v, o contribute (h + q) + 2 (h + kv) + (q + h); the MLP 3 (h + f) when gated
    (gate, up, down) or 2 (h + f) otherwise, unless only the attention projections are targeted (the
    original LoRA setting; PEFT's target_modules), or only Megatron's fused query-key-value projection
    (``qkv``, linear_qkv: one adapter of input h and output q + 2 kv). For MoE the routed experts are not adapted.
    """
    h, q, kv, f = shape.hidden, shape.q_width, shape.kv_width, shape.ffn_active
    if targets == "qkv":
        return shape.layers * rank * (h + q + 2 * kv)
    attention = (h + q) + 2 * (h + kv) + (q + h)
    mlp = (3 if shape.gated_mlp else 2) * (h + f) if targets == "all_linear" else 0.0
    return shape.layers * rank * (attention + mlp)
