"""Large-neighbourhood search over a complete schedule (docs/design.md section 10.6).

The schedule is a list of per-job placements (option index, start step) or None. Each step frees a neighbourhood
of jobs (a time window, a pair of pools over a window, the jobs a relaxation would move most, or the jobs around a
dropped required one: the repair step), keeps every other job where it is, and re-optimises the freed jobs with a
small CP-SAT model: their options and starts against the GPUs the fixed jobs leave free, the budget they leave, and
the dependencies on fixed jobs as release and deadline bounds. The objective is the schedule's own, lexicographic:
dropped weight (a required job outweighs all optional ones), then cost. The current placement is a complete hint,
so a step never makes the schedule worse; a better one replaces it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from ...physics.constants import usd_to_cents
from ..model import new_solver
from . import work
from .greedy import Placement, capacity_arrays, earliest_start
from .lp import drop_weights, fits_window, window
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
# An ejecting insertion (``Search.insert``) tries a job's first INSERT_OPTIONS options at the INSERT_STARTS
# starts nearest the wanted one; a job it pushes out that fits nowhere is put in the same way, once more
# (INSERT_DEPTH), at its own option or its INSERT_OPTIONS_DEEP cheapest and INSERT_STARTS_DEEP starts.
INSERT_OPTIONS = 4
INSERT_STARTS = 24
INSERT_DEPTH = 1
INSERT_OPTIONS_DEEP = 2
INSERT_STARTS_DEEP = 8
# Repair neighbourhoods spent on each left-out job the search is not told to place (a required one: no end).
OPTIONAL_REPAIRS = 3

# Relocations (``Search.relocate``), before the neighbourhoods, for RELOCATE_SHARE of a search's time:
# passes over the RELOCATE_TOP jobs furthest from their cheapest priced slot (more than a dollar), each
# tried at its RELOCATE_OPTIONS cheapest priced options and the RELOCATE_STARTS starts nearest that slot,
# the jobs in its way ejected: at 1,000 jobs half of the slot excess sits on five to ten large jobs, which a
# neighbourhood around one time rarely frees with everything in their way. Below RELOCATE_JOBS jobs the
# neighbourhoods reach every job several times and relocations only take their time (BENCHMARKS.md, session 12-13).
RELOCATE_JOBS = 500
RELOCATE_SHARE = 0.33
RELOCATE_TOP = 120
RELOCATE_OPTIONS = 3
RELOCATE_STARTS = 24
# A job a relocation pushes out that fits nowhere goes in by ejection at this many of its roomiest starts,
# not ``INSERT_STARTS_DEEP``: a relocation then takes a third to a half of the time, so a pass tries more
# (session 15: 1.4-2x the saving in 10 s of passes).
RELOCATE_STARTS_DEEP = 2
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
class Search:
    """The incumbent and what the search needs to move it."""

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
    stop_at: float = float("inf")  # a perf_counter time: insertions stop looking then (``solve._rescue_required``)

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

    # --- bookkeeping -------------------------------------------------------------------------

    def _use(self, k: int, p: Placement, sign: int) -> None:
        """Take (sign -1) or give back (+1) the GPUs of job k at placement p."""
        if p is None:
            return
        i, s = p
        pool, gpus = self.where[k][i]
        d = self.jobs[k].durations[i]
        self.free[pool][s : s + d] += sign * gpus
        if sign < 0:
            self.run_pool[k], self.run_start[k], self.run_end[k], self.run_gpus[k] = pool, s, s + d, gpus
        else:
            self.run_pool[k] = -1

    def running_in(self, pool: int, start: int, end: int) -> np.ndarray:
        """The jobs running on ``pool`` at some step of [start, end), by index."""
        return np.flatnonzero((self.run_pool == pool) & (self.run_start < end) & (self.run_end > start))

    def dropped_weight(self) -> int:
        return sum(w for w, p in zip(self.weights, self.placed) if p is None)

    def cost_cents(self) -> int:
        return sum(self.cents[k][p[0]] for k, p in enumerate(self.placed) if p is not None)

    def required_dropped(self) -> list[int]:
        return [k for k, (job, p) in enumerate(zip(self.jobs, self.placed)) if p is None and job.required]

    def left_out(self) -> list[int]:
        """The unplaced jobs with an option that fits their window, heaviest first (then by index)."""
        out = [k for k, p in enumerate(self.placed) if p is None and fits_window(self.jobs[k], self.horizon)]
        return sorted(out, key=lambda k: -self.weights[k])

    def place_left_out(self, deadline: float) -> int:
        """Each left-out job in turn put in by ejecting the jobs in its way (``insert``), its cheapest
        options first, near the middle of its window, until ``deadline``; the number placed."""
        placed = 0
        for k in self.left_out():
            if work.now() >= deadline:
                break
            r, lim = window(self.jobs[k], self.horizon)
            placed += self.insert(k, self.by_cost[k], (r + lim) / 2)
        return placed

    def cheapest_per_pool(self, k: int) -> set[int]:
        """Job k's cheapest option on each pool among those that fit its window."""
        r, lim = window(self.jobs[k], self.horizon)
        best: dict[int, int] = {}
        for i in self.by_cost[k]:
            if self.jobs[k].durations[i] <= lim - r:
                best.setdefault(self.where[k][i][0], i)
        return set(best.values())

    def _end(self, k: int) -> int:
        p = self.placed[k]
        assert p is not None
        return p[1] + self.jobs[k].durations[p[0]]

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
                with ThreadPoolExecutor(len(subsets)) as pool:
                    answers = list(
                        pool.map(
                            lambda a: self._solve(a[0], set(a[0]), time_limit_s, 1, a[1], None, wall),
                            zip(subsets, seeds),
                        )
                    )
        finally:
            for subset in subsets:
                for k in subset:
                    self._use(k, self.placed[k], -1)
        work.charge(work.CPSAT_S * max(t for _, _, t in answers) + work.MODEL_JOB_S * sum(map(len, subsets)))
        return [self._keep(subset, new, optimal) for subset, (new, optimal, _) in zip(subsets, answers)]

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
        m = cp_model.CpModel()
        horizon = self.horizon
        picks: dict[int, list[tuple[int, cp_model.IntVar]]] = {}
        starts, ends, dones = {}, {}, {}
        by_pool: dict[int, list[tuple[cp_model.IntervalVar, int]]] = {}
        spans: dict[int, list[int]] = {}
        big = sum(max(self.cents[k], default=0) for k in subset) + 1
        objective = []
        cost_terms = []
        for k in subset:
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
                by_pool.setdefault(pool, []).append(
                    (m.new_optional_fixed_size_interval_var(start, d, pick, f"i{k}_{i}"), opt.row.gpus)
                )
                spans.setdefault(pool, []).extend((r, lim))
                cost_terms.append((pick, self.cents[k][i]))
            m.add(sum(p for _, p in opts) == done)
            m.add(end == start + sum(job.durations[i] * p for i, p in opts))
            if forced or k == must:
                m.add(done == 1)
            objective.append((done, self.weights[k]))
            picks[k], starts[k], ends[k], dones[k] = opts, start, end, done
            m.add_hint(done, cur is not None)
            m.add_hint(start, cur[1] if cur is not None else min(r, horizon))
            m.add_hint(end, cur[1] + job.durations[cur[0]] if cur is not None else min(r, horizon))
            for i, p in opts:
                m.add_hint(p, cur is not None and cur[0] == i)
        for k in subset:
            for dep in self.jobs[k].after:
                d = self.index[dep]
                if d in chosen:
                    m.add(starts[k] >= ends[d]).only_enforce_if(dones[k])
                    m.add(dones[k] <= dones[d])
        add_pool_capacity(m, by_pool, spans, self.free)
        if self.budget_cents is not None:
            left = self.budget_cents - sum(
                self.cents[k][p[0]] for k, p in enumerate(self.placed) if p is not None and k not in chosen
            )
            m.add(sum(c * p for p, c in cost_terms) <= left)
        m.minimize(
            sum(big * w * (1 - d) for d, w in objective)
            + cp_model.LinearExpr.weighted_sum([p for p, _ in cost_terms], [c for _, c in cost_terms])
        )
        solver = new_solver(max(0.05, time_limit_s) if wall_s is None else max(0.01, wall_s), workers, seed=seed)
        if wall_s is not None:
            solver.parameters.max_deterministic_time = max(0.05, time_limit_s) / work.CPSAT_S
        stop = None
        if must is not None:
            # a repair stops at its first schedule better than the current one: it exists to place the
            # job, and the other neighbourhoods lower the cost from there
            dropped = sum(self.weights[k] for k in subset if self.placed[k] is None)
            stop = _StopBelow(big * dropped + self._cost(subset, self.placed))
        status = solver.solve(m, stop)
        spent = solver.deterministic_time
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None, False, spent
        new: list[Placement] = []
        for k in subset:
            option = next((i for i, p in picks[k] if solver.boolean_value(p)), None)
            new.append(None if option is None else (option, solver.value(starts[k])))
        return new, status == cp_model.OPTIMAL, spent

    def _bounds(self, k: int) -> tuple[int, int]:
        """The steps job k may run in, given where its predecessors and successors are placed."""
        job = self.jobs[k]
        r, lim = window(job, self.horizon)
        for dep in job.after:
            if self.placed[self.index[dep]] is None:
                r = self.horizon + 1
            else:
                r = max(r, self._end(self.index[dep]))
        for succ in self.successors[k]:
            if (after := self.placed[succ]) is not None:
                lim = min(lim, after[1])
        return r, lim

    def _cheapest_fit(self, k: int, below: int | None = None, end_by: int | None = None) -> tuple[int, Placement]:
        """The cheapest (option, earliest start) of job k that fits in what the others leave free and in
        the budget, costing less than ``below`` if given and ending by step ``end_by`` if given: (cents,
        placement), placement None if none."""
        r, lim = self._bounds(k)
        if end_by is not None:
            lim = min(lim, end_by)
        spare = None if self.budget_cents is None else self.budget_cents - self.cost_cents() + self._cents_of(k)
        most: dict[int, int] = {}  # per pool, the most GPUs free at any step of the window
        for i in self.by_cost[k]:  # cheapest first, so the first that fits is the answer
            cents = self.cents[k][i]
            if (below is not None and cents >= below) or (spare is not None and cents > spare):
                break
            pool, gpus = self.where[k][i]
            if pool not in most:
                most[pool] = int(self.free[pool][r:lim].max()) if lim > r else 0
            if gpus > most[pool]:
                continue  # no step has room: skip the scan (most options, in a nearly full pool)
            d = self.jobs[k].durations[i]
            start = earliest_start(self.free[pool], gpus, d, r, lim - d)
            if start is not None:
                return cents, (i, start)
        return (below if below is not None else 0), None

    def move_each(self, deadline: float) -> int:
        """One pass of single-job moves: each job in turn to the cheapest (option, start) that fits in
        what the others leave free (an unplaced job placed if it fits anywhere); the number of moves."""
        moves = 0
        for k in sorted(range(len(self.jobs)), key=lambda k: -self._cents_of(k)):
            if work.now() >= deadline:
                break
            cur = self.placed[k]
            self._use(k, cur, +1)
            cents, found = self._cheapest_fit(k, self._cents_of(k) if cur is not None else None)
            if found is not None and found != cur:
                moves += 1
                self.placed[k] = found
            self._use(k, self.placed[k], -1)
        return moves

    def predecessors(self, k: int) -> list[int]:
        """The jobs k waits for ('after:'), directly or through others, each after those it waits for."""
        out: list[int] = []
        seen: set[int] = set()

        def visit(y: int) -> None:
            for name in self.jobs[y].after:
                d = self.index[name]
                if d not in seen:
                    seen.add(d)
                    visit(d)
                    out.append(d)

        visit(k)
        return out

    def pull_forward(self, k: int) -> bool:
        """Place the unplaced job k where the jobs it waits for end too late for it: those jobs (and the
        ones they wait for) moved to end by the step k's option needs, each at its cheapest option that
        does, at its earliest start; k's options from the longest (the predecessors' cheapest targets)
        to the shortest. Whether k went in; if not, nothing moves."""
        chain = self.predecessors(k)
        if not chain or any(self.placed[d] is None for d in chain):
            return False
        r, lim = window(self.jobs[k], self.horizon)
        fastest = {y: min(self.jobs[y].durations, default=0) for y in chain}
        for dur in sorted({d for d in self.jobs[k].durations if d <= lim - r}, reverse=True):
            old: dict[int, Placement] = {}
            self._apply([(d, None) for d in chain], old)
            due = {d: lim - dur for d in chain}
            for y in reversed(chain):  # a job waits for those before it: they end before it starts
                for name in self.jobs[y].after:
                    d = self.index[name]
                    due[d] = min(due[d], due[y] - fastest[y])
            for d in chain:
                _, fit = self._cheapest_fit(d, end_by=due[d])
                if fit is None:
                    break
                self._move(d, fit)
            else:
                _, found = self._cheapest_fit(k)
                if found is not None:
                    self._move(k, found)
                    return True
            self._undo(old)
        return False

    def rescue(self, k: int, depth: int = INSERT_DEPTH) -> bool:
        """Put the unplaced job k in before it is given up, on every pool with room in its window: its cheapest
        option that fits what the others leave free, then with the jobs it waits for moved earlier (``pull_forward``),
        then by ejecting the jobs in its way at its cheapest option on each pool (``depth``: ejection chains)."""
        _, found = self._cheapest_fit(k)
        if found is not None:
            self._move(k, found)
            return True
        if self.pull_forward(k):
            return True
        r, lim = window(self.jobs[k], self.horizon)
        ranked = sorted(self.cheapest_per_pool(k), key=lambda i: self.cents[k][i])
        return any(
            self.insert(k, ranked[a : a + INSERT_OPTIONS], (r + lim) / 2, depth)
            for a in range(0, len(ranked), INSERT_OPTIONS)
        )

    def insert(self, k: int, options: list[int], near: float, depth: int = INSERT_DEPTH) -> bool:
        """Place the unplaced job k by ejecting the jobs in its way (``_insertion``), those that fit nowhere put in by
        ejection in turn ``depth`` levels down (until ``stop_at``); whether it did."""
        found = self._insertion(k, options[:INSERT_OPTIONS], near, INSERT_STARTS, depth, roomiest=True)
        if found is None:
            return False
        self._apply(found[1], {})
        return True

    def _insertion(
        self,
        k: int,
        options: list[int],
        near: float,
        tries: int,
        depth: int,
        below: float | None = None,
        roomiest: bool = False,
        deep_tries: int = INSERT_STARTS_DEEP,
    ) -> tuple[int, list[tuple[int, Placement]]] | None:
        """The cheapest way to put job k in: over its ``options`` in turn and the ``tries`` starts nearest
        ``near`` (``roomiest``: the starts where the fewest GPU-steps are short, then nearest), the jobs
        in its way pushed out (``_eject_for``, where those that fit nowhere go in by ejection in turn at
        ``deep_tries`` starts); (added cents, moves) or None. Only ways adding less than ``below`` count
        (None: any)."""
        r, lim = self._bounds(k)
        spare = None if self.budget_cents is None else self.budget_cents - self.cost_cents() + self._cents_of(k)
        best: tuple[int, list[tuple[int, Placement]]] | None = None
        for i in options:
            d = self.jobs[k].durations[i]
            if d > lim - r or (spare is not None and self.cents[k][i] > spare):
                continue
            pool, gpus = self.where[k][i]
            for s in self._starts(pool, gpus, d, r, lim, near, roomiest)[:tries]:
                if work.now() >= self.stop_at:
                    return best
                limit = below if best is None else best[0]
                moves = self._eject_for(k, (i, s), pool, gpus, d, depth, limit, deep_tries)
                if moves is not None:
                    delta = self._delta(moves)
                    if (best is None or delta < best[0]) and (below is None or delta < below):
                        best = (delta, moves)
        return best

    def _starts(self, pool: int, gpus: int, d: int, r: int, lim: int, near: float, roomiest: bool) -> list[int]:
        """The starts in [r, lim - d] nearest ``near``; ``roomiest``: those where the GPU-steps short of
        ``gpus`` on ``pool`` are fewest first (measured on evenly sized pools: a 1-GPU job of 79 steps in a
        98-step window found room, by ejection, only in the last 20 steps of its window)."""
        if not roomiest:
            return sorted(range(r, lim - d + 1), key=lambda s: (abs(s - near), s))
        short = np.concatenate(([0], np.cumsum(np.maximum(0, gpus - self.free[pool][r:lim]))))
        return sorted(range(r, lim - d + 1), key=lambda s: (int(short[s - r + d] - short[s - r]), abs(s - near), s))

    def _delta(self, moves: list[tuple[int, Placement]]) -> int:
        """What the moves add to the cost (the last move of a job counts)."""
        final = dict(moves)
        return sum((0 if p is None else self.cents[y][p[0]]) - self._cents_of(y) for y, p in final.items())

    def _move(self, y: int, p: Placement) -> None:
        """Job y to placement p, its GPUs freed where it was and taken where it goes."""
        self._use(y, self.placed[y], +1)
        self.placed[y] = p
        self._use(y, p, -1)

    def _apply(self, moves: list[tuple[int, Placement]], old: dict[int, Placement]) -> None:
        """Make the moves, recording each moved job's first placement in ``old`` (to undo them)."""
        for y, p in moves:
            old.setdefault(y, self.placed[y])
            self._move(y, p)

    def _undo(self, old: dict[int, Placement]) -> None:
        """Put the jobs in ``old`` back where they were."""
        for y, p in old.items():
            self._move(y, p)

    def _eject_for(
        self,
        k: int,
        at: tuple[int, int],
        pool: int,
        gpus: int,
        d: int,
        depth: int,
        limit: float | None = None,
        deep_tries: int = INSERT_STARTS_DEEP,
    ) -> list[tuple[int, Placement]] | None:
        """The moves that put job k at ``at`` (on ``pool``): the jobs running there pushed out, fewest
        GPU-steps first, until it fits, then each re-placed where it fits cheapest, or, ``depth`` allowing,
        put in by ejecting in turn; None if one finds no room, or once the moves cannot add less than
        ``limit`` cents (each job still to re-place counted at its cheapest option). Leaves the schedule
        as it was."""
        s = at[1]
        short = (gpus - self.free[pool][s : s + d]).astype(np.int64)
        in_way: list[int] = []
        if (short > 0).any():
            ys = self.running_in(pool, s, s + d)
            ys = ys[ys != k]
            gpu_steps = self.run_gpus[ys] * (self.run_end[ys] - self.run_start[ys])
            in_way = ys[np.lexsort((ys, gpu_steps))].tolist()  # fewest GPU-steps first, then by index
        ejected: list[int] = []
        for y in in_way:
            p = self.placed[y]
            assert p is not None
            a, b = max(p[1], s), min(p[1] + self.jobs[y].durations[p[0]], s + d)
            if (short[a - s : b - s] > 0).any():
                ejected.append(y)
                short[a - s : b - s] -= self.where[y][p[0]][1]
                if (short <= 0).all():
                    break
        if (short > 0).any():
            return None
        # what the moves add at least: k's option, and each ejected job at its cheapest option (a heuristic
        # bound where a job the deeper insertion pushes out would move to a cheaper option than its own)
        least = {y: self.cents[y][self.by_cost[y][0]] - self._cents_of(y) for y in ejected}
        adds = self.cents[k][at[0]] - self._cents_of(k) + sum(least.values())
        if limit is not None and adds >= limit:
            return None
        old: dict[int, Placement] = {}
        moves: list[tuple[int, Placement]] = [*((y, None) for y in ejected), (k, at)]
        self._apply(moves, old)
        try:
            for y in sorted(ejected, key=lambda y: -self.weights[y]):
                was = old[y]
                assert was is not None
                was_cents = self.cents[y][was[0]]
                adds -= least[y]
                _, p = self._cheapest_fit(y)
                step: list[tuple[int, Placement]]
                if p is not None:
                    step = [(y, p)]
                    adds += self.cents[y][p[0]] - was_cents
                elif depth > 0:
                    # its own option first (a shift in time), then its cheapest ones
                    cheapest = sorted(range(len(self.jobs[y].options)), key=lambda i: self.cents[y][i])
                    ranked = [was[0], *(i for i in cheapest[:INSERT_OPTIONS_DEEP] if i != was[0])]
                    below = None if limit is None else limit - adds + was_cents
                    deeper = self._insertion(y, ranked, was[1], deep_tries, depth - 1, below, roomiest=True)
                    if deeper is None:
                        return None
                    step = deeper[1]
                    adds += deeper[0] - was_cents
                else:
                    return None
                if limit is not None and adds >= limit:
                    return None
                self._apply(step, old)
                moves += step
            return moves
        finally:
            self._undo(old)

    def relocate(self, k: int, slots: PricedSlots) -> int:
        """Move the placed job k to one of its cheapest priced options near its cheapest priced slot, the
        jobs in its way ejected and re-placed (``_insertion``), if that lowers the cost; the cents saved."""
        cur = self.placed[k]
        assert cur is not None
        before = self.cents[k][cur[0]]
        self._move(k, None)
        options = slots.shortlist(k, RELOCATE_OPTIONS)
        found = self._insertion(
            k, options, float(slots.middle[k]), RELOCATE_STARTS, INSERT_DEPTH, before, deep_tries=RELOCATE_STARTS_DEEP
        )
        if found is None:
            self._move(k, cur)
            return 0
        self._apply(found[1], {})
        self.improved += 1
        return before - found[0]

    def slot_excess(self, slots: PricedSlots) -> list[tuple[float, int]]:
        """(priced cost above the job's cheapest priced slot, job) for every placed job, largest first."""
        out = []
        for k, p in enumerate(self.placed):
            if p is None or not np.isfinite(slots.best_cents[k]):
                continue
            opt = self.jobs[k].options[p[0]]
            here = slots.priced_cents(
                self.cents[k][p[0]], self.pool_of[opt.row.offer_name], opt.row.gpus, p[1], self.jobs[k].durations[p[0]]
            )
            out.append((here - float(slots.best_cents[k]), k))
        out.sort(reverse=True)
        return out

    def _cents_of(self, k: int) -> int:
        p = self.placed[k]
        return 0 if p is None else self.cents[k][p[0]]

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


