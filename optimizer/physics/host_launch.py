"""The host's floor under an eager PyTorch step: every operator is dispatched and its kernel launched from the CPU.

A GPU runs its kernels asynchronously behind the host, so a micro-batch takes the longer of the GPU's busy time and
the host's time to issue its operators (physics/time.py), not their sum: at a large micro-batch the host runs ahead
and hides; at a small one (a 1B model at 512 tokens on a B200) the GPU idles between kernels and the host binds.
Host time = operators dispatched x ``HOST_S_PER_OP``; extra kernel launches inside one operator (the multi-tensor
chunks of a foreach optimizer op) x ``DRIVER_LAUNCH_S``. Megatron-Core / Transformer Engine layouts are left out
(their fused kernels' counts are not sourced here), so is a CUDA graph (no job field names one).

Operators per decoder layer, eager (transformers' modeling_llama.py, huggingface/transformers@002272831fba584eb30dc
a9729c1be456836960a: LlamaRMSNorm.forward, rotate_half, apply_rotary_pos_emb, LlamaMLP.forward; transformers 5.x
keeps these forms), forward:

- each RMSNorm 8: ``.to(float32)``, ``pow(2)``, ``mean(-1)``, ``+ eps``, ``rsqrt``, ``*``, ``.to(input_dtype)``,
  ``weight *``; two a layer (four with Gemma's sandwich norms, two more with Qwen3's q/k norms);
- RoPE 10: for q and k each ``q * cos``, ``-x2`` and ``cat`` (rotate_half), ``* sin`` and ``+``;
- the block's linears (7: q, k, v, o, gate, up, down; physics/zero3_hooks.py ``block_linears``), SDPA 1, the
  MLP's activation and product (SiLU x up: 2; ungated GELU: 1), the two residual adds.

Backward, from each forward operator's derivative (pytorch tools/autograd/derivatives.yaml): a linear 2 GEMMs (data and
weight gradient; a frozen LoRA base 1), plus an add where one input feeds several linears (q/k/v, gate/up: linears - 4);
SDPA 1 (its flash backward); an RMSNorm 15 (each ``.to`` 1, ``pow`` 2, ``mean`` 1, ``rsqrt`` 3: -0.5 grad
result^3, each product 3: two products and the broadcast operand's sum, the fp32 input's two gradients added 1); RoPE 18
(per tensor: the cos and sin products 2, ``neg`` 1, the two slices' ``slice_backward`` zeros and copies 4, the three
gradients of q added 2); SiLU x up 3 (GELU 1); the residual stream's gradient added twice. A Llama layer: 38 forward,
71 backward; a fully recomputed layer runs its forward again. Around the layers: the embedding 1 + 1, the rotary
tables once 9, the final norm 8 + 15, the LM head 1 + 2, the loss 6 + 4 (ForCausalLMLoss: ``logits.float()``, the
labels' ``pad`` and shift, ``log_softmax``, ``nll_loss`` and its reduction; back: ``nll_loss_backward``'s fill and
scatter, ``log_softmax_backward``, the cast). PEFT's LoRA adds per adapted linear forward A, B, ``* scaling``, ``+``
(and a dropout), backward A's and B's two GEMMs each, the scaling's product, the input's gradient added (and the
dropout's). The experts of an MoE layer are physics/moe.py's (its host terms); its router is one linear.

torch.compile (Inductor) keeps the GEMMs and the attention as calls of their own and fuses each element-wise chain
between two of them into one Triton kernel (pytorch/pytorch@26f1733f6a174ad8d3a7c9c08b372252b6e0bba8
torch/_inductor/scheduler.py, Scheduler.fuse_nodes: "Combine eligible nodes into FusedSchedulerNodes"; a derived
count, not a published one): forward, one kernel a norm (with the residual add before it), one per rotated tensor,
one for the activation; backward two a norm (input gradient, weight gradient's
reduction), one a rotated tensor, one the activation. A compiled Llama layer: 13 forward, 22 backward; around the
layers 6 + 7 (embedding, rotary tables, final norm, head, fused loss 2 each way).

The optimizer step: foreach AdamW dispatches 8 multi-tensor operators (physics/optimizer_step.py's list:
``_foreach_mul_``, ``_foreach_lerp_``, ``_foreach_mul_``, ``_foreach_addcmul_``, ``_foreach_sqrt``, ``_foreach_div_``,
``_foreach_add_``, ``_foreach_addcdiv_``), foreach SGD with momentum 4, a fused step 1; each launches a kernel per
``MULTI_TENSOR_ELEMENTS_PER_LAUNCH`` of its local elements.
"""

from __future__ import annotations

import math

import numpy as np

from .layout import Layout, Recompute, RunSettings
from .shapes import ModelShape, TrainingState
from .zero3_hooks import ATTENTION_LINEARS, ROUTER_LINEARS, block_linears

