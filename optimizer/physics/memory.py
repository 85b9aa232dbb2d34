"""Memory per GPU, in bytes, for a layout (TP, PP, DP, ZeRO stage and shard degree, micro-batch).

Pure functions over floats or numpy arrays (the candidate generator evaluates thousands of layouts
at once with the same code ``check`` runs on one).

Sources, term by term:
- Training state: ZeRO (Rajbhandari et al. 2020, section 5): TP x PP divides all state; ZeRO-1/2/3 shard the
  optimizer state, then the gradients, then the weights. ZeRO-3 also holds gathered layers (DeepSpeed's
  estimator: 4 x largest layer), the weights in their stored format plus gradients of trained ones: under FSDP
  one block, under DeepSpeed the largest single module with its fp32 gradient partition, so DeepSpeed ZeRO-2/3
  states equal its estimators; ZeRO-2's fp32 gradient partition lives in its step alone (``deepspeed_memory.py``).
  Optimizer in backward keeps one tensor's gradient instead of all of them.
- Activations: Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer
  Models", section 4.1), re-derived for the real widths by counting what PyTorch's autograd keeps
  (``saved_tensors_hooks`` on the bundled presets, tests/validation/test_torch_accounting.py); the terms are in
  ``layer_activation_bytes`` and ``activation_bytes`` (TP with and without sequence parallelism, recompute,
  1F1B's min(p, m) micro-batches in flight, logits 6 s b V / t, activation offload).
- Reserve: the CUDA context and NCCL's buffers outside PyTorch's caching allocator (fixed) plus the allocator's
  fragmentation, about one largest transient tensor (the loss's logits), which it gives back before a run fails
  (``framework_reserve_bytes``, ``allocator_fragmentation_bytes``; published reserved-minus-allocated gaps in
  validation/memory_runs.yaml).
- Headroom: memory a plan leaves free beyond its peak (``headroom_bytes``, MEMORY_HEADROOM_DEFAULT).
- Library terms (``memory_terms.py``): bitsandbytes' 4-bit linears keep their inputs for backward, and PEFT holds an
  unsharded QLoRA base's 16-bit parameters in fp32 (QLoRA under the Hugging Face stack, ``TrainingState.bnb_saved_inputs``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from .constants import (
    ACTIVATION_OFFLOAD_RESIDENT_LAYERS,
    FRAMEWORK_RESERVE_FIXED_BYTES,
    FRAMEWORK_RESERVE_FRACTION,
    FSDP_UNSHARDED_GRAD_BYTES,
    LOSS_FP32_COPY_MIN_BYTES_PER_VOCAB,
    LOSS_LARGEST_TENSOR_BYTES_PER_VOCAB_BF16,
    LOSS_LARGEST_TENSOR_BYTES_PER_VOCAB_FP32,
)
from .context_parallel import ulysses_extra_kv_bytes
from .deepspeed_memory import (
    deepspeed_fp32_grad_bytes,
    deepspeed_frees_gradients,
    deepspeed_gathered_params,
    deepspeed_held_block_bytes,
    deepspeed_step_fp32_grad_bytes,
    deepspeed_step_temporary_bytes,
)
from .fsdp_memory import gradients_at_peak_bytes, unsharded_accumulated_grad_bytes
from .layout import Layout, Recompute, RunSettings
from .memory_terms import (
    after_backward_gradient_bytes,
    backward_gradient_bytes_per_token,
    bnb_saved_input_bytes,
    compute_split_stage_layers,
    compute_split_stage_share,
    ddp_bucket_bytes,
    kbit_upcast_bytes,
    not_concurrent_bytes,
    tp_replicated_state_bytes,
    variable_length_fragmentation_bytes,
)
from .pipeline import heaviest_stage_share, in_flight, interleaved_in_flight_factor
from .recompute_modules import freed_bytes_per_token
from .shapes import ModelShape, TrainingState
from .vocab_split import loss_vocab_split


@dataclass
class MemoryBreakdown:
    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray
    activations: np.ndarray
    reserve: np.ndarray
    optimizer_step: np.ndarray  # the optimizer step's temporaries (foreach AdamW's denominator)
    # of the four terms above and the step's, what is never allocated at once (memory_terms.not_concurrent_bytes)
    not_concurrent: np.ndarray

    @cached_property
    def total(self) -> np.ndarray:
        # Cached: the candidate table reads it once per row over arrays of a million layouts.
        parts = self.weights + self.gradients + self.optimizer + self.activations + self.reserve
        return parts + self.optimizer_step - self.not_concurrent

    @property
    def state(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer


# An fp32 gradient (IEEE 754 binary32, 4 bytes) per byte of a 16-bit one (bf16, 2 bytes): job.gradient_dtype fp32.
FP32_GRAD_BYTES_PER_GRAD_BYTE = 2.0


def state_bytes(
    shape: ModelShape,
    train: TrainingState,
    layout: Layout,
    zero3_per_step=False,
    deepspeed=False,
    grad_buffer=1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights, gradients and optimizer state per GPU (ZeRO paper section 5.1, Figure 1).

    Model parallelism (TP x PP) divides all state; ZeRO-1/2/3 shard optimizer state, gradients and
    weights over the shard group. Expert parallelism (Megatron-Core MoE) places 1 / ep of the routed
    experts on each rank, and ZeRO then shards expert state over the expert-data-parallel group (shard /
    ep ranks), so sharded expert state is divided by the whole group either way, and unsharded expert
    state by ep. With optimizer offload (ZeRO-Offload, Ren et al. 2021) the fp32 master weights and Adam
    moments live in CPU memory (``host_optimizer_bytes``) and leave the GPU.

    ZeRO-3 with its weights held over the step (``zero3_per_step``, physics/time.py) keeps the stage's
    weights unsharded from the first forward to the last backward, and each trainable parameter's unsharded
    gradient accumulated in fp32 between micro-batches (FSDP_UNSHARDED_GRAD_BYTES): the memory side of
    gathering once per step. ``deepspeed`` (per layout): DeepSpeed's ZeRO-2/3, as its estimators count them
    (``deepspeed_fp32_grad_bytes``, ``deepspeed_gathered_params``). ``grad_buffer`` (per layout): the gradient
    buffer's bytes per 16-bit gradient byte, 2 where gradients accumulate in fp32 (job.gradient_dtype: Megatron-
    Core's fp32 main_grad buffer, whole on every rank under its distributed optimizer as the 16-bit one is)."""
    tp, pp = np.asarray(layout.tp, float), np.asarray(layout.pp, float)
    zero, shard = np.asarray(layout.zero), np.asarray(layout.shard, float)
    ep = np.asarray(layout.ep, float)
    model_parallel = tp * pp
    share = shape.expert_share
    frozen_experts = share * shape.params * train.weight_bytes  # routed experts are not LoRA-adapted
    trainable_share = 0.0 if train.lora else share

    # The routed experts are split over ep x etp ranks (parallel folding; etp = tp without it), sharded
    # state over all tp x shard ranks, as the dense weights are.
    expert_split = ep * layout.expert_tp

    stage = heaviest_stage_share(
        shape, pp, layout.virtual_stages
    )  # the first and last stages hold an embedding-sized matrix each
    if train.pipeline_split == "compute":  # stages by compute (nanotron): the first takes more layers
        interleaved = np.asarray(layout.virtual_stages, float) > 1
        stage = np.where(interleaved, stage, compute_split_stage_share(shape, pp))

    def per_gpu(total, expert_total, sharded) -> np.ndarray:
        dense = (total - expert_total) / np.where(sharded, shard, 1.0) * stage / tp
        experts = expert_total / np.where(sharded, np.maximum(shard * tp, expert_split), expert_split) / pp
        return dense + experts

    weights = per_gpu(train.weights_total(shape.params), frozen_experts, zero >= 3)
    # ZeRO-3 gathers one block of weights (and reduces its gradients) at a time: DeepSpeed's
    # "largest layer" term, split by TP (and its experts by EP).
    gathered = shape.layer_params * ((1.0 - share) / tp + share / expert_split)
    deepspeed = np.asarray(deepspeed, bool) & (zero >= 2)
    gathered = np.where(deepspeed, deepspeed_gathered_params(shape, tp, expert_split), gathered)
    weights = weights + np.where(zero >= 3, zero3_gather_bytes_per_param(train) * gathered, 0.0)
    grad_total = train.grad_bytes * train.trainable_params
    grads = per_gpu(grad_total, grad_total * trainable_share, zero >= 2) * np.asarray(grad_buffer, float)
    if np.any(deepspeed):
        fp32_total = deepspeed_fp32_grad_bytes(train, zero) * train.trainable_params
        fp32_grads = per_gpu(fp32_total, fp32_total * trainable_share, True)
        # ZeRO-Offload keeps the gradient partitions in CPU memory too (stage3.py: grad_partitions_flat_buffer on
        # the offload device; the estimators' GPU figure with cpu_offload is the 16-bit weights alone).
        offloaded = np.asarray(layout.offload) > 0
        grads = np.where(deepspeed, np.where(offloaded, 0.0, grads + fp32_grads), grads)
    held = np.asarray(zero3_per_step, bool) & (zero >= 3)
    if np.any(held):
        unsharded = per_gpu(train.weights_total(shape.params), frozen_experts, False)
        # Only what FSDP shards gets a separate unsharded gradient: experts that EP already splits over the
        # whole shard group are left out of FSDP (NeMo AutoModel's MoE parallelizer: ignored_params) and
        # accumulate into their own gradient.
        accumulated_total = FSDP_UNSHARDED_GRAD_BYTES * train.trainable_params
        accumulated_experts = accumulated_total * trainable_share
        accumulated = (accumulated_total - accumulated_experts) / model_parallel * (shard > 1) + (
            accumulated_experts / expert_split / pp * (shard * tp > expert_split)
        )
        weights = np.where(held, unsharded, weights)
        grads = np.where(held, grads + accumulated, grads)
    if train.optimizer_in_backward:
        # Optimizer step in backward (PyTorch tutorial "How to save memory by fusing the optimizer step into
        # the backward pass", Tensor.register_post_accumulate_grad_hook; torchtune optimizer_in_bwd): each
        # parameter is stepped and its gradient freed as soon as it is accumulated, so at most one tensor's
        # gradient is alive, the largest one (the LM head, first in backward, for every bundled preset).
        one_tensor = train.grad_bytes * min(train.trainable_params, shape.largest_tensor_params or np.inf)
        grads = np.minimum(grads, one_tensor / tp / np.where(zero >= 2, shard, 1.0))
    optim_total = train.optimizer_bytes_at(zero) * train.trainable_params
    optim = per_gpu(optim_total, optim_total * trainable_share, zero >= 1)
    if train.tp_replicated_params:  # parameters whole on every TP rank (KempnerForge's token embedding)
        more_weights, more_grads, more_optim = tp_replicated_state_bytes(train, layout, grad_buffer)
        weights, grads, optim = weights + more_weights, grads + more_grads, optim + more_optim
    off_gpu = (np.asarray(layout.offload) > 0) | train.paged_optimizer
    return weights, grads, np.where(off_gpu, 0.0, optim)


