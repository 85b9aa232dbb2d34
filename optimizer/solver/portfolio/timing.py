"""What a portfolio's time limit keeps for what follows the search (the schedule turned into plans, explanations
and the command's output, at this machine's pace), and what the answer says of the time: the jobs the limit left
unevaluated, the optional jobs left out that fit their windows."""

from __future__ import annotations

import time

from ...inputs.schema import Portfolio
from ...planning.plans import plan_from
from .data import JobData, Prepared
from .exact import Choices
from .lp import fits_window

# Each plan the search's schedule becomes costs about this many times its own construction in what follows
# the search: the plan, the explanations and the command's output (measured at 5,000 jobs under load:
# 0.82 ms a plan, the plans 3.5 s, the table 7.2 s, YAML 11.6 s: 3.1 times the plans with the table, 4.3
# with YAML; 4.5 left a 20 s limit no time for the search where the table took 11 s of the 19 kept).
OUTPUT_PER_PLAN = 3.5


PLAN_SAMPLE = 40  # plans timed to measure the pace


def _plan_seconds(jobs: list[JobData]) -> float | None:
    """Seconds one plan takes to build (``plan_from``) on this machine now, from ``PLAN_SAMPLE`` jobs' first
    options spread over the portfolio: the pace of turning the schedule into plans and writing them out."""
    step = max(1, len(jobs) // PLAN_SAMPLE)
    picked = [job for job in jobs[::step] if job.options][:PLAN_SAMPLE]
    if not picked:
        return None
    t0 = time.perf_counter()
    for job in picked:
        opt = job.options[0]
        plan_from(job.table.ctx, opt.row, job.table.evaluation, opt.index)
    return (time.perf_counter() - t0) / len(picked)


def _extract_reserve(n_jobs: int, plan_s: float | None = None) -> float:
    """Seconds kept for what follows the search: the schedule turned into plans and explanations, and the
    command's output. Measured at 5,000 jobs (session 15): plans 1.5-1.8 s, the table 3.1 s, JSON 0.5 s,
    YAML 3.8 s, the plot 0.5 s, about 1.2 ms per job at most (plans took 8.5 s before ``bound_at``): 2 ms a
    job. ``plan_s``: a plan's time measured now (``_plan_seconds``), which raises it on a slower or busier
    machine (issue 40: 5,000 jobs at a 20 s limit ran 29 s with YAML output, the plans and YAML alone 15 s)."""
    floor = 0.3 + 0.002 * n_jobs
    return floor if plan_s is None else max(floor, 0.3 + OUTPUT_PER_PLAN * plan_s * n_jobs)


def _unevaluated_note(pf: Portfolio, prepared: Prepared, time_limit_s: float, read_s: float) -> str:
    """What the time limit left unevaluated, and what would have helped: the time, and, only where many jobs
    have a shape of their own, giving jobs of one shape the same spec (reading the files is said where it
    took a good part of the limit)."""
    done, total = len(prepared.jobs), len(pf.jobs)
    text = (
        f"the time limit ({time_limit_s:g} s) ran out while the jobs' options were evaluated: {done:,} of {total:,} "
        f"jobs ({prepared.tables:,} of {prepared.shapes:,} distinct job shapes, each one evaluation) are scheduled "
        f"from what was evaluated, the other {total - done:,} left out"
    )
    if read_s > 0.25 * time_limit_s:
        text += f"; reading the files took {read_s:.1f} s of it"
    fix = "raise --time-limit"
    if prepared.shapes > 0.5 * total and total >= 10:
        fix += (
            ", or give jobs that may share one evaluation the same model, method, batch, assumptions and GPU "
            "filter (jobs differing only in tokens share one too)"
        )
    return f"{text}; {fix}"


def _unproven_drops(jobs: list[JobData], choices: Choices, horizon: int) -> int:
    """The optional jobs left out although an option of theirs fits their window."""
    return sum(1 for job, (o, _) in zip(jobs, choices) if o is None and not job.required and fits_window(job, horizon))
