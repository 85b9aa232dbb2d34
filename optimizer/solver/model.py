"""The CP-SAT model builder shared by ``solve`` (one job) and ``portfolio`` (many jobs).

Formulation, per job j with candidate table C_j (rows of ``candidates.CandidateTable``; each row
is a hardware choice with its best strategy, its physics pre-computed and integer-scaled):

  data      offer_i, nodes_i, gpus_per_node_i, gpus_i, tp_i, pp_i, zero_i, shard_i, micro_batch_i,
            recompute_i; time_s_i (p50, ceil to s), time_rank_i (the rows' order by exact p50 time, what the
            objectives read), cost_cents_i; late_i, overfull_i, too_long_i, filtered_i in {0, 1}
            (late: past the deadline at its quantile; overfull: does not fit in memory; both as check says)
  variables choice_j in C_j (an index); pick_{j,i} <=> (choice_j == i); and the decision variables
            of docs/design.md section 9.3, each an element of its column at choice_j:
            offer_j, nodes_j, gpus_per_node_j, gpus_j, tp_j, pp_j, zero_stage_j, shard_degree_j,
            micro_batch_j, recompute_j, time_s_j, late_j, cost_cents_j, overfull_j, filtered_j
  families  (each switched on by an assumption literal, so an infeasible model can name the ones
            that bind via ``sufficient_assumptions_for_infeasibility``)
            memory:   overfull_j == 0
            deadline: late_j == 0
            budget:   sum_j cost_cents_j <= B
            supply:   nodes_j <= max_nodes, gpus_j <= max_gpus; (offer_j, nodes_j) within the offer's
                      supply (an allowed-assignments table)
            filter:   filtered_j == 0 (GPU type, minimum memory, provider, precision support)
  objective cost: minimise sum cost_cents * W + sum time_rank (ties broken by time);
            time: minimise sum time_rank * W + sum cost_cents; W = 1 + the largest tie-breaker total.

Deterministic: one worker and a fixed seed, so the same input gives the same answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from ..errors import JobError
from ..inputs import units
from ..money import budget_cents, usd_to_cents
from ..planning.candidates import Candidate, CandidateTable
from ..planning.plans import meets_deadline
from ..planning.uncertainty import p90_hours


def scaled(candidate: Candidate, table: CandidateTable) -> dict[str, int]:
    """Integer columns of one candidate: seconds, cents, and check's verdicts as 0/1 flags."""
    ev = table.evaluation
    i = candidate.index
    ctx = table.ctx
    time_s = math.ceil(candidate.time_s)
    hours_p50 = float(ev.hours[i])
    at_p90 = ctx.constraints.deadline_s is not None and ctx.constraints.deadline_quantile == "p90"
    # (one row's tokens per second, not ``timing.tokens_per_s`` of every layout for each row)
    tokens_per_s = float(
        np.broadcast_to(ev.timing.tokens_per_step, np.shape(ev.timing.step_s))[i] / ev.timing.step_s[i]
    )
    hours_p90 = p90_hours(ctx, candidate.row, tokens_per_s) if at_p90 else hours_p50
    s = ev.layout.at(i)  # (not ev.strategy(i): a validated Strategy per row took most of a 4,000-row model's build)
    return {
        "offer": table.offer_ids[candidate.row.offer_name],
        "nodes": candidate.row.nodes,
        "gpus_per_node": candidate.row.gpus_per_node,
        "gpus": candidate.row.gpus,
        "tp": int(s.tp),
        "pp": int(s.pp),
        "zero_stage": int(s.zero),
        "shard_degree": int(s.shard),
        "micro_batch": int(s.micro_batch),
        "recompute": int(s.recompute),
        "recompute_layers": int(s.recompute_layers),
        "virtual_stages": int(s.virtual_stages),
        "offload": int(s.offload),
        "time_s": time_s,
        # check's own verdicts, not whole seconds or MiB rounded against the plan: a plan 0.1 s inside the
        # deadline, or a few bytes inside the GPU, is inside it here as well
        "late": 1 if meets_deadline(ctx, hours_p50, hours_p90) is False else 0,
        # past the years any rental is planned for (units.LIMITS duration): no plan to rent
        "too_long": 1 if candidate.time_s > units.LIMITS["duration"].high else 0,
        "cost_cents": usd_to_cents(candidate.cost_usd),
        "overfull": 0 if candidate.fits else 1,
        "filtered": 1 if candidate.rejected_by == "filter" else 0,
        "over_supply": 1 if candidate.rejected_by == "supply" else 0,
    }


