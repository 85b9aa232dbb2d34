"""Achieved efficiency of the attention kernels: the share of the GPU's 16-bit dense peak that the fused
attention kernels (scores and values, forward and backward) reach, by kernel and GPU family.

The matmul efficiency (physics/efficiency.py) stands for the linear layers' GEMMs. Attention runs in kernels of
its own whose efficiency differs by generation far more than the GEMMs' do, so it takes its own figure:

- ``flash2``: FlashAttention-2, which PyTorch's scaled_dot_product_attention runs on every NVIDIA GPU by its
  fixed backend priority (flash first; the cuDNN backend is opt-in since PyTorch 2.5: pytorch/pytorch#138649,
  and was still not chosen on H100 in the 2.6 nightlies, pytorch/pytorch#142132). Every PyTorch-native stack
  (torchtitan, FSDP / Hugging Face, DeepSpeed, torchtune) attends through it.
  Ampere: "reaching 50-73% of the theoretical maximum FLOPs/s on A100" (Dao 2023, FlashAttention-2,
  arXiv:2307.08691, abstract): the range's geometric mid. Hopper: "FlashAttention-2 achieving only 35%
  utilization on the H100 GPU" (Shah et al. 2024, FlashAttention-3, arXiv:2407.08608, abstract); PyTorch's SDPA
  at (1, 24, 4608, 128) on an H100: 329.5 TFLOP/s, 33 % (pytorch/pytorch#142132).
- ``flash3``: FlashAttention-3 (flash-attn's hopper/ build; transformers' attn_implementation
  "flash_attention_3"), Hopper only: "FlashAttention-3 achieves speedup on H100 GPUs by 1.5-2.0x with FP16 reaching
  up to 740 TFLOPs/s (75% utilization)" over FlashAttention-2's 35 % (Shah et al. 2024, arXiv:2407.08608, abstract):
  FlashAttention-2's Hopper figure times the range's geometric mid. Elsewhere (no Hopper instructions) it is
  FlashAttention-2's figure.
- ``efficient``: PyTorch SDPA's memory-efficient kernel (xformers' "cutlass" one, aten/src/ATen/native/transformers/
  cuda/mem_eff_attention), which SDPA runs when it is handed an explicit attention mask: FlashAttention takes none
  (sdp_utils.cpp check_for_attn_mask), and transformers' SDPA path passes a 4-D causal-and-padding mask whenever a
  batch's attention_mask holds a zero (a padded batch; modeling_attn_mask_utils.py
  AttentionMaskConverter._ignore_causal_mask_sdpa drops it only when it is all ones). "FlashAttention-2 is around
  2x faster than FlashAttention and FlashAttention in xformers (the 'cutlass' implementation)" (Dao 2023, section
  4.1), and under a mask tensor the kernel computes every block of the s x s square where a causal kernel skips
  the masked half: twice the work. So FlashAttention-2's step efficiency over 2 x 2.
- ``cudnn``: cuDNN's fused attention, which Transformer Engine runs under Megatron-Core on Hopper and Blackwell
  (on Ampere Transformer Engine runs FlashAttention-2). NVIDIA/cudnn-frontend@3929da2e
  benchmark/sdpa_benchmark_training/results (Llama 3.1 405B heads, d 128, causal, BF16; the H200 and GB200
  CSVs): forward and backward TFLOP/s by sequence length. A training step
  spends a third of the attention FLOPs forward and two thirds backward (12 L h s: PaLM's count), so the
  step's efficiency is 1 / (1/3 / e_fwd + 2/3 / e_bwd), interpolated in log sequence length and held flat past
  the table's ends.

A GPU family or kernel without a published figure returns None: the attention then runs at the matmul
efficiency, as gpuplan costed it before.

Work, and a measured choice: both sources count a causal kernel's FLOPs as it runs them, the unmasked half of the
scores only, forward 2 matmuls and backward 5 (cudnn-frontend @ 3929da2e benchmark/sdpa_benchmark_training/
benchmark_single_sdpa.py ``flops``: the non-masked elements x 2 x (d_qk + d_vo) forward, x 2 x (3 d_qk + 2 d_vo)
backward; flash-attention's benchmarks halve a causal count alike), 7 / 12 of the step's count here (PaLM's 12 L w
s, ``attention_flops_per_token``: every key, the backward twice the forward). The step divides its own count by
the kernels' figures, i.e. attention runs at 7 / 12 of the benchmarked kernel rate in a training step. Converting
the count to the kernels' (session 36, then refitting the bases on the 303 dense rows: Hopper 0.511, Ampere 0.660,
c = 5, fused ratio 1.3) made the dense rows held out by family 7.0 % -> 10.9 % (llm-foundry's 216 rows 7.6 % ->
11.1 %, worst 1.76x) and torchtitan's context-parallel rows 2 % -> 51 % fast: whole training steps attend slower
than the kernels benchmarked alone (short sequences' small grids, the ring steps' partial blocks and merges), and
the step's count with the kernels' figures matches them. XTuner's Ulysses rows on A100 (first-seen, 0.58-0.89)
point the other way and stay unexplained.
"""

from __future__ import annotations

import math

import numpy as np

from .layout import Layout, Recompute
from .shapes import ModelShape