def relocate_far(state: Search, slots: PricedSlots, until: float) -> None:
    """Passes of ``Search.relocate`` over the jobs furthest from their cheapest priced slot, until a pass
    moves none or ``until`` (a perf_counter time)."""
    moved = True
    while moved and work.now() < until:
        moved = False
        for excess, k in state.slot_excess(slots)[:RELOCATE_TOP]:
            if excess <= 100 or work.now() >= until:
                break
            moved = state.relocate(k, slots) > 0 or moved


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
    rng = random.Random(0)
    size = min(40, len(state.jobs))
    kinds = ["window", "pools", "guided"] if guide_cents else ["window", "pools"]
    if slots is not None:
        kinds += ["priced"]
        state.allowed = freed_options(state, slots)
    turn = 0
    repair_turn = 0
    tried: set[int] = set()
    repairs: dict[int, int] = {}  # repair neighbourhoods spent on each left-out job

    def pick(kind: str) -> list[int] | None:
        """The jobs a neighbourhood of this kind frees (None: the kind has nothing left to free)."""
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

    def waiting() -> list[int]:
        """The left-out jobs (an option fits their window) the search must place: required ones and ``place``."""
        must = set(state.required_dropped()) | set(place or [])
        return [k for k in state.left_out() if k in must]

    for _ in range(5):  # single-job moves first: cheap, and they leave the CP-SAT steps the hard part
        t0 = work.now()
        if not state.move_each(deadline):
            break
        if report is not None:
            report("moves")
        if work.now() - t0 > 0.1 * max(0.0, deadline - t0):
            break
    # none in a search that starts with a job it must place left out (a repair search: its time is for
    # that). Measured on evenly sized pools: relocating there too ended at 3.5 % in 4 of 7 runs and at
    # 1.9-2.2 % in the others; without, at 2.2-2.3 % in 4 of 4
    if slots is not None and len(state.jobs) >= RELOCATE_JOBS and not waiting():
        before = state.cost_cents()
        relocate_far(state, slots, work.now() + RELOCATE_SHARE * max(0.0, deadline - work.now()))
        if report is not None and state.cost_cents() < before:
            report("relocate")
    while True:
        left = deadline - work.now()
        if left < 0.2:
            return
        if (
            target_cents is not None
            and not state.required_dropped()
            and state.cost_cents() <= target_cents
            and state.dropped_weight() == 0
        ):
            return
        # the jobs to repair: those with an option that fits their window, required ones and ``place`` first,
        # then the other left-out jobs, each a few times (the objective ranks drops first)
        missing = waiting() or [k for k in state.left_out() if repairs.get(k, 0) < OPTIONAL_REPAIRS]
        if missing and turn % 2 == 0:
            k = missing[repair_turn % len(missing)]
            repair_turn += 1
            job = state.jobs[k]
            r, lim = window(job, state.horizon)
            if k not in tried:  # first by ejecting the jobs in its way: cheap, and often enough
                tried.add(k)
                if state.rescue(k) if job.required else state.insert(k, state.by_cost[k], (r + lim) / 2):
                    if report is not None:
                        report("repair")
                    continue
            attempt = repairs.get(k, 0)
            repairs[k] = attempt + 1
            if attempt % 2 == 0:  # with the jobs it waits for (they may have to end sooner), then those near
                subset = state.around((r + lim) // 2, size, {p for p, _ in state.where[k]}, [k, *state.predecessors(k)])
            else:  # every job on one of its pools in its window, its pools in turn, cheapest first
                ranked = list(dict.fromkeys(state.where[k][i][0] for i in state.by_cost[k]))
                subset = state.crossing(k, ranked[(attempt // 2) % len(ranked)], REPAIR_JOBS)
            kind = "repair"
        else:
            kind = kinds[turn % len(kinds)]
            picked = pick(kind)
            if picked is None:
                kinds.remove(kind)
                continue
            subset = picked
        turn += 1
        limit = min(left - 0.1, REPAIR_S if kind == "repair" else STEP_S)
        if limit <= 0.05:
            return
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
            size = min(len(state.jobs), 200, size + max(2, size // 5))
        elif not optimal:
            size = max(8, size - max(2, size // 5))
        if improved and report is not None:
            report(kind)
