"""Achieved matmul efficiency: what share of a GPU's dense peak a training step's matmuls reach.

A small model with a measured basis (docs/design.md section 5.10):

    e = base[GPU family] x size(hidden)
    size(h) = (h / (h + h_half)) / (REF / (REF + h_half))       (1 at h = REF = 8,192)
    h_half = c x ridge,   ridge = peak FLOP/s of the job's precision / HBM bytes/s   (FLOP per byte)

``base`` is the efficiency on large GEMMs per GPU family (Hopper, Blackwell, ...): the same share of the
precision's own peak for 16-bit and low precision (FP8 / MXFP8). ``size`` captures that narrow models run
less efficient steps than wide ones: the GEMMs are smaller while the memory-bound work beside them
(norms, activations, casts, amax) grows with tokens x h against the GEMMs' tokens x h^2. Its half width
scales with the GPU's ridge point, so a GPU with more FLOPs per byte of HBM bandwidth, or a precision with
twice the peak on the same memory (FP8 on Hopper: h_half twice the 16-bit one), needs wider models to
reach its base: one parameter ``c`` for every GPU and precision. The parameters are fitted by
``bench/throughput.py --fit`` on every dense row of validation/ (least absolute deviations in log space of
the implied efficiencies) and scored leave one source family out (BENCHMARKS.md); a GPU family's base
ships only where that score supports it. Families without a shipped base keep the per-form-factor default
(physics/constants.py: DEFAULT_COMPUTE_EFFICIENCY), without the size factor. A catalog row's
``default_mfu`` or a job's ``assumptions.mfu`` replaces the model.

The efficiency is a share of the 16-bit peak at every precision: a low precision speeds up the GEMM kernels'
share of the time only (physics/precision.py), so its ridge is the 16-bit one. It stands for eager kernels;
fused Transformer Engine stacks reach FITTED_FUSED_RATIO times it (fitted with the bases).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence

REFERENCE_HIDDEN = 8192.0

# SKU architecture text (catalogs/hardware.yaml) -> family, first match wins.
FAMILY_OF_ARCHITECTURE = (
    ("Hopper", "hopper"),
    ("Blackwell GB202", "blackwell-pcie"),
    ("Blackwell", "blackwell"),
    ("Ampere", "ampere"),
    ("Ada", "ada"),
    ("CDNA", "cdna"),
)

# Shipped parameters: `python bench/throughput.py --fit` on 2026-12-06 (issue 48, sessions 30-31: the dense GEMMs'
# rate for the micro-batch's tokens, physics/gemm.py, and LoRA's branch kernels, physics/adapters.py), fitted on
# the 308 dense rows of validation/ (10 source families; session 32: DeepSpeed's rows under DeepSpeed's rules, the
# Ampere base 0.696 -> 0.697, c = 5 tying c = 4 within bench/throughput.py's FIT_TIE_SHARE; session 37:
# torchtitan's 405B pipeline rows at their commit's 8 micro-batches of 4, Hopper 0.556 -> 0.555; session 40: the
# loss's kernels as HBM traffic, physics/loss_time.py, Ampere 0.697 -> 0.707, Hopper 0.555 -> 0.558). Hopper and
# Ampere ship: held out by source family (leave one family out), the model's dense median is 5.8 % against the
# constant's 13.9 %. The rule also asks that no family's median be more than 3 points worse than the constant's;
# OLMo-core's table (added 2026-12-06) is 4.3 points worse: its efficiency falls with the width (1B the highest,
# 13B the lowest), where every other
# family's rises, so the size factor that fits them misses it both ways (BENCHMARKS.md). Blackwell does not ship
# (two source families, Megatron-Bridge and NeMo: with either held out the other alone cannot fit it, so no
# held-out figure tests it). The Ampere base stands for today's stacks' benchmark tables; whole published A100
# runs of 2022-23 ran 0.7-0.8x of it (bench/validate.py). BENCHMARKS.md and docs/design.md 5.10 give the figures.
FITTED_BASE: dict[str, float] = {"hopper": 0.558, "ampere": 0.707}
FITTED_HALF_PER_RIDGE = 4.0
# Transformer Engine stacks (Megatron-Core: LayerNormLinear, fused SwiGLU, RoPE and bias-dropout-add, FP8 casts
# fused into them) reach this many times the efficiency above, which eager stacks (torchtitan, FSDP, Hugging
# Face) define: fitted with the bases on the rows of the frameworks that run them (planning/frameworks.py
# fused_kernels), held out by source family like them. Applied to the per-form-factor default as well, where
# the job names its framework (planning/context.py fused_efficiency_ratio).
FITTED_FUSED_RATIO = 1.25
FUSED_RATIO_GRID = (1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4)
# The grid the data-parallel overlap (physics/constants.py FITTED_OVERLAP) is fitted on, with the bases.
OVERLAP_GRID = (0.3, 0.4, 0.5, 0.6, 0.7)

# torch.compile (Inductor) fuses an eager PyTorch stack's element-wise chains (norms, SwiGLU, RoPE, residuals,
# casts) into fewer kernels. Published speed-ups of one layout, compiled over eager: (source family, ratio).
COMPILE_SPEEDUPS: tuple[tuple[str, float], ...] = (
    # pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md @ 820504e2 (Llama 3.1 8B, FSDP, Grand Teton
    # H100), Table 1 (8 GPUs): "| FSDP | 5,762 | 82.4 |" against "| FSDP + torch.compile | 6,667 | 77.0 |";
    # Table 3 (128 GPUs): "| FSDP | 5,605 | 67.0 |" against "| FSDP + torch.compile | 6,514 | 62.0 |"
    ("torchtitan", 6667.0 / 5762.0),
    ("torchtitan", 6514.0 / 5605.0),
    # pytorch/torchtune README.md @ 1814feb1, 'Optimization flags' (Llama 3.2 3B full fine-tune, one A100):
    # "| + Packed Dataset | 60.0 | +135.16% | 7075 | +238.40% |" against
    # "| + Compile | 51.0 | -14.93% | 8998 | +27.18% |"
    ("torchtune", 8998.0 / 7075.0),
    # pytorch.org/blog/maximizing-training-throughput (IBM and Meta, fms-fsdp, Llama 7B-70B on A100 and H100):
    # "torch.compile improves training MFU between 10% and 23% for various model sizes" (the range's geometric mid)
    ("ibm-fms", math.sqrt(1.10 * 1.23)),
)


def compile_speedup(without: str | None = None) -> float:
    """The published compile speed-ups' geometric mean over source families (each family's own pairs averaged
    first, so no family weighs more for publishing more pairs), less source family ``without`` (held out)."""
    logs: dict[str, list[float]] = {}
    for family, ratio in COMPILE_SPEEDUPS:
        if family != without:
            logs.setdefault(family, []).append(math.log(ratio))
    return math.exp(statistics.fmean(statistics.fmean(v) for v in logs.values())) if logs else 1.0


# What a compiled eager stack reaches over compute_efficiency (planning/context.py compiled_efficiency_ratio)
COMPILED_RATIO = compile_speedup()

IMPLIED_LOW, IMPLIED_HIGH = 0.021, 0.99  # e* at these bounds: the layout, not the efficiency, is mis-modelled
HALF_PER_RIDGE_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 12.0, 16.0)
# A base is fitted only on rows of at least this many source families (validation/families.yaml), so no base
# rests on one framework's tables, and none is fitted on one family alone when another is held out.
MIN_SOURCE_FAMILIES = 2


def family_of(architecture: str, form_factor: str = "sxm") -> str:
    """The GPU family, qualified by form factor unless SXM (a PCIe card of the same chip runs lower clocks
    and power, so it is its own family: 'hopper-pcie')."""
    family = next((fam for key, fam in FAMILY_OF_ARCHITECTURE if key in architecture), "other")
    return family if form_factor == "sxm" else f"{family}-{form_factor}"


def ridge(peak_flops: float | None, hbm_bytes_per_s: float | None) -> float:
    """The GPU's ridge point at a precision's peak: FLOPs per byte of HBM traffic (0 when unknown)."""
    if not peak_flops or not hbm_bytes_per_s or peak_flops <= 0 or hbm_bytes_per_s <= 0:
        return 0.0
    return peak_flops / hbm_bytes_per_s


def size_factor(hidden: float, hidden_half: float) -> float:
    """Relative efficiency of a model of width ``hidden``: 1 at 8,192; 1 when unknown (params only)."""
    if hidden <= 0 or hidden_half <= 0:
        return 1.0
    return (hidden / (hidden + hidden_half)) / (REFERENCE_HIDDEN / (REFERENCE_HIDDEN + hidden_half))


def matmul_efficiency(
    architecture: str, form_factor: str, precision: str, hidden: float, ridge_flops_per_byte: float = 0.0
) -> float | None:
    """The fitted efficiency for this GPU and model width at the ridge of the job's precision (its peak over
    the HBM bandwidth: the precision acts through it; 0 = unknown, size factor 1), or None where no base is
    shipped for the GPU's family."""
    del precision  # the same share of each precision's own peak; the peak enters through the ridge
    base = FITTED_BASE.get(family_of(architecture, form_factor))
    return None if base is None else base * size_factor(hidden, FITTED_HALF_PER_RIDGE * ridge_flops_per_byte)


