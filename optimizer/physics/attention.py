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
- ``cudnn``: cuDNN's fused attention, which Transformer Engine runs under Megatron-Core on Hopper and Blackwell
  (on Ampere Transformer Engine runs FlashAttention-2). NVIDIA/cudnn-frontend@3929da2e
  benchmark/sdpa_benchmark_training/results (Llama 3.1 405B heads, d 128, causal, BF16; the H200 and GB200
  CSVs): forward and backward TFLOP/s by sequence length. A training step
  spends a third of the attention FLOPs forward and two thirds backward (12 L h s: PaLM's count), so the
  step's efficiency is 1 / (1/3 / e_fwd + 2/3 / e_bwd), interpolated in log sequence length and held flat past
  the table's ends.

A GPU family or kernel without a published figure returns None: the attention then runs at the matmul
efficiency, as gpuplan costed it before.
"""

from __future__ import annotations

import math

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
KERNELS = ("flash2", "cudnn")
FORWARD_SHARE = 1.0 / 3.0  # of a training step's attention FLOPs (the backward takes twice the forward's)


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
    if kernel == "flash2":
        return _FLASH2.get(gpu_family)
    raise ValueError(f"unknown attention kernel {kernel!r}; one of {', '.join(KERNELS)}")
