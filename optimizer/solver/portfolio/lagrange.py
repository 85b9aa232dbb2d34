"""A Lagrangian lower bound on a cost portfolio, and prices that guide the search (docs/design.md 10.6).

The exact problem in start-time form: each job j picks at most one (option o, start s) with
release <= s and s + d_o <= min(deadline, horizon); per pool k and step t the GPUs of the runs covering
t stay within capacity_k(t); total cost within the budget; dropped weight within a limit.

Relaxing the pool capacities with multipliers lambda_kt >= 0, the budget with mu >= 0 and the dropped
weight with nu >= 0 leaves one independent problem per job:

    L(lambda, mu, nu) = sum_j min( nu w_j  [only jobs that may be dropped],
                                   min_(o, s) (1 + mu) c_o + g_o sum_(t in [s, s + d_o)) lambda_k(o)t )
                        - sum_kt lambda_kt capacity_k(t) - mu budget - nu dropped_limit

For any multipliers >= 0 this is at most the cost of every schedule (weak duality: a schedule is a
choice per job that makes every relaxed term non-positive), so the bound holds at every iterate, with
no solver tolerance to trust; it is evaluated exactly here. Its maximum equals the linear relaxation
of the time-indexed start-time model (Geoffrion 1974, "Lagrangean relaxation for integer
programming", Math. Programming Study 2), which is stronger than the bucketed, preemptive LP of
``lp.py``: a job cannot split across buckets or options. Precedence between jobs is dropped (a
relaxation, so the bound stays valid).

The maximum is approached by subgradient ascent with the Polyak step (Held, Wolfe and Crowder 1974,
"Validation of subgradient optimization", Math. Programming 6): step = theta (target - L) / |g|^2,
theta halved when the bound stalls. ``Ascent`` keeps its multipliers between calls, so the solver's
later ascents (each rounding, the one after iterated greedy, the last one) go on climbing instead of
starting again from zero; a resumed run deflects the subgradient against its last direction (Camerini,
Fratta and Maffioli 1975). The inner minimum over starts is a range minimum, answered for all
options at once with a sparse table per (pool, duration) pair.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...money import usd_to_cents
from . import work
from .greedy import capacity_arrays
from .lp import drop_weights, window

# Subgradient schedule (Held, Wolfe and Crowder 1974): start with theta 2, halve after this many
# iterations without a better bound, stop when theta is this small.
STALL_ITERATIONS = 15
# The relaxed choices are averaged with this decay per iteration (a window of about 20 iterations), so
# the average follows the multipliers once they are near optimal. Measured at 1,000 jobs against the exact
# time-indexed LP (HiGHS, 104 s): the dominant option agreed for 982 of 1,000 jobs (987 averaging every
# iteration alike, 839 weighting by step size), and the rounded schedule (``greedy.guided_schedule`` and
# single-job moves, before repairing the 3-7 jobs each leaves out) cost $233,405 against $237,402 and
# $238,509.
SHARE_DECAY = 0.95
MIN_THETA = 1e-3
# A resumed ascent's step factor, at least (measured at 1,000 jobs, evenly sized pools: resumed at 0.1
# and 0.5 it reached $280,723 and $280,715 in 8 s).
RESUME_THETA = 0.1
# A resumed run's step rule, more patient than the first's (measured at 1,000 jobs, target the
# iterated-greedy cost: 279,533 -> 280,571 in 6 s, 280,724 converged in 11 s, where the first ascent stops;
# the LP is at most 281,031 there).
RESUMED_STALL_ITERATIONS = 40
RESUMED_MIN_THETA = 1e-4
# Deflection of the subgradient in a resumed run (Camerini, Fratta and Maffioli 1975, "On improving
# relaxation methods by modified gradient techniques", Math. Programming Study 3; 1.5 is their
# recommended value). Measured at 1,000 jobs, evenly sized pools, resumed for 6-8 s after a first run
# that stopped at $280,073: $280,723 (the converged value) deflected, $280,154 not. A first run from zero
# deflected stopped lower on demand-sized pools ($355,990 against $356,177, seed 2).
DEFLECTION = 1.5


@dataclass
class LagrangeBound:
    """The best bound found (cents; None when some job that must run has no option that fits), what each
    job's relaxed choice costs at the best multipliers, and the capacity prices (cents per GPU-step, per pool)."""

    bound_cents: float | None
    choice_cents: list[float] = field(default_factory=list)
    prices: list[np.ndarray] = field(default_factory=list)
    iterations: int = 0
    seconds: float = 0.0
    converged: bool = False  # the step shrank to nothing (or the relaxed choices fit) before the deadline
    # The relaxed choices averaged over the last iterations (``SHARE_DECAY``), an estimate of the LP's
    # primal solution (Larsson, Patriksson and Stromberg 1999, "Ergodic, primal convergence in dual
    # subgradient schemes", Math. Programming 86): per job its options' shares and its mean start
    shares: list[dict[int, float]] = field(default_factory=list)
    mean_start: list[float] = field(default_factory=list)

    @property
    def infeasible(self) -> bool:
        return self.bound_cents is None


