"""Step time and throughput of a layout on a GPU: roofline, collectives, pipeline bubble, overlap.

Pure functions over floats or numpy arrays. Sources:
- FLOPs per token: 6 N + 12 L h s (Chowdhery et al. 2022, "PaLM", appendix B: model FLOPs); MoE
  counts active parameters. LoRA skips the frozen weights' weight-gradient matmuls: 4 N + 6 N_adapter.
  A frozen teacher adds its forward pass, 2 N_teacher.
  Full recompute adds one forward pass (2 N + 4 L h s; Korthikanti et al. 2022, section 5: 6PD -> 8PD);
  selective recompute re-runs the attention core only (4 L h s).
- Roofline (Williams et al. 2009): a micro-batch takes max(FLOPs / (16-bit peak x efficiency), HBM bytes /
  bandwidth); a low precision speeds up the GEMM kernels' share of the linear layers only and adds its operand
  casts (physics/precision.py). HBM bytes: weights read three times (forward, data gradient, weight gradient), gradient
  accumulation read+write, activations written in forward and read in backward.
- Collectives, per GPU, ring algorithms (Patarasuk & Yuan 2009; NCCL's bus bandwidth convention):
  all-reduce 2 (n-1)/n x bytes, reduce-scatter and all-gather (n-1)/n x bytes each. Data parallel:
  one gradient all-reduce per step (ZeRO-0/1); ZeRO-2 reduce-scatters gradients every micro-batch
  and all-gathers weights once; ZeRO-3 all-gathers weights twice (forward, backward) and
  reduce-scatters gradients every micro-batch (ZeRO paper section 7: 1.5x DP volume); hybrid
  sharding adds an all-reduce of the shard over replicas. Tensor parallel: 4 all-reduces of b s h
  per layer per micro-batch (Megatron-LM, Shoeybi et al. 2019, section 3; 6 with full recompute).
  Pipeline: the activation and its gradient cross each stage boundary once per micro-batch.
- Links: a collective inside a node runs at the intra-node bandwidth per direction (vendors quote
  NVLink bidirectional: halve it), one that spans nodes at the per-GPU network bandwidth, both
  times an achieved-bandwidth efficiency.
- Optimizer offload: PCIe transfers of gradients and weights plus a CPU Adam step bound by host
  memory bandwidth replace the GPU update (ZeRO-Offload, Ren et al. 2021); not overlapped.
- Activation offload: the offloaded saved tensors cross PCIe twice per micro-batch (to the CPU in
  forward, back in backward) on a side stream that overlaps compute (torchtune OffloadActivations,
  use_streams); only the transfer time beyond the micro-batch's compute is exposed. torchtune's flags
  table measures -0.1 % tokens/s for Llama 3.2 3B on an A100, where the transfer hides entirely.
- Overlap: exposed data-parallel time = max(0, comm - overlap x compute it can hide behind). Per-micro-batch
  collectives hide behind each micro-batch; the step's all-reduce only behind the last backward (about 2/3 of a
  micro-batch). Pipeline bubble: 1F1B takes (m + p - 1) micro-batch slots for m (Narayanan et al. 2021, section 2.2).
- Host floor: an eager PyTorch micro-batch takes max(GPU busy, the host's to issue it) (physics/host_launch.py).
- Scaling efficiency = ideal step (compute and HBM only, no communication, no bubble) / predicted
  step. An explicit efficiency for the node count replaces the derived one (seed 000's 79 % test).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .adapters import lora_bytes_per_token
from .attention import (
    attention_flops_per_token,
    attention_flops_share,
    attention_hw_flops_per_token,
)
from .constants import (
    CAST_HBM_EFFICIENCY,
    LAST_BACKWARD_SHARE_OF_MICRO_BATCH,
    QLORA_DEQUANT_BYTES_PER_PARAM,
    QLORA_DEQUANT_PASSES,
)
from .context_parallel import context_parallel_s
from .eager_attention import eager_attention_s
from .fsdp_memory import skips_gradient_sync
from .gemm import dense_time_factor
from .host_launch import micro_batch_host_s, optimizer_host_s
from .layout import Cluster, Layout, Recompute, RunSettings
from .links import Links, ring
from .loss_time import loss_s
from .moe import (
    ExpertExchange,
    active_expert_share,
    by_dispatcher,
    ep_spans_nodes,
    exchange_exposed_s,
    expert_loop_s,
    expert_tokens,
    grouped_gemm_factor,
    host_s_per_moe_layer,
    moe_elementwise_bytes_per_token,
)
from .pipeline import bubble_slots
from .precision import Split, cast_bytes_per_token
from .recompute_modules import DEFAULT_RECOMPUTE_MODULES, rerun_bytes, rerun_flops_per_token
from .shapes import ModelShape, TrainingState
from .zero3_hooks import module_fetch_s

# what a step is bound by, in the order ties go: host is the waits for the host (MoE kernel launches, the eager
# experts loop), which a faster GPU does not shorten
_BOUNDS = ("compute", "memory", "network", "host")


@dataclass
class StepTime:
    step_s: np.ndarray
    ideal_s: np.ndarray
    compute_s: np.ndarray  # matmul time, whole step
    memory_s: np.ndarray  # HBM time, whole step
    network_s: np.ndarray  # exposed communication, whole step
    bubble_s: np.ndarray
    tokens_per_step: np.ndarray
    model_flops_per_token: float
    all_to_all_s: np.ndarray | float = 0.0  # exposed expert all-to-all, whole step (part of network_s)
    moe_host_s: np.ndarray | float = 0.0  # host launch waits of the MoE layers, whole step (part of ideal_s)
    dequant_s: np.ndarray | float = 0.0  # QLoRA's NF4 dequantisation kernels, whole step (part of ideal_s)
    cast_s: np.ndarray | float = 0.0  # a low precision's operand casts, whole step (part of ideal_s)
    adapter_s: np.ndarray | float = 0.0  # LoRA's low-rank branches, whole step (part of ideal_s)
    expert_loop_s: np.ndarray | float = 0.0  # transformers' eager experts loop, whole step (part of ideal_s)
    module_fetch_s: np.ndarray | float = 0.0  # DeepSpeed ZeRO-3's per-module fetches, whole step (part of ideal_s)
    eager_attention_s: np.ndarray | float = 0.0  # eager attention's score kernels, whole step (part of ideal_s)
    loss_s: np.ndarray | float = 0.0  # the loss's kernels over the logits, whole step (part of ideal_s)
    update_s: np.ndarray | float = 0.0  # the optimizer step (part of ideal_s)
    launch_host_s: np.ndarray | float = 0.0  # issuing eager operators beyond the GPU's busy time (part of ideal_s)
    launch_total_s: np.ndarray | float = 0.0  # issuing them, all of it, whole step (physics/host_launch.py)

    @property
    def tokens_per_s(self) -> np.ndarray:
        return self.tokens_per_step / self.step_s

    def faster(self, factor: np.ndarray | float) -> StepTime:
        """Every part of the step ``factor`` times faster (a measurement's correction: the whole step runs
        as measured, its parts in the proportions the model gives them)."""
        times = ("step_s", "ideal_s", "compute_s", "memory_s", "network_s", "bubble_s")
        parts: tuple[str, ...] = ("all_to_all_s", "moe_host_s", "dequant_s", "cast_s", "adapter_s", "expert_loop_s")
        parts += ("module_fetch_s", "eager_attention_s", "loss_s", "update_s", "launch_host_s", "launch_total_s")
        return replace(self, **{name: getattr(self, name) / factor for name in times + parts})

    @property
    def scaling_efficiency(self) -> np.ndarray:
        return self.ideal_s / self.step_s

    @property
    def host_s(self) -> np.ndarray | float:
        """The step's waits for the host: the MoE layers' launches, transformers' eager experts loop, DeepSpeed
        ZeRO-3's per-module fetches and, where issuing the eager operators outlasts the GPU's work, all of it."""
        launch_s = np.where(np.asarray(self.launch_host_s) > 0, self.launch_total_s, 0.0)
        return self.moe_host_s + self.expert_loop_s + self.module_fetch_s + launch_s

    def bound(self) -> np.ndarray:
        """Whichever of compute, HBM bandwidth, exposed communication or the host's waits takes longest."""
        terms = np.stack(np.broadcast_arrays(self.compute_s, self.memory_s, self.network_s, self.host_s))
        return np.array(_BOUNDS)[np.argmax(terms, axis=0)]

    def bound_at(self, i: int) -> str:
        """``bound()`` of row i alone: a plan reads one row of a table of thousands (the whole array per
        plan took 6 of the 8.5 s spent turning a 5,000-job schedule into plans)."""
        shape = np.shape(self.step_s)
        parts = (self.compute_s, self.memory_s, self.network_s, self.host_s)
        terms = [float(np.broadcast_to(x, shape)[i]) for x in parts]
        return _BOUNDS[int(np.argmax(terms))]  # the first of equal ones, as bound()