def zero3_gather_bytes_per_param(train: TrainingState) -> float:
    """Bytes per parameter of the block ZeRO-3 gathers: DeepSpeed's estimator counts 4 x the largest layer
    (``estimate_zero3_model_states_mem_needs``: fp16 weights 2 + fp16 gradients 2). The weights are
    gathered in their stored format (NF4 under QLoRA: torchao's NF4Tensor implements FSDP2's all-gather,
    torchtune's QLoRA distributed recipes) and frozen base weights produce no gradients (LoRA)."""
    return train.weight_bytes + (0.0 if train.lora else train.grad_bytes)


def host_optimizer_bytes(train: TrainingState, layout: Layout, gpus_per_node) -> np.ndarray:
    """CPU memory one node needs for its GPUs' offloaded optimizer shards."""
    shard = np.where(np.asarray(layout.zero) >= 1, np.asarray(layout.shard, float), 1.0)
    per_gpu = (
        train.optimizer_bytes
        * train.trainable_params
        / (np.asarray(layout.tp, float) * np.asarray(layout.pp, float))
        / shard
    )
    return np.where(np.asarray(layout.offload) > 0, per_gpu * np.asarray(gpus_per_node, float), 0.0)


def _norm_bytes_per_token(shape: ModelShape, fused, fp8_inputs) -> np.ndarray:
    """Bytes per token one block's norms keep (their inputs and the normalised outputs the next matmuls read):
    the activations of hidden width, outside the linears that TP splits (``activation_bytes``)."""
    h = shape.hidden
    # RMSNorm (gated models) keeps fp32 input 4h + normalised 2h + output 2h; LayerNorm input 2h + output 2h.
    norms: float | np.ndarray = 2 * (8 * h if shape.gated_mlp else 4 * h)
    if shape.norm_fp32_weight:
        # The weight multiplies the fp32 normalised input (Gemma's (1 + w), GPT-OSS), which is kept in fp32:
        # 4h fp32 input + 4h normalised + 2h bf16 output read by the next matmul = 10h per norm.
        norms = 2 * 10 * h
    if shape.sandwich_norms:
        # Gemma 2/3 also normalise each block's output; its residual add keeps nothing, so each extra norm keeps
        # its 4h fp32 input and the normalised input (4h fp32, else 2h). Measured 36h per token on
        # Gemma 2 9B = 2 x 10h + 2 x 8h.
        norms = norms + 2 * (4 * h + (4 * h if shape.norm_fp32_weight else 2 * h))
    # fused (Transformer Engine): each norm's input and the following matmul's input, bf16
    norms = np.where(fused, 2 * (2 * h + 2 * h), norms)
    # FP8 (Transformer Engine): one byte instead of two for the attention norm's output (QKV input) and the
    # MLP norm's output where a dense MLP reads it (an MoE layer's router reads it in 16 bits; its experts'
    # FC1 input is the permuted copy)
    moe_share = shape.moe_layer_share if shape.experts else 0.0
    return np.where(fp8_inputs, norms - h - h * (1.0 - moe_share), norms)


