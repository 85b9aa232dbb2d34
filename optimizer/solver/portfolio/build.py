"""The portfolio's CP-SAT model, on the same ``PlanModel`` as a single job (docs/design.md section 10).

Per job j: the PlanModel's pick booleans over its options (at most one), start_j, end_j, done_j and an
optional interval per option present iff picked; late_j for weighted lateness. Per pool: a cumulative
over the intervals with the capacity windows as fixed blocking intervals. The budget, the objective
weighting and the constraint-family switches are the PlanModel's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from ...inputs.schema import Portfolio
from ..model import JobVars, PlanModel
from .data import JobData, PoolSpec

# Past this many terms per pool, energy cuts keep a few prefix and suffix windows only.
ENERGY_CUT_TERMS = 200_000


@dataclass
class PortfolioModel:
    """The model and handles to every job's variables."""

    pf: Portfolio
    jobs: list[JobData]
    pools: list[PoolSpec]
    horizon: int
    pm: PlanModel = field(default_factory=PlanModel)
    jv: list[JobVars] = field(default_factory=list)
    starts: list[cp_model.IntVar] = field(default_factory=list)
    ends: list[cp_model.IntVar] = field(default_factory=list)
    dones: list[cp_model.IntVar] = field(default_factory=list)
    lates: list[cp_model.IntVar] = field(default_factory=list)

    @property
    def pool_of(self) -> dict[str, int]:
        return {offer: k for k, p in enumerate(self.pools) for offer in p.offers}

    def total_cost(self) -> cp_model.LinearExprT:
        return sum(PlanModel.cost_cents(v) for v in self.jv)

    def dropped_weight(self) -> cp_model.LinearExprT:
        """Weight of the jobs left out; a required job outweighs all optional ones together."""
        must = sum(job.weight for job in self.jobs if not job.required) + 1
        return sum((must if job.required else job.weight) * (1 - done) for job, done in zip(self.jobs, self.dones))

    def objective(self) -> cp_model.LinearExprT:
        """The portfolio's objective with cost as the tie-breaker."""
        cost = self.total_cost()
        if self.pf.objective == "cost":
            return cost
        max_cost = self.pm.max_total("cost_cents")
        if self.pf.objective == "makespan":
            makespan = self.pm.model.new_int_var(0, self.horizon, "makespan")
            self.pm.model.add_max_equality(makespan, self.ends)
            return self.pm.lexicographic(makespan, cost, max_cost)
        lateness = sum(job.weight * late for job, late in zip(self.jobs, self.lates))
        return self.pm.lexicographic(lateness, cost, max_cost)


def build(pf: Portfolio, jobs: list[JobData], pools: list[PoolSpec], horizon: int) -> PortfolioModel:
    pm = PortfolioModel(pf, jobs, pools, horizon)
    for job in jobs:
        _add_job(pm, job)
    _add_dependencies(pm)
    _add_pools(pm)
    if pf.objective != "weighted_lateness":
        _energy_cuts(pm)
    pm.pm.add_budget(pm.jv, pf.budget_usd)
    return pm


def _add_job(pm: PortfolioModel, job: JobData) -> None:
    m, horizon = pm.pm.model, pm.horizon
    v = pm.pm.add_job(f"j{job.index}", job.table, rows=job.options, required=False, attributes=False)
    start = m.new_int_var(min(job.release, horizon), horizon, f"start_j{job.index}")
    end = m.new_int_var(0, horizon, f"end_j{job.index}")
    done = m.new_bool_var(f"done_j{job.index}")
    late = m.new_int_var(0, horizon, f"late_j{job.index}")
    m.add(sum(v.picks) == done)
    m.add(end == start + sum(d * p for d, p in zip(job.durations, v.picks)))
    m.add(start == min(job.release, horizon)).only_enforce_if(done.negated())
    if job.deadline is not None:
        if pm.pf.objective == "weighted_lateness":
            m.add(late >= end - job.deadline)
        else:
            m.add(end <= job.deadline).only_enforce_if([done, pm.pm.switch("deadline")])
    pm.jv.append(v)
    pm.starts.append(start)
    pm.ends.append(end)
    pm.dones.append(done)
    pm.lates.append(late)


