"""Hours, GPU-hours and cost of a run: price x billed GPUs x billed hours (docs/design.md section 6.5).

Billing rounds the run up to the offer's increment; multi-node runs on offers that rent whole
nodes pay for every GPU of each node.
"""

from __future__ import annotations

import numpy as np


def billed_hours(hours, billing_increment_s) -> np.ndarray:
    increment_h = np.asarray(billing_increment_s, float) / 3600.0
    # The small epsilon keeps 125.0000000001 h (floating noise) from billing a whole extra increment.
    return np.ceil(np.asarray(hours, float) / increment_h - 1e-9) * increment_h


def run_cost_usd(price_usd_per_gpu_hour, gpus, hours, billing_increment_s=1.0) -> np.ndarray:
    """price x GPUs x hours, rounded up to the billing increment (seed 000: 1,000 GPU-h x $5.50 = $5,500)."""
    return (
        np.asarray(price_usd_per_gpu_hour, float) * np.asarray(gpus, float) * billed_hours(hours, billing_increment_s)
    )