# Host time of one eager PyTorch operator, Python to kernel launch: the geometric middle of the stated range, "The
# crucial sum is the "before kernel" total: ~5–25 µs of CPU-side work per op" ("From PyTorch op to kernel launch",
# https://jiahuanglin.xyz/all_lessons/gpu_kernel_serving/18_pytorch_to_kernel.html, its table: Python bytecode ~1 us,
# pybind11 ~1 us, autograd dispatch ~1-3 us, ATen dispatcher ~1-2 us, backend ~1-5 us, cudaLaunchKernel ~1-3 us).
# Its low end is PyTorch's own dispatch without a launch: "an overhead of ~7 microseconds for the simplest tensor
# operations" with autograd (pytorch/pytorch issue 41383, 2020).
HOST_S_PER_OP = math.sqrt(5e-6 * 25e-6)
# One more kernel launched inside an operator already dispatched: the driver's share alone, "Driver
# (cudaLaunchKernel) | Enqueue grid+block+args onto a stream. | ~1–3 µs on CUDA 12+ drivers" (the same lesson's
# table), its geometric middle.
DRIVER_LAUNCH_S = math.sqrt(1e-6 * 3e-6)
# Elements a multi-tensor kernel covers: kChunkSize 65536 per block, depth_to_max_blocks 2240 blocks a launch where
# the driver takes 32 KB kernel arguments (CUDA >= 12.1, sm_70 and up) (pytorch/pytorch@008356caea068ac05ec39943d334e8e
# f7b06af40 aten/src/ATen/native/cuda/MultiTensorApply.cuh: "we will launch a kernel when EITHER the blocks get
# filled up OR the tensors get filled up")
MULTI_TENSOR_ELEMENTS_PER_LAUNCH = 65536.0 * 2240.0

# Eager operators, forward and backward (the module's count)
RMSNORM_OPS = (8.0, 15.0)
ROPE_OPS = (10.0, 18.0)
GATED_ACTIVATION_OPS = (2.0, 3.0)  # SiLU(gate) x up
ACTIVATION_OPS = (1.0, 1.0)  # GELU
RESIDUAL_OPS = (2.0, 2.0)  # the two adds; their gradients added into the stream
ATTENTION_OPS = (1.0, 1.0)  # SDPA and its backward
LORA_OPS = (4.0, 6.0)  # per adapted linear: A, B, scaling, add; back: 2 x 2 GEMMs, scaling, the input's gradient
LORA_DROPOUT_OPS = (1.0, 1.0)
# embedding, rotary tables, final norm, LM head, loss
AROUND_LAYERS_OPS = (1.0 + 9.0 + RMSNORM_OPS[0] + 1.0 + 6.0, 1.0 + RMSNORM_OPS[1] + 2.0 + 4.0)
# Inductor's kernels (the module's count): per norm, per rotated tensor (q, k), the activation, around the layers
COMPILED_NORM_OPS = (1.0, 2.0)
COMPILED_ROPE_OPS = (2.0, 2.0)
COMPILED_ACTIVATION_OPS = (1.0, 1.0)
COMPILED_AROUND_LAYERS_OPS = (6.0, 7.0)
COMPILED_LORA_OPS = (2.0, 4.0)  # the adapters' GEMMs; their element-wise work fuses into the neighbours'

# Multi-tensor operators of an optimizer step (the module's list)
FOREACH_ADAMW_OPS = 8.0
FOREACH_SGD_OPS = 4.0
FUSED_STEP_OPS = 1.0
_ADAPTED_LINEARS = {"qkv": 1.0, "attention": ATTENTION_LINEARS}


def optimizer_step_ops(optimizer: str, implementation: str) -> float:
    """Multi-tensor operators one optimizer step dispatches: foreach AdamW 8, foreach SGD 4, else 1 (a fused step,
    or an optimizer with kernels of its own)."""
    if implementation == "foreach" and optimizer == "adamw":
        return FOREACH_ADAMW_OPS
    if implementation == "foreach" and optimizer == "sgd":
        return FOREACH_SGD_OPS
    return FUSED_STEP_OPS


def _norms(shape: ModelShape) -> float:
    return 2.0 + (2.0 if shape.sandwich_norms else 0.0) + (2.0 if shape.qk_norm else 0.0)


