"""The dense GEMMs' rate for the rows a micro-batch gives them (issue 48: a GEMM timed from its shape).

A linear layer's forward GEMM has M = the micro-batch's tokens on the rank (b s / cp), N = its output width and
K = its input width (both after the TP split: physics/precision.dense_gemms); its data gradient swaps N and K;
its weight gradient has the weight's shape for output and the tokens for K. Few tokens leave both short: the
forward and data-gradient GEMMs get few output tiles (T = M N / 128^2; a GEMM runs at T / (T + T_half) of its
many-tile rate, tile and wave quantization) and the weight gradient a short K (k / (k + k_half), the fixed cost
of a tile amortised over its K loop). Both sourced in physics/constants.py (GEMM_TILES_HALF, GEMM_K_HALF_16BIT).

The efficiency (physics/efficiency.py) stands for micro-batches of GEMM_K_REFERENCE tokens, where every
fitted row's GEMMs sit near their many-tile rate: ``rows_factor`` is the rate at the layout's tokens over the rate
at that reference, the same widths and TP. 1 without the model's shapes.
"""

from __future__ import annotations

import numpy as np

from .constants import GEMM_K_HALF_16BIT, GEMM_K_REFERENCE, GEMM_TILE_ELEMENTS, GEMM_TILES_HALF
from .precision import Split, dense_gemms
from .shapes import ModelShape


def tile_rate(rows, cols) -> np.ndarray:
    """The share of its many-tile rate a GEMM with ``rows`` x ``cols`` outputs reaches."""
    tiles = np.asarray(rows, float) * np.asarray(cols, float) / GEMM_TILE_ELEMENTS
    return tiles / (tiles + GEMM_TILES_HALF)


def _time_per_flop(shape: ModelShape, tp, rows, weight_gradient: bool, k_half=GEMM_K_HALF_16BIT) -> np.ndarray:
    """Relative time per FLOP of one layer's dense GEMMs with ``rows`` tokens: forward (rows x N), data gradient
    (rows x K), and, where the weights train, weight gradient (K = rows, its tile's fixed cost worth ``k_half``
    steps), combined by FLOPs (equal per pass)."""
    rows = np.asarray(rows, float)
    weight: np.ndarray | float = 0.0
    time: np.ndarray | float = 0.0
    for w, k_forward, n_forward in dense_gemms(shape, tp):
        weight = weight + (3.0 if weight_gradient else 2.0) * w
        time = time + w * (1.0 / tile_rate(rows, n_forward) + 1.0 / tile_rate(rows, k_forward))
        if weight_gradient:
            time = time + w * (rows + k_half) / rows
    return np.asarray(time / weight, float)


def rows_factor(shape: ModelShape, tp, rows, weight_gradient: bool = True, k_half=GEMM_K_HALF_16BIT) -> np.ndarray:
    """The dense GEMMs' rate with ``rows`` tokens per micro-batch on a rank over their rate with
    GEMM_K_REFERENCE tokens (1 there; under 1 with fewer tokens). ``weight_gradient``: False where the base
    weights are frozen (LoRA: no weight-gradient GEMM). ``k_half``: the weight gradient's fixed cost per tile in
    K steps, GEMM_K_HALF_16BIT at 16 bits, r times it at r times the rate (FP8: GEMM_K_HALF_FP8)."""
    tp = np.asarray(tp, float)
    rows = np.broadcast_to(np.asarray(rows, float), np.broadcast_shapes(np.shape(tp), np.shape(rows)))
    if not shape.has_shapes or shape.hidden <= 0:
        return np.ones_like(rows)
    rows = np.maximum(rows, 1.0)
    reference = _time_per_flop(shape, tp, GEMM_K_REFERENCE, weight_gradient, k_half)
    return np.minimum(1.0, np.asarray(reference / _time_per_flop(shape, tp, rows, weight_gradient, k_half), float))


def dense_time_factor(split: Split, shape: ModelShape, tp, rows, weight_gradient: bool = True) -> np.ndarray:
    """The dense linear layers' time with ``rows`` tokens per micro-batch on a rank over their 16-bit time at
    GEMM_K_REFERENCE tokens: ``split.dense_factor_at`` the 16-bit rate and the low precision's, whose weight-gradient
    GEMMs (K = the tokens) pay their tiles' fixed cost at their own rate, worth r times the K steps at r times the
    16-bit peak (physics/constants.py GEMM_K_HALF_FP8 = 2 x GEMM_K_HALF_16BIT)."""
    rate16 = rows_factor(shape, tp, rows, weight_gradient)
    low = rows_factor(shape, tp, rows, weight_gradient, GEMM_K_HALF_16BIT * split.peak_ratio)
    return split.dense_factor_at(rate16, low)
