"""The portfolio solve's progress lines (issue 53: from the first second): the seconds since the command
began, the phase, and in the search the best schedule so far with its placed count, bound and gap."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...money import CENTS_PER_USD
from .data import JobData
from .greedy import Pass
from .lns import Search

# Seconds between the lines that count the jobs whose options are evaluated (the CLI thins them further
# where stderr is not a terminal).
OPTIONS_PROGRESS_EVERY_S = 1.0


def say_at(progress: Callable[[str], None] | None, started: float) -> Callable[[str], None]:
    """A line printer that puts the seconds since ``started`` (a perf_counter time) before each line; silent
    where ``progress`` is None."""

    def say(text: str) -> None:
        if progress is not None:
            progress(f"  {time.perf_counter() - started:6.1f} s  {text}")

    return say


def options_progress(say: Callable[[str], None]) -> Callable[[int, int], None]:
    """``prepare``'s progress as lines: one a second at most, the first a second in (a job's bad input found
    sooner is the only line), and the last."""
    last = [time.perf_counter()]

    def count(done: int, total: int) -> None:
        now = time.perf_counter()
        if done == total or now - last[0] >= OPTIONS_PROGRESS_EVERY_S:
            last[0] = now
            say(f"options  {done:,}/{total:,} jobs evaluated")

    return count


def cost_gap(cost: float, bound: float) -> float:
    """The share of ``cost`` above ``bound`` (0 where the bound meets it, or nothing costs anything)."""
    return max(0.0, (cost - bound) / cost) if cost > 0 else 0.0


def placed_line(state: Search) -> str:
    """A construction step's line: the jobs placed, and the required ones still out."""
    placed = sum(p is not None for p in state.placed)
    missing = len(state.required_dropped())
    return f"placed {placed:,}/{len(state.jobs):,}" + (f", {missing:,} required out" if missing else "")


class BestSoFar:
    """The search's progress lines: each gives the best schedule so far, whichever step found it (iterated
    greedy's passes are worse than an earlier rounding at first; printed as they came they read as
    regressions), its placed jobs, and the bound and gap at that time."""

    def __init__(self, say: Callable[[str], None], jobs: list[JobData], bound: Callable[[], float]) -> None:
        self._say, self._jobs, self._bound = say, jobs, bound
        self._best: tuple[tuple[int, int], int, int] | None = None  # (dropped weight, cents), placed, required out

    def _tell(self, phase: str, found: tuple[tuple[int, int], int, int]) -> None:
        if self._best is None or found[0] < self._best[0]:
            self._best = found
        (_, cost), placed, missing = self._best
        extra = f"  {missing} required unplaced" if missing else ""
        bound = self._bound()
        self._say(
            f"{phase:<8} placed {placed:,}/{len(self._jobs):,}  best ${cost / CENTS_PER_USD:,.2f}  "
            f"bound ${bound / CENTS_PER_USD:,.2f}  gap {cost_gap(cost, bound):.2%}{extra}"
        )

    def search(self, phase: str, state: Search) -> None:
        placed = sum(p is not None for p in state.placed)
        score = (state.dropped_weight(), state.cost_cents())
        self._tell(phase, (score, placed, len(state.required_dropped())))

    def greedy_pass(self, p: Pass) -> None:
        missing = sum(1 for job, q in zip(self._jobs, p.placed) if q is None and job.required)
        self._tell("reorder", (p.score, sum(q is not None for q in p.placed), missing))
