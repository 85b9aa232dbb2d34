"""Large-neighbourhood search over a complete schedule (docs/design.md section 10.6).

The schedule is a list of per-job placements (option index, start step) or None. Each step frees a neighbourhood
of jobs (a time window, a pair of pools over a window, the jobs a relaxation would move most, or the jobs around a
dropped required one: the repair step), keeps every other job where it is, and re-optimises the freed jobs with a
small CP-SAT model: their options and starts against the GPUs the fixed jobs leave free, the budget they leave, and
the dependencies on fixed jobs as release and deadline bounds. The objective is the schedule's own, lexicographic:
dropped weight (a required job outweighs all optional ones), then cost. The current placement is a complete hint,
so a step never makes the schedule worse; a better one replaces it. The search's loop ends at its deadline counted
in work (``work``), and at once when the wall clock stops the budget; every turn of it charges work. The moves of
one job at a time (insertions, relocations, rescues) are ``ejection.Placements``'.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from ...money import usd_to_cents
from ..model import new_solver
from . import work
from .ejection import RELOCATE_JOBS, RELOCATE_SHARE, Placements, relocate_far
from .greedy import Placement, capacity_arrays
from .lp import drop_weights, window
from .pools import add_pool_capacity
from .slots import PricedSlots

# With a relaxation's prices, a freed job may take its current option, its cheapest ones and these many whose cheapest
# priced slot costs least (200 jobs: 1.6 % with 2, 1.7 % with 4, 2.1 % with every option; smaller models prove sooner).
PRICED_OPTIONS = 3
CHEAPEST_OPTIONS = 2

# Seconds per neighbourhood: 0.15-1 s gave the same gaps at 1,000 jobs within 0.1 point (session 11).
STEP_S = 0.25
# Tries at a second neighbourhood whose windows do not overlap the first one's.
PAIR_TRIES = 3
# Repair neighbourhoods spent on each left-out job the search is not told to place (a required one: no end).
OPTIONAL_REPAIRS = 3

# A repair step's time, and its jobs when they are all those crossing the left-out job's window on one of its
# pools (every other step: the jobs nearest it on all its pools): a required job needing most of a 99 %-used pool
# for most of its window went in with the 54 jobs crossing it in 10 s, not in 3 s, never with its 40 nearest.
REPAIR_S = 8.0
REPAIR_JOBS = 120


class _StopBelow(cp_model.CpSolverSolutionCallback):
    """Stops the search at the first solution whose objective is below ``below``."""

    def __init__(self, below: float):
        super().__init__()
        self.below = below

    def on_solution_callback(self) -> None:
        if self.objective_value < self.below:
            self.stop_search()


@dataclass
class _Neighbourhood:
    """A neighbourhood's CP-SAT model and its variables, per freed job: its picks (option index, boolean), start,
    end and done; per pool its intervals (with their GPUs) and the steps they may cover; the objective's terms."""

    m: cp_model.CpModel
    big: int  # the weight of a dropped unit of priority: more than every freed job's dearest option together
    picks: dict[int, list[tuple[int, cp_model.IntVar]]] = field(default_factory=dict)
    starts: dict[int, cp_model.IntVar] = field(default_factory=dict)
    ends: dict[int, cp_model.IntVar] = field(default_factory=dict)
    dones: dict[int, cp_model.IntVar] = field(default_factory=dict)
    by_pool: dict[int, list[tuple[cp_model.IntervalVar, int]]] = field(default_factory=dict)
    spans: dict[int, list[int]] = field(default_factory=dict)
    objective: list[tuple[cp_model.IntVar, int]] = field(default_factory=list)  # (done, weight)
    cost_terms: list[tuple[cp_model.IntVar, int]] = field(default_factory=list)  # (pick, cents)