@dataclass
class _Options:
    """Every (job, option) that fits its job's window, as flat arrays (options of a job contiguous)."""

    pool: np.ndarray
    gpus: np.ndarray
    dur: np.ndarray
    cents: np.ndarray
    lo: np.ndarray  # first start
    hi: np.ndarray  # last start
    pair: np.ndarray  # index into the (pool, duration) pairs
    option: np.ndarray  # the option's index in its job
    pairs: list[tuple[int, int]]
    first: np.ndarray  # per job with options: index of its first row (for reduceat)
    jobs_with: np.ndarray  # the jobs that have options


@dataclass
class _Relaxed:
    """What one run of the ascent relaxes: the options, the jobs it may drop, and the weight it may drop (less
    the jobs with no option, dropped in every schedule)."""

    opts: _Options
    may_drop: np.ndarray
    limit: float


def _options(jobs, pool_of: dict[str, int], horizon: int) -> _Options:
    rows: list[tuple[int, int, int, int, int, int, int, int]] = []
    for j, job in enumerate(jobs):
        r, lim = window(job, horizon)
        for i, (opt, d) in enumerate(zip(job.options, job.durations)):
            if 0 < d <= lim - r:
                rows.append(
                    (j, pool_of[opt.row.offer_name], opt.row.gpus, d, usd_to_cents(opt.cost_usd), r, lim - d, i)
                )
    arr = np.array(rows, dtype=np.int64).reshape(-1, 8)
    pair_keys = arr[:, 1] * (horizon + 1) + arr[:, 3]
    uniq, pair = np.unique(pair_keys, return_inverse=True)
    pairs = [(int(u // (horizon + 1)), int(u % (horizon + 1))) for u in uniq]
    jobs_with, first = np.unique(arr[:, 0], return_index=True)
    return _Options(
        arr[:, 1],
        arr[:, 2].astype(np.float64),
        arr[:, 3],
        arr[:, 4].astype(np.float64),
        arr[:, 5],
        arr[:, 6],
        pair.reshape(-1),
        arr[:, 7],
        pairs,
        first,
        jobs_with,
    )


def _range_min(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """min(values[rows[i], lo[i] : hi[i] + 1]) for every i, with a sparse table over the last axis built
    only as deep as the longest range needs (level l holds the minimum of 2^l values from each column)."""
    level = np.floor(np.log2(hi - lo + 1)).astype(np.int64)
    tables = [values]
    width = 1
    for _ in range(int(level.max()) if len(level) else 0):
        prev = tables[-1]
        tables.append(np.minimum(prev[:, :-width], prev[:, width:]))
        width *= 2
    out = np.empty(len(lo))
    for lv in np.unique(level):
        sel = level == lv
        t = tables[lv]
        out[sel] = np.minimum(t[rows[sel], lo[sel]], t[rows[sel], hi[sel] - (1 << lv) + 1])
    return out


class Ascent:
    """Subgradient ascent on L that later calls resume where the last one stopped: from the best
    multipliers found, with the step factor it had (raised to ``RESUME_THETA`` if it had shrunk below
    that), a more patient step rule and the averaged choices it had gathered. Restarting from zero threw
    the climb away: at 1,000 jobs on evenly sized pools each restart spent its seconds getting back (a
    second ascent from zero, 6 s: $279,774; resumed: $280,154 without deflection and $280,723, the
    converged value, with it)."""

    def __init__(self, jobs, pools, pool_of: dict[str, int], horizon: int, budget_cents: int | None):
        self.jobs, self.horizon, self.budget_cents = jobs, horizon, budget_cents
        self.weights = np.array(drop_weights(jobs), dtype=np.float64)
        self.cap = np.array([c[:horizon] for c in capacity_arrays(pools, horizon)], dtype=np.float64)
        fits = any(0 < d <= window(job, horizon)[1] - window(job, horizon)[0] for job in jobs for d in job.durations)
        self.opts = _options(jobs, pool_of, horizon) if fits else None
        self.lam = np.zeros_like(self.cap)
        self.mu = 0.0
        self.nu: float | None = None  # set at the first run that lets a job be dropped
        self.theta = 2.0
        self.limit: int | None = None  # the drop limit of the last run (the best bound is for it)
        self.best = -np.inf
        self.best_at: tuple[np.ndarray, float, float] | None = None  # the multipliers of the best bound
        self.best_out: LagrangeBound | None = None
        n_rows = 0 if self.opts is None else len(self.opts.cents)
        # decayed count of the iterations that chose each row, and its starts' sum
        self.mass = np.zeros(n_rows)
        self.start_mass = np.zeros(n_rows)

    def run(
        self,
        dropped_limit: int | None,
        *,
        deadline: float,
        target_cents: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> LagrangeBound:
        """Ascend until ``deadline`` (a perf_counter time), or until ``stop()`` says so. ``dropped_limit``
        None: every job with an option must run. ``target_cents``: a schedule's cost (sets the step; default
        1.1 x the best bound). The bound returned is the best found for this drop limit, in this run or an
        earlier one."""
        t0 = time.perf_counter()
        if dropped_limit != self.limit:  # the best bound was for another limit: this one climbs on its own
            self.limit, self.best, self.best_out = dropped_limit, -np.inf, None
        out, relaxed = self._relaxed(dropped_limit)
        if relaxed is None:
            return out
        self._climb(relaxed, out, deadline, target_cents, stop)
        return self._summary(out, relaxed.opts, t0)

    def _relaxed(self, dropped_limit: int | None) -> tuple[LagrangeBound, _Relaxed | None]:
        """The run's answer to fill in, and what its ascent relaxes under ``dropped_limit``: None where the
        answer is known without one (no job, nothing fits anywhere, or a job that must run fits nowhere)."""
        jobs, weights = self.jobs, self.weights
        n_jobs = len(jobs)
        must = np.array(
            [dropped_limit is None or weights[j] > dropped_limit for j in range(n_jobs)] if n_jobs else [],
            dtype=bool,
        )
        out = LagrangeBound(None, [0.0] * n_jobs, shares=[{} for _ in jobs], mean_start=[0.0] * n_jobs)
        if n_jobs == 0:
            out.bound_cents = 0.0
            return out, None
        if self.opts is None:  # nothing fits anywhere: every schedule is empty
            out.bound_cents = 0.0 if not np.any(must & np.array([bool(job.options) for job in jobs])) else None
            return out, None
        opts = self.opts
        has = np.zeros(n_jobs, dtype=bool)
        has[opts.jobs_with] = True
        if np.any(must & ~has & np.array([bool(job.options) for job in jobs])):
            return out, None  # a job that must run fits nowhere in its window: no schedule exists
        must &= has  # jobs without any option are dropped in every schedule (counted in the limit)
        limit = 0.0 if dropped_limit is None else float(dropped_limit) - float(weights[~has].sum())
        if limit < 0:
            return out, None
        return out, _Relaxed(opts, ~must & has, limit)

    def _resume(self, relaxed: _Relaxed) -> tuple[bool, int, float]:
        """Set the multipliers the climb starts from: the best found, whatever their limit (then the patient
        step rule), or the drop multiplier's first value; whether resumed, and the stall and stop rule."""
        opts, weights, may_drop = relaxed.opts, self.weights, relaxed.may_drop
        resumed = self.best_at
        stall_iterations, min_theta = STALL_ITERATIONS, MIN_THETA
        if resumed is not None:
            self.lam, self.mu, self.nu = resumed[0].copy(), resumed[1], resumed[2]
            self.theta = max(self.theta, RESUME_THETA)
            stall_iterations, min_theta = RESUMED_STALL_ITERATIONS, RESUMED_MIN_THETA
        if self.nu is None and np.any(may_drop):
            # start where a job is dropped at about its own cheapest cost per unit of weight
            cheapest = np.minimum.reduceat(opts.cents, opts.first)
            droppable = may_drop[opts.jobs_with]
            self.nu = float(np.median(cheapest[droppable] / weights[opts.jobs_with][droppable]))
        return resumed is not None, stall_iterations, min_theta

    def _climb(
        self,
        relaxed: _Relaxed,
        out: LagrangeBound,
        deadline: float,
        target_cents: float | None,
        stop: Callable[[], bool] | None,
    ) -> None:
        """The subgradient iterations with the Polyak step, until the step factor is spent, the relaxed choices
        fit, ``deadline`` or ``stop()``; leaves the multipliers and the best bound on the Ascent."""
        resumed, stall_iterations, min_theta = self._resume(relaxed)
        opts, may_drop, limit = relaxed.opts, relaxed.may_drop, relaxed.limit
        horizon, budget_cents, weights, cap = self.horizon, self.budget_cents, self.weights, self.cap
        lam, mu, nu, theta = self.lam, self.mu, self.nu or 0.0, self.theta
        stall = 0
        pair_pool = np.array([k for k, _ in opts.pairs])
        pair_dur = np.array([d for _, d in opts.pairs])
        direction: np.ndarray | None = None
        # an iteration's work: its rows, and the sparse tables of ``_range_min`` (pairs x steps x levels)
        levels = int(np.log2(max(1, int((opts.hi - opts.lo).max()) + 1))) + 1
        per_iteration = work.ASCENT_ROW_S * len(opts.cents) + work.ASCENT_CELL_S * len(opts.pairs) * horizon * levels
        while True:
            value, choice_row, starts = _evaluate(opts, lam, mu, nu, weights, may_drop, horizon, pair_pool, pair_dur)
            value -= float((lam * cap).sum()) + (mu * budget_cents if budget_cents is not None else 0.0) + nu * limit
            out.iterations += 1
            work.charge(per_iteration)
            self._record(choice_row, starts, SHARE_DECAY)
            if value > self.best + 1e-9:
                stall = 0
                self._keep_best(value, (lam, mu, nu), choice_row, len(self.jobs))
            else:
                stall += 1
                if stall >= stall_iterations:
                    theta, stall = theta / 2, 0
            if theta < min_theta:
                out.converged = True
                break
            if work.past(deadline) or (stop is not None and stop()):
                break
            g_cap, g_mu, g_nu = self._subgradient(relaxed, choice_row, starts, lam, mu, nu)
            if float((g_cap**2).sum()) + g_mu**2 + g_nu**2 <= 1e-12:
                out.converged = True
                # the relaxed choices are a feasible schedule: the bound is the optimum, and they its solution
                self._record(choice_row, starts, 0.0)
                break
            if resumed and direction is not None and (dot := float((g_cap * direction).sum())) < 0:
                # deflected (Camerini, Fratta and Maffioli 1975): take out of the capacity subgradient
                # part of its turn back against the last direction, which damps the zigzag
                g_cap = g_cap - DEFLECTION * dot / float((direction**2).sum()) * direction
            direction = g_cap
            norm = float((g_cap**2).sum()) + g_mu**2 + g_nu**2
            target = (
                target_cents if target_cents is not None and target_cents > self.best else 1.1 * max(self.best, 1.0)
            )
            step = theta * (target - value) / norm
            lam = np.maximum(0.0, lam + step * g_cap)
            mu = max(0.0, mu + step * g_mu)
            nu = max(0.0, nu + step * g_nu)
        self.lam, self.mu, self.nu, self.theta = lam, mu, nu, theta

    def _record(self, choice_row: np.ndarray, starts: np.ndarray, keep: float) -> None:
        """Decay the averages by ``keep`` and count this iteration's choices in."""
        mass, start_mass = self.mass, self.start_mass
        picked = choice_row >= 0
        mass[:] *= keep
        start_mass[:] *= keep
        np.add.at(mass, choice_row[picked], 1.0)
        np.add.at(start_mass, choice_row[picked], starts[picked])

    def _keep_best(
        self, value: float, multipliers: tuple[np.ndarray, float, float], choice_row: np.ndarray, n_jobs: int
    ) -> None:
        """A better bound: it, its multipliers, its capacity prices and each job's relaxed choice kept."""
        lam, mu, nu = multipliers
        opts = self.opts
        assert opts is not None
        self.best = value
        self.best_at = (lam.copy(), mu, nu)
        # float sums over up to millions of terms: shave their rounding so the bound stays below
        best_out = LagrangeBound(max(0.0, value - 1e-9 * abs(value)), [0.0] * n_jobs)
        best_out.prices = [lam[k].copy() for k in range(len(lam))]
        for j, r in zip(opts.jobs_with, choice_row):
            if r >= 0:
                best_out.choice_cents[j] = float(opts.cents[r])
        self.best_out = best_out

    def _subgradient(
        self, relaxed: _Relaxed, choice_row: np.ndarray, starts: np.ndarray, lam: np.ndarray, mu: float, nu: float
    ) -> tuple[np.ndarray, float, float]:
        """Each relaxed constraint's slack at the current choices (capacity per pool and step, budget, dropped
        weight), projected where a zero multiplier with slack cannot go lower."""
        opts, may_drop, limit = relaxed.opts, relaxed.may_drop, relaxed.limit
        cap, budget_cents, horizon, weights = self.cap, self.budget_cents, self.horizon, self.weights
        use = np.zeros((len(cap), horizon + 1))
        chosen = choice_row[choice_row >= 0]
        np.add.at(use, (opts.pool[chosen], starts[choice_row >= 0]), opts.gpus[chosen])
        np.add.at(use, (opts.pool[chosen], starts[choice_row >= 0] + opts.dur[chosen]), -opts.gpus[chosen])
        g_cap = np.cumsum(use, axis=1)[:, :horizon] - cap
        g_cap[(lam <= 0) & (g_cap < 0)] = 0.0  # projected: a zero price with slack cannot go lower
        g_mu = float(opts.cents[chosen].sum()) - budget_cents if budget_cents is not None else 0.0
        if budget_cents is not None and mu <= 0 and g_mu < 0:
            g_mu = 0.0
        dropped = may_drop[opts.jobs_with] & (choice_row < 0)
        g_nu = float(weights[opts.jobs_with][dropped].sum()) - limit if np.any(may_drop) else 0.0
        if nu <= 0 and g_nu < 0:
            g_nu = 0.0
        return g_cap, g_mu, g_nu

    def _summary(self, out: LagrangeBound, opts, t0: float) -> LagrangeBound:
        """A run's answer: the best bound found for its limit, and each job's averaged choices and start."""
        mass, start_mass = self.mass, self.start_mass
        if self.best_out is not None:
            out.bound_cents = self.best_out.bound_cents
            out.choice_cents, out.prices = self.best_out.choice_cents, self.best_out.prices
        total = np.add.reduceat(mass, opts.first)
        starts_sum = np.add.reduceat(start_mass, opts.first)
        group = np.repeat(np.arange(len(opts.first)), np.diff(np.append(opts.first, len(mass))))  # row -> job's index
        for row in np.flatnonzero(mass > 0):
            out.shares[int(opts.jobs_with[group[row]])][int(opts.option[row])] = float(mass[row] / total[group[row]])
        for n, j in enumerate(opts.jobs_with):
            if total[n] > 0:
                out.mean_start[int(j)] = float(starts_sum[n] / total[n])
        out.seconds = time.perf_counter() - t0
        return out

    def run_apart(
        self, dropped_limit: int | None, *, deadline: float, target_cents: float | None = None
    ) -> Apart | None:
        """``run`` in a forked process while the caller goes on searching on the other core; ``Apart.collect``
        takes its answer and multipliers. None where processes cannot be forked (not Linux): run it in line."""
        if sys.platform != "linux":
            return None
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        stop = context.Event()

        def ascend() -> None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is the parent's to handle
            out = self.run(dropped_limit, deadline=deadline, target_cents=target_cents, stop=stop.is_set)
            send.send((out, {name: getattr(self, name) for name in _STATE}, work.cut()))

        process = context.Process(target=ascend, daemon=True)
        process.start()
        send.close()
        return Apart(self, process, receive, stop)


# What a run changes on its Ascent, sent back from a run apart so that later runs resume from it.
_STATE = ("lam", "mu", "nu", "theta", "limit", "best", "best_at", "best_out", "mass", "start_mass")


class Apart:
    """An ascent running in a forked process (``Ascent.run_apart``)."""

    def __init__(self, ascent: Ascent, process, receive, stop) -> None:
        self._ascent, self._process, self._receive, self._stop = ascent, process, receive, stop

    def collect(self, wait_s: float) -> LagrangeBound | None:
        """Stop the ascent and take its answer, its Ascent's state with it; None (the Ascent as it was)
        when nothing came within ``wait_s`` seconds. Under a work budget (``work``) the ascent runs to its own
        deadline, counted in its work, so that what it sends is the same however fast it ran; the wall clock's
        safety stop (it stops there too) bounds the wait, and where it stopped the ascent, or nothing came, the
        budget is marked stopped (``work.stop``): the answer is then the wall clock's."""
        counting = work.counting()
        if not counting:
            self._stop.set()
        got = None
        try:
            if self._receive.poll(wait_s + (min(work.wall_left(), 3600.0) if counting else 0.0)):
                got = self._receive.recv()
        except (EOFError, OSError):  # the process died without an answer
            got = None
        finally:
            self._receive.close()
            self._process.join(timeout=0.5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
        if got is None or got[2]:
            # what the ascent sent, or that nothing came, is the wall clock's doing: the answer says so
            if counting:
                work.stop()
            if got is None:
                return None
        out, state, _ = got
        for name, value in state.items():
            setattr(self._ascent, name, value)
        return out


def _evaluate(opts: _Options, lam, mu, nu, weights, may_drop, horizon, pair_pool, pair_dur):
    """sum_j of each job's relaxed minimum; per job with options its best row (-1: dropped) and start."""
    prefix = np.concatenate([np.zeros((len(lam), 1)), np.cumsum(lam, axis=1)], axis=1)  # (pools, horizon+1)
    width = horizon + 1
    # per (pool, duration) pair and start: the prices summed over the run's steps (inf past the end)
    ends = np.arange(width)[None, :] + pair_dur[:, None]
    ended = prefix[pair_pool[:, None], np.minimum(ends, width - 1)]
    run = np.where(ends < width, ended - prefix[pair_pool], np.inf)
    price = _range_min(run, opts.lo, opts.hi, opts.pair)
    total = (1.0 + mu) * opts.cents + opts.gpus * price
    best_per_job = np.minimum.reduceat(total, opts.first)
    # Per job its first row at the minimum, and that row's first start at its range minimum, by array
    # operations (a loop over jobs took two thirds of each iteration at 1,000 jobs).
    owner = np.repeat(np.arange(len(opts.first)), np.diff(np.append(opts.first, len(total))))
    at_min = np.flatnonzero(total <= best_per_job[owner])
    _, first_at = np.unique(owner[at_min], return_index=True)
    choice_row = at_min[first_at]
    lo, hi, pair = opts.lo[choice_row], opts.hi[choice_row], opts.pair[choice_row]
    starts = np.empty(len(choice_row), dtype=np.int64)
    for part in range(0, len(choice_row), 1024):  # in blocks, so the padded windows stay small
        sl = slice(part, part + 1024)
        span = int((hi[sl] - lo[sl]).max()) + 1
        cols = lo[sl, None] + np.arange(span)[None, :]
        inside = cols <= hi[sl, None]
        values = np.where(inside, run[pair[sl, None], np.minimum(cols, width - 1)], np.inf)
        starts[sl] = lo[sl] + np.argmin(values, axis=1)
    drop_value = nu * weights[opts.jobs_with]
    drops = may_drop[opts.jobs_with] & (drop_value < best_per_job)
    choice_row[drops] = -1
    value = float(np.where(drops, drop_value, best_per_job).sum())
    return value, choice_row, starts