COLUMNS = (
    "offer",
    "nodes",
    "gpus_per_node",
    "gpus",
    "tp",
    "pp",
    "zero_stage",
    "shard_degree",
    "micro_batch",
    "recompute",
    "recompute_layers",
    "virtual_stages",
    "offload",
    "time_s",
    "time_rank",
    "too_long",
    "late",
    "cost_cents",
    "overfull",
    "filtered",
    "over_supply",
)


# The largest magnitude a CP-SAT integer may take (its domains are 64-bit; sums of them are checked by the
# solver itself, which answers MODEL_INVALID).
MAX_SOLVER_INT = 2**62


def overflow_error(table: CandidateTable) -> JobError:
    """The answer when a job's seconds or cents overflow the solver's integers (runs of centuries, costs of
    trillions): bad input, named."""
    return JobError(
        "the plans for this job run so long or cost so much that their seconds and cents overflow the "
        "solver's integers; check job.tokens, job.measured rates, the assumptions (mfu, link_efficiency, "
        "overlap), the GPUs' TFLOPS and bandwidths and the prices (a plan of centuries is not one to rent)",
        source=table.ctx.problem.source_path,
        field="job.tokens",
    )


def aeons_error(table: CandidateTable, best: Candidate) -> JobError:
    """The answer when even the best plan runs past the years any rental is planned for (``units.LIMITS``
    duration): the inputs, not the plan, are what to look at."""
    years = best.time_s / units.YEAR_S
    return JobError(
        f"the best plan runs {years:,.0f} years, past the {units.LIMITS['duration'].high / units.YEAR_S:.0f} years "
        "any GPU rental is planned for; check job.tokens, job.measured rates, the assumptions (mfu, "
        "link_efficiency, overlap), the GPUs' TFLOPS and bandwidths and the prices (a plan of centuries is not "
        "one to rent)",
        source=table.ctx.problem.source_path,
        field="job.tokens",
    )


def solver_rows(table: CandidateTable) -> list[Candidate]:
    """Candidates the model can choose among: priced rows whose strategies respect the global batch."""
    return [
        c
        for c in table.candidates
        if c.index >= 0
        and c.rejected_by != "global_batch"
        and c.row.offer is not None
        and not math.isnan(c.cost_usd)
        and not math.isnan(c.time_s)
    ]


def new_solver(time_limit_s: float, workers: int = 1, seed: int = 0) -> cp_model.CpSolver:
    """A CP-SAT solver with a time limit that leaves Ctrl-C to the caller: CP-SAT's default
    ``catch_sigint_signal`` would stop the search as if the limit had passed (an interrupted solve must
    never look like an answer) and reset SIGINT to its default action afterwards."""
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.catch_sigint_signal = False
    return solver


@dataclass
class JobVars:
    """Handles to one job's decision variables."""

    name: str
    rows: list[Candidate]
    data: list[dict[str, int]]
    choice: cp_model.IntVar
    picks: list[cp_model.IntVar]
    attr: dict[str, cp_model.IntVar]

    def chosen(self, solver: cp_model.CpSolver) -> Candidate:
        picked = self.picked(solver)
        if picked is None:
            raise ValueError(f"job {self.name} has no chosen row in this solution")
        return self.rows[picked]

    def picked(self, solver: cp_model.CpSolver) -> int | None:
        """Index of the chosen row, or None for a dropped optional job."""
        return next((i for i, p in enumerate(self.picks) if solver.boolean_value(p)), None)


