"""Portfolio inputs: GPU pools over time and each job's options (rows of its candidate table, with
durations in time steps), pruned of options another one on the same offer beats."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...errors import GpuplanError, JobError
from ...inputs.catalog import offers_for
from ...inputs.files import portfolio_job_problem
from ...inputs.schema import Catalog, Portfolio
from ...planning.calibration import job_context
from ...planning.candidates import Candidate, CandidateTable
from ..model import solver_rows
from .compact import retime
from .tables import Tables

WEIGHT_SCALE = 1000  # job weights to integers


@dataclass
class PoolSpec:
    name: str
    offers: set[str]
    segments: list[tuple[int, int, int]]  # (start step, end step, GPUs)

    @property
    def peak_capacity(self) -> int:
        return max(g for _, _, g in self.segments)

    def capacity_at(self, step: int) -> int:
        return next((g for s, e, g in self.segments if s <= step < e), 0)


@dataclass
class JobData:
    index: int
    name: str
    table: CandidateTable
    options: list[Candidate]
    durations: list[int]
    release: int
    deadline: int | None
    weight: int
    required: bool
    after: list[str]


def _steps(seconds: float, step_s: float) -> int:
    """Whole steps that hold ``seconds`` (rounded up; a time on a step boundary is that boundary)."""
    return int(math.ceil(seconds / step_s - 1e-9))


def whole_steps(seconds: float, step_s: float) -> int:
    """Whole steps within ``seconds`` (rounded down; a time on a step boundary is that boundary: 4.1h is
    14,759.999... s, 41 steps of 6 minutes, not 40)."""
    return int(math.floor(seconds / step_s + 1e-9))


def _snapped(seconds: float, step_s: float) -> float:
    """A time within float noise of a step boundary, as that boundary (4.1h written in hours is 14,759.999...
    s: a window edge there had counted as inside the step before it, and emptied every step back to 0)."""
    k = round(seconds / step_s)
    return k * step_s if abs(seconds / step_s - k) < 1e-9 * max(1, k) else seconds


def pool_specs(pf: Portfolio, catalog: Catalog, horizon: int) -> list[PoolSpec]:
    pools: list[PoolSpec] = []
    named: dict[str, int] = {}  # offer -> the pool that holds it
    for i, pool in enumerate(pf.pools):
        try:
            offers = {o.name for o in offers_for(catalog, pool.offer)}
        except GpuplanError as exc:
            raise exc.located(pf.source_path, f"pools[{i}].offer") from None
        if not offers:
            raise JobError(
                f"no offer in catalog '{catalog.name}' matches {pool.offer!r}",
                source=pf.source_path,
                field=f"pools[{i}].offer",
            )
        shared = sorted(o for o in offers if o in named)
        if shared:
            j = named[shared[0]]
            raise JobError(
                f"pools[{j}] ({pf.pools[j].offer!r}) and pools[{i}] ({pool.offer!r}) both hold offer {shared[0]!r}; "
                "an offer's GPUs are one pool: give its supply once (with windows where it changes)",
                source=pf.source_path,
                field=f"pools[{i}].offer",
            )
        pools.append(PoolSpec(pool.offer, offers, _step_segments(pool, pf.time_step_s, horizon)))
        named |= dict.fromkeys(offers, i)
    for offer in catalog.offers:  # offers without a pool: their catalog supply, all the time
        if offer.name not in named:
            pools.append(PoolSpec(offer.name, {offer.name}, [(0, horizon, offer.max_nodes * offer.gpus_per_node)]))
    return pools


def _step_segments(pool, step_s: float, horizon: int) -> list[tuple[int, int, int]]:
    """(first step, end step, GPUs): at each step the fewest GPUs the pool has at any moment of it (``gpus``,
    a later window overriding an earlier one). A window edge between step boundaries (0 GPUs from 1h to
    5h at 3h steps) was rounded up, so the steps it cut into kept their GPUs and a schedule used GPUs the
    pool did not have; taking each step's minimum keeps every schedule within the real supply."""

    windows = [(_snapped(w.start_s, step_s), _snapped(w.end_s, step_s), w.gpus) for w in pool.windows]

    def gpus_at(t: float) -> int:
        gpus = pool.gpus
        for start_s, end_s, window_gpus in windows:
            if start_s <= t < end_s:
                gpus = window_gpus
        return gpus

    changes = sorted({t for start_s, end_s, _ in windows for t in (start_s, end_s)})
    bounds = {0, horizon}
    for t in changes:  # a change inside a step makes that step a segment of its own
        bounds |= {min(horizon, whole_steps(t, step_s)), min(horizon, _steps(t, step_s))}
    edges = sorted(bounds)
    segments: list[tuple[int, int, int]] = []
    for s, e in zip(edges, edges[1:]):
        a, b = s * step_s, e * step_s
        gpus = min([gpus_at(a)] + [gpus_at(t) for t in changes if a < t < b])
        if segments and segments[-1][2] == gpus and segments[-1][1] == s:
            segments[-1] = (segments[-1][0], e, gpus)
        else:
            segments.append((s, e, gpus))
    return segments