def layer_activation_bytes(
    shape: ModelShape,
    seq_len: float,
    micro_batch,
    eager_attention: bool,
    fused_kernels: bool | np.ndarray = False,
    fp8_saved_inputs: bool | np.ndarray = False,
) -> np.ndarray:
    """Bytes one transformer block keeps for backward, per micro-batch, without parallelism.

    ``fused_kernels``: Megatron-Core with Transformer Engine fuses the norms into the next matmul and the
    SwiGLU into one kernel, keeping each norm's bf16 input (2h) and 6f for a gated MLP (the
    Korthikanti et al. 2022 count re-derived for these widths); eager PyTorch (Hugging Face, torchtitan)
    keeps what is measured below. ``fp8_saved_inputs``: in FP8 training Transformer Engine's Linear,
    LayerNormLinear and LayerNormMLP save the FP8 cast of each linear's input for the weight-gradient GEMM
    instead of the bf16 one (transformer_engine/pytorch/module/linear.py: ``saved_inputmat = inputmat``
    when fp8, keeping only the column-wise FP8 data), 1 byte per element: the two norm outputs, the
    output projection's input and the down projection's input, h + h + q + f bytes less per token.
    torchao's Float8Linear (torchtitan) saves the high-precision input, so eager kernels keep 2 bytes."""
    s, b = float(seq_len), np.asarray(micro_batch, float)
    h, q, k, f = shape.hidden, shape.q_width, shape.kv_width, shape.ffn_active
    # Measured with saved_tensors_hooks (PyTorch 2.13, transformers 5.24, bf16, SDPA flash kernel): Llama 3.1
    # 8B keeps 200,840 bytes per token per layer = 16h + 4q + 4k + 8f + 136 (log-sum-exp and norm rstd,
    # left out); the earlier Megatron-fused count (bf16 norm inputs, 6f SwiGLU) gave 139,264, 31 % low.
    attention: float | np.ndarray = 2 * q + 2 * k + 2 * k + 2 * q
    # MLA (DeepSeek-V3): the compressed query and key/value latents each pass an RMSNorm (fp32 input 4r,
    # bf16 normalised 2r) and feed the up-projection (2r): 8 (r_q + r_kv), measured the same way.
    attention = attention + 8 * shape.mla_ranks
    mlp: float | np.ndarray = 8 * f if shape.gated_mlp else 4 * f
    if shape.clamped_swiglu:
        # GPT-OSS (transformers GptOssExperts): gate and up split from one projection, each clamped, then
        # sigmoid(1.702 gate) and (up + 1) x glu: measured 14f bytes per token (f = k x expert width).
        mlp = 14 * f
    # ``fused_kernels`` and ``fp8_saved_inputs`` may be per-layout arrays (each layout's framework's kernels)
    fused = np.asarray(fused_kernels, bool)
    fp8_inputs = fused & np.asarray(fp8_saved_inputs, bool)
    mlp = np.where(fused, 6 * f if shape.gated_mlp else 4 * f, mlp)
    moe_share = shape.moe_layer_share if shape.experts else 0.0
    # One byte instead of two for each linear's saved input (the norms' outputs: ``_norm_bytes_per_token``),
    # the output projection's input and the down projection's input.
    mlp = np.where(fp8_inputs, mlp - f, mlp)
    attention = np.where(fp8_inputs, attention - q, attention)
    if shape.qk_norm:
        kv_heads = shape.heads * k / q
        # Fused: Transformer Engine's RMSNorm (Megatron-Core's q/k layernorm) keeps its bf16 input and an fp32
        # rstd per head and token; the normalised Q and K are the attention inputs already counted. Eager:
        # Qwen3's per-head RMSNorms on Q and K, measured the same way: fp32 input 4, normalised 2 bf16 (the
        # 4q + 4k of the rope inputs already count the outputs) per element, plus an fp32 rstd per head and
        # token: 6q + 6k + 4 (heads + kv heads).
        attention = attention + np.where(fused, 2 * q + 2 * k, 6 * q + 6 * k) + 4 * (shape.heads + kv_heads)
    # MoE layers (measured the same way on Qwen3-30B-A3B at reduced width, transformers' grouped_mm experts,
    # the grouped-GEMM path torchtitan and Megatron-Core also take): the dispatch keeps each token's hidden
    # state once per routed expert (2hk, the permuted grouped-GEMM input) and the experts' outputs for the
    # routing-weight multiply (2hk), plus the router's fp32 logits for the softmax backward (4E) and the
    # int64 routing indices (3 x 8k). The 8f of the SwiGLU already counts f = k x expert width.
    topk = shape.experts_per_token
    # An fp32 router (DeepSeek-V3) also keeps its fp32 copy of the hidden state (4h).
    router = 4 * h if shape.router_fp32 else 0.0
    # Under Transformer Engine in FP8 the permuted copy is the experts' FC1 input, kept in one byte (hk).
    dispatched = np.where(fp8_inputs, 3 * h * topk, 4 * h * topk)
    moe = (dispatched + 4 * shape.experts + 24 * topk + router) * moe_share if shape.experts else 0.0
    per_layer = s * b * (_norm_bytes_per_token(shape, fused, fp8_inputs) + attention + mlp + moe)
    if eager_attention:
        per_layer = per_layer + 2.0 * shape.heads * s * s * b
    return per_layer


