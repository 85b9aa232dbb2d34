"""Interruptions: hardware failures and spot preemptions, with periodic checkpoints and restarts.

- Failure rate: Llama 3 (Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.4) saw 419
  unexpected interruptions in 54 days of pre-training on 16,384 H100s: 419 / (16,384 x 54 x 24) =
  1.97e-5 per GPU-hour (a per-GPU MTBF of about 50,700 hours). A job on G GPUs is interrupted at
  G x that rate, plus nodes x the offer's preemption rate on spot capacity.
- Checkpoint interval: Young's optimum tau = sqrt(2 delta M) (Young 1974, "A first order
  approximation to the optimum checkpoint interval"), M the job's mean time between interruptions,
  delta the time to write a checkpoint.
- Expected time (first order, Daly 2006): T (1 + delta / tau) + N (tau / 2 + R), with N = T / M
  interruptions, each losing half an interval of work on average plus the restart time R.
- p90: the same with N at the 90th percentile of a Poisson count of mean T / M.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

# Above this mean the Poisson count is summed in thousands of terms; its normal approximation
# (mean + z sqrt(mean), continuity-corrected) is then within one count of the exact quantile.
NORMAL_APPROXIMATION_MEAN = 500.0


def interruption_rate_per_hour(gpus, nodes, failure_rate_per_gpu_hour: float, preemptions_per_node_hour=0.0):
    return np.asarray(gpus, float) * failure_rate_per_gpu_hour + np.asarray(nodes, float) * preemptions_per_node_hour


def checkpoint_interval_h(rate_per_hour, checkpoint_h):
    """Young's optimum interval (hours); infinite when nothing interrupts."""
    rate = np.asarray(rate_per_hour, float)
    with np.errstate(divide="ignore"):
        return np.where(
            rate > 0, np.sqrt(2.0 * np.asarray(checkpoint_h, float) / np.where(rate > 0, rate, 1.0)), np.inf
        )


def expected_hours(train_h, rate_per_hour, checkpoint_h, restart_h):
    """Failure-free hours T -> expected hours with checkpoints, lost work and restarts."""
    train_h, rate = np.asarray(train_h, float), np.asarray(rate_per_hour, float)
    tau = checkpoint_interval_h(rate, checkpoint_h)
    saving = np.where(np.isfinite(tau), np.asarray(checkpoint_h, float) / np.where(np.isfinite(tau), tau, 1.0), 0.0)
    lost = np.where(np.isfinite(tau), tau / 2.0, 0.0) + restart_h
    return train_h * (1.0 + saving) + train_h * rate * lost


def poisson_quantile(mean: float, q: float = 0.9) -> int:
    """The smallest count k with P(N <= k) >= q for N ~ Poisson(mean)."""
    if mean <= 0:
        return 0
    if mean > NORMAL_APPROXIMATION_MEAN:
        return max(0, int(math.ceil(mean + NormalDist().inv_cdf(q) * math.sqrt(mean) - 0.5)))
    k, term = 0, math.exp(-mean)
    total = term
    while total < q:
        k += 1
        term *= mean / k
        total += term
    return k


def quantile_hours(
    train_h: float, rate_per_hour: float, checkpoint_h: float, restart_h: float, q: float = 0.9
) -> float:
    """Hours at quantile ``q`` of the number of interruptions (scalar)."""
    if rate_per_hour <= 0:
        return train_h
    tau = float(checkpoint_interval_h(rate_per_hour, checkpoint_h))
    count = poisson_quantile(train_h * rate_per_hour, q)
    return train_h * (1.0 + checkpoint_h / tau) + count * (tau / 2.0 + restart_h)
