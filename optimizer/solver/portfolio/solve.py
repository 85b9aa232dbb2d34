"""``portfolio``: many jobs sharing GPU pools and one budget over a calendar (docs/design.md section 10).

Time runs in steps of ``time_step`` (default one hour) from the portfolio start. The model is built by
``build``; the solve is lexicographic, in two CP-SAT runs: first the weight of dropped jobs (a required
job weighs more than all optional ones together, so a schedule always exists and the greedy schedule is
a complete warm start), then, with that weight fixed, the portfolio's objective. When CP-SAT finds
nothing in time the greedy schedule is the answer, labelled. A required job still dropped makes the
answer infeasible only when the first run proved it; otherwise the status is unknown. Small portfolios go to the
whole model (``exact``); larger cost portfolios to the search here (``_search``), then, up to ``POLISH_JOBS``
jobs, the whole model hinted with its schedule. Every phase's time is counted in work (``work.budget``), so two
runs give the same answer; the time kept for the output is ``timing``'s.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...inputs.schema import Catalog, Portfolio
from ...physics.constants import CENTS_PER_USD
from ...physics.constants import budget_cents as budget_cents_of
from ...results import PortfolioResult
from . import work
from .data import pool_specs, prepare, whole_steps
from .ejection import ahead, missing, score
from .exact import LARGE_MODEL_OPTIONS, Choices, PortfolioData, _cheapest_bound, _exact, _greedy_only, _polish
from .extract import extract
from .greedy import (
    Fit,
    guided_schedule,
    largest_first_order,
    reorder_search,
    squeaky_wheel,
)
from .lagrange import Apart, Ascent, LagrangeBound
from .lns import Search, search
from .lp import drop_weights, lp_bound
from .progress import BestSoFar, cost_gap, options_progress, placed_line, say_at
from .slots import PricedSlots, priced_slots
from .timing import _extract_reserve, _plan_seconds, _unevaluated_note, _unproven_drops

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
    """Large cost portfolios: a complete schedule by squeaky-wheel greedy, the Lagrangian relaxation
    (bound and capacity prices; the GLOP LP as well where it is small), greedy again at those prices,
    iterated greedy over job orders, then large-neighbourhood search with repair until the time limit
    (``deadline`` less ``reserve``, the seconds kept for what follows: ``_extract_reserve``)."""
    jobs, pools, horizon = data.jobs, data.pools, data.horizon
    pool_of = {offer: k for k, p in enumerate(pools) for offer in p.offers}
    budget_cents = None if pf.budget_usd is None else budget_cents_of(pf.budget_usd)
    weights = drop_weights(jobs)
    left = work.left(deadline - reserve)
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
            if work.past(until):
                break
            share = lag.shares[k]
            options = sorted(range(len(jobs[k].options)), key=lambda i: (-share.get(i, 0.0), found.cents[k][i]))
            found.insert(k, options, lag.mean_start[k])
        for k in found.left_out():  # still out: its cheapest option on each pool, where there may be room
            if work.past(until):
                break
            found.insert(k, sorted(found.cheapest_per_pool(k), key=lambda i: found.cents[k][i]), lag.mean_start[k])
        for k in found.required_dropped():  # required and still out: once more, with deeper ejection chains
            if work.past(until):
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
                lag = ascent(
                    started_try + 0.3 * work.between(started_try, until),
                    target=state.cost_cents() * (1 + ROUND_TARGET_STEP * attempt),
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
            if work.cut() or work.now() + (took if retry else 2 * took) > until:
                break
        assert best_found is not None
        short = missing(best_found, state)
        if short and not work.past(until):
            # once more with the jobs it lacks placed before the others (squeaky wheel across roundings):
            # measured on evenly sized pools, a rounding that lacked one 8-GPU job whose window its pool
            # had filled (no insertion or repair step put it in, so the answer fell back to the incumbent,
            # 3.3 % against 1.4-2.0 %) came out complete this way in 4 of 7 traced runs (BENCHMARKS.md,
            # session 13)
            again = rounded(lag, until, first=short)
            if score(again) < score(best_found):
                best_found = again
                short = missing(best_found, state)
        if short and not work.past(until):
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
            found = roundings(lag, slots, work.share_of(ROUND_SHARE, deadline - reserve))
            # still without some job the incumbent places, but ahead of it (``ahead``): the search goes
            # on from it, with a share of the time to put those jobs in; if it cannot, the incumbent is the
            # schedule again (the answer ranks dropped weight first)
            if score(found) < score(state) or ahead(found, state):
                incumbent, state, rounded_won = state, found, True
                show("rounded")
                if short := missing(state, incumbent):
                    until = work.share_of(REPAIR_SHARE, deadline - reserve)
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
        reorder_until = work.share_of(share, deadline - reserve)
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
    last = FINAL_BOUND_SHARE * work.left(deadline - reserve) if relaxed and state.left_out() else 0

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
    if relaxed and not work.past(deadline - reserve):
        until = work.share_of(REFINE_SHARE, deadline - reserve)
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
                if work.past(until):
                    return put
                put += state.rescue(k, depth)
        return put
    finally:
        state.stop_at = float("inf")