def op_saved_bytes_per_token(shape: ModelShape) -> float:
    """Bytes per token one block keeps under per-op selective checkpointing (torchtitan's SelectiveAC,
    torchtitan/distributed/activation_checkpoint.py at b5bcd76c, 2026-08-21): its input (2h); the outputs of the
    ops it must save, SDPA's (2q, with an fp32 log-sum-exp per head) and every other matmul's, the first, third,
    ... in forward order (q 2q, v 2k, the MLP's first 2f and, gated, its down projection's 2h); the rest
    (norms, RoPE, the other matmuls, the SwiGLU) re-run in backward. MoE layers: the router gate is recomputed,
    the experts' grouped GEMMs and the all-to-alls are saved (their outputs, 4f + 2hk, and the dispatched copy,
    2hk), with the router's fp32 logits and routing indices as without recompute."""
    h, q, k, f = shape.hidden, shape.q_width, shape.kv_width, shape.ffn_active
    attention = 2 * h + 2 * q + 2 * k + 2 * q + 4 * shape.heads
    dense = 2 * f + (2 * h if shape.gated_mlp else 0.0)
    if not shape.experts:
        return attention + dense
    topk, share = shape.experts_per_token, shape.moe_layer_share
    moe = 4 * f + 4 * h * topk + 4 * shape.experts + 24 * topk
    return attention + share * moe + (1.0 - share) * dense


