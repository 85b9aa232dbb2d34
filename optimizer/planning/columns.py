"""Structs of per-layout arrays (``Layout``, ``RunSettings``, ``StepTime`` and the like): a subset of their rows, and
several of them one after the other, each field a column of n entries or one value for every layout."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

import numpy as np


def is_column(value: object, n: int) -> bool:
    return isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == n


def take(value, idx: np.ndarray, n: int):
    """``value`` (a struct of arrays with ``n`` entries, or a scalar) at the entries ``idx``."""
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: take(getattr(value, f.name), idx, n) for f in fields(value) if f.init})
    return value[idx] if is_column(value, n) else value


def concat(values: list, lengths: list[int]):
    """Structs of arrays (or scalars) of ``lengths`` entries each, one after the other."""
    first = values[0]
    if is_dataclass(first) and not isinstance(first, type):
        return replace(
            first,
            **{f.name: concat([getattr(v, f.name) for v in values], lengths) for f in fields(first) if f.init},
        )
    if all(v is None for v in values):
        return None
    columns = [is_column(v, n) for v, n in zip(values, lengths)]
    if not any(columns) and all(np.array_equal(v, first) for v in values):
        return first  # job-wide (the model's FLOPs per token, a term that is 0 for every layout)
    return np.concatenate([v if c else np.broadcast_to(v, (n,)) for v, c, n in zip(values, columns, lengths)])
