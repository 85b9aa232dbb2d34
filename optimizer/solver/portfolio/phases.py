"""The search for large cost portfolios as named phases (docs/design.md section 10.6): ``PortfolioSearch``.

Its fields are what the phases share: the incumbent schedule (``state``, a ``Search``), the lower bounds found so
far (``bounds``), the Lagrangian ascent (``relax``) and its prices (``guide``, ``slots``), and whether the
relaxation's rounded schedule is the one the search goes on from. ``run`` calls the phases in turn: the first
schedule (squeaky-wheel greedy, the required jobs rescued, the left-out ones put in), the first ascent with greedy
at its prices and the roundings of its schedule, the LP where it helps, iterated greedy over job orders, the
ascent resumed beside the neighbourhoods, a last bound, and the answer. Every phase's time is a share of the work
left (``work``), so the same portfolio gives the same schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ...inputs.schema import Portfolio
from ...money import CENTS_PER_USD
from ...money import budget_cents as budget_cents_of
from ...results import PortfolioResult
from . import work
from .data import JobData, PoolSpec
from .ejection import ahead, missing, score
from .exact import LARGE_MODEL_OPTIONS, Choices, PortfolioData, _cheapest_bound, _greedy_only
from .greedy import Fit, Pass, Placement, guided_schedule, largest_first_order, reorder_search, squeaky_wheel
from .lagrange import Apart, Ascent, LagrangeBound
from .lns import Search, search
from .lp import LpBound, drop_weights, lp_bound
from .progress import BestSoFar, cost_gap, placed_line
from .slots import PricedSlots, priced_slots

# From this many jobs on, the search's greedy passes pack each job against its neighbours instead of at
# its earliest start: 1,000 jobs gain 0.7-1.8 points at 60 s, 200 jobs lose 0.4 (BENCHMARKS, session history).
CONTACT_JOBS = 500
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
# (``PortfolioSearch.last_bound``). Measured at 1,000 jobs (``--pools-sized mixed``): the ascent for every job placed
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
class PortfolioSearch:
    """Large cost portfolios: a complete schedule by squeaky-wheel greedy, the Lagrangian relaxation (bound and
    capacity prices; the GLOP LP as well where it is small), greedy again at those prices, the relaxation's
    schedule rounded, iterated greedy over job orders, then large-neighbourhood search with repair until the time
    limit (``deadline`` less ``reserve``, the seconds kept for what follows: ``timing._extract_reserve``)."""

    pf: Portfolio
    data: PortfolioData
    result: PortfolioResult
    deadline: float
    workers: int
    say: Callable[[str], None]
    reserve: float
    jobs: list[JobData] = field(init=False)
    pools: list[PoolSpec] = field(init=False)
    horizon: int = field(init=False)  # steps
    pool_of: dict[str, int] = field(init=False)
    budget_cents: int | None = field(init=False)
    weights: list[int] = field(init=False)
    left: float = field(init=False)  # the search's seconds of work when it begins
    # Past CONTACT_JOBS jobs, a second first schedule, largest job first, each packed against its
    # neighbours (``contact_start``), and iterated greedy packs by contact too.
    fit: Fit = field(init=False)
    first: Pass = field(init=False)  # the first greedy schedule (iterated greedy starts from it)
    state: Search = field(init=False)  # the incumbent
    bounds: dict[str, float] = field(default_factory=dict)  # cents, by source
    report: BestSoFar = field(init=False)
    relax: Ascent = field(init=False)
    rounded_won: bool = False  # the search goes on from the relaxation's rounded schedule
    dropped_proven: bool = False  # the LP proved that no schedule places every required job
    guide: list[float] | None = None  # per job, what the relaxation spends on it
    slots: PricedSlots | None = None  # each job's cheapest slot at the relaxation's prices
    lp: LpBound | None = None

    def __post_init__(self) -> None:
        self.jobs, self.pools, self.horizon = self.data.jobs, self.data.pools, self.data.horizon
        self.pool_of = {offer: k for k, p in enumerate(self.pools) for offer in p.offers}
        self.budget_cents = None if self.pf.budget_usd is None else budget_cents_of(self.pf.budget_usd)
        self.weights = drop_weights(self.jobs)
        self.left = work.left(self.deadline - self.reserve)
        self.fit = "contact" if len(self.jobs) >= CONTACT_JOBS else "earliest"

    def run(self) -> tuple[Choices, bool]:
        """The phases in turn; per job its option and start, and whether its drops are proven necessary."""
        starts: list[tuple[float, list[int] | None, Fit]] = [(0.1, None, "earliest")]
        if self.fit == "contact" and self.left > 0:
            starts.append((0.05, largest_first_order(self.jobs), "contact"))
        self.say(f"construct  {len(self.jobs):,} jobs: greedy passes")
        if self.left <= 0:
            return self.greedy_only(), False
        self.construct(starts)
        self.show("greedy")
        self.relax = Ascent(self.jobs, self.pools, self.pool_of, self.horizon, self.budget_cents)
        if self.left > 1.0:
            lag = self.ascent(work.now() + ASCENT_SHARE * self.left)  # the first ascent: a bound and prices
            if lag.bound_cents is not None:
                self.bounds["lagrangian_relaxation"] = lag.bound_cents
                self.priced_greedy(lag)
                self.round_relaxation(lag)
            else:
                self.show("bound")
            self.linear_bound(lag)
        self.reorder()
        self.neighbourhoods_phase()
        return self.answer()

    def greedy_only(self) -> Choices:
        """No time left after the files and the options: greedy's first pass, its required jobs rescued, is the
        answer at once."""
        first = squeaky_wheel(
            self.jobs, self.pools, self.pool_of, self.horizon, self.budget_cents, 0.0, self.weights, passes=1
        )
        quick = self.searcher(first.placed)
        _rescue_required(quick, self.deadline)
        return _greedy_only(self.jobs, self.weights, quick.placed, self.result)

    def construct(self, starts: list[tuple[float, list[int] | None, Fit]]) -> None:
        """The first complete schedule: the better of the greedy ``starts`` (share of the time, first order, fit),
        its required jobs rescued and its left-out jobs put in by ejection; hands on ``state``, ``first`` and the
        cheapest-options bound."""
        jobs, left = self.jobs, self.left
        self.first = min(
            (
                squeaky_wheel(
                    jobs,
                    self.pools,
                    self.pool_of,
                    self.horizon,
                    self.budget_cents,
                    work.now() + share * left,
                    self.weights,
                    order=o,
                    fit=f,
                )
                for share, o, f in starts
            ),
            key=lambda p: p.score,
        )
        self.state = self.searcher(self.first.placed)
        self.say(f"construct  greedy: {placed_line(self.state)}")
        if self.state.required_dropped():
            _rescue_required(self.state, work.now() + RESCUE_SHARE * left)
            self.say(f"construct  rescue: {placed_line(self.state)}")
        # The jobs greedy left out, put in by ejection before the relaxation, which is for as few drops as
        # the schedule: every job placed here is one the relaxation may no longer drop.
        self.state.place_left_out(work.now() + PLACE_SHARE * left)
        self.result.method = "lp_lns"
        self.bounds = {"cheapest_options": _cheapest_bound(jobs, self.weights, self.state.dropped_weight())}
        self.report = BestSoFar(self.say, jobs, lambda: self.best()[0])

    def searcher(self, placed: list[Placement]) -> Search:
        """A ``Search`` (the schedule and its moves) from these placements."""
        return Search(self.jobs, self.pools, self.pool_of, self.horizon, self.budget_cents, placed, self.workers)

    def best(self) -> tuple[float, str]:
        """The highest bound in whole cents and its source; on a tie the relaxation (which also proves the supply
        does not bind)."""
        source = max(self.bounds, key=lambda k: (round(self.bounds[k]), k != "cheapest_options"))
        return self.bounds[source], source

    def show(self, phase: str) -> None:
        """A progress line: the best schedule so far after ``phase``, with the bound and gap."""
        self.report.search(phase, self.state)

    def ascent(self, until: float, target: float | None = None) -> LagrangeBound:
        """Subgradient ascent on the Lagrangian until ``until``, aimed at ``target`` (cents; default the
        current schedule's cost), for as few drops as the schedule (the answer never drops more; kept as
        ``relax.limit``). Each call resumes the last one (``Ascent``)."""
        return self.relax.run(
            self.state.dropped_weight(),
            deadline=until,
            target_cents=self.state.cost_cents() if target is None else target,
        )

    def priced_greedy(self, lag: LagrangeBound) -> None:
        """The first ascent's prices kept (``guide``, ``slots``), and greedy again at those prices, which becomes
        the incumbent where it is better."""
        self.guide = lag.choice_cents
        self.slots = priced_slots(self.jobs, self.pool_of, self.horizon, lag.prices)
        priced = self.searcher(
            squeaky_wheel(
                self.jobs,
                self.pools,
                self.pool_of,
                self.horizon,
                self.budget_cents,
                work.now() + 0.05 * self.left,
                self.weights,
                prices=lag.prices,
            ).placed
        )
        if score(priced) < score(self.state):
            self.state = priced
        self.show("bound")

    def round_relaxation(self, lag: LagrangeBound) -> None:
        """The relaxation's schedule rounded (``roundings``); where it beats the incumbent, or is ahead of it
        (``ahead``), the search goes on from it (``rounded_won``), with a share of the time to put in the jobs
        it lacks; if it cannot, the incumbent is the schedule again (the answer ranks dropped weight first)."""
        assert self.slots is not None
        found = self.roundings(lag, self.slots, work.share_of(ROUND_SHARE, self.deadline - self.reserve))
        if score(found) < score(self.state) or ahead(found, self.state):
            incumbent, self.state, self.rounded_won = self.state, found, True
            self.show("rounded")
            if short := missing(self.state, incumbent):
                until = work.share_of(REPAIR_SHARE, self.deadline - self.reserve)
                search(self.state, until, guide_cents=self.guide, report=self.show, slots=self.slots, place=short)
                if score(incumbent) < score(self.state):
                    self.state, self.rounded_won = incumbent, False

    def rounded(
        self, lag: LagrangeBound, until: float, first: list[int] | None = None, widen: PricedSlots | None = None
    ) -> Search:
        """The relaxation's own schedule made whole: ``guided_schedule`` (``first``: jobs it places before
        the others; ``widen``: prices at which a job that finds no room for its own option tries its
        ``ROUND_FALLBACKS`` cheapest priced ones), single-job moves, then the jobs it left out put in by
        ejecting others (``Search.insert``): at the options the relaxation gives them most of, then, for
        those still out, at their cheapest option on each pool, and the required ones still out with deeper
        ejection chains (``ROUND_DEEP_INSERT_DEPTH``)."""
        jobs = self.jobs
        fallback = None if widen is None else [widen.shortlist(k, ROUND_FALLBACKS) for k in range(len(jobs))]
        placed = guided_schedule(
            jobs,
            self.pools,
            self.pool_of,
            self.horizon,
            self.budget_cents,
            until,
            self.weights,
            lag.shares,
            lag.mean_start,
            first,
            fallback,
        ).placed
        found = self.searcher(placed)
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

    def roundings(self, lag: LagrangeBound, priced_at: PricedSlots, until: float) -> Search:
        """The best of up to ``ROUND_TRIES`` roundings, each of a relaxation from an ascent aimed a little
        higher than the last (``ROUND_TARGET_STEP``), then, if it still lacks jobs the incumbent places,
        repair steps for them until ``until``. Which jobs the rounding leaves out, and so its cost, swings
        with the last iterations of the ascent; the bound hardly moves."""
        best_found: Search | None = None
        widen = retry = False
        for attempt in range(ROUND_TRIES):
            started_try = work.now()
            if attempt:
                lag = self.ascent(
                    started_try + 0.3 * work.between(started_try, until),
                    target=self.state.cost_cents() * (1 + ROUND_TARGET_STEP * attempt),
                )
                if lag.bound_cents is None:
                    break
                self.bounds["lagrangian_relaxation"] = max(self.bounds["lagrangian_relaxation"], lag.bound_cents)
            found = self.rounded(lag, until, widen=priced_at if widen else None)
            # a rounding that does not beat the incumbent: the next ones let jobs fall back (``ROUND_FALLBACKS``)
            lost = not (score(found) < score(self.state) or ahead(found, self.state))
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
        short = missing(best_found, self.state)
        if short and not work.past(until):
            # once more with the jobs it lacks placed before the others (squeaky wheel across roundings):
            # measured on evenly sized pools, a rounding that lacked one 8-GPU job whose window its pool
            # had filled (no insertion or repair step put it in, so the answer fell back to the incumbent,
            # 3.3 % against 1.4-2.0 %) came out complete this way in 4 of 7 traced runs (BENCHMARKS.md,
            # session 13)
            again = self.rounded(lag, until, first=short)
            if score(again) < score(best_found):
                best_found = again
                short = missing(best_found, self.state)
        if short and not work.past(until):
            search(best_found, until, slots=priced_at, place=short)
        return best_found

    def linear_bound(self, lag: LagrangeBound) -> None:
        """GLOP's LP: a second bound where it is small and the Lagrangian (``lag``, the first ascent's) did not
        converge, and the proof that no schedule places every required job when one is still left out (no
        fractional schedule does; ``LP_PROOF_OPTIONS``); hands on ``lp``, ``dropped_proven`` and its guide."""
        jobs, left = self.jobs, self.left
        n_options = sum(len(job.options) for job in jobs)
        # The converged Lagrangian is the time-indexed LP, at least as strong as GLOP's bucketed one
        # (which adds only the dependencies): measured, GLOP took 12 s of a 60 s limit at 200 jobs and
        # never raised the bound, so it runs only where the Lagrangian did not converge.
        settled = lag.converged and not any(job.after for job in jobs)
        proof = self.state.required_dropped() and n_options <= LP_PROOF_OPTIONS
        if (n_options <= LARGE_MODEL_OPTIONS and not settled) or proof:
            pools, pool_of, horizon, budget_cents = self.pools, self.pool_of, self.horizon, self.budget_cents
            lp = lp_bound(
                jobs, pools, pool_of, horizon, budget_cents, self.state.dropped_weight(), time_limit_s=0.2 * left
            )
            self.lp = lp
            if lp.bound_cents is not None:
                self.bounds["lp_relaxation"] = lp.bound_cents
                self.guide = self.guide or lp.fractional_cents
            if lp.infeasible and self.state.required_dropped():
                check = lp_bound(jobs, pools, pool_of, horizon, budget_cents, None, time_limit_s=0.1 * left)
                self.dropped_proven = check.infeasible
            self.show("lp")

    def reorder(self) -> None:
        """Iterated greedy over job orders from the first schedule until it stalls; its schedule becomes the
        incumbent where it is better. Not where the schedule already drops less than greedy did: its passes
        drop no less than the first one, which ejections beat."""
        # (measured, before rounding: at 1,000 jobs it gained ten times what CP-SAT neighbourhoods do)
        if self.first.score[0] <= self.state.dropped_weight():
            share = REORDER_SHARE_ROUNDED if self.rounded_won else REORDER_SHARE
            reorder_until = work.share_of(share, self.deadline - self.reserve)
            reordered = reorder_search(
                self.jobs,
                self.pools,
                self.pool_of,
                self.horizon,
                self.budget_cents,
                reorder_until,
                self.weights,
                self.first,
                report=self.report.greedy_pass,
                fit=self.fit,
                rival=score(self.state),
            )
            if reordered.score < score(self.state):
                self.state = self.searcher(reordered.placed)
                self.rounded_won = False

    def neighbourhoods_phase(self) -> None:
        """The ascent resumed beside the neighbourhoods (``refine_apart``), large-neighbourhood search until the
        time kept for a last bound, that bound (``last_bound``), and the required jobs still out rescued."""
        end = self.deadline - self.reserve
        # Where jobs that fit are still left out, the neighbourhoods may put some in; then the bounds, each
        # for as many drops as the schedule had when it was computed, are weaker than one for the final
        # drops, so a last ascent gets a share of the time.
        relaxed = "lagrangian_relaxation" in self.bounds
        last = FINAL_BOUND_SHARE * work.left(end) if relaxed and self.state.left_out() else 0
        apart = self.refine_apart() if relaxed and not work.past(end) else None
        try:
            self.neighbourhoods(end - last)
        finally:
            if apart is not None:
                self.refined(apart.collect(APART_WAIT_S))
        if last:
            self.last_bound()
        if _rescue_required(self.state, end):
            self.show("rescue")

    def refine_apart(self) -> Apart | None:
        """The ascent resumed, more patient and aimed at the improved schedule's cost, for ``REFINE_SHARE`` of
        the time: with two workers in a forked process beside the search's first seconds (``Ascent.run_apart``;
        the search's relocations use one core), handed on to be collected; otherwise here, before the search."""
        # (the first ascent's Polyak target, the first schedule, 7 % above the bound at 1,000 jobs, stops it
        # short of the LP)
        until = work.share_of(REFINE_SHARE, self.deadline - self.reserve)
        apart = None
        if self.workers >= 2:
            apart = self.relax.run_apart(
                self.state.dropped_weight(), deadline=until, target_cents=self.state.cost_cents()
            )
        if apart is None:
            self.refined(self.ascent(until))
        return apart

    def refined(self, again: LagrangeBound | None) -> None:
        """A resumed ascent's answer: where its bound is higher, it and its prices replace the first ones."""
        if (
            again is not None
            and again.bound_cents is not None
            and again.bound_cents > self.bounds["lagrangian_relaxation"]
        ):
            self.bounds["lagrangian_relaxation"] = again.bound_cents
            self.guide = again.choice_cents
            self.slots = priced_slots(self.jobs, self.pool_of, self.horizon, again.prices)
        self.show("bound")

    def neighbourhoods(self, until: float) -> None:
        """Large-neighbourhood search from the incumbent until ``until``, or until within ``STOP_GAP`` of the
        best bound other than the cheapest options'."""
        target = self.best()[0] / (1 - STOP_GAP) if len(self.bounds) > 1 else None
        search(self.state, until, guide_cents=self.guide, report=self.show, target_cents=target, slots=self.slots)

    def last_bound(self) -> None:
        """The time kept at the end: a last ascent where the schedule now drops less than the last ascent's limit
        (the smallest: the schedule never drops more than it did), else back to the neighbourhoods."""
        end = self.deadline - self.reserve
        if self.relax.limit is not None and self.state.dropped_weight() < self.relax.limit:
            final = self.ascent(end)
            if final.bound_cents is not None and final.bound_cents > self.bounds["lagrangian_relaxation"]:
                self.bounds["lagrangian_relaxation"] = final.bound_cents
                self.show("bound")
        else:
            self.neighbourhoods(end)  # no fewer drops: the time kept goes back to the search

    def answer(self) -> tuple[Choices, bool]:
        """The result's bound, gap, status and note; per job its option and start, and whether the drops are
        proven necessary."""
        result, state = self.result, self.state
        cost = state.cost_cents()
        bound, source = self.best()
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
        self.say(f"search   {state.improved} improving steps of {state.steps}")
        result.notes.append(
            "schedule by squeaky-wheel greedy + Lagrangian relaxation + "
            + ("the relaxation's schedule rounded" if self.rounded_won else "iterated greedy")
            + f" + large-neighbourhood search; gap against the {source.replace('_', ' ')} bound"
            + ("" if self.lp is None or self.lp.bound_cents is not None else " (the LP did not finish in time)")
        )
        return [(p[0], p[1]) if p else (None, 0) for p in state.placed], self.dropped_proven


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