def flops_per_token(
    shape: ModelShape,
    train: TrainingState,
    seq_len: float,
    recompute=Recompute.NONE,
    recomputed_share=None,
    recompute_modules: frozenset[str] = DEFAULT_RECOMPUTE_MODULES,
) -> tuple[float, np.ndarray]:
    """(model FLOPs, hardware FLOPs) per token; model FLOPs define MFU, hardware FLOPs take time.

    The attention term is 12 L (heads x head_dim) s: the score and value matmuls run at the attention
    width, not the hidden size (Qwen3-30B-A3B: 32 x 128 = 4096 vs hidden 2048; Gemma 2 9B: 16 x 256 =
    4096 vs 3584), as torchtitan's ``get_dense_model_nparams_and_flops`` counts it. FlopCounterMode over
    forward + backward (tests/validation/test_torch_accounting.py) counts 14 L q s for SDPA's flash kernel (its
    backward re-computes the scores), which the model-FLOPs convention leaves out."""
    attention = attention_flops_per_token(shape, seq_len)
    if train.lora:
        model = 4.0 * shape.active_params + 6.0 * train.trainable_params + attention
    else:
        model = 6.0 * shape.active_params + attention
    model += 2.0 * train.teacher_params
    rc = np.asarray(recompute)
    # Full recompute of a share of the layers (``recomputed_share``; None: all) re-runs that share's forward.
    share = np.where(rc == Recompute.FULL, 1.0, 0.0) if recomputed_share is None else np.asarray(recomputed_share)
    extra = share * (2.0 * shape.active_params + attention / 3.0)
    # selective recompute re-runs its modules' forward (physics/recompute_modules.py; Megatron-Core's default: the
    # attention core)
    selective = (attention / 3.0 if "core_attn" in recompute_modules else 0.0) + rerun_flops_per_token(
        shape, recompute_modules
    )
    extra = extra + np.where(rc == Recompute.SELECTIVE, selective, 0.0)
    extra = extra + np.where(rc == Recompute.OP, op_recompute_flops_per_token(shape), 0.0)
    return model, model + extra