def _prune(options: list[Candidate], durations: list[int]) -> tuple[list[Candidate], list[int]]:
    """Drop options that another option on the same offer beats (or ties) on GPUs, duration and cost (all
    pairs at once: a loop over pairs took 10 ms a job, 10 s at 1,000 distinct jobs)."""
    if not options:
        return [], []
    names = [a.row.offer_name for a in options]
    offer = np.unique(names, return_inverse=True)[1]
    gpus = np.array([a.row.gpus for a in options])
    dur = np.array(durations)
    cost = np.array([a.cost_usd for a in options], dtype=float)
    # beaten[a, b]: b on a's offer, no more GPUs, steps or cost than a, and not the same on all three
    same = (gpus[:, None] == gpus[None, :]) & (dur[:, None] == dur[None, :]) & (cost[:, None] == cost[None, :])
    beaten = (
        (offer[:, None] == offer[None, :])
        & (gpus[None, :] <= gpus[:, None])
        & (dur[None, :] <= dur[:, None])
        & (cost[None, :] <= cost[:, None])
        & ~same
    ).any(axis=1)
    keep, seen = [], set()
    for k in np.flatnonzero(~beaten):
        key = (names[k], int(gpus[k]), int(dur[k]), float(cost[k]))
        if key not in seen:
            seen.add(key)
            keep.append(int(k))
    return [options[k] for k in keep], [durations[k] for k in keep]


def shortlist(options: list[Candidate], durations: list[int]) -> tuple[list[Candidate], list[int]]:
    """Per offer, the two cheapest options and the fastest one (large portfolios only)."""
    keep = set()
    by_offer: dict[str, list[int]] = {}
    for i, opt in enumerate(options):
        by_offer.setdefault(opt.row.key.split(":")[0] + (":spot" if opt.row.spot else ""), []).append(i)
    for idx in by_offer.values():
        keep.update(sorted(idx, key=lambda i: (options[i].cost_usd, durations[i]))[:2])
        keep.add(min(idx, key=lambda i: (durations[i], options[i].cost_usd)))
    chosen = sorted(keep)
    return [options[i] for i in chosen], [durations[i] for i in chosen]


_TOKEN_FIELDS = {"tokens", "dataset_tokens", "epochs"}


def _shape_key(pf: Portfolio, index: int, *, tokens: bool = True) -> str | None:
    """What a job's candidate table depends on: its file or inline spec, assumptions and GPU filter
    (never its name, release, deadline or priority), so jobs of one shape share one table. ``tokens``
    False: the same without the token count, where the layouts do not depend on it (an inline job with
    a global batch: a free batch is sized from the job's compute); None where they may."""
    entry = pf.jobs[index]
    if not tokens and (entry.job is None or entry.job.global_batch is None or entry.job.free_batch):
        return None
    exclude = None if tokens else {"job": _TOKEN_FIELDS}
    return json.dumps(
        [entry.file, entry.model_dump(mode="json", include={"job", "assumptions", "gpu"}, exclude=exclude), pf.spot],
        sort_keys=True,
        default=str,
    )


class OptionsTimeout(Exception):
    """The time limit ran out while the jobs' candidate tables were built (``prepare_jobs``)."""

    def __init__(self, done: int, total: int):
        super().__init__(done, total)
        self.done, self.total = done, total


@dataclass
class Prepared:
    """``prepare``'s answer: the jobs whose options were evaluated in time, and what was left out."""

    jobs: list[JobData]
    unevaluated: list[int]  # indices into pf.jobs: no table in time, or waiting ('after:') for such a job
    tables: int  # distinct job shapes evaluated
    shapes: int  # distinct job shapes in the portfolio


def prepare_jobs(pf: Portfolio, catalog: Catalog, horizon: int, until: float | None = None) -> list[JobData]:
    """Each job's options (``prepare``); ``OptionsTimeout`` when the time limit left any job unevaluated."""
    prepared = prepare(pf, catalog, horizon, until)
    if prepared.unevaluated:
        raise OptionsTimeout(len(prepared.jobs), len(pf.jobs))
    return prepared.jobs