def stage_layer_counts(shape: ModelShape, layout: Layout, split: str = "layers") -> tuple[np.ndarray, np.ndarray]:
    """Layers of the first and of the last pipeline stage: ceil(L / p) each where the layers split evenly
    (``Layout.stage_layers``), the compute split's counts under ``split`` "compute" (nanotron, one chunk a GPU:
    ``memory_terms.compute_split_stage_layers``)."""
    even = layout.stage_layers(shape.layers)
    if split != "compute":
        return even, even
    first, last = compute_split_stage_layers(shape, layout.pp)
    interleaved = np.asarray(layout.virtual_stages, float) > 1
    return np.where(interleaved, even, first), np.where(interleaved, even, last)


def activation_bytes(shape: ModelShape, settings: RunSettings, layout: Layout, split: str = "layers") -> np.ndarray:
    """Activation memory of the busiest pipeline stage; with TP > 1 split by TP throughout under sequence
    parallelism (``settings.sequence_parallel``: Megatron, torchtitan), else the norms and layer inputs whole.
    ``split``: how the stages divide the layers (``TrainingState.pipeline_split``, ``stage_layer_counts``).

    Interleaving v > 1 chunks per GPU keeps more micro-batches in flight: x (1 + (p - 1) / (p v))
    (Korthikanti et al. 2022, section 4.2.3; Megatron-LM's interleaved-schedule memory penalty)."""
    tp, pp = np.asarray(layout.tp, float), np.asarray(layout.pp, float)
    b = np.asarray(layout.micro_batch, float)
    rc = np.asarray(layout.recompute)
    s = float(settings.seq_len)
    fused, fp8 = settings.fused_kernels, settings.fp8_saved_inputs
    full_layer = layer_activation_bytes(shape, s, b, settings.eager_attention, fused, fp8)
    # Selective recompute (or FlashAttention) drops the s^2 attention term (Korthikanti section 5).
    flash_layer = layer_activation_bytes(shape, s, b, False, fused, fp8)
    # selective recompute by module (Megatron-Core's --recompute-modules): what the named modules free as well
    freed = s * b * freed_bytes_per_token(shape, settings.recompute_modules, fused, fp8)
    kept_layer = np.where(rc == Recompute.SELECTIVE, flash_layer - freed, full_layer)  # a layer not fully recomputed
    flight = in_flight(pp, layout.grad_accum)
    # Full recompute of r of the stage's layers (layout.recomputed_share: all, or Megatron's block method, the
    # first r): each of those keeps only its input (2 sbh), the others all their tensors. A recomputed layer's
    # working set (one layer's tensors) is live when its backward re-runs it, after the layers above it have freed
    # theirs: the peak is the larger of the two (with every layer recomputed, the working set on top).
    # per-op selective recompute: every block keeps what op_saved_bytes_per_token counts instead of its input
    op = rc == Recompute.OP
    share = np.where(op, 1.0, layout.recomputed_share(shape.layers))
    recomputing = share > 0
    first_layers, last_layers = stage_layer_counts(shape, layout, split)
    held = first_layers * flight  # layer-micro-batches whose tensors wait for backward
    last_held = last_layers + 0.0 * flight
    if settings.activation_offload:
        # Saved tensors go to pinned CPU memory as they are made and come back one layer ahead of backward
        # (torchtune OffloadActivations): only the layers in transfer stay on the GPU.
        held = np.minimum(held, ACTIVATION_OFFLOAD_RESIDENT_LAYERS)
        last_held = np.minimum(last_held, ACTIVATION_OFFLOAD_RESIDENT_LAYERS)
    layer_input = np.where(op, s * b * op_saved_bytes_per_token(shape), 2.0 * s * b * shape.hidden)

    def stored(layers):
        return layer_input * layers * share + np.maximum(
            kept_layer * layers * (1.0 - share), np.where(recomputing, flash_layer, 0.0)
        )

    # Without sequence parallelism every TP rank keeps the tensors of hidden width whole: the norms' inputs and
    # outputs, and under full recompute each layer's input (Korthikanti et al. 2022, eq. 2: 10 sbh of the 34
    # sbh are not split by TP; with sequence parallelism, eq. 4, all are). What TP leaves unsplit, per layer:
    whole = np.where(np.asarray(settings.sequence_parallel, bool), 0.0, 1.0 - 1.0 / tp)
    norm_layer = s * b * _norm_bytes_per_token(shape, fused, fused & np.asarray(fp8, bool)) * whole
    input_layer = layer_input * whole

    def unsplit(layers):
        return input_layer * layers * share + np.maximum(
            norm_layer * layers * (1.0 - share), np.where(recomputing, norm_layer, 0.0)
        )

    logits = settings.logits_bytes_per_vocab * s * b * shape.vocab / loss_vocab_split(settings, layout)
    # a backward's gradients in flight (a re-run layer's too), after the loss's tensors are freed
    grads_h, grads_f = backward_gradient_bytes_per_token(shape)
    grads = s * b * (grads_f / tp + grads_h * (1.0 / tp + whole))
    top = np.maximum(logits, grads)  # what the last stage adds to its layers
    v = np.asarray(layout.virtual_stages, float)
    first_stage = (stored(held) / tp + unsplit(held)) * interleaved_in_flight_factor(pp, v)
    last_stage = stored(last_held) / tp + top + unsplit(last_held)
    return np.where(pp > 1, np.maximum(first_stage, last_stage), first_stage + top)