def op_recompute_flops_per_token(shape: ModelShape) -> float:
    """Forward FLOPs per token that per-op selective checkpointing re-runs (torchtitan's SelectiveAC: every
    second matmul of a block, physics/memory.op_saved_bytes_per_token): the key and output projections and the
    MLP's second matmul (gated: up, else down), 2 (h k + q h + h f) per layer; an MoE layer's experts are saved,
    so there only the attention's two. Attention (SDPA saved) and element-wise ops' time are not counted."""
    h, q, k, f = shape.hidden, shape.q_width, shape.kv_width, shape.ffn_active
    mlp_share = 1.0 - (shape.moe_layer_share if shape.experts else 0.0)
    return 2.0 * shape.layers * (h * k + q * h + mlp_share * h * f)


def _peak16(hw: Cluster) -> np.ndarray:
    """The 16-bit dense peak (the attention kernels' rate, and the one the efficiency is a share of)."""
    peak = np.asarray(hw.peak_flops, float)
    if hw.attention_peak_flops is None:
        return peak
    peak16 = np.asarray(hw.attention_peak_flops, float)
    return np.where(np.isfinite(peak16) & (peak16 > 0), peak16, peak)


@dataclass(frozen=True)
class _MicroBatch:
    """One micro-batch on one GPU of the slowest stage: roofline terms and the bytes it owns."""

    compute_s: np.ndarray
    memory_s: np.ndarray
    stage_share: np.ndarray  # share of the layers on the busiest stage
    weight_bytes: np.ndarray  # per GPU, after TP and PP
    grad_bytes: np.ndarray
    moe_elementwise_s: np.ndarray | float = 0.0  # MoE permutation and activation kernels, not overlapped
    moe_host_s: np.ndarray | float = 0.0  # host launch time of the MoE layers the GPU waits for
    expert_weight_bytes: np.ndarray | float = 0.0  # the routed experts' part of weight_bytes (after EP)
    expert_grad_bytes: np.ndarray | float = 0.0  # the routed experts' part of grad_bytes
    dequant_s: np.ndarray | float = 0.0  # QLoRA's NF4 -> bf16 dequantisation kernels, not overlapped
    cast_s: np.ndarray | float = 0.0  # a low precision's operand casts (physics/precision.py), not overlapped
    adapter_s: np.ndarray | float = 0.0  # LoRA's low-rank branches (physics/adapters.py), not overlapped
    expert_loop_s: np.ndarray | float = 0.0  # transformers' eager experts loop (physics/moe.py), not overlapped
    module_fetch_s: np.ndarray | float = 0.0  # ZeRO-3's per-module fetches (physics/zero3_hooks.py), not overlapped
    eager_attention_s: np.ndarray | float = 0.0  # the materialised scores' kernels (physics/eager_attention.py)
    loss_s: np.ndarray | float = 0.0  # the loss's kernels over the logits (physics/loss_time.py)
    launch_host_s: np.ndarray | float = 0.0  # the host's time to issue the eager operators (physics/host_launch.py)

    @property
    def busy_s(self) -> np.ndarray:
        host = self.moe_host_s + self.expert_loop_s + self.module_fetch_s  # the waits for the host (StepTime.host_s)
        serial = self.moe_elementwise_s + host + self.dequant_s + self.cast_s + self.adapter_s + self.eager_attention_s
        serial = serial + self.loss_s
        # the GPU runs behind the host: the longer of its work and the host's to issue the operators
        return np.maximum(np.maximum(self.compute_s, self.memory_s) + serial, self.launch_host_s)


