"""The search's clock counts work, not wall seconds, so that a search its budget cuts short ends in the same
schedule on a fast machine and on a busy one (issue 53, docs/design.md section 10).

Inside ``budget``, ``now()`` is the clock's origin plus the work charged so far, in seconds of the reference
machine (2 cores): every read of the clock, every window a greedy or search step scans (``charge_scan``), every
ascent iteration over the options, every CP-SAT neighbourhood's deterministic time and every LP's time limit. Each
phase's share of the time limit is then a share of that work, and where it stops depends on the input and the flags
only. The wall clock stays as a safety stop: past ``stop_at`` the clock reads infinity, every phase stops at its
next check with the best schedule it has, and ``Clock.cut`` says the answer is the wall clock's. Outside ``budget``
(tests of one phase, the options), ``now()`` is ``time.perf_counter()``.

Small portfolios' whole model in CP-SAT (``exact``) runs under a budget too, its deterministic time the work. A
deadline computed after the stop is infinite: phases compare with ``past`` and ``left``, never subtract the clock
themselves (infinity less infinity is NaN, which no comparison stops).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

# Seconds of the reference machine per unit of each kind of work, calibrated on the 1,000-job benchmarks
# (bench/portfolio_bench.py, distinct and constructed, 2 cores, the machine shared): a clock read (the loop around it
# does at least that much), a window scan and each step it covers, per ascent iteration each option row and each cell
# of its range-minimum tables, a second of CP-SAT deterministic time, a job in a neighbourhood's model, a simplex pivot
# per column.
READ_S = 2e-5
SCAN_S = 1.5e-5
SCAN_STEP_S = 2e-9
ASCENT_ROW_S = 1.8e-7
ASCENT_CELL_S = 4e-9
CPSAT_S = 6.0
MODEL_JOB_S = 1.2e-2
LP_PIVOT_S = 3e-8
# Seconds of the reference machine per second of CP-SAT deterministic time on the whole model (``solve._two_phase``).
CPSAT_MODEL_S = 3.0
# Seconds to build the whole model in CP-SAT (``build``), per option (30-300 distinct jobs: 170-300 us).
BUILD_OPTION_S = 2.5e-4
# The least a neighbourhood step costs (its model and solver, when it frees no job or CP-SAT does nothing), so
# that every turn of the search's loop moves its clock on.
STEP_FLOOR_S = 1e-3
# Work-seconds the options take per distinct job shape evaluated, on one of ``workers`` processes (1,000 distinct
# jobs, 2 workers: 26-44 s for 997 tables). Charged whether a table was built or read from the on-disk cache, so
# that the cache makes a run faster, never different.
TABLE_S = 0.068
# Work-seconds per wall second of the time limit: below 1, the budget leaves the wall clock room for a machine
# that runs slower than the reference one before the safety stop cuts a phase.
SPEED = 1.0


@dataclass
class Clock:
    """Work charged since ``origin`` (a perf_counter time), and the wall-clock safety stop."""

    origin: float
    stop_at: float = math.inf
    spent: float = 0.0
    cut: bool = False

    def now(self) -> float:
        """The origin plus the work so far; infinity once the wall clock passed ``stop_at``."""
        self.spent += READ_S
        if self.cut or time.perf_counter() >= self.stop_at:
            self.cut = True
            return math.inf
        return self.origin + self.spent / SPEED


CUT_NOTE = (
    "the wall clock stopped the search before its work budget ran out (this machine ran slower than the one the "
    "budget is calibrated on): the schedule is the best found by then, and another run may end in another one"
)


def options_s(tables: int, workers: int) -> float:
    """The options' time on the reference machine: ``TABLE_S`` per table, over ``workers`` processes."""
    return TABLE_S * tables / max(1, workers)


_clock: ContextVar[Clock | None] = ContextVar("portfolio_work_clock", default=None)


@contextmanager
def budget(origin: float, stop_at: float) -> Iterator[Clock]:
    """Count the work of what runs inside from ``origin`` on, with the wall clock stopping it at ``stop_at``."""
    clock = Clock(origin, stop_at)
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


def now() -> float:
    """The search's time: work-counted inside ``budget``, the wall clock's otherwise."""
    clock = _clock.get()
    return time.perf_counter() if clock is None else clock.now()


def left(deadline: float) -> float:
    """Seconds of the search's time from now to ``deadline``: 0 once past it, and once the wall clock stopped the
    budget, whatever ``deadline`` is. Never NaN: a deadline set after the stop is infinite (now plus a share of
    nothing), and infinity less the clock's infinity is NaN, which no ``<`` stops (session 30: a repair search
    given such a deadline ran 35 minutes)."""
    return between(now(), deadline)


def between(t: float, deadline: float) -> float:
    """Seconds from time ``t`` to ``deadline``, 0 if none or either is infinite the same way (never NaN)."""
    gap = deadline - t
    return gap if gap > 0 else 0.0  # (NaN > 0 is false)


def share_of(share: float, deadline: float) -> float:
    """The time at which ``share`` of what is left to ``deadline`` will have passed (``left``)."""
    t = now()
    return t + share * between(t, deadline)


def past(deadline: float) -> bool:
    """Whether ``deadline`` has passed (always, once the wall clock stopped the budget)."""
    return not now() < deadline


def charge(seconds: float) -> None:
    """Count this much reference-machine work (nothing outside ``budget``)."""
    clock = _clock.get()
    if clock is not None:
        clock.spent += seconds


def charge_scan(steps: int) -> None:
    """Count one scan of a window of ``steps`` steps (``greedy._fit_mask``)."""
    clock = _clock.get()
    if clock is not None:
        clock.spent += SCAN_S + SCAN_STEP_S * steps


def counting() -> bool:
    """Whether a work budget is running (CP-SAT is then limited by deterministic time)."""
    return _clock.get() is not None


def wall_left() -> float:
    """Wall seconds to the safety stop (infinite outside ``budget``)."""
    clock = _clock.get()
    return math.inf if clock is None else max(0.0, clock.stop_at - time.perf_counter())


def stop() -> None:
    """Mark the running budget stopped by the wall clock (a run apart that it stopped: ``lagrange.Apart``)."""
    clock = _clock.get()
    if clock is not None:
        clock.cut = True


def cut() -> bool:
    """Whether the wall clock stopped the running budget."""
    clock = _clock.get()
    return clock is not None and clock.cut