@dataclass
class Search(Placements):
    """The incumbent and what the search needs to move it: its placements and their moves (``Placements``), and
    the CP-SAT neighbourhoods."""

    jobs: list
    pools: list
    pool_of: dict[str, int]
    horizon: int
    budget_cents: int | None
    placed: list[Placement]
    workers: int = 2
    weights: list[int] = field(default_factory=list)
    cents: list[list[int]] = field(default_factory=list)
    free: list[np.ndarray] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)
    successors: list[list[int]] = field(default_factory=list)
    steps: int = 0
    improved: int = 0
    # per placed job, the options a neighbourhood may give it besides its current one (None: all); a
    # neighbourhood's optimum is then over those, so "optimal" means optimal among them
    allowed: list[set[int]] | None = None
    # per job and option, its pool and GPUs (read in every ejection); per job, where it runs now (pool -1:
    # not placed), as arrays so that an ejection finds the jobs in its way in one vector operation
    where: list[list[tuple[int, int]]] = field(default_factory=list)
    run_pool: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    run_start: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    run_end: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    run_gpus: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    by_cost: list[list[int]] = field(default_factory=list)  # per job, its options cheapest first
    stop_at: float = float("inf")  # a perf_counter time: insertions stop looking then (``phases._rescue_required``)
    # the threads that solve a pair of neighbourhoods side by side: one pool for a whole search (``search`` closes
    # it), not one per step
    threads: ThreadPoolExecutor | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.weights = drop_weights(self.jobs)
        self.where = [[(self.pool_of[o.row.offer_name], o.row.gpus) for o in job.options] for job in self.jobs]
        n = len(self.jobs)
        self.run_pool = np.full(n, -1, dtype=np.int64)
        self.run_start, self.run_end, self.run_gpus = (np.zeros(n, dtype=np.int64) for _ in range(3))
        self.cents = [[usd_to_cents(o.cost_usd) for o in job.options] for job in self.jobs]
        self.by_cost = [sorted(range(len(c)), key=lambda i: (c[i], i)) for c in self.cents]
        self.index = {job.name: k for k, job in enumerate(self.jobs)}
        self.successors = [[] for _ in self.jobs]
        for k, job in enumerate(self.jobs):
            for dep in job.after:
                self.successors[self.index[dep]].append(k)
        self.free = capacity_arrays(self.pools, self.horizon)
        for k, p in enumerate(self.placed):
            self._use(k, p, -1)

    # --- one step ----------------------------------------------------------------------------

    def reach(self, subset: list[int]) -> tuple[int, int]:
        """The steps a neighbourhood's model can touch: the union of its jobs' windows."""
        spans = [window(self.jobs[k], self.horizon) for k in subset]
        return min(r for r, _ in spans), max(lim for _, lim in spans)

    def independent(self, subsets: list[list[int]]) -> bool:
        """Whether neighbourhoods can be solved at once: no budget, no dependencies, and windows that
        do not overlap in time, so neither model reads the GPUs the other one moves."""
        if self.budget_cents is not None or any(self.jobs[k].after or self.successors[k] for s in subsets for k in s):
            return False
        spans = sorted(self.reach(s) for s in subsets if s)
        return all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))

    def reoptimise_many(
        self, subsets: list[list[int]], time_limit_s: float, must: int | None = None
    ) -> list[tuple[bool, bool]]:
        """Re-optimise each subset with every job outside it fixed, all at once (one thread and one
        CP-SAT worker each, when there are several: they must be ``independent``), then keep each
        improvement; per subset (improved, solved to optimality). ``must``: a job of the (single) subset
        that the new schedule must place (a repair)."""
        for subset in subsets:
            for k in subset:
                self._use(k, self.placed[k], +1)
        seeds = list(range(self.steps, self.steps + len(subsets)))
        self.steps += len(subsets)
        # under a work budget: one worker each, deterministic time, the most any took charged (side by side)
        wall = work.wall_left() if work.counting() else None
        workers = 1 if wall is not None else self.workers
        try:
            if len(subsets) == 1:
                answers = [self._solve(subsets[0], set(subsets[0]), time_limit_s, workers, seeds[0], must, wall)]
            else:
                if self.threads is None:
                    self.threads = ThreadPoolExecutor(max(2, self.workers), thread_name_prefix="neighbourhood")
                answers = list(
                    self.threads.map(
                        lambda a: self._solve(a[0], set(a[0]), time_limit_s, 1, a[1], None, wall),
                        zip(subsets, seeds),
                    )
                )
        finally:
            for subset in subsets:
                for k in subset:
                    self._use(k, self.placed[k], -1)
        # never nothing: a step that frees no job still costs its model, so a loop of them ends
        spent = work.CPSAT_S * max(t for _, _, t in answers) + work.MODEL_JOB_S * sum(map(len, subsets))
        work.charge(max(work.STEP_FLOOR_S, spent))
        return [self._keep(subset, new, optimal) for subset, (new, optimal, _) in zip(subsets, answers)]

    def close(self) -> None:
        """Stop the threads of the neighbourhoods' pairs (a later pair starts them again)."""
        if self.threads is not None:
            self.threads.shutdown(wait=True)
            self.threads = None

    def _keep(self, subset: list[int], new: list[Placement] | None, optimal: bool) -> tuple[bool, bool]:
        """Replace the subset's placements by ``new`` when that drops less weight, or as much for less."""
        if new is None:
            return False, optimal
        before = (sum(self.weights[k] for k in subset if self.placed[k] is None), self._cost(subset, self.placed))
        after_placed = list(self.placed)
        for k, p in zip(subset, new):
            after_placed[k] = p
        after = (sum(self.weights[k] for k in subset if after_placed[k] is None), self._cost(subset, after_placed))
        if after >= before:
            return False, optimal
        for k in subset:
            self._use(k, self.placed[k], +1)
        self.placed = after_placed
        for k in subset:
            self._use(k, self.placed[k], -1)
        self.improved += 1
        return True, optimal

    def _cost(self, subset: list[int], placed: list[Placement]) -> int:
        return sum(self.cents[k][p[0]] for k in subset if (p := placed[k]) is not None)

    def _solve(
        self,
        subset: list[int],
        chosen: set[int],
        time_limit_s: float,
        workers: int,
        seed: int,
        must: int | None = None,
        wall_s: float | None = None,
    ) -> tuple[list[Placement] | None, bool, float]:
        """The subset re-optimised (None: none found), whether optimally, CP-SAT's deterministic time (``wall_s``:
        under a work budget, the wall seconds left; ``time_limit_s`` is then scaled to deterministic time)."""
        hood = self._model(subset, chosen, must)
        solver = new_solver(max(0.05, time_limit_s) if wall_s is None else max(0.01, wall_s), workers, seed=seed)
        if wall_s is not None:
            solver.parameters.max_deterministic_time = max(0.05, time_limit_s) * work.SPEED / work.CPSAT_S
        stop = None
        if must is not None:
            # a repair stops at its first schedule better than the current one: it exists to place the
            # job, and the other neighbourhoods lower the cost from there
            dropped = sum(self.weights[k] for k in subset if self.placed[k] is None)
            stop = _StopBelow(hood.big * dropped + self._cost(subset, self.placed))
        status = solver.solve(hood.m, stop)
        spent = solver.deterministic_time
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, False, spent
        new: list[Placement] = []
        for k in subset:
            option = next((i for i, p in hood.picks[k] if solver.boolean_value(p)), None)
            new.append(None if option is None else (option, solver.value(hood.starts[k])))
        return new, status == cp_model.OPTIMAL, spent

    def _model(self, subset: list[int], chosen: set[int], must: int | None) -> _Neighbourhood:
        """The neighbourhood's CP-SAT model: each freed job (``_add_job``), the dependencies among them, the
        pools' GPUs and the budget the fixed jobs leave, and the objective (dropped weight, then cost)."""
        hood = _Neighbourhood(cp_model.CpModel(), big=sum(max(self.cents[k], default=0) for k in subset) + 1)
        m = hood.m
        for k in subset:
            self._add_job(hood, k, chosen, must)
        for k in subset:
            for dep in self.jobs[k].after:
                d = self.index[dep]
                if d in chosen:
                    m.add(hood.starts[k] >= hood.ends[d]).only_enforce_if(hood.dones[k])
                    m.add(hood.dones[k] <= hood.dones[d])
        add_pool_capacity(m, hood.by_pool, hood.spans, self.free)
        cost_terms = hood.cost_terms
        if self.budget_cents is not None:
            left = self.budget_cents - sum(
                self.cents[k][p[0]] for k, p in enumerate(self.placed) if p is not None and k not in chosen
            )
            m.add(sum(c * p for p, c in cost_terms) <= left)
        m.minimize(
            sum(hood.big * w * (1 - d) for d, w in hood.objective)
            + cp_model.LinearExpr.weighted_sum([p for p, _ in cost_terms], [c for _, c in cost_terms])
        )
        return hood

    def _add_job(self, hood: _Neighbourhood, k: int, chosen: set[int], must: int | None) -> None:
        """Job k freed: its start, end and done variables, one pick and interval per option that fits the window
        the fixed jobs it waits for and the fixed jobs waiting for it leave, and its current placement as hint."""
        m, horizon = hood.m, self.horizon
        job, cur = self.jobs[k], self.placed[k]
        r, lim = window(job, horizon)
        forced = False
        blocked = False
        for dep in job.after:
            d = self.index[dep]
            if d in chosen:
                continue
            if self.placed[d] is None:
                blocked = True
            else:
                r = max(r, self._end(d))
        for s in self.successors[k]:
            succ = self.placed[s]
            if s not in chosen and succ is not None:
                forced = True
                lim = min(lim, succ[1])
        start = m.new_int_var(min(r, horizon), max(min(r, horizon), lim), f"s{k}")
        end = m.new_int_var(0, horizon, f"e{k}")
        done = m.new_bool_var(f"d{k}")
        opts = []
        for i, (opt, d) in enumerate(zip(job.options, job.durations)):
            if blocked or d > lim - r:
                continue
            if self.allowed is not None and cur is not None and i not in self.allowed[k] and cur[0] != i:
                continue  # an unplaced job keeps every option: the repair step must find room for it
            pool = self.pool_of[opt.row.offer_name]
            pick = m.new_bool_var(f"p{k}_{i}")
            opts.append((i, pick))
            m.add(start + d <= lim).only_enforce_if(pick)
            hood.by_pool.setdefault(pool, []).append(
                (m.new_optional_fixed_size_interval_var(start, d, pick, f"i{k}_{i}"), opt.row.gpus)
            )
            hood.spans.setdefault(pool, []).extend((r, lim))
            hood.cost_terms.append((pick, self.cents[k][i]))
        m.add(sum(p for _, p in opts) == done)
        m.add(end == start + sum(job.durations[i] * p for i, p in opts))
        if forced or k == must:
            m.add(done == 1)
        hood.objective.append((done, self.weights[k]))
        hood.picks[k], hood.starts[k], hood.ends[k], hood.dones[k] = opts, start, end, done
        m.add_hint(done, cur is not None)
        m.add_hint(start, cur[1] if cur is not None else min(r, horizon))
        m.add_hint(end, cur[1] + job.durations[cur[0]] if cur is not None else min(r, horizon))
        for i, p in opts:
            m.add_hint(p, cur is not None and cur[0] == i)

    # --- neighbourhoods ------------------------------------------------------------------------

    def _span(self, k: int) -> tuple[int, int]:
        p = self.placed[k]
        if p is None:
            return window(self.jobs[k], self.horizon)
        return p[1], p[1] + self.jobs[k].durations[p[0]]

    def _on(self, k: int, pools: set[int]) -> bool:
        """Whether job k runs on one of ``pools`` (an unplaced job: whether it could). By where it runs,
        not where it could: every job has options on every pool of the benchmark, so "could" freed the
        jobs nearest in time on all pools (1,000 jobs, 30 s from one schedule: 0.4 % cheaper, not 0.15 %)."""
        p = self.placed[k]
        if p is None:
            return any(pool in pools for pool, _ in self.where[k])
        return self.where[k][p[0]][0] in pools

    def crossing(self, k: int, pool: int, size: int) -> list[int]:
        """Job k and up to ``size`` - 1 jobs running on ``pool`` in k's window, nearest its middle first, and
        the jobs k waits for (they may have to end sooner)."""
        r, lim = window(self.jobs[k], self.horizon)
        mid = (r + lim) / 2
        others = [int(y) for y in self.running_in(pool, r, lim) if y != k]
        inside = sorted((abs((self.run_start[y] + self.run_end[y]) / 2 - mid), y) for y in others)
        near = [k, *(y for _, y in inside[: size - 1])]
        return near + [d for d in self.predecessors(k) if d not in near]

    def around(self, t: int, size: int, pools: set[int] | None = None, seeds: list[int] | None = None) -> list[int]:
        """Up to ``size`` jobs nearest to step t (running on the given pools, if any), seeds first."""
        out = list(dict.fromkeys(seeds or []))
        taken = set(out)
        scored = []
        for k, job in enumerate(self.jobs):
            if k in taken or not job.options:
                continue
            if pools is not None and not self._on(k, pools):
                continue
            a, b = self._span(k)
            scored.append((0 if a <= t < b else min(abs(a - t), abs(b - 1 - t)), k))
        scored.sort()
        out += [k for _, k in scored[: max(0, size - len(out))]]
        return out