def _micro_batch(
    shape,
    train,
    hw: Cluster,
    layout: Layout,
    seq_len: float,
    hw_flops_per_token,
    acts,
    attention_efficiency,
    dispatcher: str = "alltoall",
    host_s_per_layer: float = 0.0,
    ep_spans=False,
    recompute_modules: frozenset[str] = DEFAULT_RECOMPUTE_MODULES,
) -> _MicroBatch:
    """Roofline of one micro-batch: max(FLOPs / (peak x efficiency), HBM bytes / bandwidth), attention apart."""
    tp, pp = np.asarray(layout.tp, float), np.asarray(layout.pp, float)
    b = np.asarray(layout.micro_batch, float)
    # The slowest stage sets the pace: with uneven stages it holds ceil(L / p) of the L layers.
    stage_share = np.ceil(shape.layers / pp) / shape.layers if shape.layers else 1.0 / pp
    # Context parallelism: each of cp ranks runs 1 / cp of the sequence's tokens and, with the causal
    # load balancing of Megatron-Core and torchtitan (2 cp chunks per sequence), 1 / cp of its attention.
    cp = np.asarray(layout.cp, float)
    tokens = b * seq_len * stage_share / tp / cp
    # FlashAttention's score and value matmuls run in 16-bit even in FP8 training (Transformer Engine's
    # default; torchtitan's float8 converts linear layers only), so they take the 16-bit peak.
    attention = attention_hw_flops_per_token(shape, seq_len, layout, "core_attn" in recompute_modules)
    peak16 = _peak16(hw)
    linear = hw_flops_per_token - attention
    expert = linear * active_expert_share(shape)
    # A low precision speeds up the GEMM kernels' share of the linear layers' 16-bit time only, and adds the
    # casts of their operands (physics/precision.py).
    split = Split.of(shape, tp, hw.compute_efficiency, np.asarray(hw.peak_flops, float) / peak16)
    routed = expert_tokens(layout, b * seq_len / cp)
    grouped = grouped_gemm_factor(shape, hw, layout, routed)
    # the 16-bit grouped-GEMM rate for the rest of the experts' time: the same one unless a layout runs faster
    grouped16 = (
        grouped_gemm_factor(shape, replace(hw, peak_flops=peak16), layout, routed)
        if shape.experts and np.any(split.low_precision)
        else grouped
    )
    phi = split.gemm_share
    expert_factor = phi / (split.expert_speedup * grouped) + (1.0 - phi) / grouped16
    # the dense GEMMs at the micro-batch's tokens per rank, each precision at its own rate (physics/gemm.py)
    dense = dense_time_factor(split, shape, tp, b * seq_len / cp, weight_gradient=not train.lora)
    compute_s = tokens * (
        ((linear - expert) * dense + expert * expert_factor) / (peak16 * hw.compute_efficiency)
        + attention / (peak16 * attention_efficiency)
    )
    cast_s = np.where(
        split.low_precision,
        tokens * cast_bytes_per_token(shape) / (np.asarray(hw.hbm_bytes_per_s, float) * CAST_HBM_EFFICIENCY),
        0.0,
    )
    # LoRA's branches beside each adapted linear run at HBM bandwidth (physics/adapters.py)
    adapter_bytes = lora_bytes_per_token(
        shape, train.lora_targets, layout.recomputed_share(shape.layers), train.lora_adapter_bytes, train.lora_dropout
    )
    adapter_s = tokens * adapter_bytes / (np.asarray(hw.hbm_bytes_per_s, float) * CAST_HBM_EFFICIENCY)
    model_parallel = tp / stage_share
    # Expert parallelism keeps 1 / (ep x etp) of the routed experts on each rank (frozen under LoRA).
    expert_parallel = np.asarray(layout.ep, float) * layout.expert_tp / stage_share
    expert_weights = shape.expert_share * shape.params * train.weight_bytes
    weight_bytes = (
        train.weights_total(shape.params) - expert_weights
    ) / model_parallel + expert_weights / expert_parallel
    expert_grads = 0.0 if train.lora else shape.expert_share * train.grad_bytes * train.trainable_params
    grad_bytes = (
        train.grad_bytes * train.trainable_params - expert_grads
    ) / model_parallel + expert_grads / expert_parallel
    teacher_bytes = 2.0 * train.teacher_params / model_parallel
    # Trained weights are read forward, for the data gradient and for the weight gradient; frozen ones
    # twice (no weight gradient); a teacher once (forward only).
    weight_reads = (2.0 if train.lora else 3.0) * (weight_bytes - teacher_bytes) + teacher_bytes
    acts = (0.0 if acts is None else np.asarray(acts, float)) + rerun_bytes(shape, layout, tokens, recompute_modules)
    memory_s = (weight_reads + 2.0 * grad_bytes + 2.0 * acts) / hw.hbm_bytes_per_s
    moe_bytes = by_dispatcher(dispatcher, ep_spans, lambda d: moe_elementwise_bytes_per_token(shape, d))
    moe_s = tokens * moe_bytes / np.asarray(hw.hbm_bytes_per_s, float)
    # The stage's MoE layers each wait for the host once per micro-batch (physics/constants.py).
    host_s = host_s_per_layer * np.ceil(shape.layers * stage_share) * shape.moe_layer_share if shape.experts else 0.0
    dequant_s = 0.0
    if train.quantized_base:  # the stage's NF4 weights, after TP and EP, dequantised every pass
        quantized = shape.params - train.bf16_base_params - shape.expert_share * shape.params
        per_gpu = quantized / model_parallel + shape.expert_share * shape.params / expert_parallel
        passes = QLORA_DEQUANT_PASSES + layout.recomputed_share(shape.layers)
        dequant_s = passes * per_gpu * QLORA_DEQUANT_BYTES_PER_PARAM / np.asarray(hw.hbm_bytes_per_s, float)
    return _MicroBatch(
        compute_s,
        memory_s,
        np.asarray(stage_share, float),
        weight_bytes,
        grad_bytes,
        moe_s,
        host_s,
        expert_weights / expert_parallel,
        expert_grads / expert_parallel,
        dequant_s,
        cast_s,
        adapter_s,
    )