def least_recomputed_layers(
    shape: ModelShape, settings: RunSettings, layout: Layout, activation_budget_bytes, chunks=1, split="layers"
) -> np.ndarray:
    """Per layout, the fewest layers of each pipeline stage (a multiple of ``chunks``: the same count in each of a
    rank's chunks) whose full recompute keeps the stage's activations per context-parallel rank within
    ``activation_budget_bytes``; 0 (all of them) where only recomputing every layer, or nothing, fits. Time grows
    and memory shrinks with the count, so the fewest that fit is the fastest layout that fits (a bisection)."""
    per_stage = layout.stage_layers(shape.layers)
    step = np.maximum(np.asarray(chunks, float), 1.0)
    lo = np.zeros(np.shape(per_stage))  # in units of ``step``: lo too few (or none), hi enough (or all)
    hi = np.ceil(per_stage / step)
    cp = np.asarray(layout.cp, float)
    budget = np.asarray(activation_budget_bytes, float)
    while np.any(hi - lo > 1):
        open_ = hi - lo > 1
        mid = np.floor((lo + hi) / 2.0)
        trial = replace(
            layout, recompute=Recompute.FULL, recompute_layers=np.maximum(np.minimum(mid * step, per_stage), 1)
        )
        fits = activation_bytes(shape, settings, trial, split) / cp <= budget
        hi = np.where(open_ & fits, mid, hi)
        lo = np.where(open_ & ~fits, mid, lo)
    count = np.minimum(hi * step, per_stage)
    return np.where(count >= per_stage, 0, count).astype(np.int64)


def loss_largest_tensor_bytes_per_vocab(logits_bytes_per_vocab, upcast=True) -> np.ndarray:
    """The loss's largest single tensor per token and vocabulary entry (constants.LOSS_LARGEST_TENSOR_*): an fp32
    copy of the logits where the loss holds one (6 bytes or more, and it ``upcast``s them), else the bf16 logits (any
    loss that keeps them), else none (a fused loss). A cross-entropy on the bf16 logits (job.loss bf16, ``upcast``
    False) takes its 6 bytes as three bf16 tensors (tests/validation/test_loss_memory.py), Megatron-Core's as fp32 + bf16."""
    total = np.asarray(logits_bytes_per_vocab, float)
    bf16 = np.where(total > 0.0, LOSS_LARGEST_TENSOR_BYTES_PER_VOCAB_BF16, 0.0)
    fp32 = (total >= LOSS_FP32_COPY_MIN_BYTES_PER_VOCAB) & np.asarray(upcast, bool)
    return np.where(fp32, LOSS_LARGEST_TENSOR_BYTES_PER_VOCAB_FP32, bf16)


def allocator_fragmentation_bytes(shape: ModelShape, settings: RunSettings, layout: Layout) -> np.ndarray:
    """PyTorch's caching allocator's reserved-minus-allocated gap per GPU: about one of the step's largest transient
    tensors, a new segment taken when no cached block is whole for it (constants.FRAMEWORK_RESERVE_FRACTION's
    comment), here the loss's largest logits tensor on a GPU: s b V / (t cp) entries (the vocabulary split over TP
    where the loss is, ``vocab_split.loss_vocab_split``, as ``activation_bytes`` splits the logits; the sequence by CP). It does not grow with the GPU's capacity.

    Against published reserved figures (validation/memory_runs.yaml: reserved minus gpuplan's allocated peak):
    torchtitan's Llama 3.1 8B at local batch 2 and 8192 tokens, eager loss (one fp32 logits tensor 7.8 GiB), 7.7 and
    9.1 GiB; torchao's at batch 1 (3.9 GiB), 3.5 and 3.9 GiB; with the loss compiled (bf16 logits, 3.9 GiB at batch
    2) Trainy's H200 runs 2.9 and 3.7 GiB, where 5 % of capacity gave 6.6 GiB on H200 and 8.4 GiB on B200."""
    tokens = float(settings.seq_len) * np.asarray(layout.micro_batch, float) / np.asarray(layout.cp, float)
    per_vocab = loss_largest_tensor_bytes_per_vocab(settings.logits_bytes_per_vocab, settings.loss_upcast)
    return per_vocab * tokens * shape.vocab / loss_vocab_split(settings, layout)


