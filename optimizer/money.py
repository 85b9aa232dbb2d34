"""Money as the planner counts it: the integer cents the CP-SAT models work in, a budget's whole cents, and the
cost difference under which two plans tie (the faster one then wins). A leaf module, beside physics/constants.py:
every layer may read it."""

from __future__ import annotations

import math

CENTS_PER_USD = 100  # the solver works in integer cents


def budget_cents(usd: float) -> int:
    """The most whole cents within a budget: a cost in cents (``usd_to_cents``) is within ``usd`` exactly when
    it is at most this. Rounding the budget instead let a $1.50 schedule through a $1.499 budget."""
    return int(math.floor(usd * CENTS_PER_USD + 1e-6))  # 1e-6: 1.15 x 100 is 114.99999999999999


# Near-ties under the cost objective (issue 46; constraints.cost_tolerance "auto"): a plan that costs at most
# the larger of these more than the cheapest one, and runs faster, is chosen over it. ASSUMPTION: a
# difference within 1 % is inside the price sheet's rounding and far inside the step-time model's own
# spread (sigma 0.06-0.12, planning/uncertainty.py), so it is no reason to run four times longer (seed 003:
# 1 B200 for 7.1 days at $909.08 had won over 4 B200 for 42.6 h at $909.40).
NEAR_TIE_FRACTION = 0.01
NEAR_TIE_MIN_USD = 1.0


def usd_to_cents(usd: float) -> int:
    """Integer cents for the CP-SAT model: the cents every result shows (``round(usd, 2)``, which rounds the
    decimal value). Rounding ``usd * 100`` instead counts $539.915 (stored just below) as 53,992 cents
    where the schedule shows $539.91, and a bound proven in those cents came out a cent above the cost."""
    return int(round(round(usd, 2) * CENTS_PER_USD))