@dataclass
class PlanModel:
    model: cp_model.CpModel = field(default_factory=cp_model.CpModel)
    jobs: list[JobVars] = field(default_factory=list)
    switches: dict[str, cp_model.IntVar] = field(default_factory=dict)
    # CP-SAT's presolve (off for large single-job tables: ``solver.single``)
    presolve: bool = True

    def switch(self, family: str) -> cp_model.IntVar:
        """The assumption literal that turns a constraint family on."""
        if family not in self.switches:
            self.switches[family] = self.model.new_bool_var(f"enforce_{family}")
        return self.switches[family]

    def add_job(
        self,
        name: str,
        table: CandidateTable,
        *,
        rows: list[Candidate] | None = None,
        required: bool = True,
        attributes: bool = True,
    ) -> JobVars:
        """One job's choice among its candidate rows: ``pick`` booleans (exactly one, or at most one
        for an optional job) and, with ``attributes``, the index and element variables of docs/design.md section 9.3."""
        rows = solver_rows(table) if rows is None else rows
        data = [scaled(c, table) for c in rows]
        # time as the rows' order by their exact hours: whole seconds had tied 600.755 s with 600.934 s, and
        # the time objective took the slower (cheaper) one, dropping the faster from the frontier
        order = {t: k for k, t in enumerate(sorted({c.time_s for c in rows}))}
        for d, c in zip(data, rows):
            d["time_rank"] = order[c.time_s]
        if any(abs(v) > MAX_SOLVER_INT for d in data for v in d.values()):
            raise overflow_error(table)
        m = self.model
        picks = [m.new_bool_var(f"pick_{name}_{i}") for i in range(len(rows))]
        if required and picks:
            m.add_exactly_one(picks)
        elif required:
            m.add_bool_or([])  # nothing to choose: infeasible by construction
        else:
            m.add_at_most_one(picks)
        choice = m.new_int_var(0, max(len(rows) - 1, 0), f"choice_{name}")
        attr = {}
        if attributes:
            for i, pick in enumerate(picks):
                m.add(choice == i).only_enforce_if(pick)
            for col in COLUMNS:
                values = [d[col] for d in data] or [0]
                var = m.new_int_var(min(values), max(values), f"{col}_{name}")
                m.add_element(choice, values, var)
                attr[col] = var
        job = JobVars(name, rows, data, choice, picks, attr)
        self.jobs.append(job)
        return job

    # --- constraint families ------------------------------------------------------------------

    def add_memory(self, job: JobVars) -> None:
        self.model.add(job.attr["overfull"] == 0).only_enforce_if(self.switch("memory"))

    def add_deadline(self, job: JobVars, deadline_s: float | None, name: str = "deadline") -> None:
        if deadline_s is not None:
            # the candidate's late column was computed against this deadline (planning.plans.meets_deadline)
            self.model.add(job.attr["late"] == 0).only_enforce_if(self.switch(name))

    @staticmethod
    def cost_cents(job: JobVars) -> cp_model.LinearExprT:
        """The job's cost in cents: its element variable, or the sum over its picks when it has none
        (an optional portfolio job costs nothing when dropped)."""
        if "cost_cents" in job.attr:
            return job.attr["cost_cents"]
        return sum(d["cost_cents"] * p for d, p in zip(job.data, job.picks))

    def add_budget(self, jobs: list[JobVars], budget_usd: float | None) -> None:
        if budget_usd is not None:
            self.model.add(sum(self.cost_cents(j) for j in jobs) <= budget_cents(budget_usd)).only_enforce_if(
                self.switch("budget")
            )

    def add_supply(self, job: JobVars, table: CandidateTable) -> None:
        on = self.switch("supply")
        self.model.add(job.attr["over_supply"] == 0).only_enforce_if(on)
        # The catalog's own supply: each offer's node count stays within its max_nodes.
        allowed = sorted(
            {(table.offer_ids[o.name], n) for o in table.ctx.catalog.offers for n in range(1, o.max_nodes + 1)}
        )
        self.model.add_allowed_assignments([job.attr["offer"], job.attr["nodes"]], allowed)

    def add_filter(self, job: JobVars) -> None:
        self.model.add(job.attr["filtered"] == 0).only_enforce_if(self.switch("filter"))

    def restrict(self, job: JobVars, allowed: list[int]) -> None:
        """Limit a job's choice to some rows (used for per-SKU runners-up)."""
        self.model.add_allowed_assignments([job.choice], [(i,) for i in allowed])

    # --- objective ----------------------------------------------------------------------------

    def max_total(self, column: str) -> int:
        """The largest possible sum of a column over the jobs (each at its largest row)."""
        return sum(max(d[column] for d in j.data) for j in self.jobs if j.data)

    def lexicographic(
        self,
        primary: cp_model.LinearExprT,
        secondary: cp_model.LinearExprT,
        secondary_max: int,
        primary_max: int | None = None,
    ) -> cp_model.LinearExprT:
        """primary x (secondary_max + 1) + secondary: the secondary term only breaks ties of the primary.
        Where that could pass the solver's integers (``primary_max``: a row of centuries at millions of
        dollars, kept in the model so that an infeasible answer can name what binds), the tie-breaker is
        counted in coarser units, so that a job a few such rows share is still answered."""
        unit = 1
        if primary_max is not None:
            while (primary_max + 1) * (secondary_max // unit + 1) > MAX_SOLVER_INT // 4:
                unit *= 2
        if unit > 1:
            coarse = self.model.new_int_var(0, secondary_max // unit, "tie_breaker")
            self.model.add_division_equality(coarse, secondary, unit)
            secondary, secondary_max = coarse, secondary_max // unit
        return cp_model.LinearExpr.weighted_sum([primary, secondary], [secondary_max + 1, 1])

    def set_objective(self, objective: str) -> None:
        """Single jobs: cost with time as the tie-breaker, or time with cost as the tie-breaker."""
        time_total = sum(j.attr["time_rank"] for j in self.jobs)
        cost_total = sum(self.cost_cents(j) for j in self.jobs)
        time_max, cost_max = self.max_total("time_rank"), self.max_total("cost_cents")
        if objective == "cost":
            self.model.minimize(self.lexicographic(cost_total, time_total, time_max, cost_max))
        else:
            self.model.minimize(self.lexicographic(time_total, cost_total, cost_max, time_max))

    def solver(
        self, time_limit_s: float, assumptions: dict[str, bool] | None = None, workers: int = 1
    ) -> cp_model.CpSolver:
        """A CP-SAT solver for this model with the constraint families switched as asked (all on by
        default); one worker and a fixed seed unless told otherwise, so answers are reproducible."""
        self.model.clear_assumptions()
        literals = []
        for family, var in self.switches.items():
            on = True if assumptions is None else assumptions.get(family, True)
            literals.append(var if on else var.negated())
        self.model.add_assumptions(literals)
        solver = new_solver(time_limit_s, workers)
        solver.parameters.cp_model_presolve = self.presolve
        return solver

    def solve(
        self, time_limit_s: float = 10.0, assumptions: dict[str, bool] | None = None, workers: int = 1
    ) -> tuple[cp_model.CpSolver, cp_model.CpSolverStatus]:
        solver = self.solver(time_limit_s, assumptions, workers)
        status = solver.solve(self.model)
        return solver, status

    def binding_families(self, solver: cp_model.CpSolver, left_s: Callable[[], float] | None = None) -> list[str]:
        """A minimal set of constraint families that cannot hold together.

        CP-SAT's core is sufficient, not minimal; dropping each family in turn and re-solving with
        only the rest switched on leaves the irreducible ones. ``left_s``: the seconds left of the command's
        time limit (default 10 s a solve); when they run out the core found so far is kept (still sufficient).
        """
        names = {v.index: k for k, v in self.switches.items()}
        core = [names[i] for i in solver.sufficient_assumptions_for_infeasibility() if i in names]
        for family in list(core):
            rest = [f for f in core if f != family]
            limit_s = 10.0 if left_s is None else left_s()
            if limit_s <= 0:
                break
            _, status = self.solve(limit_s, assumptions={f: f in rest for f in self.switches})
            if status == cp_model.INFEASIBLE:
                core = rest
        return core