def prepare(
    pf: Portfolio,
    catalog: Catalog,
    horizon: int,
    until: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
) -> Prepared:
    """Each job's options. The candidate table of each distinct job is built once and shared (jobs of one
    shape, ``_shape_key``: 10,000 identical jobs build one); jobs that differ only in their token count share
    one evaluation of their layouts (``retimed``): measured, 300 jobs of two shapes and 288 token counts took
    21 s to prepare with a table each. No table is begun past ``until`` (a perf_counter time) once one is
    built: the jobs whose shape has none then are left out, unevaluated, with every job waiting ('after:') for
    one of them, and the others are scheduled. ``progress(done, total)``: called with the jobs looked at so
    far, before the first and after each table built. The tables are built on ``workers`` cores
    (``tables.Tables``) and kept small (``compact``)."""
    if progress is not None:
        progress(0, len(pf.jobs))
    keys = [_shape_key(pf, i) for i in range(len(pf.jobs))]
    bases = [_shape_key(pf, i, tokens=False) for i in range(len(pf.jobs))]
    firsts: dict[str, int] = {}  # per shape that needs a table built (not retimed), its first job
    for i, (key, base) in enumerate(zip(keys, bases)):
        firsts.setdefault(base if base is not None else f"tokens:{key}", i)
    with_tokens = frozenset(i for i in firsts.values() if bases[i] is None)
    tables = Tables(pf, catalog, sorted(firsts.values()), workers, with_tokens)
    try:
        return _prepare(pf, catalog, until, progress, keys, bases, tables)
    finally:
        tables.close()


def _prepare(
    pf: Portfolio,
    catalog: Catalog,
    until: float | None,
    progress: Callable[[int, int], None] | None,
    keys: list[str | None],
    bases: list[str | None],
    tables: Tables,
) -> Prepared:
    """``prepare``'s loop over the jobs, given each one's shape with and without its token count."""
    jobs = []
    shapes: dict[str, tuple[CandidateTable, list[Candidate], list[int]] | None] = {}  # None: not evaluated
    evaluated: dict[str, CandidateTable] = {}  # by the shape without its token count
    built = 0
    for i, entry in enumerate(pf.jobs):
        key = keys[i]
        assert key is not None
        if key not in shapes:
            # no table begun past ``until`` (~0.2-1 s each); retiming one built (a millisecond) goes on
            if until is not None and built and bases[i] not in evaluated and time.perf_counter() > until:
                shapes[key] = None
                continue
            problem = portfolio_job_problem(pf, i)
            try:
                ctx = job_context(problem, catalog)
            except GpuplanError as exc:
                # the job's GPU filter is the entry's ``gpu:``, which the job reads as constraints.gpu
                if exc.field and exc.field.startswith("constraints.gpu") and entry.gpu is not None:
                    raise type(exc)(
                        exc.reason, source=pf.source_path, field=f"jobs[{i}]" + exc.field.removeprefix("constraints")
                    ) from None
                if entry.file is None and exc.field and exc.source == pf.source_path:
                    # an inline job: its fields sit under its entry (the message named 'job.x' of 500 jobs)
                    raise type(exc)(exc.reason, source=pf.source_path, field=f"jobs[{i}].{exc.field}") from None
                raise
            base = bases[i]
            table = retime(evaluated[base], ctx) if base in evaluated else tables.next(ctx)
            if base is not None:
                evaluated.setdefault(base, table)
            built += 1
            options = [c for c in solver_rows(table) if c.rejected_by is None]
            durations = [_steps(c.time_s, pf.time_step_s) for c in options]
            shapes[key] = (table, *_prune(options, durations))
            if progress is not None:
                progress(i + 1, len(pf.jobs))
        shared = shapes[key]
        if shared is None:
            continue
        table, options, durations = shared
        deadline = None if entry.deadline_s is None else whole_steps(entry.deadline_s, pf.time_step_s)
        jobs.append(
            JobData(
                i,
                entry.name,
                table,
                list(options),
                list(durations),
                _steps(entry.release_s, pf.time_step_s),
                deadline,
                int(round(entry.weight * WEIGHT_SCALE)),
                entry.required,
                entry.after,
            )
        )
    kept = {job.name for job in jobs}
    while True:  # a job waiting for one left out is left out too (the model needs both ends of 'after:')
        out = [job for job in jobs if any(name not in kept for name in job.after)]
        if not out:
            break
        kept -= {job.name for job in out}
        jobs = [job for job in jobs if job.name in kept]
    unevaluated = [i for i, entry in enumerate(pf.jobs) if entry.name not in kept]
    return Prepared(jobs, unevaluated, built, len(shapes))