# (sequence length, forward efficiency, backward efficiency), causal, share of the 16-bit dense peak
_CUDNN_CAUSAL: dict[str, tuple[tuple[int, float, float], ...]] = {
    # H200 (989 TFLOP/s): "484 (49%) | 370 (37%)" at 2,048 ... "688 (70%) | 581 (59%)" at 32,768
    "hopper": (
        (2048, 0.49, 0.37),
        (4096, 0.60, 0.48),
        (8192, 0.65, 0.55),
        (16384, 0.68, 0.59),
        (32768, 0.70, 0.59),
    ),
    # GB200 (2,500 TFLOP/s): "1097 (44%) | 885 (35%)" at 2,048 ... "1622 (65%) | 1226 (49%)" at 32,768
    "blackwell": (
        (2048, 0.44, 0.35),
        (4096, 0.56, 0.46),
        (8192, 0.63, 0.53),
        (16384, 0.68, 0.53),
        (32768, 0.65, 0.49),
    ),
}
# FlashAttention-2, forward and backward together, by GPU family (the module's sources)
_FLASH2: dict[str, float] = {"ampere": math.sqrt(0.50 * 0.73), "hopper": 0.35}
# The kernel each stack attends with, by GPU family: Transformer Engine runs cuDNN where it has it
KERNEL_NAMES = {
    "flash2": "FlashAttention-2 (SDPA)",
    "cudnn": "cuDNN's fused attention",
    "efficient": "SDPA's memory-efficient attention under a mask tensor",
    "flash3": "FlashAttention-3",
}
KERNELS = tuple(KERNEL_NAMES)
FORWARD_SHARE = 1.0 / 3.0  # of a training step's attention FLOPs as the step counts them (the module's Work)
# FlashAttention-3 over FlashAttention-2 on H100: "1.5-2.0x" (Shah et al. 2024, abstract), the geometric mid
FLASH3_OVER_FLASH2_HOPPER = math.sqrt(1.5 * 2.0)
# FlashAttention-2 over xformers' cutlass kernel, SDPA's memory-efficient one (Dao 2023, arXiv:2307.08691, 4.1)
FLASH2_OVER_CUTLASS = 2.0
# The blocks a kernel computes under a dense mask tensor over those a causal kernel computes: all s^2 of s^2 / 2
DENSE_MASK_WORK = 2.0


def _step_efficiency(forward: float, backward: float) -> float:
    return 1.0 / (FORWARD_SHARE / forward + (1.0 - FORWARD_SHARE) / backward)


def _interpolated(table: tuple[tuple[int, float, float], ...], seq_len: float) -> float:
    points = [(math.log(s), _step_efficiency(f, b)) for s, f, b in table]
    x = math.log(max(seq_len, 1.0))
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


def attention_efficiency(kernel: str, gpu_family: str, seq_len: float) -> float | None:
    """The attention kernels' share of the 16-bit peak over a training step (forward and backward) at keys per
    query ``seq_len``, or None where no figure is published for this kernel on this GPU family."""
    if kernel == "cudnn":
        if gpu_family in _CUDNN_CAUSAL:
            return _interpolated(_CUDNN_CAUSAL[gpu_family], seq_len)
        kernel = "flash2"  # Transformer Engine on Ampere runs FlashAttention-2
    if kernel not in KERNEL_NAMES:
        raise ValueError(f"unknown attention kernel {kernel!r}; one of {', '.join(KERNELS)}")
    flash2 = _FLASH2.get(gpu_family)
    return None if flash2 is None else flash2 * speed_over_flash2(kernel, gpu_family)


def speed_over_flash2(kernel: str, gpu_family: str) -> float:
    """A kernel's rate over FlashAttention-2's on this GPU family (and over the matmul efficiency where no
    FlashAttention-2 figure is published): FlashAttention-3's on Hopper; SDPA's memory-efficient kernel under a mask
    tensor at half the rate over twice the blocks; 1 for the others."""
    if kernel == "flash3" and gpu_family == "hopper":
        return FLASH3_OVER_FLASH2_HOPPER
    if kernel == "efficient":
        return 1.0 / (FLASH2_OVER_CUTLASS * DENSE_MASK_WORK)
    return 1.0


def attention_flops_per_token(shape: ModelShape, seq_len: float) -> float:
    """Attention score and value FLOPs per token, forward and backward: 12 L w s (Chowdhery et al. 2022,
    appendix B), w the attention width (heads x head_dim; DeepSeek's MLA: heads x (192 + 128) / 2, its
    scores at the query-key head dim and its values at the value head dim) and s the keys per query
    (``ModelShape.attention_span``: shorter in sliding-window layers)."""
    width = shape.attention_width or shape.q_width or shape.hidden
    return 12.0 * shape.layers * width * shape.attention_span(seq_len)


def attention_hw_flops_per_token(shape, seq_len: float, layout: Layout, core_attn: bool = True) -> np.ndarray:
    """Attention score and value FLOPs per token as ``flops_per_token`` counts them: 12 L h s, plus a third
    more where the forward attention is recomputed (selective recompute, or the fully recomputed layers)."""
    return attention_flops_per_token(shape, seq_len) * (1.0 + attention_rerun_share(shape, layout, core_attn) / 3.0)


def attention_rerun_share(shape, layout: Layout, core_attn: bool = True) -> np.ndarray:
    """Share of the attention forward run again in backward: all of it under selective recompute of the core, the
    recomputed layers' share under full recompute."""
    selective = (np.asarray(layout.recompute) == Recompute.SELECTIVE) & core_attn
    return np.where(selective, 1.0, layout.recomputed_share(shape.layers))


def attention_flops_share(shape, seq_len: float) -> float:
    """Share of a token's model FLOPs in the attention scores and values: 12 L h s of 6 N + 12 L h s
    (Chowdhery et al. 2022, appendix B)."""
    attention = attention_flops_per_token(shape, seq_len)
    total = 6.0 * shape.active_params + attention
    return attention / total if total > 0 else 0.0
