"""Achieved matmul efficiency: what share of a GPU's dense peak a training step's matmuls reach.

A small model with a measured basis (docs/design.md section 5.10):

    e = base[family, precision class] x size(hidden)
    size(h) = (h / (h + h_half)) / (REF / (REF + h_half))       (1 at h = REF = 8,192)

``base`` is the efficiency on large GEMMs per GPU family (Hopper, Blackwell, ...) and precision class
(16-bit, or low precision: FP8 / MXFP8, as a share of the low-precision peak, which end to end gains far
less than the 2x of the peaks); ``size`` captures that narrow models (hidden 4,096) run smaller, less
efficient GEMMs than wide ones. The parameters are fitted by ``bench/throughput.py --fit`` on the
published layouts of validation/throughput_runs.yaml, and their leave-one-out errors are reported in
BENCHMARKS.md. Families or precision classes without measurements keep the per-form-factor default
(physics/constants.py: DEFAULT_COMPUTE_EFFICIENCY). A catalog row's ``default_mfu`` or a job's
``assumptions.mfu`` replaces the model.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

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

# Shipped parameters: none yet. `python bench/throughput.py --fit` fits them on the 27 dense rows of
# validation/throughput_runs.yaml; on 2026-11-30 (Hopper 16-bit 0.534, Hopper low precision 0.582,
# Blackwell low precision 0.616, hidden_half 3,072) their leave-one-out median error was 10.2 %, worse
# than the per-form-factor constant's 7.5 % on the same rows once attention runs at the 16-bit peak
# (physics/time.py); 10.4 % against 9.3 % after the ZeRO-3 traffic corrections (rings over every NIC of a
# node, weights held over the step under PP), so the constant stays the default until a fit beats it
# held out (BENCHMARKS.md).
FITTED_BASE: dict[tuple[str, str], float] = {}
FITTED_HIDDEN_HALF = 0.0

IMPLIED_LOW, IMPLIED_HIGH = 0.021, 0.99  # e* at these bounds: the layout, not the efficiency, is mis-modelled
HIDDEN_HALF_GRID = tuple(float(h) for h in (0, 256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192))


def family_of(architecture: str, form_factor: str = "sxm") -> str:
    """The GPU family, qualified by form factor unless SXM (a PCIe card of the same chip runs lower clocks
    and power, so it is its own family: 'hopper-pcie')."""
    family = next((fam for key, fam in FAMILY_OF_ARCHITECTURE if key in architecture), "other")
    return family if form_factor == "sxm" else f"{family}-{form_factor}"


def precision_class(precision: str) -> str:
    """16-bit (bf16, fp16) or low precision (fp8, mxfp8, nvfp4): each is a share of its own peak."""
    return "16" if precision in ("bf16", "fp16") else "low"


def size_factor(hidden: float, hidden_half: float) -> float:
    """Relative GEMM efficiency of a model of width ``hidden``: 1 at 8,192; 1 when unknown (params only)."""
    if hidden <= 0 or hidden_half <= 0:
        return 1.0
    return (hidden / (hidden + hidden_half)) / (REFERENCE_HIDDEN / (REFERENCE_HIDDEN + hidden_half))


def matmul_efficiency(architecture: str, form_factor: str, precision: str, hidden: float) -> float | None:
    """The fitted efficiency for this GPU, precision and model width, or None where nothing was fitted."""
    base = FITTED_BASE.get((family_of(architecture, form_factor), precision_class(precision)))
    return None if base is None else base * size_factor(hidden, FITTED_HIDDEN_HALF)


def fit_bases(points: Sequence[tuple[str, str, float, float]]) -> tuple[dict[tuple[str, str], float], float]:
    """Least absolute deviations in log space (robust to the few layouts whose non-compute time gpuplan
    mis-models, which push e* to its bounds): for each hidden_half of the grid the best base per group is
    the median of e* / size; the hidden_half with the least total absolute log error wins. Points whose
    e* sits at a bound of the search (0.02 or 1) say nothing about efficiency and are left out.
    ``points``: (family, precision class, hidden, implied efficiency e*)."""
    points = [p for p in points if IMPLIED_LOW < p[3] < IMPLIED_HIGH]
    best: tuple[float, dict[tuple[str, str], float], float] | None = None
    for half in HIDDEN_HALF_GRID:
        logs: dict[tuple[str, str], list[float]] = {}
        for fam, cls, hidden, implied in points:
            logs.setdefault((fam, cls), []).append(math.log(implied / size_factor(hidden, half)))
        bases = {k: math.exp(statistics.median(v)) for k, v in logs.items()}
        sse = sum(
            abs(math.log(implied) - math.log(bases[(fam, cls)] * size_factor(hidden, half)))
            for fam, cls, hidden, implied in points
        )
        if best is None or sse < best[0] - 1e-12:
            best = (sse, bases, half)
    if best is None:
        return {}, 0.0
    return best[1], best[2]
