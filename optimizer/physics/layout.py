"""How a job is laid out on its GPUs, as one typed struct the memory and time formulas share.

``Layout`` is a struct of arrays: each field is an integer numpy array (or a scalar), one entry per
layout, so the candidate table evaluates a million layouts with the same code ``check`` runs on one.
Adding a parallel dimension means adding a field here and reading it in the formulas that use it.
``Cluster`` is the hardware side of the same rows; ``RunSettings`` the job-wide numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any

import numpy as np

from .constants import HOST_LINK_GB_PER_S_PER_GPU, HOST_MEMORY_GB_PER_S_PER_GPU

Ints = int | np.ndarray
Floats = float | np.ndarray


class Recompute(IntEnum):
    """Activation recomputation (Korthikanti et al. 2022, section 5)."""

    NONE = 0
    SELECTIVE = 1  # attention core only
    FULL = 2  # every layer re-runs its forward pass in backward
    OP = 3  # per-op selective (torchtitan's SAC): every block keeps its matmuls' outputs but every second one

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> Recompute:
        return cls[label.upper()]

    @classmethod
    def parse(cls, label: str) -> tuple[Recompute, int]:
        """'none', 'selective', 'full' (every layer: 0 layers named) or 'layers:N' (full recompute of N layers of
        each pipeline stage) as (kind, layers)."""
        kind, _, count = label.partition(":")
        if kind.lower() == "layers":
            return cls.FULL, int(count)
        return cls.from_label(label), 0


# A strategy grid's recompute_layers under full recompute: the fewest layers that fit (resolved per layout)
RECOMPUTE_LEAST = -1


class Offload(IntEnum):
    """Where the optimizer state lives (ZeRO-Offload, Ren et al. 2021)."""

    NONE = 0
    OPTIMIZER = 1

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def from_label(cls, label: str) -> Offload:
        return cls[label.upper()]


@dataclass(frozen=True)
class Layout:
    """Parallel degrees and batching of one or many layouts (aligned arrays or scalars).

    ``dp = gpus / (tp x cp x pp)`` ranks split the batch and ``cp`` ranks each sequence; weights are
    replicated over both, so ``shard``, the group ZeRO shards over, is ``dp x cp`` for full sharding,
    the ranks inside a node for a hybrid shard, 1 without ZeRO; ``grad_accum`` micro-batches of
    ``micro_batch`` sequences per optimizer step; ``virtual_stages`` interleaved chunks per GPU.
    """

    tp: Ints = 1
    pp: Ints = 1
    dp: Ints = 1
    zero: Ints = 0
    shard: Ints = 1
    micro_batch: Ints = 1
    grad_accum: Ints = 1
    recompute: Ints = Recompute.NONE
    virtual_stages: Ints = 1
    offload: Ints = Offload.NONE
    cp: Ints = 1  # context parallelism: ranks that split each sequence (RunSettings.context_parallel: the exchange)
    ep: Ints = 1  # expert parallelism: ranks (of the dp x cp ones) that split the routed experts
    # Expert tensor parallelism under Megatron-Core's parallel folding: the routed experts are split over
    # ep x etp ranks drawn from all tp x dp x cp ranks (etp 1: whole experts); 0: the attention TP, EP
    # over the dp x cp ranks (no folding).
    etp: Ints = 0
    # Under full recompute, the layers of each pipeline stage (all its chunks together) that re-run their forward
    # pass in backward; the others keep their activations (Megatron-Core's --recompute-method block
    # --recompute-num-layers, torchtitan's per-layer checkpointing every k-th block). 0: all of them.
    # RECOMPUTE_LEAST in a strategy grid: the fewest that fit, which candidates.py resolves per layout.
    recompute_layers: Ints = 0

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_grid(cls, grid: np.ndarray) -> Layout:
        """Columns of an integer grid, in ``field_names`` order."""
        return cls(*(grid[:, i] for i in range(grid.shape[1])))

    def at(self, i: int) -> Layout:
        """The i-th layout as plain integers."""
        return Layout(*(int(np.asarray(getattr(self, name))[i]) for name in self.field_names()))

    def as_floats(self) -> dict[str, np.ndarray]:
        return {name: np.asarray(getattr(self, name), float) for name in self.field_names()}

    def stage_layers(self, layers: float) -> np.ndarray:
        """Layers of the busiest pipeline stage: uneven stages put ceil(L / p) on the first."""
        return np.ceil(layers / np.asarray(self.pp, float))

    def recomputed_layers(self, layers: float) -> np.ndarray:
        """Layers of the busiest stage that re-run their forward pass in backward (0 without full recompute)."""
        per_stage = self.stage_layers(layers)
        n = np.asarray(self.recompute_layers, float)
        chosen = np.where(n > 0, np.minimum(n, per_stage), per_stage)
        return np.where(np.asarray(self.recompute) == Recompute.FULL, chosen, 0.0)

    def recomputed_share(self, layers: float) -> np.ndarray:
        """Share of the busiest stage's layers that re-run their forward pass in backward (0 to 1; a model known
        by its parameter count alone, ``layers`` 0, recomputes all or nothing)."""
        if layers <= 0:
            return np.where(np.asarray(self.recompute) == Recompute.FULL, 1.0, 0.0)
        return self.recomputed_layers(layers) / np.maximum(self.stage_layers(layers), 1.0)

    @property
    def expert_tp(self) -> np.ndarray:
        """The TP degree inside each routed expert: ``etp``, or the attention TP when not folded."""
        etp, tp = np.asarray(self.etp, float), np.asarray(self.tp, float)
        return np.where(etp > 0, etp, tp)


@dataclass(frozen=True)
class Cluster:
    """Per-GPU hardware figures in base units (arrays aligned with a ``Layout``, or scalars)."""

    peak_flops: Floats
    hbm_bytes_per_s: Floats
    intra_bytes_per_s: Floats  # bidirectional, the vendors' NVLink convention
    network_bytes_per_s: Floats
    gpus_per_node: Floats
    compute_efficiency: Floats
    nodes: Floats = 1.0
    attention_peak_flops: Floats | None = None  # 16-bit peak the attention kernels run at (None: peak_flops)
    # compute_efficiency's multiplier where a layout runs fused Transformer Engine kernels (RunSettings.fused_kernels)
    fused_efficiency_ratio: Floats = 1.0
    # its multiplier where a layout's eager PyTorch stack runs under torch.compile (every other layout)
    compiled_efficiency_ratio: Floats = 1.0
    # the attention kernels' share of the 16-bit peak (physics/attention.py) in a layout whose framework runs
    # eager PyTorch layers or Transformer Engine's (nan: unpublished, the matmul efficiency applies)
    attention_efficiency_eager: Floats = float("nan")
    attention_efficiency_fused: Floats = float("nan")
    host_link_bytes_per_s: float = HOST_LINK_GB_PER_S_PER_GPU * 1e9  # GPU <-> CPU (PCIe) per GPU
    host_memory_bytes_per_s: float = HOST_MEMORY_GB_PER_S_PER_GPU * 1e9  # CPU DRAM share per GPU


@dataclass(frozen=True)
class RunSettings:
    """Job-wide numbers the formulas need besides the model, the training state and the layout."""

    seq_len: float
    eager_attention: bool = False  # materialised s x s attention (no FlashAttention)
    # Megatron-Core / Transformer Engine fused norms and SwiGLU (a bool, or per layout: its framework's kernels)
    fused_kernels: bool | np.ndarray = False
    fp8_saved_inputs: bool | np.ndarray = False  # Transformer Engine keeps FP8 linear inputs for the weight gradient
    # per layout, whether its framework runs Transformer Engine's layers (Cluster.fused_efficiency_ratio applies)
    fused_framework: bool | np.ndarray = False
    # the data-parallel reduce's bytes per 16-bit gradient byte: 2 where gradients reduce in fp32 (job.gradient_dtype;
    # planning/labels.py fp32_reduce: Megatron-Core's fp32 main_grad, torchtitan's mixed_precision_reduce float32)
    reduce_per_grad_byte: Floats = 1.0
    # the gradient buffer's bytes per 16-bit gradient byte: 2 where the gradients take an fp32 buffer of their own
    # beside 16-bit weights (job.gradient_dtype fp32: Megatron-Core's main_grad, nanotron's accumulate_grad_in_fp32)
    grad_buffer: Floats = 1.0
    # per layout, whether its framework's data parallelism without ZeRO is torch DDP, whose buckets copy every
    # gradient (physics/memory_terms.py ddp_bucket_bytes; planning/frameworks.py ddp_gradient_copy)
    ddp_gradient_copy: bool | np.ndarray = False
    # per layout, whether its framework frees the gradients after each step (physics/memory_terms.py
    # not_concurrent_bytes; planning/frameworks.py frees_gradients)
    frees_gradients: bool | np.ndarray = False
    # TP splits the norms and residuals along the sequence too (Megatron's sequence parallelism; per layout)
    sequence_parallel: bool | np.ndarray = True
    logits_bytes_per_vocab: Floats = (
        12.0  # per token and vocabulary entry the loss takes (constants.LOGITS_BYTES_PER_VOCAB)
    )
    # whether the loss upcasts the logits to fp32 (job.loss other than bf16; memory.allocator_fragmentation_bytes)
    loss_upcast: bool | np.ndarray = True
    # per token and vocabulary entry the loss's kernels read and write (physics/loss_time.py; per layout)
    loss_traffic_bytes_per_logit: Floats = 0.0
    # the loss runs on vocabulary-sharded logits, split by TP (job.loss_parallel; physics/vocab_split.py)
    loss_parallel: bool = True
    activation_offload: bool = False  # saved activations in pinned CPU memory between forward and backward
    variable_lengths: bool = False  # unpacked samples of different lengths (job.variable_lengths)
    # what selective recompute re-runs (Megatron-Core's --recompute-modules; physics/recompute_modules.py)
    recompute_modules: frozenset[str] = frozenset({"core_attn"})
    overlap: float = 0.0  # fraction of data-parallel traffic hidden behind compute
    moe_overlap: float = 0.0  # fraction of expert-parallel all-to-all hidden behind compute
    moe_dispatcher: str = "alltoall"  # "alltoall": a copy per routed expert; "deepep": one per rank / node
    # the context-parallel exchange (job.context_parallel; physics/context_parallel.py): "ring" (ring attention's K/V
    # passes), "all_to_all" (Ulysses: DeepSpeed, Megatron-Core a2a) or "all_to_all_repeat_kv" (XTuner's Ulysses)
    context_parallel: str = "ring"
    moe_host_s_per_layer: float = 0.0  # host launch time per MoE layer and micro-batch the GPU waits for
    moe_host_s_per_local_expert: float = 0.0  # and per local expert, where Transformer Engine's GroupedLinear runs
    # per layout: its framework's experts run Transformer Engine's GroupedLinear, a host loop over local experts
    grouped_gemm_per_expert: bool | np.ndarray = False
    # per layout: the experts run as transformers' eager loop (physics/moe.py expert_loop_s), and under
    # DeepSpeed ZeRO-3 with each expert's linears fetched one module at a time
    expert_loop: bool | np.ndarray = False
    zero3_module_fetch: bool | np.ndarray = False
    # per layout: its framework issues eager PyTorch operators from Python, whose host time floors each micro-batch
    # (physics/host_launch.py; not Transformer Engine's stack), compiled by torch.compile where ``compiled``; and the
    # multi-tensor operators its optimizer step dispatches (host_launch.optimizer_step_ops; 1: a fused step)
    host_launch: bool | np.ndarray = False
    compiled: bool | np.ndarray = False
    optimizer_step_ops: float = 1.0
    link_efficiency: float = 1.0  # achieved / nominal link bandwidth
    activation_reserve: Any = "auto"  # "auto", bytes, or a fraction of capacity (< 1)
    framework_overhead: Any = "auto"  # "auto", bytes, or a fraction of capacity (< 1)

    @property
    def bucket_per_grad_byte(self) -> np.ndarray:
        """torch DDP's buckets' bytes per byte of the gradients counted: the reduce dtype's over the buffer's
        (physics/memory_terms.py ddp_bucket_bytes)."""
        return np.asarray(self.reduce_per_grad_byte, float) / np.asarray(self.grad_buffer, float)