def _model_parallel_s(
    shape,
    hw: Cluster,
    layout: Layout,
    seq_len: float,
    mb: _MicroBatch,
    links: Links,
    exchange: ExpertExchange = ExpertExchange(),
    cp_exchange: str = "ring",
):
    """TP all-reduces and PP sends of one micro-batch (not overlapped); the context-parallel exchange
    (physics/context_parallel.py); the expert all-to-alls, of which
    ``exchange.overlap`` hides behind compute, never more than the micro-batch's own compute (Megatron-Core's
    ``--overlap-moe-expert-parallel-comm`` and DualPipe hide one micro-batch's all-to-all behind another's
    compute)."""
    tp, pp, dp = np.asarray(layout.tp, float), np.asarray(layout.pp, float), np.asarray(layout.dp, float)
    cp = np.asarray(layout.cp, float)
    b = np.asarray(layout.micro_batch, float)
    tokens = b * seq_len / cp  # per rank: context parallelism splits each sequence
    recomputed = layout.recomputed_share(shape.layers)  # a recomputed layer's forward all-reduces again
    tp_bytes = (4.0 + 2.0 * recomputed) * 2.0 * ring(tp) * tokens * shape.hidden * 2.0
    layers, g = shape.layers * mb.stage_share, np.asarray(hw.gpus_per_node, float)
    tp_s = layers * tp_bytes / links.spanning(tp, g)  # NVLink, or the network where a hand-picked TP spans nodes
    stage_spans_nodes = links.multi_node & (tp * cp * dp >= g)
    pp_bw = np.where(stage_spans_nodes, links.net, links.intra)
    v = np.asarray(layout.virtual_stages, float)
    # each of the v chunks sends its activation forward and its gradient back
    pp_s = np.where(pp > 1, v * 2.0 * tokens * shape.hidden * 2.0 / tp / pp_bw, 0.0)
    return (
        tp_s
        + pp_s
        + context_parallel_s(
            shape, layout, tokens, layers, links, g, attention_flops_share(shape, seq_len) * mb.compute_s, cp_exchange
        )
        + exchange_exposed_s(shape, layout, tokens, layers, mb.compute_s, links, g, exchange)
    )