def supported(points: Sequence[tuple[str, float, float, float, str]]) -> dict[str, tuple[int, set[str]]]:
    """Per GPU family: how many usable points (e* inside the search bounds) and which source families."""
    out: dict[str, tuple[int, set[str]]] = {}
    for fam, _, _, implied, source in points:
        if IMPLIED_LOW < implied < IMPLIED_HIGH:
            n, sources = out.get(fam, (0, set()))
            out[fam] = (n + 1, sources | {source})
    return out


def fit_bases(
    points: Sequence[tuple[str, float, float, float, str]],
    families: Collection[str] | None = None,
    grid: Sequence[float] = HALF_PER_RIDGE_GRID,
) -> tuple[dict[str, float], float]:
    """Least absolute deviations in log space (robust to the few layouts whose non-compute time gpuplan
    mis-models, which push e* to its bounds): for each c of the grid the best base per GPU family is the
    median of e* / size; the c with the least total absolute log error wins. Points whose e* sits at a bound
    of the search (0.02 or 1) say nothing about efficiency and are left out, as are GPU families outside
    ``families`` (None: every family) and those whose points come from fewer than MIN_SOURCE_FAMILIES
    source families. ``points``: (GPU family, hidden, ridge, implied efficiency e*, source family).
    Returns ({GPU family: base}, c)."""
    support = supported(points)
    keep = {
        fam
        for fam, (_, sources) in support.items()
        if len(sources) >= MIN_SOURCE_FAMILIES and (families is None or fam in families)
    }
    points = [p for p in points if p[0] in keep and IMPLIED_LOW < p[3] < IMPLIED_HIGH]
    best: tuple[float, dict[str, float], float] | None = None
    for c in grid:
        logs: dict[str, list[float]] = {}
        for fam, hidden, rdg, implied, _ in points:
            logs.setdefault(fam, []).append(math.log(implied / size_factor(hidden, c * rdg)))
        bases = {k: math.exp(statistics.median(v)) for k, v in logs.items()}
        cost = fit_cost(points, bases, c)
        if best is None or cost < best[0] - 1e-12:
            best = (cost, bases, c)
    if best is None or not best[1]:
        return {}, 0.0
    return best[1], best[2]


def fit_cost(points: Sequence[tuple[str, float, float, float, str]], bases: dict[str, float], c: float) -> float:
    """Total absolute log error of the model (``bases``, ``c``) over the points of the GPU families it has a base
    for, those with e* inside the search bounds."""
    return sum(
        abs(math.log(implied) - math.log(bases[fam] * size_factor(hidden, c * rdg)))
        for fam, hidden, rdg, implied, _ in points
        if fam in bases and IMPLIED_LOW < implied < IMPLIED_HIGH
    )
