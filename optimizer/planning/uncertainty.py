"""How uncertain a time estimate is: a lognormal spread around the physics' median.

Time = predicted x exp(sigma x Z), Z standard normal, so the prediction is the p50 and
p90 = p50 x exp(1.2816 sigma). Sigma combines, as independent log-errors:
- compute efficiency: 0.12 with the per-class default (published MFUs for one hardware class span
  roughly 0.35-0.55, about +-25 % around 0.45: see the validation table in BENCHMARKS.md); 0.08 when
  the user states an efficiency; 0.06 when projected from a measurement on other hardware (the
  measured factor carries over, the bound may shift); 0.02 at a measured configuration (run-to-run noise),
  or what the calibration misses there where measurements share one factor (|log predicted / measured|);
- multi-node scaling: 0.10 when the run spans nodes and neither an explicit efficiency nor a
  measurement covers it (network contention, stragglers).
"""

from __future__ import annotations

import math

from ..physics import reliability
from ..physics.constants import Z90
from .context import HardwareRow, JobContext
from .reliability import checkpoint_hours, interruption_rate


def _terms(ctx: JobContext, row: HardwareRow) -> list[tuple[str, float]]:
    lean = ctx.calibration.leaning(row) if ctx.calibration.active else None
    if ctx.is_measured(row) and (miss := ctx.measured_miss(row)) > 0.02:
        # (each measurement is an anchor the calibration meets; a miss is a layout the peak moved)
        compute = (f"measured on this configuration, which the calibration misses by {math.expm1(miss):.0%}", miss)
    elif ctx.is_measured(row):
        compute = ("measured on this configuration", 0.02)
    elif lean is not None:
        compute = (f"throughput {lean.describe(row.gpus)}", 0.06)
    elif ctx.calibration.active:
        compute = ("compute efficiency projected from a measurement", 0.06)
    elif ctx.assumptions.mfu == "auto" and ctx.assumptions.matmul_efficiency == "auto":
        compute = ("compute efficiency (per-class default)", 0.12)
    else:
        compute = ("compute efficiency (stated)", 0.08)
    terms = [compute]
    if row.nodes > 1 and ctx.explicit_efficiency(row.nodes) is None and not ctx.is_measured(row):
        terms.append(("multi-node scaling", 0.10))
    return terms


def sigma(ctx: JobContext, row: HardwareRow) -> float:
    return math.sqrt(sum(s * s for _, s in _terms(ctx, row)))


def spread(ctx: JobContext, row: HardwareRow, z: float = Z90) -> float:
    """Multiplier from p50 to the quantile with standard score ``z`` (p90 by default)."""
    return math.exp(sigma(ctx, row) * z)


def p90_hours(ctx: JobContext, row: HardwareRow, tokens_per_s: float) -> float:
    """p90 hours: the lognormal efficiency spread on the 90th-percentile interruption count."""
    a = ctx.assumptions
    train_h = ctx.job.total_tokens / tokens_per_s / 3600.0
    rate, checkpoint_h, restart_h = interruption_rate(ctx, row), checkpoint_hours(ctx, row), a.restart_s / 3600.0
    # Rare interruptions have a p90 count of zero: never go below the expected time.
    interrupted = max(
        reliability.quantile_hours(train_h, rate, checkpoint_h, restart_h),
        float(reliability.expected_hours(train_h, rate, checkpoint_h, restart_h)),
    )
    return interrupted * spread(ctx, row) + a.startup_s / 3600.0


def sources(ctx: JobContext, row: HardwareRow) -> str:
    text = "; ".join(f"{name} (sigma {s:.2f})" for name, s in _terms(ctx, row))
    # spot rows count both (reliability.interruption_rate)
    return text + (
        "; hardware failures and spot preemptions (Poisson p90)" if row.spot else "; hardware failures (Poisson p90)"
    )