def _data_parallel_exposed_s(
    train, hw: Cluster, layout: Layout, mb: _MicroBatch, links: Links, overlap: float, zero3_per_step=False
):
    """ZeRO / data-parallel traffic left over after hiding behind compute. Gradients are reduced over every
    rank that holds the same weights: the data-parallel and the context-parallel ranks for dense weights;
    for routed experts split over ep x etp ranks, the expert-data-parallel ranks (Megatron-Core MoE's
    expert data parallel group; FSDP2 over EP's remaining ranks, torchtitan and NeMo AutoModel), ep x etp
    ranks apart, so fewer of them share a node and a NIC.

    ZeRO-3 under gradient accumulation (m micro-batches per step), two schedules (``zero3_per_step``):
    per micro-batch (FSDP2's default, reshard_after_forward=True: every micro-batch all-gathers the
    weights for forward and again for backward and reduce-scatters its gradients; ZeRO paper section 7:
    1.5x the data-parallel volume, m times), or once per step (weights held unsharded and gradients
    accumulated unsharded over the step: torch.distributed.pipelining's ``backward_maybe_with_nosync``
    sets ``set_reshard_after_backward(False)`` and ``set_requires_gradient_sync(False)`` and reduces after
    the last micro-batch; torchtitan keeps reshard_after_forward False under PP; NeMo AutoModel's
    ``enable_fsdp_optimizations`` does both without PP). The step's all-gather hides behind the first
    micro-batch's forward (a third of it), its reduce-scatter behind the last backward (two thirds). A loop that
    skips FSDP2's gradient sync on all but the last micro-batch (``job.gradient_accumulator: unsharded``) gathers
    per micro-batch and reduce-scatters once, behind the last backward."""
    tp = np.asarray(layout.tp, float)
    dp = np.asarray(layout.dp, float) * np.asarray(layout.cp, float)
    zero, shard = np.asarray(layout.zero), np.asarray(layout.shard, float)
    m = np.asarray(layout.grad_accum, float)
    g = np.asarray(hw.gpus_per_node, float)
    expert_split = np.asarray(layout.ep, float) * layout.expert_tp
    expert_w, expert_g = np.asarray(mb.expert_weight_bytes, float), np.asarray(mb.expert_grad_bytes, float)
    dense_w, dense_g = mb.weight_bytes - expert_w, mb.grad_bytes - expert_g
    replicas = np.maximum(dp / shard, 1.0)
    # ZeRO shards the dense weights over tp x shard consecutive ranks (every tp-th one), the experts over
    # the shard x tp / (ep x etp) expert-data-parallel ranks that hold the same experts.
    expert_shard = np.maximum(1.0, shard * tp / expert_split)
    shard_bw = links.spanning(tp * shard, g, tp)
    expert_shard_bw = links.spanning(expert_split * expert_shard, g, expert_split)
    trainable_weight_bytes = mb.weight_bytes
    if train.lora:
        trainable_weight_bytes = train.adapter_weight_bytes * train.trainable_params * mb.stage_share / tp

    def over_shards_s(dense_bytes, expert_bytes) -> np.ndarray:
        """Seconds of a ring all-gather or reduce-scatter of ``dense_bytes`` over the ZeRO shard group and
        ``expert_bytes`` over the experts' own."""
        return ring(shard) * dense_bytes / shard_bw + ring(expert_shard) * expert_bytes / expert_shard_bw

    def gathers_s(weight_copies: float, grad_copies: float) -> np.ndarray:
        """Seconds of ZeRO-3 all-gathers (``weight_copies`` of the weights) and reduce-scatters (of the
        gradients, ``grad_copies``), frozen weights included (LoRA gathers its base weights too)."""
        return over_shards_s(
            weight_copies * dense_w + grad_copies * dense_g, weight_copies * expert_w + grad_copies * expert_g
        )

    per_step_held = np.asarray(zero3_per_step, bool) & (zero >= 3)
    # FSDP2 without gradient sync on every micro-batch but the last (job.gradient_accumulator "unsharded",
    # physics/fsdp_memory.py): each micro-batch gathers the weights twice, the gradients are reduce-scattered once,
    # behind the last backward (FSDPParamGroup.post_backward returns before reducing while reduce_grads is False)
    unsynced = skips_gradient_sync(train, layout) & ~per_step_held
    zero3_micro_s = np.where(unsynced, gathers_s(2.0, 0.0), gathers_s(2.0, 1.0))
    zero2_micro_s = over_shards_s(dense_g, expert_g)
    per_micro_s = np.where((zero >= 3) & ~per_step_held, zero3_micro_s, np.where(zero == 2, zero2_micro_s, 0.0))
    # ZeRO-2 all-gathers the updated weights once a step, the experts' over their shard group (frozen under LoRA)
    trained_expert_w = 0.0 if train.lora else expert_w
    per_step_shard_s = np.where(
        zero == 2, over_shards_s(trainable_weight_bytes - trained_expert_w, trained_expert_w), 0.0
    )
    dp_bw = links.spanning(tp * dp, g, tp)
    expert_dp = np.maximum(1.0, dp * tp / expert_split)
    expert_dp_bw = links.spanning(expert_split * expert_dp, g, expert_split)
    # hybrid sharding all-reduces each rank's gradient shard over the ranks holding the same one: 1 / shard of the
    # dense gradients over the replicas, 1 / expert_shard of the experts' over expert_dp / expert_shard ranks (FSDP2
    # over the ranks EP leaves, replicated as the dense weights are: torchtitan's dp_shard_mod_ep, AutoModel's ep_shard)
    expert_replicas = np.maximum(1.0, expert_dp / expert_shard)
    hybrid_s = 2.0 * ring(replicas) * dense_g / shard / links.spanning(tp * dp, g, tp * shard)
    expert_replica_bw = links.spanning(tp * dp, g, expert_split * expert_shard)
    hybrid_s += 2.0 * ring(expert_replicas) * expert_g / expert_shard / expert_replica_bw
    allreduce_s = np.where(
        zero <= 1, 2.0 * ring(dp) * dense_g / dp_bw + 2.0 * ring(expert_dp) * expert_g / expert_dp_bw, hybrid_s
    )
    per_step_s = per_step_shard_s + allreduce_s
    busy = mb.busy_s
    held_gather_s = np.where(per_step_held, gathers_s(1.0, 0.0), 0.0)
    held_reduce_s = np.where(per_step_held | unsynced, gathers_s(0.0, 1.0), 0.0)
    return (
        m * np.maximum(0.0, per_micro_s - overlap * busy)
        + np.maximum(0.0, held_gather_s - overlap * (1.0 - LAST_BACKWARD_SHARE_OF_MICRO_BATCH) * busy)
        + np.maximum(0.0, per_step_s + held_reduce_s - overlap * LAST_BACKWARD_SHARE_OF_MICRO_BATCH * busy)
    )