def layer_ops(shape: ModelShape, train: TrainingState, compiled: bool, moe_layer: bool = False) -> tuple[float, float]:
    """(forward, backward) host operators of one decoder layer (the module's count); ``moe_layer``: its MLP is the
    experts' (physics/moe.py), counted there, and a router linear."""
    linears = ATTENTION_LINEARS + ROUTER_LINEARS if moe_layer else block_linears(shape)
    adapted = (_ADAPTED_LINEARS.get(train.lora_targets, linears) if train.lora_targets else 0.0) if train.lora else 0.0
    weight_grads = 0.0 if train.lora else linears  # frozen base weights: no weight-gradient GEMM
    if compiled:
        activation = (0.0, 0.0) if moe_layer else COMPILED_ACTIVATION_OPS
        forward = linears + ATTENTION_OPS[0] + _norms(shape) * COMPILED_NORM_OPS[0] + COMPILED_ROPE_OPS[0]
        backward = (
            linears + weight_grads + ATTENTION_OPS[1] + _norms(shape) * COMPILED_NORM_OPS[1] + COMPILED_ROPE_OPS[1]
        )
        lora = COMPILED_LORA_OPS
    else:
        activation = (0.0, 0.0) if moe_layer else (GATED_ACTIVATION_OPS if shape.gated_mlp else ACTIVATION_OPS)
        shared_inputs = max(0.0, linears - 4.0)  # q/k/v and gate/up read one input: their gradients added
        forward = linears + ATTENTION_OPS[0] + _norms(shape) * RMSNORM_OPS[0] + ROPE_OPS[0] + RESIDUAL_OPS[0]
        backward = linears + weight_grads + shared_inputs + ATTENTION_OPS[1] + _norms(shape) * RMSNORM_OPS[1]
        backward += ROPE_OPS[1] + RESIDUAL_OPS[1]
        lora = (
            (LORA_OPS[0] + LORA_DROPOUT_OPS[0], LORA_OPS[1] + LORA_DROPOUT_OPS[1]) if train.lora_dropout else LORA_OPS
        )
    return forward + activation[0] + adapted * lora[0], backward + activation[1] + adapted * lora[1]


def micro_batch_ops(shape: ModelShape, train: TrainingState, layout: Layout, compiled) -> np.ndarray:
    """Host operators of one micro-batch on the busiest pipeline stage: its layers forward, backward and, where
    recomputed, forward again (selective recompute re-runs the attention, per-op recompute every second linear),
    plus the operators around the layers. 0 for a model known by its parameter count alone."""
    if not shape.has_shapes or shape.layers <= 0:
        return np.zeros(np.shape(np.asarray(compiled)))
    stage_layers = layout.stage_layers(shape.layers)
    moe_share = shape.moe_layer_share

    def count(is_compiled: bool) -> np.ndarray:
        dense_f, dense_b = layer_ops(shape, train, is_compiled)
        moe_f, moe_b = layer_ops(shape, train, is_compiled, moe_layer=True) if moe_share else (0.0, 0.0)
        forward = (1.0 - moe_share) * dense_f + moe_share * moe_f
        backward = (1.0 - moe_share) * dense_b + moe_share * moe_b
        rc = np.asarray(layout.recompute)
        rerun = layout.recomputed_share(shape.layers) * forward
        rerun = rerun + np.where(rc == Recompute.SELECTIVE, ATTENTION_OPS[0], 0.0)
        rerun = rerun + np.where(rc == Recompute.OP, block_linears(shape) / 2.0, 0.0)
        around = COMPILED_AROUND_LAYERS_OPS if is_compiled else AROUND_LAYERS_OPS
        return stage_layers * (forward + backward + rerun) + around[0] + around[1]

    return np.where(np.asarray(compiled, bool), count(True), count(False))


def micro_batch_host_s(shape: ModelShape, train: TrainingState, layout: Layout, settings: RunSettings) -> np.ndarray:
    """Host seconds to issue one micro-batch's operators where the layout runs eager PyTorch layers (compiled under
    ``settings.compiled``): where ``settings.host_launch`` (not Transformer Engine's stack), else 0."""
    eager_stack = np.asarray(settings.host_launch, bool)
    ops = micro_batch_ops(shape, train, layout, np.asarray(settings.compiled, bool))
    return np.where(eager_stack, ops * HOST_S_PER_OP, 0.0)


def optimizer_host_s(shape: ModelShape, train: TrainingState, layout: Layout, settings: RunSettings) -> np.ndarray:
    """Host seconds of one optimizer step's multi-tensor operators on a GPU's local shard (after TP, PP and, from
    ZeRO-1, the shard): each dispatched once, each launching a kernel per ``MULTI_TENSOR_ELEMENTS_PER_LAUNCH``
    elements; where ``settings.host_launch``, and the model's shapes are known, else 0."""
    eager_stack = np.asarray(settings.host_launch, bool)
    if not shape.has_shapes:
        return np.zeros(np.shape(eager_stack))
    stage_share = layout.stage_layers(shape.layers) / max(shape.layers, 1.0)
    shard = np.where(np.asarray(layout.zero) >= 1, np.asarray(layout.shard, float), 1.0)
    local = train.trainable_params * stage_share / np.asarray(layout.tp, float) / shard
    launches = np.ceil(local / MULTI_TENSOR_ELEMENTS_PER_LAUNCH)
    ops = np.asarray(settings.optimizer_step_ops, float)
    return np.where(eager_stack, ops * (HOST_S_PER_OP + np.maximum(launches - 1.0, 0.0) * DRIVER_LAUNCH_S), 0.0)
