"""Candidate tables kept small for portfolios: each row's evaluation cut to the layouts that can be its best.

A job's table evaluates every layout of every row (up to 125,000 layouts for a full fine-tune on the default
catalog, tens of MB of arrays), but the portfolio reads one layout per row: the row's best (``best_layout``),
for its own token count and, through ``retimed``, for the other jobs of its shape. Within a row every layout's
hours are the same increasing function of its step time (``_run_hours_and_cost``: interruptions, checkpoints
and start-up are per row), so the layouts that tie for the row's shortest hours at one token count are the
ones that do at any other. Keeping those (and each row's current pick, for the rows nothing fits) gives the
same candidates, for every token count, from a few layouts per row; ``retime`` then gives another token
count's table without choosing each row's best again wherever the ties are the same."""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

import numpy as np

from ...planning.candidates import CandidateTable, retimed
from ...planning.context import JobContext
from ...planning.evaluation import _run_hours_and_cost

# Layouts within this share of their row's shortest hours count as tied (``best_layout`` rounds hours to 1e-9 h).
TIE = 1e-6


def _take(value, idx: np.ndarray, n: int):
    """``value`` with every per-layout array (first axis ``n`` long) cut to ``idx``, through nested dataclasses."""
    if isinstance(value, np.ndarray):
        return value[idx] if value.ndim >= 1 and value.shape[0] == n else value
    if is_dataclass(value) and not isinstance(value, type):
        return replace(value, **{f.name: _take(getattr(value, f.name), idx, n) for f in fields(value) if f.init})
    return value


def compact(table: CandidateTable) -> CandidateTable:
    """``table`` with its evaluation cut to the layouts that can be a row's best at any token count: the same
    candidates, and the same ones again from ``retimed`` (tested in tests/solver/test_portfolio_scale.py)."""
    ev = table.evaluation
    n = len(ev.row)
    if n == 0:
        return table
    keep = np.zeros(n, dtype=bool)
    keep[[c.index for c in table.candidates if c.index >= 0]] = True
    ok = ev.fits & np.isfinite(ev.hours)
    if ok.any():
        hours = np.where(ok, ev.hours, np.inf)
        shortest = np.full(len(table.rows), np.inf)
        np.minimum.at(shortest, ev.row, hours)
        keep |= ok & (hours <= shortest[ev.row] * (1 + TIE))
    idx = np.flatnonzero(keep)
    if len(idx) == n:
        return table
    at = np.full(n, -1, dtype=np.int64)
    at[idx] = np.arange(len(idx))
    candidates = [replace(c, index=int(at[c.index])) if c.index >= 0 else c for c in table.candidates]
    small = CandidateTable(table.ctx, table.rows, _take(ev, idx, n), candidates)
    small.unevaluated = table.unevaluated
    return small


def _tied(hours: np.ndarray, ok: np.ndarray, row: np.ndarray, n_rows: int) -> np.ndarray:
    """Per layout, whether it is among its row's shortest (hours rounded as ``best_layout`` rounds them)."""
    rounded = np.where(ok, np.round(hours, 9), np.inf)
    shortest = np.full(n_rows, np.inf)
    np.minimum.at(shortest, row, rounded)
    return ok & (rounded == shortest[row])


def retime(table: CandidateTable, ctx: JobContext) -> CandidateTable:
    """``retimed(table, ctx)``: ``table`` for another token count. Where each row's shortest layouts are the
    same ones at the new hours (always, for a ``compact`` table, up to rounding), each row keeps its pick
    (the rest of ``best_layout``'s order does not depend on tokens) and only its hours and cost change: a
    vector operation, where choosing every row's best again took 7 ms a job. Otherwise ``retimed`` itself."""
    ev = table.evaluation
    hours, cost = _run_hours_and_cost(ctx, table.rows, ev.row, ev.timing)
    ok = ev.fits & np.isfinite(ev.hours)
    now = ev.fits & np.isfinite(hours)
    n_rows = len(table.rows)
    if not np.array_equal(ok, now) or not np.array_equal(
        _tied(ev.hours, ok, ev.row, n_rows), _tied(hours, now, ev.row, n_rows)
    ):
        return retimed(table, ctx)
    out = CandidateTable(ctx, table.rows, replace(ev, hours=hours, cost_usd=cost))
    out.candidates = [
        replace(c, time_s=float(hours[c.index] * 3600.0), cost_usd=float(cost[c.index])) if c.index >= 0 else c
        for c in table.candidates
    ]
    out.unevaluated = table.unevaluated
    return out
