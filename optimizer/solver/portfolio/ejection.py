"""A schedule's placements and the moves of one job at a time (docs/design.md section 10.6): ``Placements``, the
part of the large-neighbourhood search's state (``lns.Search``) that keeps each job's placement and the GPUs it
takes, and moves jobs without CP-SAT: single-job moves to the cheapest room, ejecting insertions (the jobs in the
way pushed out and put back, in chains), relocations toward a job's cheapest priced slot, and the rescue of a
required job left out (its predecessors pulled earlier)."""

from __future__ import annotations

import numpy as np

from . import work
from .greedy import Placement, earliest_start
from .lp import fits_window, window
from .slots import PricedSlots

# An ejecting insertion (``Search.insert``) tries a job's first INSERT_OPTIONS options at the INSERT_STARTS
# starts nearest the wanted one; a job it pushes out that fits nowhere is put in the same way, once more
# (INSERT_DEPTH), at its own option or its INSERT_OPTIONS_DEEP cheapest and INSERT_STARTS_DEEP starts.
INSERT_OPTIONS = 4
INSERT_STARTS = 24
INSERT_DEPTH = 1
INSERT_OPTIONS_DEEP = 2
INSERT_STARTS_DEEP = 8

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


class Placements:
    """Each job's placement (option, start) or None, the GPUs each pool has left per step, and the moves of one job
    at a time; ``lns.Search`` holds the fields (a dataclass) and adds the CP-SAT neighbourhoods."""

    jobs: list
    pool_of: dict[str, int]
    horizon: int
    budget_cents: int | None
    placed: list[Placement]
    weights: list[int]
    cents: list[list[int]]
    free: list[np.ndarray]
    index: dict[str, int]
    successors: list[list[int]]
    improved: int
    # per job and option, its pool and GPUs; per job, where it runs now (pool -1: not placed)
    where: list[list[tuple[int, int]]]
    run_pool: np.ndarray
    run_start: np.ndarray
    run_end: np.ndarray
    run_gpus: np.ndarray
    by_cost: list[list[int]]  # per job, its options cheapest first
    stop_at: float

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
            if work.past(deadline):
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
            if work.past(deadline):
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
                if work.past(self.stop_at):
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


def relocate_far(state: Placements, slots: PricedSlots, until: float) -> None:
    """Passes of ``Placements.relocate`` over the jobs furthest from their cheapest priced slot, until a pass
    moves none or ``until`` (a perf_counter time)."""
    moved = True
    while moved and not work.past(until):
        moved = False
        for excess, k in state.slot_excess(slots)[:RELOCATE_TOP]:
            if excess <= 100 or work.past(until):
                break
            moved = state.relocate(k, slots) > 0 or moved


def score(s: Placements) -> tuple[int, int]:
    """A schedule's rank, lexicographic: dropped weight, then cost."""
    return s.dropped_weight(), s.cost_cents()


def missing(s: Placements, other: Placements) -> list[int]:
    """The jobs ``other`` places and ``s`` does not."""
    return [k for k, (p, q) in enumerate(zip(s.placed, other.placed)) if p is None and q is not None]


def ahead(s: Placements, complete: Placements) -> bool:
    """Whether ``s`` costs less than ``complete`` even with the jobs it lacks at their cheapest option."""
    return s.cost_cents() + sum(min(complete.cents[k]) for k in missing(s, complete)) < complete.cost_cents()
