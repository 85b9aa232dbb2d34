"""``portfolio``: many jobs sharing GPU pools and one budget over a calendar (docs/design.md section 10).

Time runs in steps of ``time_step`` (default one hour) from the portfolio start. The model is built by
``build``; the solve is lexicographic, in two CP-SAT runs: first the weight of dropped jobs (a required
job weighs more than all optional ones together, so a schedule always exists and the greedy schedule is
a complete warm start), then, with that weight fixed, the portfolio's objective. When CP-SAT finds
nothing in time the greedy schedule is the answer, labelled. A required job still dropped makes the
answer infeasible only when the first run proved it; otherwise the status is unknown. Small portfolios go to the
whole model (``exact``); larger cost portfolios to the search (``phases.PortfolioSearch``), then, up to
``POLISH_JOBS`` jobs, the whole model hinted with its schedule. Every phase's time is counted in work
(``work.budget``), so two runs give the same answer; the time kept for the output is ``timing``'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...inputs.schema import Catalog, Portfolio
from ...results import PortfolioResult
from . import work
from .data import pool_specs, prepare, whole_steps
from .exact import LARGE_MODEL_OPTIONS, Choices, PortfolioData, _exact, _polish
from .extract import extract
from .phases import STOP_GAP, PortfolioSearch
from .progress import options_progress, say_at
from .timing import _extract_reserve, _plan_seconds, _unevaluated_note, _unproven_drops

# Cost portfolios with more jobs than this go to greedy + LP + large-neighbourhood search; smaller
# ones (and the makespan and lateness objectives) to the whole model in CP-SAT.
SEARCH_JOBS = 30
# Search-path portfolios up to this many jobs spend the second half of their time in the whole model
# in CP-SAT, hinted with the search's schedule: at this size it proves what the relaxations cannot and
# finds schedules the neighbourhoods miss (BENCHMARKS, "where the gap lives").
POLISH_JOBS = 100
POLISH_SHARE = 0.5  # of the time left after the options are built


@dataclass
class PortfolioOutcome:
    """The result, the model's data (for explanations), and whether dropping was proven optimal; the jobs the
    time limit left unevaluated (indices into the portfolio's jobs, ``data.prepare``) are in neither."""

    result: PortfolioResult
    model: PortfolioData
    dropped_proven: bool
    unevaluated: list[int] = field(default_factory=list)


def solve_portfolio(
    pf: Portfolio,
    catalog: Catalog,
    *,
    time_limit_s: float = 60.0,
    workers: int = 2,
    progress: Callable[[str], None] | None = None,
    started: float | None = None,
) -> PortfolioOutcome:
    """Schedule every job of the portfolio: which option, when, at what cost; what was dropped.
    ``started`` (a perf_counter time, default now) is when the time limit began to run."""
    started = time.perf_counter() if started is None else started
    read_s = time.perf_counter() - started  # the files, before this call
    deadline = started + time_limit_s
    step = pf.time_step_s
    horizon = whole_steps(pf.horizon_s, step)
    pools = pool_specs(pf, catalog, horizon)
    say = say_at(progress, started)
    prepared = prepare(
        pf,
        catalog,
        horizon,
        deadline - _extract_reserve(len(pf.jobs)),
        options_progress(say) if progress else None,
        workers,
    )
    jobs = prepared.jobs
    # what follows the search, at this machine's pace now: a few plans built and timed
    reserve = _extract_reserve(len(jobs), _plan_seconds(jobs))
    n_options = sum(len(job.options) for job in jobs)
    say(f"options  {len(jobs):,} jobs, {n_options:,} options")
    result = PortfolioResult(
        status="unknown",
        objective=pf.objective,
        total_cost_usd=0.0,
        gap=0.0,
        schedule=[],
        dropped=[],
        pools=[],
        budget_usd=pf.budget_usd,
        horizon_h=horizon * step / 3600.0,
        notes=[],
    )
    if prepared.unevaluated:
        result.notes.append(_unevaluated_note(pf, prepared, time_limit_s, read_s))
    data = PortfolioData(jobs, pools, horizon)
    if pf.objective == "cost" and len(jobs) > SEARCH_JOBS:
        polish = len(jobs) <= POLISH_JOBS and n_options <= LARGE_MODEL_OPTIONS
        until = deadline - POLISH_SHARE * (deadline - time.perf_counter()) if polish else deadline
        # the search's time counted in work (``work.budget``): the limit less the options and the output on the
        # reference machine; the wall clock (``until`` less the reserve measured now) stops it only if slower
        search_s = time_limit_s - work.options_s(prepared.tables, workers) - _extract_reserve(len(jobs))
        with work.budget(0.0, until - reserve) as clock:
            share = 1 - POLISH_SHARE if polish else 1.0
            choices, dropped_proven = _search(pf, data, result, share * search_s, workers, say, 0.0)
        say(f"search   {clock.spent:.1f} s of work counted in {time.perf_counter() - started:.1f} s")
        cut = clock.cut
        if polish and (result.gap > STOP_GAP or result.status != "optimal"):
            # counted in work too, from where the search's work ended to the end of the search's time
            with work.budget(clock.spent / work.SPEED, deadline - reserve) as polished:
                choices, dropped_proven = _polish(
                    pf, data, result, choices, dropped_proven, search_s, workers, progress, started
                )
            cut = cut or polished.cut
        result.notes += [work.CUT_NOTE] if cut else []
    else:
        # CP-SAT's time counted in work (its deterministic time), so that two runs give the same answer
        exact_s = time_limit_s - work.options_s(prepared.tables, workers) - _extract_reserve(len(jobs))
        with work.budget(0.0, deadline - reserve) as clock:
            choices, dropped_proven = _exact(pf, data, result, exact_s, workers, progress, started, time_limit_s)
        result.notes += [work.CUT_NOTE] if clock.cut else []
    unproven = _unproven_drops(jobs, choices, horizon)
    if unproven and not dropped_proven and pf.objective == "cost":
        which = (
            "1 optional job left out fits its window"
            if unproven == 1
            else f"{unproven} optional jobs left out fit their windows"
        )
        result.notes.append(
            f"{which}, and fewer drops were not proven impossible: the bound and the gap hold for schedules "
            "leaving out as much priority weight"
        )
    extract(pf, jobs, choices, pools, result)
    result.solve_s = time.perf_counter() - started
    return PortfolioOutcome(result, data, dropped_proven, prepared.unevaluated)


def _search(
    pf: Portfolio,
    data: PortfolioData,
    result: PortfolioResult,
    deadline: float,
    workers: int,
    say: Callable[[str], None],
    reserve: float,
) -> tuple[Choices, bool]:
    """Large cost portfolios: the search's phases (``phases.PortfolioSearch``) until ``deadline`` less
    ``reserve``; per job its option and start, and whether the drops are proven necessary."""
    return PortfolioSearch(pf, data, result, deadline, workers, say, reserve).run()
