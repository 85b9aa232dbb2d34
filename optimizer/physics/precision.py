"""Low-precision matmuls (FP8, MXFP8, NVFP4): the part of a step they speed up, and the casts they add.

The efficiency ``e`` (physics/efficiency.py) is the matmuls' achieved share of the 16-bit peak: a step's
linear layers take F / (peak16 x e) at 16 bits. That time is two things. The GEMM kernels themselves run
at g16 = GEMM_CEILING_16BIT x r16 (the largest GEMMs' share of the peak, times the rate of the model's
reduction lengths K, k / (k + k_half): physics/constants.py), so they are a share phi = e / g16 of it; the
rest, 1 - phi, is what ``e`` absorbs beside them (the element-wise kernels between the GEMMs: norms,
activations, residuals, rotary embeddings; launch gaps and synchronisation). A low precision speeds up the
GEMM share only, s times (its peak over the 16-bit one, times LOW_PRECISION_GEMM_CEILING_RATIO, times the
K-rate at its own k_half over the 16-bit one), and adds the casts of the GEMMs' operands:

    linear time = F / (peak16 x e) x (phi / s + 1 - phi)  +  cast bytes / (HBM x CAST_HBM_EFFICIENCY)

At 16 bits s = 1 and no cast runs: the time is the one the efficiency was fitted on. This is why FP8
training runs 1.2-1.5x faster where its peak is 2x: NVIDIA's Megatron-Bridge performance guide ("typically
1.2-1.5x"), torchtitan's Llama 3 70B on 256 H100 (597 -> 829 tokens/s per GPU, 1.39x), torchtitan's Llama 3
8B with torch.compile (1.28x, Table 1 of benchmarks/llama3_h100_202412_torchtitan.md), torchao's float8
tensorwise Llama 3 8B on 8 H100 (+25 %). tests/physics/test_precision.py holds the split to them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .constants import (
    GEMM_CEILING_16BIT,
    GEMM_K_HALF_16BIT,
    LOW_PRECISION_CAST_BYTES_PER_ELEMENT,
    LOW_PRECISION_GEMM_CEILING_RATIO,
)
from .shapes import ModelShape

# the job precisions whose GEMMs run faster than 16 bits (their casts show as time_breakdown_s.casts)
LOW_PRECISIONS = frozenset({"fp8", "nvfp4"})


def widths(shape: ModelShape) -> tuple[float, float, float, float]:
    """(hidden h, query width q, the QKV projection's output q + 2 kv, gate factor g: 2 for a gated MLP)."""
    h = shape.hidden
    q = shape.q_width or h
    return h, q, q + 2.0 * (shape.kv_width or h), 2.0 if shape.gated_mlp else 1.0


def dense_gemms(shape: ModelShape, tp) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(FLOP weight n x k, forward K, data-gradient K) of one layer's dense GEMMs on a rank of ``tp``: QKV and
    the MLP's first GEMM column-parallel (K = h), the output projection and the MLP's second GEMM
    row-parallel (K split tp ways; Megatron-LM, Shoeybi et al. 2019, section 3). The weight gradient's K is
    the tokens, long enough to run at the ceiling."""
    tp = np.asarray(tp, float)
    h, q, qkv, g = widths(shape)
    f = (shape.expert_ffn if shape.experts else shape.ffn_active) or 4.0 * h
    return [
        (h * qkv / tp, np.full_like(tp, h), qkv / tp),
        (q / tp * h, q / tp, np.full_like(tp, h)),
        (h * g * f / tp, np.full_like(tp, h), g * f / tp),
        (f / tp * h, f / tp, np.full_like(tp, h)),
    ]


def k_rate(shape: ModelShape, tp, k_half) -> np.ndarray:
    """The dense GEMMs' rate for their reduction lengths, k / (k + k_half) combined harmonically by FLOPs
    (time adds up per FLOP) over forward, data gradient and weight gradient (at rate 1); 1 without shapes."""
    tp = np.asarray(tp, float)
    if not shape.has_shapes or shape.hidden <= 0:
        return np.ones_like(tp)
    k_half = np.asarray(k_half, float)
    weight: np.ndarray | float = 0.0
    time: np.ndarray | float = 0.0
    for w, k_forward, k_data in dense_gemms(shape, tp):
        weight = weight + 3.0 * w
        time = time + w * ((k_forward + k_half) / k_forward + (k_data + k_half) / k_data + 1.0)
    return np.asarray(weight / time, float)


def cast_bytes_per_token(shape: ModelShape) -> float:
    """HBM bytes of a low-precision step's operand casts per token, all layers, forward and backward: each
    dense GEMM's input (forward) and output gradient (backward), LOW_PRECISION_CAST_BYTES_PER_ELEMENT each
    (physics/constants.py). The routed experts' casts are in the MoE element-wise traffic already
    (MOE_ELEMENTWISE_FORWARD_H), so an MoE layer counts its attention projections only. 0 without shapes."""
    if not shape.has_shapes or shape.hidden <= 0:
        return 0.0
    h, q, qkv, g = widths(shape)
    f = shape.ffn_active or 4.0 * h
    attention = (h + q) + (qkv + h)  # inputs of QKV and the projection, gradients of their outputs
    mlp = (h + f) + (g * f + h)
    dense_share = 1.0 - shape.moe_layer_share if shape.experts else 1.0
    elements = shape.layers * (attention + dense_share * mlp)
    return LOW_PRECISION_CAST_BYTES_PER_ELEMENT * elements


@dataclass(frozen=True)
class Split:
    """How a precision with ``peak_ratio`` times the 16-bit peak changes the linear layers' time."""

    gemm_share: np.ndarray  # phi: the GEMM kernels' share of the 16-bit linear time
    dense_speedup: np.ndarray  # s for the dense GEMMs (1 at 16 bits)
    expert_speedup: np.ndarray  # s for the experts' grouped GEMMs, before their K and token-count rates
    low_precision: np.ndarray  # bool: casts run
    peak_ratio: np.ndarray  # r: the precision's peak over the 16-bit one (1 where unknown)

    @classmethod
    def of(cls, shape: ModelShape, tp, efficiency, peak_ratio) -> Split:
        ratio = np.asarray(peak_ratio, float)
        ratio = np.where(np.isfinite(ratio) & (ratio > 0), ratio, 1.0)
        low = ratio > 1.0 + 1e-9
        rate16 = k_rate(shape, tp, GEMM_K_HALF_16BIT)
        gemm16 = GEMM_CEILING_16BIT * rate16
        share = np.clip(np.asarray(efficiency, float) / gemm16, 0.0, 1.0)
        ceiling = np.where(low, LOW_PRECISION_GEMM_CEILING_RATIO, 1.0)
        # the fixed cost per tile is time: at r times the rate it is worth r times the K steps
        rate_low = k_rate(shape, tp, GEMM_K_HALF_16BIT * ratio)
        return cls(
            gemm_share=share,
            dense_speedup=ratio * ceiling * rate_low / rate16,
            expert_speedup=ratio * ceiling,
            low_precision=low,
            peak_ratio=ratio,
        )

    @property
    def dense_factor(self) -> np.ndarray:
        """The dense linear layers' time over their 16-bit time: phi / s + 1 - phi."""
        return self.gemm_share / self.dense_speedup + 1.0 - self.gemm_share

    def dense_factor_at(self, rate16, rate_low) -> np.ndarray:
        """``dense_factor`` at a micro-batch's tokens, over the 16-bit time at GEMM_K_REFERENCE tokens: the GEMMs at
        their own precision's rate for those tokens (``rate_low``: physics/gemm.py rows_factor with the low
        precision's K_half), the rest at the 16-bit one (``rate16``)."""
        rate_low = np.where(self.low_precision, rate_low, rate16)
        return self.gemm_share / (self.dense_speedup * rate_low) + (1.0 - self.gemm_share) / rate16
