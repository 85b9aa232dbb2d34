"""Step time and throughput of a layout on a GPU: roofline, collectives, pipeline bubble, overlap.

Pure functions over floats or numpy arrays. Sources:
- FLOPs per token: 6 N + 12 L h s (Chowdhery et al. 2022, "PaLM", appendix B: model FLOPs); MoE
  counts active parameters. LoRA skips the frozen weights' weight-gradient matmuls: 4 N + 6 N_adapter.
  A frozen teacher adds its forward pass, 2 N_teacher.
  Full recompute adds one forward pass (2 N + 4 L h s; Korthikanti et al. 2022, section 5: 6PD -> 8PD);
  selective recompute re-runs the attention core only (4 L h s).
- Roofline (Williams et al. 2009): a micro-batch takes max(FLOPs / (peak x efficiency), HBM bytes /
  bandwidth). HBM bytes: weights read three times (forward, data gradient, weight gradient), gradient
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
- Overlap: exposed data-parallel time = max(0, comm - overlap x compute it can hide behind).
  Per-micro-batch collectives hide behind each micro-batch; the step's all-reduce only behind the
  last backward (about 2/3 of a micro-batch). Pipeline bubble: 1F1B takes (m + p - 1) micro-batch
  slots for m micro-batches (Narayanan et al. 2021, section 2.2).
- Scaling efficiency = ideal step (compute and HBM only, no communication, no bubble) / predicted
  step. An explicit efficiency for the node count replaces the derived one (seed 000's 79 % test).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constants import LAST_BACKWARD_SHARE_OF_MICRO_BATCH, QLORA_DEQUANT_SLOWDOWN
from .layout import Cluster, Layout, Recompute, RunSettings
from .shapes import ModelShape, TrainingState


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

    @property
    def tokens_per_s(self) -> np.ndarray:
        return self.tokens_per_step / self.step_s

    @property
    def scaling_efficiency(self) -> np.ndarray:
        return self.ideal_s / self.step_s

    def bound(self) -> np.ndarray:
        """Whichever of compute, HBM bandwidth or exposed communication takes longest."""
        terms = np.stack(np.broadcast_arrays(self.compute_s, self.memory_s, self.network_s))
        return np.array(["compute", "memory", "network"])[np.argmax(terms, axis=0)]


def flops_per_token(
    shape: ModelShape, train: TrainingState, seq_len: float, recompute=Recompute.NONE
) -> tuple[float, np.ndarray]:
    """(model FLOPs, hardware FLOPs) per token; model FLOPs define MFU, hardware FLOPs take time."""
    attention = 12.0 * shape.layers * shape.hidden * seq_len
    if train.lora:
        model = 4.0 * shape.active_params + 6.0 * train.trainable_params + attention
    else:
        model = 6.0 * shape.active_params + attention
    model += 2.0 * train.teacher_params
    rc = np.asarray(recompute)
    extra = np.where(
        rc == Recompute.FULL,
        2.0 * shape.active_params + attention / 3.0,
        np.where(rc == Recompute.SELECTIVE, attention / 3.0, 0.0),
    )
    return model, model + extra


def _ring(n) -> np.ndarray:
    n = np.asarray(n, float)
    return (n - 1.0) / np.maximum(n, 1.0)


def step_time(
    shape: ModelShape,
    train: TrainingState,
    hw: Cluster,
    layout: Layout,
    settings: RunSettings,
    *,
    activation_bytes_per_micro=None,
    explicit_efficiency=None,
) -> StepTime:
    """Time of one optimizer step. ``explicit_efficiency`` (nan = none) replaces the derived one."""
    nodes, g = np.asarray(hw.nodes, float), np.asarray(hw.gpus_per_node, float)
    tp, pp, dp = np.asarray(layout.tp, float), np.asarray(layout.pp, float), np.asarray(layout.dp, float)
    zero, shard = np.asarray(layout.zero), np.asarray(layout.shard, float)
    b, m = np.asarray(layout.micro_batch, float), np.asarray(layout.grad_accum, float)
    recompute = np.asarray(layout.recompute)
    s = float(settings.seq_len)
    overlap, link_efficiency = settings.overlap, settings.link_efficiency
    model_fpt, hw_fpt = flops_per_token(shape, train, s, recompute)

    # --- one micro-batch on one GPU: roofline
    # The slowest stage sets the pace: with uneven stages it holds ceil(L / p) of the L layers.
    stage_share = np.ceil(shape.layers / pp) / shape.layers if shape.layers else 1.0 / pp
    flops_mb = hw_fpt * b * s * stage_share / tp
    slowdown = QLORA_DEQUANT_SLOWDOWN if train.quantized_base else 1.0
    compute_mb = slowdown * flops_mb / (hw.peak_flops * hw.compute_efficiency)
    model_parallel = tp / stage_share
    weight_bytes = train.weights_total(shape.params) / model_parallel
    grad_bytes = train.grad_bytes * train.trainable_params / model_parallel
    teacher_bytes = 2.0 * train.teacher_params / model_parallel
    # Trained weights are read forward, for the data gradient and for the weight gradient; frozen ones
    # twice (no weight gradient); a teacher once (forward only).
    weight_reads = (2.0 if train.lora else 3.0) * (weight_bytes - teacher_bytes) + teacher_bytes
    acts = 0.0 if activation_bytes_per_micro is None else np.asarray(activation_bytes_per_micro, float)
    hbm_mb = weight_reads + 2.0 * grad_bytes + 2.0 * acts
    memory_mb = hbm_mb / hw.hbm_bytes_per_s

    # --- links: inside a node per direction, across nodes at the NIC
    intra = hw.intra_bytes_per_s / 2.0 * link_efficiency
    net = hw.network_bytes_per_s * link_efficiency
    multi_node = nodes > 1
    tp_comm_bytes = np.where(recompute == Recompute.FULL, 6.0, 4.0) * 2.0 * _ring(tp) * b * s * shape.hidden * 2.0
    tp_mb = (shape.layers * stage_share) * tp_comm_bytes / intra
    stage_spans_nodes = multi_node & (tp * dp >= g)
    pp_bw = np.where(stage_spans_nodes, net, intra)
    v = np.asarray(layout.virtual_stages, float)
    # each of the v chunks sends its activation forward and its gradient back
    pp_mb = np.where(pp > 1, v * 2.0 * b * s * shape.hidden * 2.0 / tp / pp_bw, 0.0)
    busy_mb = np.maximum(compute_mb, memory_mb)
    micro_s = busy_mb + tp_mb + pp_mb

    # --- data parallel / ZeRO traffic
    replicas = np.maximum(dp / shard, 1.0)
    shard_bw = np.where(multi_node & (tp * shard > g), net, intra)
    dp_bw = np.where(multi_node & (tp * dp > g), net, intra)
    trainable_weight_bytes = train.adapter_weight_bytes * train.trainable_params / model_parallel
    if not train.lora:
        trainable_weight_bytes = weight_bytes
    per_micro_bytes = np.where(
        zero >= 3,
        2.0 * _ring(shard) * weight_bytes + _ring(shard) * grad_bytes,
        np.where(zero == 2, _ring(shard) * grad_bytes, 0.0),
    )
    per_step_shard_bytes = np.where(zero == 2, _ring(shard) * trainable_weight_bytes, 0.0)
    allreduce_bytes = np.where(zero <= 1, 2.0 * _ring(dp) * grad_bytes, 2.0 * _ring(replicas) * grad_bytes / shard)
    allreduce_bw = np.where(zero <= 1, dp_bw, np.where(multi_node, net, intra))
    per_micro_s = per_micro_bytes / shard_bw
    per_step_s = per_step_shard_bytes / shard_bw + allreduce_bytes / allreduce_bw
    exposed = m * np.maximum(0.0, per_micro_s - overlap * busy_mb) + np.maximum(
        0.0, per_step_s - overlap * LAST_BACKWARD_SHARE_OF_MICRO_BATCH * busy_mb
    )

    # --- optimizer update: read and write the local optimizer shard, gradients and weights
    opt_shard = np.where(zero >= 1, shard, 1.0)
    update_bytes = (
        2.0
        * (
            train.optimizer_bytes
            + train.grad_bytes
            + train.adapter_weight_bytes
            + (0.0 if train.lora else train.weight_bytes)
        )
        * train.trainable_params
    )
    update_s = update_bytes / model_parallel / opt_shard / hw.hbm_bytes_per_s
    # ZeRO-Offload (Ren et al. 2021, section 4): gradients go to the CPU and updated bf16 weights come
    # back over PCIe; the CPU Adam step streams fp32 state (plus the fp32 gradient) through host memory.
    local = train.trainable_params / model_parallel / opt_shard
    offloaded_s = (
        2.0 * 2.0 * local / hw.host_link_bytes_per_s
        + 2.0 * (train.optimizer_bytes + 4.0) * local / hw.host_memory_bytes_per_s
    )
    update_s = np.where(np.asarray(layout.offload) > 0, offloaded_s, update_s)

    # interleaving v chunks per GPU shrinks the bubble to (p - 1) / v micro-batch slots
    pipeline_s = (m + (pp - 1.0) / v) * micro_s
    step_s = pipeline_s + update_s + exposed
    ideal_s = m * busy_mb + update_s
    if explicit_efficiency is not None:
        eff = np.asarray(explicit_efficiency, float)
        step_s = np.where(np.isnan(eff), step_s, ideal_s / np.where(np.isnan(eff), 1.0, eff))
    return StepTime(
        step_s=step_s,
        ideal_s=ideal_s,
        compute_s=m * compute_mb,
        memory_s=m * memory_mb,
        network_s=step_s - ideal_s - (pp - 1.0) / v * busy_mb,
        bubble_s=(pp - 1.0) / v * busy_mb,
        tokens_per_step=dp * b * m * s,
        model_flops_per_token=model_fpt,
    )