def _update_s(train, hw: Cluster, layout: Layout, mb: _MicroBatch):
    """The optimizer step: on the GPU, read and write the local shard of state, gradients and weights;
    offloaded (ZeRO-Offload, Ren et al. 2021, section 4), gradients go to the CPU and updated bf16
    weights come back over PCIe while the CPU Adam step streams fp32 state (and the fp32 gradient)
    through host memory."""
    zero, shard = np.asarray(layout.zero), np.asarray(layout.shard, float)
    model_parallel = np.asarray(layout.tp, float) / mb.stage_share
    opt_shard = np.where(zero >= 1, shard, 1.0)
    per_param = (
        train.optimizer_bytes_at(zero)
        + train.grad_bytes
        + train.adapter_weight_bytes
        + (0.0 if train.lora else train.weight_bytes)
    )
    on_gpu_s = 2.0 * per_param * train.trainable_params / model_parallel / opt_shard / hw.hbm_bytes_per_s
    on_gpu_s = on_gpu_s * train.update_traffic_ratio  # a foreach step's passes (physics/optimizer_step.py)
    local = train.trainable_params / model_parallel / opt_shard
    offloaded_s = (
        2.0 * 2.0 * local / hw.host_link_bytes_per_s
        + 2.0 * (train.optimizer_bytes + 4.0) * local / hw.host_memory_bytes_per_s
    )
    return np.where(np.asarray(layout.offload) > 0, offloaded_s, on_gpu_s)


def _activation_offload_exposed_s(hw: Cluster, mb: _MicroBatch, offloaded_bytes) -> np.ndarray:
    """PCIe time of offloaded activations (out in forward, back in backward) not hidden behind compute."""
    transfer_s = 2.0 * np.asarray(offloaded_bytes, float) / hw.host_link_bytes_per_s
    return np.maximum(0.0, transfer_s - mb.busy_s)


def _serial_terms(mb: _MicroBatch, shape, train, hbm_bytes_per_s, layout: Layout, settings: RunSettings):
    """The micro-batch with the kernels and waits its roofline leaves out, each where the run has it: transformers'
    eager experts loop, ZeRO-3's per-module fetches, eager attention's scores, the loss and the host's floor."""
    s, stage_layers = float(settings.seq_len), np.ceil(shape.layers * mb.stage_share)
    if shape.experts and (np.any(settings.expert_loop) or np.any(settings.zero3_module_fetch)):
        dispatched = expert_tokens(layout, np.asarray(layout.micro_batch, float) * s / np.asarray(layout.cp, float))
        loop = expert_loop_s(shape, layout, dispatched, stage_layers, settings.expert_loop, settings.zero3_module_fetch)
        mb = replace(mb, expert_loop_s=loop)
    if np.any(settings.zero3_module_fetch):
        mb = replace(mb, module_fetch_s=module_fetch_s(shape, train, layout, stage_layers, settings.zero3_module_fetch))
    if settings.eager_attention:  # the s x s scores in HBM (physics/eager_attention.py)
        mb = replace(mb, eager_attention_s=eager_attention_s(shape, hbm_bytes_per_s, layout, s, mb.stage_share))
    if shape.vocab and np.any(settings.loss_traffic_bytes_per_logit):  # the cross-entropy (physics/loss_time.py)
        mb = replace(mb, loss_s=loss_s(shape, hbm_bytes_per_s, layout, settings) * mb.stage_share)
    if np.any(settings.host_launch):  # the host's floor under eager PyTorch (physics/host_launch.py)
        mb = replace(mb, launch_host_s=micro_batch_host_s(shape, train, layout, settings))
    return mb


