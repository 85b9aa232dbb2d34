"""A neighbourhood's pools in the large-neighbourhood search's CP-SAT model (solver/portfolio/lns.py): each
pool's GPUs as one cumulative constraint over the neighbourhood's optional intervals, with what the rest of the
schedule holds there as fixed blocks, one per step where the free capacity changes."""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model


def add_pool_capacity(
    m: cp_model.CpModel,
    by_pool: dict[int, list[tuple[cp_model.IntervalVar, int]]],
    spans: dict[int, list[int]],
    free: list[np.ndarray],
) -> None:
    """``by_pool``: each pool's (interval, GPUs) of the neighbourhood's options; ``spans``: the steps their
    windows cover; ``free[pool]``: the GPUs the rest of the schedule leaves free at each step."""
    for pool, items in by_pool.items():
        lo, hi = min(spans[pool]), max(spans[pool])
        window = free[pool][lo:hi]
        cap = int(window.max()) if len(window) else 0
        blocks = []
        cuts = np.flatnonzero(np.diff(window)) + 1
        bounds = [0, *cuts.tolist(), len(window)]
        for a, b in zip(bounds, bounds[1:]):
            gap = cap - int(window[a])
            if gap > 0:
                blocks.append((m.new_fixed_size_interval_var(lo + a, b - a, f"b{pool}_{a}"), gap))
        every = items + blocks
        m.add_cumulative([i for i, _ in every], [g for _, g in every], max(cap, 0))