def framework_reserve_bytes(setting, capacity_bytes, fragmentation_bytes=None, allocated_bytes=0.0) -> np.ndarray:
    """CUDA context, NCCL buffers and allocator fragmentation per GPU. ``auto``: 1.5 GiB outside the caching
    allocator (CUDA context ~0.5-1 GiB, NCCL's buffers) plus the allocator's fragmentation,
    ``fragmentation_bytes`` (``allocator_fragmentation_bytes``: about the largest transient tensor, not a share of
    capacity), or 5 % of capacity where it is not known (a model without shapes). The fragmentation is cache the
    allocator gives back when the device is full (torch.cuda.memory_stats "num_alloc_retries: number of failed
    cudaMalloc calls that result in a cache flush and retry"), so it takes at most what ``allocated_bytes`` and the
    fixed part leave of the capacity: published runs reserve up to the GPU's memory and no further (torchtitan's
    Llama 3.1 8B at 32k tokens, 83.9 GiB reserved of 89.4). A size is taken as is; a number below 1 is a fraction
    of capacity."""
    capacity = np.asarray(capacity_bytes, float)
    if setting == "auto":
        if fragmentation_bytes is None:
            return FRAMEWORK_RESERVE_FIXED_BYTES + FRAMEWORK_RESERVE_FRACTION * capacity
        room = np.maximum(capacity - FRAMEWORK_RESERVE_FIXED_BYTES - np.asarray(allocated_bytes, float), 0.0)
        return FRAMEWORK_RESERVE_FIXED_BYTES + np.minimum(np.asarray(fragmentation_bytes, float), room)
    if isinstance(setting, float) and setting < 1.0:
        return setting * capacity
    return np.full_like(capacity, float(setting))


# Memory a plan keeps free beyond its modelled peak (constraints.memory_headroom). The allocator evidence asks for
# 10-15 % (torchtune aims at 85-90 % reserved with no allocator retries, meta-pytorch/torchtune PR 1360; FSDP's
# reserved pool ran 4.1-7.2 GB over its active peak on A100-40GB, meta-llama/llama-cookbook PR 41), but the
# framework reserve holds the fragmentation (1.5 GiB + one largest transient, ``allocator_fragmentation_bytes``;
# 5 % of capacity + 1.5 GiB before), and published runs sat 0.6-3.3 % under capacity under the old reserve
# (llm-foundry MPT-1B on A100-40GB, Megatron-Bridge Qwen3-30B-A3B on B300): a default above 0 called them unfit.
MEMORY_HEADROOM_DEFAULT = "0%"
MEMORY_EDGE_SHARE = 0.05  # of capacity: a plan with less left is at the edge (one allocator spike from failing)


def headroom_bytes(setting: str | float | None, capacity_bytes) -> np.ndarray:
    """Bytes per GPU a plan leaves free: ``setting`` a share of capacity (``"10%"``), bytes, or None (default)."""
    capacity = np.asarray(capacity_bytes, float)
    setting = MEMORY_HEADROOM_DEFAULT if setting is None else setting
    if isinstance(setting, str):
        return float(setting.rstrip("%")) / 100.0 * capacity
    return np.full_like(capacity, float(setting))


def _after_backward_bytes(shape: ModelShape, train: TrainingState, layout: Layout, settings: RunSettings) -> np.ndarray:
    """``memory_terms.after_backward_gradient_bytes`` for a layout: the stage's 16-bit gradients unsharded (ZeRO-1 leaves
    them whole) against one micro-batch's activations of the busiest stage."""
    whole = replace(layout, zero=np.minimum(np.asarray(layout.zero), 1))
    half = state_bytes(shape, train, whole)[1]
    one = replace(layout, grad_accum=1, virtual_stages=1)
    micro = activation_bytes(shape, settings, one, train.pipeline_split) / np.asarray(layout.cp, float)
    return after_backward_gradient_bytes(half, micro, layout)