def step_time(
    shape: ModelShape,
    train: TrainingState,
    hw: Cluster,
    layout: Layout,
    settings: RunSettings,
    *,
    activation_bytes_per_micro=None,
    explicit_efficiency=None,
    offloaded_bytes_per_micro=None,
    zero3_per_step=False,
    moe_routing: str = "topk",
) -> StepTime:
    """Time of one optimizer step. ``explicit_efficiency`` (nan = none) replaces the derived one; ``moe_routing``
    how the router picks a token's experts (physics/moe.py MOE_ROUTINGS)."""
    s = float(settings.seq_len)
    recompute = (np.asarray(layout.recompute), layout.recomputed_share(shape.layers), settings.recompute_modules)
    model_fpt, hw_fpt = flops_per_token(shape, train, s, *recompute)
    links = Links.of(hw, settings.link_efficiency)
    # Transformer Engine's fused layers where the layout's framework runs them, else torch.compile's fusion (a
    # ratio of 1 where the job does not compile)
    fused = np.asarray(settings.fused_framework, bool)
    ratio = np.where(fused, hw.fused_efficiency_ratio, hw.compiled_efficiency_ratio)
    if np.any(ratio != 1.0):
        hw = replace(hw, compute_efficiency=np.asarray(hw.compute_efficiency, float) * ratio)
    # attention at its kernels' own efficiency (Transformer Engine's under its framework), else the matmuls'
    attention = np.where(fused, hw.attention_efficiency_fused, hw.attention_efficiency_eager)
    attention = np.where(np.isfinite(attention), attention, hw.compute_efficiency)
    mb = _micro_batch(
        shape,
        train,
        hw,
        layout,
        s,
        hw_fpt,
        activation_bytes_per_micro,
        attention,
        settings.moe_dispatcher,
        host_s_per_moe_layer(shape, layout, settings),
        ep_spans_nodes(layout, links, np.asarray(hw.gpus_per_node, float)),
        settings.recompute_modules,
    )
    g32 = np.asarray(settings.reduce_per_grad_byte, float)  # an fp32 reduce: twice the traffic (job.gradient_dtype)
    mb = replace(mb, grad_bytes=mb.grad_bytes * g32, expert_grad_bytes=np.asarray(mb.expert_grad_bytes) * g32)
    mb = _serial_terms(mb, shape, train, hw.hbm_bytes_per_s, layout, settings)
    exchange = ExpertExchange(settings.moe_dispatcher, moe_routing, settings.moe_overlap)
    micro_s = mb.busy_s + _model_parallel_s(shape, hw, layout, s, mb, links, exchange, settings.context_parallel)
    if offloaded_bytes_per_micro is not None:
        micro_s = micro_s + _activation_offload_exposed_s(hw, mb, offloaded_bytes_per_micro)
    exposed = _data_parallel_exposed_s(train, hw, layout, mb, links, settings.overlap, zero3_per_step)
    update_s = _update_s(train, hw, layout, mb)
    update_host_s = optimizer_host_s(shape, train, layout, settings) if np.any(settings.host_launch) else 0.0
    launch_exposed_s = np.maximum(0.0, update_host_s - update_s)  # the step's own launches beyond its kernels

    pp, m = np.asarray(layout.pp, float), np.asarray(layout.grad_accum, float)
    v = np.asarray(layout.virtual_stages, float)
    bubble = bubble_slots(pp, v)  # 1F1B's m + (p - 1) / v micro-batch slots (physics/pipeline.py)
    slots = m + bubble
    bubble_s = bubble * mb.busy_s
    step_s = slots * micro_s + update_s + launch_exposed_s + exposed
    tokens = np.asarray(layout.micro_batch, float) * s / np.asarray(layout.cp, float)
    g = np.asarray(hw.gpus_per_node, float)
    a2a_s = slots * exchange_exposed_s(
        shape, layout, tokens, shape.layers * mb.stage_share, mb.compute_s, links, g, exchange
    )
    ideal_s = m * mb.busy_s + update_s + launch_exposed_s
    if explicit_efficiency is not None:
        eff = np.asarray(explicit_efficiency, float)
        step_s = np.where(np.isnan(eff), step_s, ideal_s / np.where(np.isnan(eff), 1.0, eff))
    return StepTime(
        step_s=step_s,
        ideal_s=ideal_s,
        compute_s=m * mb.compute_s,
        memory_s=m * mb.memory_s,
        network_s=step_s - ideal_s - bubble_s,
        bubble_s=bubble_s,
        tokens_per_step=np.asarray(layout.dp, float) * np.asarray(layout.micro_batch, float) * m * s,
        model_flops_per_token=model_fpt,
        all_to_all_s=a2a_s,
        moe_host_s=slots * np.asarray(mb.moe_host_s, float),
        dequant_s=slots * np.asarray(mb.dequant_s, float),
        cast_s=slots * np.asarray(mb.cast_s, float),
        adapter_s=slots * np.asarray(mb.adapter_s, float),
        expert_loop_s=slots * np.asarray(mb.expert_loop_s, float),
        module_fetch_s=slots * np.asarray(mb.module_fetch_s, float),
        eager_attention_s=slots * np.asarray(mb.eager_attention_s, float),
        loss_s=slots * np.asarray(mb.loss_s, float),
        update_s=update_s,
        launch_host_s=slots * (mb.busy_s - replace(mb, launch_host_s=0.0).busy_s) + launch_exposed_s,
        launch_total_s=slots * np.asarray(mb.launch_host_s, float) + update_host_s,
    )
