"""How uncertain a time estimate is: a lognormal spread around the physics' median.

Time = predicted x exp(sigma x Z), Z standard normal, so the prediction is the p50 and
p90 = p50 x exp(1.2816 sigma). Sigma combines, as independent log-errors:
- compute efficiency: 0.12 with the per-class default (published MFUs for one hardware class span
  roughly 0.35-0.55, i.e. about +-25 % around 0.45), 0.08 when the user states an efficiency;
- multi-node scaling: 0.10 when the run spans nodes and no explicit efficiency table covers it
  (network contention, stragglers).
"""

from __future__ import annotations

import math

from .context import HardwareRow, JobContext

Z90 = 1.2815515655446004


def sigma(ctx: JobContext, row: HardwareRow) -> float:
    compute = 0.12 if ctx.assumptions.mfu == "auto" else 0.08
    network = 0.10 if row.nodes > 1 and ctx.explicit_efficiency(row.nodes) is None else 0.0
    return math.hypot(compute, network)


def spread(ctx: JobContext, row: HardwareRow, z: float = Z90) -> float:
    """Multiplier from p50 to the quantile with standard score ``z`` (p90 by default)."""
    return math.exp(sigma(ctx, row) * z)


def sources(ctx: JobContext, row: HardwareRow) -> str:
    parts = ["compute efficiency " + ("(per-class default)" if ctx.assumptions.mfu == "auto" else "(stated)")]
    if row.nodes > 1 and ctx.explicit_efficiency(row.nodes) is None:
        parts.append("multi-node scaling")
    return ", ".join(parts)
