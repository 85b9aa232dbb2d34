"""Each job's cheapest slot at the Lagrangian relaxation's capacity prices, and how far a schedule's
placement of it is from there (docs/design.md section 10.6).

With prices lambda_kt >= 0 (cents per GPU-step, per pool), a job's priced cost at (option o, start s) is

    rc_j(o, s) = c_o + g_o sum_(t in [s, s + d_o)) lambda_k(o)t

and for every schedule placing every job (cost minus the relaxation's value at those prices):

    cost - L(lambda) = sum_j [rc_j(placement) - min rc_j]  +  sum_kt lambda_kt (capacity_kt - use_kt)

Both sums are non-negative. The first ("slot excess") is what moving jobs towards their cheapest priced
slot can win; the second is priced capacity left idle. On the constructed benchmark the first is about
three quarters of the gap (bench/portfolio_gap.py), so the search frees the jobs with the largest
excess together with the jobs around their cheapest slot.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...money import usd_to_cents
from .lp import window


@dataclass
class PricedSlots:
    """Per job: its cheapest priced cost (cents; inf when nothing fits its window), and that slot's pool
    and middle step; per pool, the prefix sums of the prices (prefix[k][t] = sum of steps before t)."""

    best_cents: np.ndarray
    pool: np.ndarray
    middle: np.ndarray
    prefix: list[np.ndarray]
    option_cents: list[list[float]]  # per job and option: its cheapest priced cost (inf: does not fit)

    def shortlist(self, job: int, count: int) -> list[int]:
        """The ``count`` options of a job whose cheapest priced slot costs least, cheapest first."""
        ranked = sorted(range(len(self.option_cents[job])), key=lambda i: self.option_cents[job][i])
        return [i for i in ranked[:count] if np.isfinite(self.option_cents[job][i])]

    def priced_cents(self, cents: int, pool: int, gpus: int, start: int, steps: int) -> float:
        """A placement's cost with its GPU-steps priced in."""
        return cents + gpus * float(self.prefix[pool][start + steps] - self.prefix[pool][start])


def priced_slots(jobs, pool_of: dict[str, int], horizon: int, prices: list[np.ndarray]) -> PricedSlots:
    """The cheapest (option, start) of every job at ``prices``, over the starts its window allows."""
    prefix = [np.concatenate(([0.0], np.cumsum(np.asarray(p[:horizon], dtype=np.float64)))) for p in prices]
    n = len(jobs)
    best = np.full(n, np.inf)
    pool = np.zeros(n, dtype=np.int64)
    middle = np.zeros(n, dtype=np.int64)
    option_cents: list[list[float]] = []
    for j, job in enumerate(jobs):
        r, lim = window(job, horizon)
        option_cents.append([np.inf] * len(job.options))
        for i, (opt, d) in enumerate(zip(job.options, job.durations)):
            if not 0 < d <= lim - r:
                continue
            k = pool_of[opt.row.offer_name]
            sums = prefix[k][r + d : lim + 1] - prefix[k][r : lim - d + 1]
            s = int(np.argmin(sums))
            value = usd_to_cents(opt.cost_usd) + opt.row.gpus * float(sums[s])
            option_cents[j][i] = value
            if value < best[j]:
                best[j], pool[j], middle[j] = value, k, r + s + d // 2
    return PricedSlots(best, pool, middle, prefix, option_cents)