def freed_options(state: Search, slots: PricedSlots) -> list[set[int]]:
    """Per job, the options a neighbourhood may give it besides its current one: the ``PRICED_OPTIONS``
    whose cheapest slot costs least at the relaxation's prices, its ``CHEAPEST_OPTIONS`` cheapest, and its
    cheapest on each pool, so a job may leave a full pool for one with room."""
    return [
        set(slots.shortlist(k, PRICED_OPTIONS)) | set(state.by_cost[k][:CHEAPEST_OPTIONS]) | state.cheapest_per_pool(k)
        for k in range(len(state.jobs))
    ]


@dataclass
class Picks:
    """The jobs each kind of neighbourhood frees, drawn with the search's random numbers; ``size``: how many (the
    search adapts it to how fast the steps prove their optimum)."""

    state: Search
    rng: random.Random
    size: int
    guide_cents: list[float] | None = None
    slots: PricedSlots | None = None

    def __call__(self, kind: str) -> list[int] | None:
        """The jobs a neighbourhood of this kind frees (None: the kind has nothing left to free)."""
        state, rng, size, slots, guide_cents = self.state, self.rng, self.size, self.slots, self.guide_cents
        t = rng.randrange(max(1, state.horizon))
        if kind == "window":
            return state.around(t, size)
        if kind == "pools":
            chosen = set(rng.sample(range(len(state.pools)), min(2, len(state.pools))))
            return state.around(t, size, chosen)
        if kind == "priced":
            assert slots is not None
            far = [(e, k) for e, k in state.slot_excess(slots) if e > 0.5]
            if not far:
                return None
            # one of the jobs furthest from their slot (the top tenth), weighted by how far
            furthest = far[: max(1, len(far) // 10)]
            k = rng.choices([k for _, k in furthest], weights=[e for e, _ in furthest])[0]
            p = state.placed[k]
            assert p is not None
            here = state.pool_of[state.jobs[k].options[p[0]].row.offer_name]
            return state.around(int(slots.middle[k]), size, {int(slots.pool[k]), here}, [k])
        assert guide_cents is not None
        excess = sorted(
            ((state.cents[k][p[0]] - guide_cents[k] if p is not None else 0.0, k) for k, p in enumerate(state.placed)),
            reverse=True,
        )
        top = [k for e, k in excess[: max(3, size)] if e > 0]
        if not top:
            return None
        seeds = rng.sample(top, min(len(top), max(1, size // 4)))
        start, _ = state._span(seeds[0])
        pools = {state.pool_of[o.row.offer_name] for k in seeds for o in state.jobs[k].options}
        return state.around(start, size, pools, seeds)


def search(
    state: Search,
    deadline: float,
    *,
    guide_cents: list[float] | None = None,
    report: Callable[[str], None] | None = None,
    target_cents: float | None = None,
    slots: PricedSlots | None = None,
    place: list[int] | None = None,
) -> None:
    """Improve ``state`` until ``deadline`` (a perf_counter time) or until its cost reaches ``target_cents``.
    ``guide_cents``: per job, what a relaxation spends on it; the jobs that cost most above it are
    freed together in the "guided" neighbourhood. ``slots``: each job's cheapest slot at the relaxation's
    prices; the "priced" neighbourhood frees a job far from its slot with the jobs around that slot.
    ``place``: optional jobs the repair step places too while they are left out (required ones always);
    once none of those is left out, it tries each other left-out job ``OPTIONAL_REPAIRS`` times."""
    pick = Picks(state, random.Random(0), min(40, len(state.jobs)), guide_cents, slots)
    kinds = ["window", "pools", "guided"] if guide_cents else ["window", "pools"]
    if slots is not None:
        kinds += ["priced"]
        state.allowed = freed_options(state, slots)
    steps = Steps(state, deadline, pick, kinds, report, target_cents, place)
    steps.moves()
    # none in a search that starts with a job it must place left out (a repair search: its time is for
    # that). Measured on evenly sized pools: relocating there too ended at 3.5 % in 4 of 7 runs and at
    # 1.9-2.2 % in the others; without, at 2.2-2.3 % in 4 of 4
    if slots is not None and len(state.jobs) >= RELOCATE_JOBS and not steps.waiting():
        before = state.cost_cents()
        relocate_far(state, slots, work.share_of(RELOCATE_SHARE, deadline))
        if report is not None and state.cost_cents() < before:
            report("relocate")
    try:  # (the threads of the pairs of neighbourhoods stopped however it ends)
        while steps.step():
            pass
    finally:
        state.close()


@dataclass
class Steps:
    """The turns of ``search``'s loop and what they carry from one to the next: the kinds of neighbourhood left,
    the turn (repairs take every other one), and the repairs spent on each left-out job."""

    state: Search
    deadline: float
    pick: Picks
    kinds: list[str]
    report: Callable[[str], None] | None
    target_cents: float | None
    place: list[int] | None
    turn: int = 0
    repair_turn: int = 0
    tried: set[int] = field(default_factory=set)  # left-out jobs already tried by ejection
    repairs: dict[int, int] = field(default_factory=dict)  # repair neighbourhoods spent on each left-out job

    def waiting(self) -> list[int]:
        """The left-out jobs (an option fits their window) the search must place: required ones and ``place``."""
        must = set(self.state.required_dropped()) | set(self.place or [])
        return [k for k in self.state.left_out() if k in must]

    def moves(self) -> None:
        """Single-job moves first, up to five rounds while they pay: cheap, and they leave the CP-SAT steps the
        hard part."""
        for _ in range(5):
            t0 = work.now()
            if not self.state.move_each(self.deadline):
                break
            if self.report is not None:
                self.report("moves")
            now = work.now()
            if not now < self.deadline or now - t0 > 0.1 * max(0.0, self.deadline - t0):
                break

    def step(self) -> bool:
        """One turn: a repair of a left-out job (every other turn while there is one) or a neighbourhood of the
        next kind, re-optimised; False once the search ends (its time, its target, or no kind left)."""
        state = self.state
        left = work.left(self.deadline)  # (0 once the wall clock stopped the budget, whatever the deadline)
        if left < 0.2:
            return False
        if (
            self.target_cents is not None
            and not state.required_dropped()
            and state.cost_cents() <= self.target_cents
            and state.dropped_weight() == 0
        ):
            return False
        # the jobs to repair: those with an option that fits their window, required ones and ``place`` first,
        # then the other left-out jobs, each a few times (the objective ranks drops first)
        missing = self.waiting() or [k for k in state.left_out() if self.repairs.get(k, 0) < OPTIONAL_REPAIRS]
        if missing and self.turn % 2 == 0:
            repair = self.repair(missing)
            if repair is None:
                return True
            kind, subset = "repair", repair
        else:
            if not self.kinds:
                return False
            kind = self.kinds[self.turn % len(self.kinds)]
            picked = self.pick(kind)
            if picked is None:
                self.kinds.remove(kind)
                return True
            if not picked:  # no job there to free: the next kind, the pick's work charged (the loop moves on)
                work.charge(work.STEP_FLOOR_S)
                self.turn += 1
                return True
            subset = picked
        self.turn += 1
        limit = min(left - 0.1, REPAIR_S if kind == "repair" else STEP_S)
        if limit <= 0.05:
            return False
        self.reoptimise(kind, subset, limit)
        return True

    def repair(self, missing: list[int]) -> list[int] | None:
        """The next left-out job in turn: put in by ejecting the jobs in its way the first time (None when that
        placed it), else the neighbourhood to free with it, alternately its predecessors and the jobs near it,
        and every job on one of its pools in its window."""
        state = self.state
        k = missing[self.repair_turn % len(missing)]
        self.repair_turn += 1
        job = state.jobs[k]
        r, lim = window(job, state.horizon)
        if k not in self.tried:  # first by ejecting the jobs in its way: cheap, and often enough
            self.tried.add(k)
            if state.rescue(k) if job.required else state.insert(k, state.by_cost[k], (r + lim) / 2):
                if self.report is not None:
                    self.report("repair")
                return None
        attempt = self.repairs.get(k, 0)
        self.repairs[k] = attempt + 1
        if attempt % 2 == 0:  # with the jobs it waits for (they may have to end sooner), then those near
            return state.around(
                (r + lim) // 2, self.pick.size, {p for p, _ in state.where[k]}, [k, *state.predecessors(k)]
            )
        # every job on one of its pools in its window, its pools in turn, cheapest first
        ranked = list(dict.fromkeys(state.where[k][i][0] for i in state.by_cost[k]))
        return state.crossing(k, ranked[(attempt // 2) % len(ranked)], REPAIR_JOBS)

    def reoptimise(self, kind: str, subset: list[int], limit: float) -> None:
        """The subset re-optimised for up to ``limit`` seconds, with a second neighbourhood of the same kind
        elsewhere in time beside it on two workers; the neighbourhoods grow when they prove their optimum in
        half the time and shrink when they do not prove it."""
        state, pick = self.state, self.pick
        subsets = [subset]
        if kind != "repair" and state.workers >= 2:
            # a second neighbourhood of the same kind elsewhere in time, solved at the same time (one
            # CP-SAT worker each): measured at 1,000 jobs, one worker per step gains as much per step
            for _ in range(PAIR_TRIES):
                other = pick(kind)
                if other and state.independent([subset, other]):
                    subsets.append(other)
                    break
        t0 = work.now()
        answers = state.reoptimise_many(subsets, limit, must=subset[0] if kind == "repair" else None)
        improved, optimal = any(i for i, _ in answers), all(o for _, o in answers)
        took = work.now() - t0
        if optimal and took < limit / 2:
            pick.size = min(len(state.jobs), 200, pick.size + max(2, pick.size // 5))
        elif not optimal:
            pick.size = max(8, pick.size - max(2, pick.size // 5))
        if improved and self.report is not None:
            self.report(kind)
