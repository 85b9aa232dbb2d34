"""``portfolio``: many jobs sharing GPU pools and one budget over a calendar (docs/design.md section 10).

Time runs in steps of ``time_step`` (default one hour) from the portfolio start. The model is built by
``build``; the solve is lexicographic, in two CP-SAT runs: first the weight of dropped jobs (a required
job weighs more than all optional ones together, so a schedule always exists and the greedy schedule is
a complete warm start), then, with that weight fixed, the portfolio's objective. When CP-SAT finds
nothing in time the greedy schedule is the answer, labelled. A required job still dropped makes the
answer infeasible only when the first run proved it; otherwise the status is unknown.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from ...inputs.schema import Catalog, Portfolio
from ...physics.constants import CENTS_PER_USD, optimality_gap, usd_to_cents
from ...physics.constants import budget_cents as budget_cents_of
from ...planning.plans import plan_from
from ...results import PortfolioResult
from . import work
from .build import PortfolioModel, build, warm_start
from .data import JobData, PoolSpec, Prepared, pool_specs, prepare, shortlist, whole_steps
from .extract import extract
from .greedy import (
    Fit,
    Placement,
    greedy_schedule,
    guided_schedule,
    largest_first_order,
    reorder_search,
    squeaky_wheel,
)
from .lagrange import Apart, Ascent, LagrangeBound
from .lns import Search, search
from .lp import drop_weights, fits_window, lp_bound
from .progress import BestSoFar, cost_gap, options_progress, placed_line, say_at
from .slots import PricedSlots, priced_slots

# Past this many options, jobs keep a shortlist and presolve skips probing (measured: probing ate
# 13 s of a 13 s limit at 1,000 jobs before search started).
LARGE_MODEL_OPTIONS = 5_000

# Cost portfolios with more jobs than this go to greedy + LP + large-neighbourhood search; smaller
# ones (and the makespan and lateness objectives) to the whole model in CP-SAT.
SEARCH_JOBS = 30
# From this many jobs on, the search's greedy passes pack each job against its neighbours instead of at
# its earliest start: 1,000 jobs gain 0.7-1.8 points at 60 s, 200 jobs lose 0.4 (BENCHMARKS, session history).
CONTACT_JOBS = 500
# Search-path portfolios up to this many jobs spend the second half of their time in the whole model
# in CP-SAT, hinted with the search's schedule: at this size it proves what the relaxations cannot and
# finds schedules the neighbourhoods miss (BENCHMARKS, "where the gap lives").
POLISH_JOBS = 100
POLISH_SHARE = 0.5  # of the time left after the options are built
STOP_GAP = 1e-4  # the search stops early once its gap to the bound is below this
# The ascent resumed after iterated greedy, aimed at the improved schedule's cost: its share of the time
# then left.
REFINE_SHARE = 0.25
ASCENT_SHARE = 0.6  # the first ascent's share: 1,000 distinct jobs 1.55 % -> 0.91 % at 23.5 s of work
# Seconds to wait, after the search, for the ascent run apart to stop and send its answer.
APART_WAIT_S = 2.0
# Share of the search's time for putting in the jobs the first schedule leaves out (measured at 1,000
# jobs where the pools of most jobs' cheapest options are short, ``--pools-sized mixed``: greedy left 16
# optional jobs out, insertion put 8 of them in within 13 s).
PLACE_SHARE = 0.15
# Shares of the time then left: rounding the relaxation's schedule (repairs included: at 1,000 jobs with
# evenly sized pools its 7 missing jobs took 15 s to put in), then iterated greedy until it stalls, with
# less time when the rounded schedule won (measured, 60 s: 1,000 jobs on demand-sized pools 0.98-1.03 %
# either way, evenly sized 2.8-3.0 % where 80 % left the repairs too late; 200 jobs 1.0-1.1 %, where
# skipping iterated greedy altogether gave 1.21-1.32 %).
ROUND_SHARE = 0.3
# Share of the neighbourhoods' time kept for a last ascent when jobs are still left out at their start
# (``_search``). Measured at 1,000 jobs (``--pools-sized mixed``): the ascent for every job placed
# converges in about 2 s.
FINAL_BOUND_SHARE = 0.15
# Roundings tried, each after an ascent aimed this much higher than the last. The rounding's cost swings
# with the ascent's last iterations; measured at 1,000 jobs on demand-sized pools, after insertion, for
# ascents aimed at 1.000, 1.003, 1.006 and 1.010 x the first schedule's cost: 1.4, 1.6, 1.7 and 1.2 %
# above the bound (seed 0), 1.1, 1.5, 1.0 and 1.3 % (seed 1); seed 3 gave 2.0 % aimed at $182,903.79
# and 1.1 % at $182,904.
ROUND_TRIES = 4
ROUND_TARGET_STEP = 0.004
REORDER_SHARE = 0.8
REORDER_SHARE_ROUNDED = 0.25
# When the rounded schedule lacks jobs the incumbent places, the share of the search's time it has to put
# them in before the incumbent takes over (measured at 1,000 jobs, seed 2 of the demand-sized benchmark:
# an optional job it never placed, so the whole search went to a schedule that lost at the end, 1.55 %).
REPAIR_SHARE = 0.3
# After a rounding that does not beat the incumbent, the next one lets a job that finds no room for the
# relaxation's option take one of its this many cheapest options at the relaxation's prices. Measured at
# 1,000 jobs on the instance issue 13 was measured on (``--prices uniform``, seed 0; its LP splits 109 jobs
# over options): every rounding lost to iterated greedy (it left 50-60 jobs out, too many to put in by
# ejection in time), 4.8-5.5 % at 60 s; with this 3.1 % and 4.9 % in two runs (the widened rounding needs
# time for a second rounding after the first one's insertions; 2.2 % where the second always fell back).
# Letting every rounding fall back cost 0.4-1 point on demand-sized, evenly sized and mixed pools (1.37 %,
# 1.75 %, 2.13 % where 0.6-0.7 %, 1.2-1.6 %, 1.0-1.1 %): there insertion puts the few left-out jobs on their
# own options, which a fallback to a slower GPU does not.
ROUND_FALLBACKS = 3
# A required job a rounding still leaves out after its insertions goes in once more with ejection chains
# this deep (``Search.insert``). Measured on the instance, replaying one run's rounding with
# fallbacks: 17 jobs left out by the relaxation's schedule, one required job still out after the two
# insertion passes (the rounding then loses to the complete, costlier first one, and the run ends at
# 4.5-4.8 % from iterated greedy's schedule); the deeper chain put it in at once, $314,378.84 complete
# against the incumbent's $318,241.97. Inserting every left-out job this deep made that rounding take
# 11 s instead of 1.7 s, hence only the required ones still out.
ROUND_DEEP_INSERT_DEPTH = 2
# Past this many options GLOP's proof that the required jobs cannot all be placed is not tried: at 10,000
# distinct jobs (675,696 options, 922 required jobs out on pools sized for 1,000) the roundings and GLOP ran
# from 400 s to the end of a 600 s limit, the peak rose from 0.95 GB to 3.5 GB (max RSS; 1.05 GB on pools that
# hold every job, where GLOP does not run), no proof came, and the search had no time to put any job in.
# 1,000 distinct jobs have about 67,000 options.
LP_PROOF_OPTIONS = 200_000
# Share of the search's time for putting in, before anything else, the required jobs the first schedule
# leaves out (``_rescue_required``; the neighbourhoods' repairs go on with those still out). At 1,000
# distinct jobs none is out; at 10,000 on the same pools 984 were, at 2-7 s each.
RESCUE_SHARE = 0.1

Choices = list[tuple[int | None, int]]  # per job: option index (None: dropped) and start step


class _Progress(cp_model.CpSolverSolutionCallback):
    """Prints the phase, the best objective, the bound and the gap while CP-SAT solves."""

    def __init__(self, out: Callable[[str], None], started: float | None = None, lp_bound: float | None = None):
        super().__init__()
        self._out = out
        self._t0 = time.perf_counter() if started is None else started
        self.lp_bound = lp_bound  # cents, raises the cost phase's bound
        self.phase = "jobs"  # "jobs": dropped weight; then the objective (cost in USD, or its own unit)

    def on_solution_callback(self) -> None:
        value, bound = self.objective_value, self.best_objective_bound
        if self.phase == "cost":
            bound = max(bound, self.lp_bound or 0.0)
            gap = (value - bound) / value if value else 0.0
            text = f"cp-sat   cost ${value / CENTS_PER_USD:,.2f}  bound ${bound / CENTS_PER_USD:,.2f}  gap {gap:.2%}"
        elif self.phase == "jobs":
            text = f"cp-sat   dropped weight {value:,.0f}  bound {bound:,.0f}"
        else:
            text = f"cp-sat   {self.phase} objective {value:,.0f}  bound {bound:,.0f}"
        self._out(f"  {time.perf_counter() - self._t0:6.1f} s  {text}")


@dataclass
class PortfolioOutcome:
    """The result, the model's data (for explanations), and whether dropping was proven optimal; the jobs the
    time limit left unevaluated (indices into the portfolio's jobs, ``data.prepare``) are in neither."""

    result: PortfolioResult
    model: PortfolioData
    dropped_proven: bool
    unevaluated: list[int] = field(default_factory=list)


@dataclass
class PortfolioData:
    """What explanations need: the jobs with their options, the pools, the horizon in steps."""

    jobs: list[JobData]
    pools: list[PoolSpec]
    horizon: int


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
        result.notes += [work.CUT_NOTE] if clock.cut else []
        if polish and (result.gap > STOP_GAP or result.status != "optimal"):
            choices, dropped_proven = _polish(
                pf, data, result, choices, dropped_proven, deadline - reserve, workers, progress, started
            )
    else:
        choices, dropped_proven = _exact(pf, data, result, deadline - reserve, workers, progress, started, time_limit_s)
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


def _unproven_drops(jobs: list[JobData], choices: Choices, horizon: int) -> int:
    """The optional jobs left out although an option of theirs fits their window."""
    return sum(1 for job, (o, _) in zip(jobs, choices) if o is None and not job.required and fits_window(job, horizon))


def _search(
    pf: Portfolio,
    data: PortfolioData,
    result: PortfolioResult,
    deadline: float,
    workers: int,
    say: Callable[[str], None],
    reserve: float,
) -> tuple[Choices, bool]:
    """Large cost portfolios: a complete schedule by squeaky-wheel greedy, the Lagrangian relaxation
    (bound and capacity prices; the GLOP LP as well where it is small), greedy again at those prices,
    iterated greedy over job orders, then large-neighbourhood search with repair until the time limit
    (``deadline`` less ``reserve``, the seconds kept for what follows: ``_extract_reserve``)."""
    jobs, pools, horizon = data.jobs, data.pools, data.horizon
    pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
    budget_cents = None if pf.budget_usd is None else budget_cents_of(pf.budget_usd)
    weights = drop_weights(jobs)
    left = deadline - reserve - work.now()
    # Past CONTACT_JOBS jobs, a second first schedule, largest job first, each packed against its
    # neighbours (``contact_start``), and iterated greedy packs by contact too.
    fit: Fit = "contact" if len(jobs) >= CONTACT_JOBS else "earliest"
    starts: list[tuple[float, list[int] | None, Fit]] = [(0.1, None, "earliest")]
    if fit == "contact" and left > 0:
        starts.append((0.05, largest_first_order(jobs), "contact"))
    say(f"construct  {len(jobs):,} jobs: greedy passes")
    if left <= 0:  # the files and the options took the time: greedy's first pass is the answer, at once
        first = squeaky_wheel(jobs, pools, pool_of, horizon, budget_cents, 0.0, weights, passes=1)
        quick = Search(jobs, pools, pool_of, horizon, budget_cents, first.placed, workers)
        _rescue_required(quick, deadline)
        return _greedy_only(jobs, weights, quick.placed, result), False
    first = min(
        (
            squeaky_wheel(
                jobs, pools, pool_of, horizon, budget_cents, work.now() + share * left, weights, order=o, fit=f
            )
            for share, o, f in starts
        ),
        key=lambda p: p.score,
    )
    state = Search(jobs, pools, pool_of, horizon, budget_cents, first.placed, workers)
    say(f"construct  greedy: {placed_line(state)}")
    if state.required_dropped():
        _rescue_required(state, work.now() + RESCUE_SHARE * left)
        say(f"construct  rescue: {placed_line(state)}")
    # The jobs greedy left out, put in by ejection before the relaxation, which is for as few drops as
    # the schedule: every job placed here is one the relaxation may no longer drop.
    state.place_left_out(work.now() + PLACE_SHARE * left)
    result.method = "lp_lns"
    bounds = {"cheapest_options": _cheapest_bound(jobs, weights, state.dropped_weight())}

    def best() -> tuple[float, str]:
        # the highest in whole cents; on a tie the relaxation (which also proves the supply does not bind)
        source = max(bounds, key=lambda k: (round(bounds[k]), k != "cheapest_options"))
        return bounds[source], source

    report = BestSoFar(say, jobs, lambda: best()[0])

    def show(phase: str) -> None:
        report.search(phase, state)

    def ascent(
        until: float,
        target: float | None = None,
    ) -> LagrangeBound:
        """Subgradient ascent on the Lagrangian until ``until``, aimed at ``target`` (cents; default the
        current schedule's cost), for as few drops as the schedule (the answer never drops more; kept as
        ``relax.limit``). Each call resumes the last one (``Ascent``)."""
        return relax.run(
            state.dropped_weight(),
            deadline=until,
            target_cents=state.cost_cents() if target is None else target,
        )

    def rounded(
        lag: LagrangeBound, until: float, first: list[int] | None = None, widen: PricedSlots | None = None
    ) -> Search:
        """The relaxation's own schedule made whole: ``guided_schedule`` (``first``: jobs it places before
        the others; ``widen``: prices at which a job that finds no room for its own option tries its
        ``ROUND_FALLBACKS`` cheapest priced ones), single-job moves, then the jobs it left out put in by
        ejecting others (``Search.insert``): at the options the relaxation gives them most of, then, for
        those still out, at their cheapest option on each pool, and the required ones still out with deeper
        ejection chains (``ROUND_DEEP_INSERT_DEPTH``)."""
        fallback = None if widen is None else [widen.shortlist(k, ROUND_FALLBACKS) for k in range(len(jobs))]
        placed = guided_schedule(
            jobs, pools, pool_of, horizon, budget_cents, until, weights, lag.shares, lag.mean_start, first, fallback
        ).placed
        found = Search(jobs, pools, pool_of, horizon, budget_cents, placed, workers)
        found.move_each(until)
        for k in found.left_out():
            if work.now() >= until:
                break
            share = lag.shares[k]
            options = sorted(range(len(jobs[k].options)), key=lambda i: (-share.get(i, 0.0), found.cents[k][i]))
            found.insert(k, options, lag.mean_start[k])
        for k in found.left_out():  # still out: its cheapest option on each pool, where there may be room
            if work.now() >= until:
                break
            found.insert(k, sorted(found.cheapest_per_pool(k), key=lambda i: found.cents[k][i]), lag.mean_start[k])
        for k in found.required_dropped():  # required and still out: once more, with deeper ejection chains
            if work.now() >= until:
                break
            cheapest = sorted(found.cheapest_per_pool(k), key=lambda i: found.cents[k][i])
            found.insert(k, cheapest, lag.mean_start[k], ROUND_DEEP_INSERT_DEPTH)
        found.move_each(until)
        return found

    def roundings(lag: LagrangeBound, priced_at: PricedSlots, until: float) -> Search:
        """The best of up to ``ROUND_TRIES`` roundings, each of a relaxation from an ascent aimed a little
        higher than the last (``ROUND_TARGET_STEP``), then, if it still lacks jobs the incumbent places,
        repair steps for them until ``until``. Which jobs the rounding leaves out, and so its cost, swings
        with the last iterations of the ascent; the bound hardly moves."""
        best_found: Search | None = None
        widen = retry = False
        for attempt in range(ROUND_TRIES):
            started_try = work.now()
            if attempt:
                left_try = until - started_try
                lag = ascent(
                    started_try + 0.3 * left_try, target=state.cost_cents() * (1 + ROUND_TARGET_STEP * attempt)
                )
                if lag.bound_cents is None:
                    break
                bounds["lagrangian_relaxation"] = max(bounds["lagrangian_relaxation"], lag.bound_cents)
            found = rounded(lag, until, widen=priced_at if widen else None)
            # a rounding that does not beat the incumbent: the next ones let jobs fall back (``ROUND_FALLBACKS``)
            lost = not (score(found) < score(state) or ahead(found, state))
            retry, widen = lost and not widen, lost
            if best_found is None or score(found) < score(best_found):
                best_found = found
            took = work.now() - started_try
            # no time for another try and its repairs; the first with fallbacks needs time only for itself
            # (on the issue's own instance, one run: the first rounding lost after 5 of its 13 s and the one
            # with fallbacks, which beat the incumbent in the other runs, never came; 5.15 %)
            if work.now() + (took if retry else 2 * took) > until:
                break
        assert best_found is not None
        short = missing(best_found, state)
        if short and work.now() < until:
            # once more with the jobs it lacks placed before the others (squeaky wheel across roundings):
            # measured on evenly sized pools, a rounding that lacked one 8-GPU job whose window its pool
            # had filled (no insertion or repair step put it in, so the answer fell back to the incumbent,
            # 3.3 % against 1.4-2.0 %) came out complete this way in 4 of 7 traced runs (BENCHMARKS.md,
            # session 13)
            again = rounded(lag, until, first=short)
            if score(again) < score(best_found):
                best_found = again
                short = missing(best_found, state)
        if short and work.now() < until:
            search(best_found, until, slots=priced_at, place=short)
        return best_found

    show("greedy")
    relax = Ascent(jobs, pools, pool_of, horizon, budget_cents)
    rounded_won = False
    dropped_proven = False
    guide: list[float] | None = None
    slots: PricedSlots | None = None
    lp = None
    if left > 1.0:
        lag = ascent(work.now() + ASCENT_SHARE * left)
        if lag.bound_cents is not None:
            bounds["lagrangian_relaxation"] = lag.bound_cents
            guide = lag.choice_cents
            slots = priced_slots(jobs, pool_of, horizon, lag.prices)
            priced = Search(
                jobs,
                pools,
                pool_of,
                horizon,
                budget_cents,
                squeaky_wheel(
                    jobs,
                    pools,
                    pool_of,
                    horizon,
                    budget_cents,
                    work.now() + 0.05 * left,
                    weights,
                    prices=lag.prices,
                ).placed,
                workers,
            )
            if score(priced) < score(state):
                state = priced
            show("bound")
            found = roundings(lag, slots, work.now() + ROUND_SHARE * max(0.0, deadline - reserve - work.now()))
            # still without some job the incumbent places, but ahead of it (``ahead``): the search goes
            # on from it, with a share of the time to put those jobs in; if it cannot, the incumbent is the
            # schedule again (the answer ranks dropped weight first)
            if score(found) < score(state) or ahead(found, state):
                incumbent, state, rounded_won = state, found, True
                show("rounded")
                if short := missing(state, incumbent):
                    until = work.now() + REPAIR_SHARE * max(0.0, deadline - reserve - work.now())
                    search(state, until, guide_cents=guide, report=show, slots=slots, place=short)
                    if score(incumbent) < score(state):
                        state, rounded_won = incumbent, False
        else:
            show("bound")
        n_options = sum(len(job.options) for job in jobs)
        # The converged Lagrangian is the time-indexed LP, at least as strong as GLOP's bucketed one
        # (which adds only the dependencies): measured, GLOP took 12 s of a 60 s limit at 200 jobs and
        # never raised the bound, so it runs only where the Lagrangian did not converge.
        settled = lag.converged and not any(job.after for job in jobs)
        proof = state.required_dropped() and n_options <= LP_PROOF_OPTIONS
        if (n_options <= LARGE_MODEL_OPTIONS and not settled) or proof:
            # GLOP: a second bound where it is small, and the proof that no schedule places every required
            # job when one is still left out (no fractional schedule does; ``LP_PROOF_OPTIONS``)
            lp = lp_bound(jobs, pools, pool_of, horizon, budget_cents, state.dropped_weight(), time_limit_s=0.2 * left)
            if lp.bound_cents is not None:
                bounds["lp_relaxation"] = lp.bound_cents
                guide = guide or lp.fractional_cents
            if lp.infeasible and state.required_dropped():
                check = lp_bound(jobs, pools, pool_of, horizon, budget_cents, None, time_limit_s=0.1 * left)
                dropped_proven = check.infeasible
            show("lp")
    # Iterated greedy over job orders until it stalls (measured, before rounding: at 1,000 jobs it gained
    # ten times what CP-SAT neighbourhoods do), then CP-SAT neighbourhoods. Not where the schedule already
    # drops less than greedy did: its passes drop no less than the first one, which ejections beat.
    if first.score[0] <= state.dropped_weight():
        share = REORDER_SHARE_ROUNDED if rounded_won else REORDER_SHARE
        reorder_until = work.now() + share * max(0.0, deadline - reserve - work.now())
        reordered = reorder_search(
            jobs,
            pools,
            pool_of,
            horizon,
            budget_cents,
            reorder_until,
            weights,
            first,
            report=report.greedy_pass,
            fit=fit,
            rival=score(state),
        )
        if reordered.score < score(state):
            state = Search(jobs, pools, pool_of, horizon, budget_cents, reordered.placed, workers)
            rounded_won = False
    # Where jobs that fit are still left out, the neighbourhoods may put some in; then the bounds, each
    # for as many drops as the schedule had when it was computed, are weaker than one for the final
    # drops, so a last ascent gets a share of the time.
    relaxed = "lagrangian_relaxation" in bounds
    last = FINAL_BOUND_SHARE * max(0.0, deadline - reserve - work.now()) if relaxed and state.left_out() else 0

    def refined(again: LagrangeBound | None) -> None:
        nonlocal guide, slots
        if again is not None and again.bound_cents is not None and again.bound_cents > bounds["lagrangian_relaxation"]:
            bounds["lagrangian_relaxation"] = again.bound_cents
            guide = again.choice_cents
            slots = priced_slots(jobs, pool_of, horizon, again.prices)
        show("bound")

    # The ascent resumed, more patient and aimed at the improved schedule's cost: the first one's Polyak
    # target (the first schedule, 7 % above the bound at 1,000 jobs) stops it short of the LP. It gets
    # ``REFINE_SHARE`` of the time; with two workers it runs apart, on the second core, while the search
    # begins (``Ascent.run_apart``; the search's relocations use one core), otherwise before the search.
    apart: Apart | None = None
    if relaxed and work.now() < deadline - reserve:
        until = work.now() + REFINE_SHARE * max(0.0, deadline - reserve - work.now())
        if workers >= 2:
            apart = relax.run_apart(state.dropped_weight(), deadline=until, target_cents=state.cost_cents())
        if apart is None:
            refined(ascent(until))

    def neighbourhoods(until: float) -> None:
        target = best()[0] / (1 - STOP_GAP) if len(bounds) > 1 else None
        search(state, until, guide_cents=guide, report=show, target_cents=target, slots=slots)

    try:
        neighbourhoods(deadline - reserve - last)
    finally:
        if apart is not None:
            refined(apart.collect(APART_WAIT_S))
    # (the last ascent's drop limit is the smallest: the schedule never drops more than it did)
    if last and relax.limit is not None and state.dropped_weight() < relax.limit:
        final = ascent(deadline - reserve)
        if final.bound_cents is not None and final.bound_cents > bounds["lagrangian_relaxation"]:
            bounds["lagrangian_relaxation"] = final.bound_cents
            show("bound")
    elif last:
        neighbourhoods(deadline - reserve)  # no fewer drops: the time kept goes back to the search
    if _rescue_required(state, deadline - reserve):
        show("rescue")
    cost = state.cost_cents()
    bound, source = best()
    result.bound_source = source
    # every schedule costs whole cents, so a bound within a cent of the cost proves it (the bounds are
    # shaved by their float tolerance, which would otherwise leave a gap of 1e-7)
    proven = math.ceil(bound - 1e-6) >= cost
    if proven:
        bound = float(cost)
    result.bound_usd = round(bound / CENTS_PER_USD, 2)
    result.gap = cost_gap(cost, bound)
    result.status = "optimal" if proven and not state.required_dropped() and cost > 0 else "feasible"
    if result.status == "optimal" and state.dropped_weight() > 0:
        result.status = "feasible"  # the bound is for as few drops; fewer might exist
    # how many steps the neighbourhoods took depends on the machine's pace: a progress line, not the answer's
    # (two runs that end in the same schedule give the same answer)
    say(f"search   {state.improved} improving steps of {state.steps}")
    result.notes.append(
        "schedule by squeaky-wheel greedy + Lagrangian relaxation + "
        + ("the relaxation's schedule rounded" if rounded_won else "iterated greedy")
        + f" + large-neighbourhood search; gap against the {source.replace('_', ' ')} bound"
        + ("" if lp is None or lp.bound_cents is not None else " (the LP did not finish in time)")
    )
    return [(p[0], p[1]) if p else (None, 0) for p in state.placed], dropped_proven


def _rescue_required(state: Search, until: float) -> int:
    """Before a required job is given up, ``Search.rescue`` tries it on every pool with room in its window
    (the jobs it waits for moved earlier where they end too late for it): all of them with single ejections,
    then those still out with chains ``ROUND_DEEP_INSERT_DEPTH`` deep, until ``until`` (a perf_counter time;
    an ejection under way stops there too: at 10,000 jobs one deep rescue took minutes, and 984 required
    jobs were out); the number put in."""
    state.stop_at, put = until, 0
    try:
        for depth in dict.fromkeys((1, ROUND_DEEP_INSERT_DEPTH)):
            for k in state.required_dropped():
                if work.now() >= until:
                    return put
                put += state.rescue(k, depth)
        return put
    finally:
        state.stop_at = float("inf")


def _greedy_only(jobs: list[JobData], weights: list[int], placed: list[Placement], result: PortfolioResult) -> Choices:
    """The answer when no time is left for the search: the greedy schedule, its gap against every placed job
    at its cheapest option (and every required job, when none may be dropped), said as such."""
    dropped = sum(w for w, p in zip(weights, placed) if p is None)
    cost = sum(usd_to_cents(job.options[p[0]].cost_usd) for job, p in zip(jobs, placed) if p is not None)
    bound = _cheapest_bound(jobs, weights, dropped)
    result.method, result.status, result.bound_source = "greedy", "feasible", "cheapest_options"
    result.bound_usd = round(bound / CENTS_PER_USD, 2)
    result.gap = cost_gap(cost, bound)
    result.notes.append(
        "the time limit left no time for the search (reading the files and evaluating the options took it): "
        "this is the greedy schedule (earliest deadline first, cheapest option that fits); gap against every "
        "job at its cheapest option; raise --time-limit for the search"
    )
    return [(p[0], p[1]) if p else (None, 0) for p in placed]


def _polish(
    pf: Portfolio,
    data: PortfolioData,
    result: PortfolioResult,
    choices: Choices,
    dropped_proven: bool,
    deadline: float,
    workers: int,
    progress: Callable[[str], None] | None,
    started: float,
) -> tuple[Choices, bool]:
    """The whole model in CP-SAT (two phases, ``_two_phase``) hinted with the search's schedule; keeps
    whichever schedule drops less weight, then costs less, and the higher of the two bounds. Both bounds
    hold for the kept schedule: the search's is for as many drops as its own schedule or fewer, CP-SAT's
    for as many as its phase 1 proved or found, never more than the hint's."""
    jobs, pools, horizon = data.jobs, data.pools, data.horizon
    pm = build(pf, jobs, pools, horizon)
    placed: list[Placement] = [(o, s) if o is not None else None for o, s in choices]
    warm_start(pm, placed)
    solver, status, proven = _two_phase(pm, deadline, workers, progress, started, False, None)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return choices, dropped_proven
    weights = drop_weights(jobs)

    def score(ch: Choices) -> tuple[int, int]:
        dropped = sum(w for w, (o, _) in zip(weights, ch) if o is None)
        return dropped, sum(usd_to_cents(job.options[o].cost_usd) for job, (o, _) in zip(jobs, ch) if o is not None)

    found: Choices = [(v.picked(solver), solver.value(start)) for v, start in zip(pm.jv, pm.starts)]
    best = min(found, choices, key=score)
    cost = score(best)[1]
    bound = max(result.bound_usd * CENTS_PER_USD if result.bound_usd is not None else 0.0, solver.best_objective_bound)
    if status == cp_model.OPTIMAL and best is found:
        bound = float(cost)
    raised = bound > (result.bound_usd or 0.0) * CENTS_PER_USD + 0.5
    if raised:
        result.bound_source = "cp_sat"
    result.bound_usd = round(bound / CENTS_PER_USD, 2)
    result.gap = cost_gap(cost, bound)
    if status == cp_model.OPTIMAL and proven and best is found:
        result.status = "optimal"  # the fewest drops proven, then the least cost for them
    result.notes.append(
        f"then the whole model in CP-SAT from that schedule ({'optimal' if status == cp_model.OPTIMAL else 'stopped'}"
        f"{', a better schedule' if best is found and score(found) < score(choices) else ''})"
        + ("; the gap is now against CP-SAT's bound" if raised else "")
    )
    return best, dropped_proven or proven


def score(s: Search) -> tuple[int, int]:
    """A schedule's rank, lexicographic: dropped weight, then cost."""
    return s.dropped_weight(), s.cost_cents()


def missing(s: Search, other: Search) -> list[int]:
    """The jobs ``other`` places and ``s`` does not."""
    return [k for k, (p, q) in enumerate(zip(s.placed, other.placed)) if p is None and q is not None]


def ahead(s: Search, complete: Search) -> bool:
    """Whether ``s`` costs less than ``complete`` even with the jobs it lacks at their cheapest option."""
    return s.cost_cents() + sum(min(complete.cents[k]) for k in missing(s, complete)) < complete.cost_cents()


def _cheapest_bound(jobs: list[JobData], weights: list[int], dropped_limit: int) -> float:
    """Cents: every required job at its cheapest option, when dropping one would drop more than allowed."""
    return float(
        sum(
            min(usd_to_cents(c.cost_usd) for c in job.options)
            for job, w in zip(jobs, weights)
            if job.options and w > dropped_limit
        )
    )


def _extract_reserve(n_jobs: int, plan_s: float | None = None) -> float:
    """Seconds kept for what follows the search: the schedule turned into plans and explanations, and the
    command's output. Measured at 5,000 jobs (session 15): plans 1.5-1.8 s, the table 3.1 s, JSON 0.5 s,
    YAML 3.8 s, the plot 0.5 s, about 1.2 ms per job at most (plans took 8.5 s before ``bound_at``): 2 ms a
    job. ``plan_s``: a plan's time measured now (``_plan_seconds``), which raises it on a slower or busier
    machine (issue 40: 5,000 jobs at a 20 s limit ran 29 s with YAML output, the plans and YAML alone 15 s)."""
    floor = 0.3 + 0.002 * n_jobs
    return floor if plan_s is None else max(floor, 0.3 + OUTPUT_PER_PLAN * plan_s * n_jobs)


def _exact(
    pf: Portfolio,
    data: PortfolioData,
    result: PortfolioResult,
    deadline: float,
    workers: int,
    progress: Callable[[str], None] | None,
    started: float,
    time_limit_s: float,
) -> tuple[Choices, bool]:
    """The whole model in CP-SAT (two phases), warm-started from greedy; greedy when it finds nothing."""
    jobs, pools, horizon = data.jobs, data.pools, data.horizon
    large = sum(len(job.options) for job in jobs) > LARGE_MODEL_OPTIONS
    if large:
        total = sum(len(job.options) for job in jobs)
        for job in jobs:
            job.options, job.durations = shortlist(job.options, job.durations)
        result.notes.append(
            f"large portfolio: each job keeps its two cheapest and its fastest option per offer "
            f"({sum(len(job.options) for job in jobs):,} of {total:,} options); the optimum is over that shortlist"
        )
    budget_cents = None if pf.budget_usd is None else budget_cents_of(pf.budget_usd)
    if time.perf_counter() >= deadline:  # no time for the model (5,000 jobs: seconds to build): greedy at once
        pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
        placed = greedy_schedule(jobs, pools, pool_of, horizon, budget_cents)
        return _greedy_only(jobs, drop_weights(jobs), placed, result), False
    pm = build(pf, jobs, pools, horizon)
    placed = greedy_schedule(jobs, pools, pm.pool_of, horizon, budget_cents)
    greedy_cost = sum(usd_to_cents(job.options[p[0]].cost_usd) for job, p in zip(jobs, placed) if p)
    say_at(progress, started)(f"greedy   cost ${greedy_cost / CENTS_PER_USD:,.2f}")
    warm_start(pm, placed)
    lp_cents = None
    if pf.objective == "cost":
        weights = drop_weights(jobs)
        dropped = sum(w for w, p in zip(weights, placed) if p is None)
        left = deadline - time.perf_counter()
        lp = lp_bound(jobs, pools, pm.pool_of, horizon, budget_cents, dropped, time_limit_s=max(0.5, 0.2 * left))
        lp_cents = lp.bound_cents
    solver, status, dropped_proven = _two_phase(pm, deadline, workers, progress, started, large, lp_cents)
    result.method = "cp_sat"
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        result.status = "optimal" if status == cp_model.OPTIMAL else "feasible"
        bound, source = solver.best_objective_bound, "cp_sat"
        if lp_cents is not None and lp_cents > bound and pf.objective == "cost":
            # The LP bound holds for as few drops as the greedy schedule: valid if CP-SAT's is no better.
            new_drop = sum(w for w, v in zip(drop_weights(jobs), pm.jv) if v.picked(solver) is None)
            if new_drop >= sum(w for w, p in zip(drop_weights(jobs), placed) if p is None):
                bound, source = lp_cents, "lp_relaxation"
        if status == cp_model.OPTIMAL:
            bound = solver.objective_value
        result.gap = optimality_gap(solver.objective_value, bound, status == cp_model.OPTIMAL)
        if pf.objective == "cost":
            result.bound_usd = round(bound / CENTS_PER_USD, 2)
            result.bound_source = source
        choices: Choices = [(v.picked(solver), solver.value(start)) for v, start in zip(pm.jv, pm.starts)]
    else:
        result.status = "feasible"
        result.method = "greedy"
        choices = [(p[0], p[1]) if p else (None, 0) for p in placed]
        result.gap = _greedy_gap(pm, choices)
        result.bound_source = "cheapest_options"
        result.notes.append(
            f"CP-SAT found no schedule within {time_limit_s:g} s: this is the greedy schedule "
            "(earliest deadline first, cheapest option); raise --time-limit or coarsen time_step"
        )
    return choices, dropped_proven


def _two_phase(
    pm: PortfolioModel, deadline: float, workers: int, progress, started: float, large: bool, lp_cents: float | None
) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus, bool]:
    """Minimise the dropped weight (a third of the time left), then, with it fixed, the objective."""
    m = pm.pm.model
    solver = pm.pm.solver(max(0.1, (deadline - time.perf_counter()) / 3), workers=workers)
    if large:
        solver.parameters.cp_model_probing_level = 0
    callback = _Progress(progress, started, lp_cents) if progress else None
    dropped = pm.dropped_weight()
    m.minimize(dropped)
    status = solver.solve(m, callback)
    dropped_proven = status == cp_model.OPTIMAL
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        m.add(dropped <= round(solver.objective_value))
        m.clear_hints()
        for v in pm.jv:
            for pick in v.picks:
                m.add_hint(pick, solver.boolean_value(pick))
        for start in pm.starts:
            m.add_hint(start, solver.value(start))
        solver.parameters.max_time_in_seconds = max(0.1, deadline - time.perf_counter())
        m.minimize(pm.objective())
        if callback:
            callback.phase = pm.pf.objective
        status = solver.solve(m, callback)
    return solver, status, dropped_proven


def _greedy_gap(pm: PortfolioModel, choices: Choices) -> float:
    """The greedy schedule's gap against each scheduled job's cheapest option."""
    picked = [(job, i) for job, (i, _) in zip(pm.jobs, choices) if i is not None]
    cost = sum(job.options[i].cost_usd for job, i in picked)
    floor = sum(min(c.cost_usd for c in job.options) for job, _ in picked)
    return (cost - floor) / cost if cost else 0.0