def memory_breakdown(
    shape: ModelShape,
    train: TrainingState,
    layout: Layout,
    settings: RunSettings,
    capacity_bytes,
    zero3_per_step=False,
    deepspeed=False,
) -> MemoryBreakdown:
    """Per-GPU memory of one layout. ``activation_reserve`` is 'auto', bytes, or a fraction (<1); ``deepspeed``
    (per layout) counts ZeRO-2/3 states as DeepSpeed's estimators do."""
    weights, grads, optim = state_bytes(shape, train, layout, zero3_per_step, deepspeed, settings.grad_buffer)
    ds_fp32 = np.zeros_like(grads)  # DeepSpeed ZeRO-2's fp32 gradient partition lives in its step alone
    if np.any(deepspeed):
        plain = state_bytes(shape, train, layout, zero3_per_step, False, settings.grad_buffer)[1]
        ds_fp32 = deepspeed_step_fp32_grad_bytes(grads, plain, layout, deepspeed)
        grads = grads - ds_fp32
    frees = deepspeed_frees_gradients(layout, deepspeed, settings.frees_gradients)
    weights = weights + kbit_upcast_bytes(train, layout)  # PEFT's fp32 copy of a QLoRA base's 16-bit parameters
    # FSDP2 without gradient sync until the last micro-batch: each unit's fp32 gradient held unsharded (fsdp_memory.py;
    # the weights held over the step, zero3_per_step, count that gradient in state_bytes already)
    accumulated = np.where(zero3_per_step, 0.0, unsharded_accumulated_grad_bytes(shape, train, layout))
    grads = gradients_at_peak_bytes(grads, accumulated, frees)
    if np.any(deepspeed) and shape.has_shapes:  # ZeRO-3 keeps the running block gathered (reuse distance)
        weights = weights + np.where(np.asarray(deepspeed, bool), deepspeed_held_block_bytes(shape, train, layout), 0.0)
    capacity = np.asarray(capacity_bytes, float)
    activation_reserve = settings.activation_reserve
    if activation_reserve == "auto":
        # Context parallelism splits every sequence cp ways; with FlashAttention every activation term is
        # linear in the sequence, so each rank keeps 1 / cp of them (Megatron-Core context parallelism).
        acts = activation_bytes(shape, settings, layout, train.pipeline_split) / np.asarray(layout.cp, float)
        # Ulysses' FlashAttention keeps the replicated K and V heads it received (physics/context_parallel.py)
        acts = acts + ulysses_extra_kv_bytes(shape, layout, float(settings.seq_len), settings.context_parallel)
        if train.bnb_saved_inputs and shape.has_shapes:
            acts = acts + bnb_saved_input_bytes(shape, settings, layout)  # bitsandbytes' 4-bit linears' inputs
    elif activation_reserve < 1.0:
        acts = activation_reserve * capacity
    else:
        acts = np.full_like(capacity, float(activation_reserve))
    fragmentation = allocator_fragmentation_bytes(shape, settings, layout) if shape.has_shapes else None
    if fragmentation is not None:  # samples of many lengths: the length-dependent tensors once more
        fragmentation = variable_length_fragmentation_bytes(fragmentation, acts, settings)
    # the optimizer step's temporaries, sharded as the state is; and what is never allocated at once (the
    # parameters' gradients only: the accumulators and DDP's buckets below persist)
    per_state_byte = train.step_temporary_bytes / train.optimizer_bytes if train.optimizer_bytes else 0.0
    step = optim * (0.0 if train.optimizer_in_backward else per_state_byte) + deepspeed_step_temporary_bytes(ds_fp32)
    apart = not_concurrent_bytes(acts, grads, step, layout, frees)
    if train.gradient_accumulator == "after_backward" and shape.has_shapes:  # nanotron's FP32GradientAccumulator
        grads = grads + _after_backward_bytes(shape, train, layout, settings)
    grads = grads + ddp_bucket_bytes(grads, layout, settings.ddp_gradient_copy, settings.bucket_per_grad_byte)
    allocated = weights + grads + optim + acts + step - apart
    reserve = framework_reserve_bytes(settings.framework_overhead, capacity, fragmentation, allocated)
    shape_of = np.broadcast(weights, acts, capacity).shape
    return MemoryBreakdown(
        weights=np.broadcast_to(weights, shape_of).astype(float),
        gradients=np.broadcast_to(grads, shape_of).astype(float),
        optimizer=np.broadcast_to(optim, shape_of).astype(float),
        activations=np.broadcast_to(acts, shape_of).astype(float),
        reserve=np.broadcast_to(reserve, shape_of).astype(float),
        optimizer_step=np.broadcast_to(step, shape_of).astype(float),
        not_concurrent=np.broadcast_to(apart, shape_of).astype(float),
    )


def max_params_fitting(
    capacity_bytes: float, gpus: int, bytes_per_param: float, reserve_bytes: float, zero_stage: int = 3
) -> float:
    """Largest parameter count whose training state fits, the seed's capacity arithmetic.

    Fully sharded (ZeRO-3) over g GPUs: g x (capacity - reserve) / bytes_per_param. Lower stages
    keep the unsharded parts on every GPU (ZeRO-1: weights and gradients 4 bytes of 16).
    """
    usable = capacity_bytes - reserve_bytes
    if usable <= 0:
        return 0.0
    replicated = {0: bytes_per_param, 1: 4.0 * bytes_per_param / 16.0, 2: 2.0 * bytes_per_param / 16.0, 3: 0.0}[
        zero_stage
    ]
    sharded = bytes_per_param - replicated
    return usable / (replicated + sharded / gpus)