def _add_dependencies(pm: PortfolioModel) -> None:
    """A job starts after each predecessor ends, and runs only if they do."""
    index = {job.name: k for k, job in enumerate(pm.jobs)}
    for k, job in enumerate(pm.jobs):
        for dep in job.after:
            d = index[dep]
            pm.pm.model.add(pm.starts[k] >= pm.ends[d]).only_enforce_if(pm.dones[k])
            pm.pm.model.add(pm.dones[k] <= pm.dones[d])


def _add_pools(pm: PortfolioModel) -> None:
    """A cumulative per pool at its peak capacity; windows with less capacity block the difference."""
    m, pool_of = pm.pm.model, pm.pool_of
    items: dict[int, list] = {k: [] for k in range(len(pm.pools))}
    for job, v, start in zip(pm.jobs, pm.jv, pm.starts):
        for opt, dur, pick in zip(job.options, job.durations, v.picks):
            interval = m.new_optional_fixed_size_interval_var(start, dur, pick, f"run_j{job.index}_{opt.row.key}")
            items[pool_of[opt.row.offer_name]].append((interval, opt.row.gpus))
    for k, pool in enumerate(pm.pools):
        if not items[k]:
            continue
        cap = pool.peak_capacity
        for s, e, gpus in pool.segments:
            if gpus < cap and e > s:
                items[k].append((m.new_interval_var(s, e - s, e, f"block_{k}_{s}"), cap - gpus))
        m.add_cumulative([i for i, _ in items[k]], [g for _, g in items[k]], cap)


def _energy_cuts(pm: PortfolioModel) -> None:
    """Redundant linear cuts that tighten CP-SAT's LP bound: per pool and window [R, D) between a
    release and a deadline, the GPU-steps of the jobs that must run inside it fit its capacity.
    Large portfolios keep the windows [0, D) and [R, horizon) only, so the model stays small."""
    horizon, pool_of = pm.horizon, pm.pool_of
    for k, pool in enumerate(pm.pools):
        cap = [pool.capacity_at(t) for t in range(horizon)]
        energy = [
            (job.release, horizon if job.deadline is None else job.deadline, opt.row.gpus * d, pick)
            for job, v in zip(pm.jobs, pm.jv)
            for opt, d, pick in zip(job.options, job.durations, v.picks)
            if pool_of[opt.row.offer_name] == k
        ]
        if not energy:
            continue
        releases = sorted({r for r, _, _, _ in energy})
        dues = sorted({d for _, d, _, _ in energy} | {horizon})
        windows = [(r, d) for r in releases for d in dues if d > r]
        if len(windows) * len(energy) > ENERGY_CUT_TERMS:
            keep = max(1, ENERGY_CUT_TERMS // (2 * len(energy)))
            windows = [(0, d) for d in dues[:: max(1, len(dues) // keep)]] + [
                (r, horizon) for r in releases[:: max(1, len(releases) // keep)] if r > 0
            ]
        for start, due in windows:
            terms = [e * p for r, d, e, p in energy if r >= start and d <= due]
            if terms:
                pm.pm.model.add(sum(terms) <= sum(cap[start:due]))


def warm_start(pm: PortfolioModel, placed: list[tuple[int, int] | None]) -> None:
    """Hint every variable from a complete schedule (per job: option index and start, or None)."""
    m = pm.pm.model
    for k, (job, v) in enumerate(zip(pm.jobs, pm.jv)):
        chosen = placed[k]
        for i, pick in enumerate(v.picks):
            m.add_hint(pick, chosen is not None and chosen[0] == i)
        start = chosen[1] if chosen else min(job.release, pm.horizon)
        end = start + (job.durations[chosen[0]] if chosen else 0)
        m.add_hint(pm.starts[k], start)
        m.add_hint(pm.ends[k], end)
        m.add_hint(pm.dones[k], chosen is not None)
        m.add_hint(pm.lates[k], max(0, end - job.deadline) if job.deadline is not None and chosen else 0)
