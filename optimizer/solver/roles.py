"""The API of jobs with roles (issue 52, docs/roles.md): ``solve_roles`` splits each offer's GPUs between the
roles and picks the best plan; ``check_roles`` answers a hand-picked split.

A role plan sits on one offer's node, or on two offers' nodes (each role on its own SKU and price, the
transfer over the network: planning/role_mixed.py). For every offer the catalog holds and the job's GPU filters
let through, each GPU count it rents (its ``gpu_counts``, else 2 to a node) gets its best split by bisection
(planning/roles.py ``best_split``); every pair of those offers gives its frontier of splits across the two,
kept where no plan on one node matches or beats it on cost and hours (planning/role_mixed.py ``covered``).
Those within the deadline and budget compete under the objective (time, or cost = hours x GPUs x price), ties
going to the cheaper, then the faster, then fewer GPUs, then one node. The search is exhaustive over (offer,
GPU count) and (offer, count, offer, count), so no CP-SAT model is needed for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import ArgumentError, GpuplanError, JobError
from ..inputs.catalog import find_sku, passes_gpu_names, sku_key, usable_memory_bytes
from ..inputs.files import problem_catalog
from ..inputs.roles import ROLE_NAMES
from ..inputs.schema import Catalog, Offer, Problem
from ..planning.candidates import not_rentable
from ..planning.role_jobs import offer_hardware, role_job
from ..planning.role_mixed import Seat, covered, mixed_plans, mixed_split, needs_nvlink_reason, network_binds
from ..planning.roles import RoleJob, RolePlan, RoleSplit, evaluate_split, launch_note, plan_roles

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class OfferPlan:
    """One split on one offer's node."""

    offer: str  # the producers' offer (and, on one node, the consumers')
    plan: RolePlan
    consumer_offer: str | None = None  # set where the consumers sit on another offer's node

    @property
    def where(self) -> str:
        """The split and where it sits: '7 + 1 B200 on b200-3.4x', or each role's GPUs and offer."""
        s, p = self.plan.split, self.plan
        if self.consumer_offer is None:
            nodes = f" ({p.nodes} nodes)" if p.nodes > 1 else ""
            return f"{s.producers} + {s.consumers} {p.sku} on {self.offer}{nodes}"
        return (
            f"{s.producers} x {p.sku} on {self.offer} + {s.consumers} x {p.consumer_sku_name} on {self.consumer_offer}"
        )


@dataclass(frozen=True)
class RolesResult:
    """A role job's answer: the chosen plan (None: nothing runs, ``refused`` says why), every (offer, GPU count)'s
    best split that was weighed (``check``: the checked split), and why offers or plans were left out."""

    job: str
    objective: str
    roles: tuple[str, str]  # the producers' role name, the consumers'
    best: OfferPlan | None
    plans: tuple[OfferPlan, ...]
    refused: tuple[str, ...] = ()
    optimum: OfferPlan | None = None  # check: the best plan under the same constraints
    notes: tuple[str, ...] = field(default_factory=tuple)
    checked: bool = False  # the answer to a hand-picked split (check), not a search (solve)
    workload: str = "drafter"  # job.roles.workload: what the answer calls each role (inputs/roles.py role_names)


def _rank(plan: RolePlan, objective: str) -> tuple[float, float, int, bool]:
    if objective == "cost":
        return (round(plan.cost_usd, 2), plan.hours, plan.split.gpus, plan.mixed)
    return (plan.hours, round(plan.cost_usd, 2), plan.split.gpus, plan.mixed)


def _offers(problem: Problem, catalog: Catalog) -> list[Offer]:
    """The offers the job's GPU filters let through: types and providers as the single-job planner reads them
    (``passes_gpu_names``), the least memory per GPU on what the offer delivers or the device reports, GPUs per
    node."""
    gpu = problem.constraints.gpu
    out = []
    for offer in catalog.offers:
        sku = find_sku(catalog, offer.sku)
        if not passes_gpu_names(gpu, sku, offer):
            continue
        if gpu.min_memory_bytes and usable_memory_bytes(sku, offer)[0] < gpu.min_memory_bytes:
            continue
        if gpu.count is not None and offer.gpus_per_node != gpu.count:
            continue
        out.append(offer)
    return out


def _within(plan: RolePlan, problem: Problem) -> str | None:
    """Why a plan breaks the deadline or budget; None if it keeps both."""
    c = problem.constraints
    if c.deadline_s is not None and plan.hours * SECONDS_PER_HOUR > c.deadline_s:
        return f"{plan.hours / 24:,.2f} days, over the {c.deadline_s / 86400:,.2f}-day deadline"
    if c.budget_usd is not None and plan.cost_usd > c.budget_usd:
        return f"${plan.cost_usd:,.0f}, over the ${c.budget_usd:,.0f} budget"
    return None


def _names(problem: Problem) -> tuple[str, str]:
    roles = problem.job.roles
    assert roles is not None
    return (roles.target.name, roles.drafter.name)


def solve_roles(problem: Problem, *, catalog: Catalog | None = None) -> RolesResult:
    """The best split of the job's GPUs between its roles over the catalog's offers and GPU counts."""
    catalog = catalog or problem_catalog(problem, None)
    job = role_job(problem, catalog)
    return _solve(problem, catalog, job)


def _solve(problem: Problem, catalog: Catalog, job: RoleJob) -> RolesResult:
    c = problem.constraints
    plans: list[OfferPlan] = []
    refused: list[str] = []
    broken: list[tuple[OfferPlan, str]] = []  # plans that run but break the deadline or budget
    for offer in _offers(problem, catalog):
        counts = [g for g in offer.gpu_counts or range(2, offer.gpus_per_node + 1) if 2 <= g <= offer.gpus_per_node]
        if job.rl is not None:  # a GRPO job also runs over whole nodes, as many as the offer and the job allow
            most = min(offer.max_nodes, c.max_nodes or offer.max_nodes)
            counts += [n * offer.gpus_per_node for n in range(2, most + 1)]
        if c.max_gpus is not None and counts and not [g for g in counts if g <= c.max_gpus]:
            refused.append(f"{offer.name}: max_gpus {c.max_gpus} leaves no count of 2 or more GPUs (one per role)")
            continue
        counts = [g for g in counts if c.max_gpus is None or g <= c.max_gpus]
        try:
            answer = plan_roles(job, offer_hardware(catalog, offer), counts, problem.objective)
        except JobError as exc:
            refused.append(f"{offer.name}: {exc.reason}")
            continue
        if answer.best is None:
            refused.append(f"{offer.name}: {answer.refused}")
            continue
        for plan in answer.per_count:
            why = _within(plan, problem)
            if why is None:
                plans.append(OfferPlan(offer.name, plan))
            else:
                broken.append((OfferPlan(offer.name, plan), why))
                refused.append(f"{offer.name}, {plan.split.producers} + {plan.split.consumers} GPUs: {why}")
    one_node = [p.plan for p in plans] + [b.plan for b, _ in broken]
    mixed = mixed_plans(job, [Seat.of(catalog, o) for o in _offers(problem, catalog)], c.max_gpus)
    for m in mixed.plans:
        if covered(m.plan, one_node):  # a plan on one node is as good: the mixed one is not shown
            continue
        row = OfferPlan(m.producer_offer, m.plan, m.consumer_offer)
        why = _within(m.plan, problem)
        if why is None:
            plans.append(row)
        else:
            broken.append((row, why))
    refused += mixed.refused
    best = min(plans, key=lambda p: _rank(p.plan, problem.objective)) if plans else None
    if not plans and broken:  # the nearest plan first, then why the offers plan nothing
        nearest, why = min(broken, key=lambda b: _rank(b[0].plan, problem.objective))
        refused = [
            f"every split breaks the job's constraints; the {'fastest' if problem.objective == 'time' else 'cheapest'}, "
            f"{nearest.where}, takes {why}",
            *[r for r in refused if not any(r.startswith(f"{b.offer}, ") for b, _ in broken)],
        ]
    if not plans and not refused:
        refused.append("no offer in the catalog passes the job's GPU filters")
    return RolesResult(
        problem.job.name, problem.objective, _names(problem), best, tuple(plans), tuple(refused),
        workload=_workload(problem),
    )  # fmt: skip


def _offer_for(catalog: Catalog, name: str, gpus: int) -> Offer:
    """An offer by name, or the cheapest offer of a SKU whose node holds ``gpus``."""
    by_name = [o for o in catalog.offers if sku_key(o.name) == sku_key(name)]
    if by_name:
        return by_name[0]
    try:
        sku = find_sku(catalog, name).name
    except GpuplanError as exc:
        raise ArgumentError(exc.reason, field="role") from None
    offers = [o for o in catalog.offers if sku_key(find_sku(catalog, o.sku).name) == sku_key(sku)]
    if not offers:
        raise ArgumentError(f"the catalog {catalog.name} offers no {sku}", field="role")
    fitting = [o for o in offers if o.gpus_per_node >= gpus] or offers
    return min(fitting, key=lambda o: (o.price_usd_per_gpu_hour, o.gpus_per_node))


def check_roles(
    problem: Problem, roles: Sequence[tuple[str, int, str]], *, catalog: Catalog | None = None
) -> RolesResult:
    """A hand-picked split: ``roles`` as (role, GPUs, SKU or offer), one for each of the job's roles; the answer
    carries its rates, what binds, hours and cost, and the best plan under the same constraints."""
    catalog = catalog or problem_catalog(problem, None)
    given = {name: (gpus, sku) for name, gpus, sku in roles}
    if len(given) != len(roles) or set(given) != set(ROLE_NAMES):
        raise ArgumentError(
            f"give each of the job's roles once, {' and '.join(ROLE_NAMES)}: --role target=3xRTX-PRO-6000 "
            f"--role drafter=1xRTX-PRO-6000 (got {', '.join(f'{n}={g}x{s}' for n, g, s in roles) or 'none'})",
            field="role",
        )
    (t, t_sku), (d, d_sku) = given["target"], given["drafter"]
    if t < 1 or d < 1:
        raise ArgumentError(f"each role needs at least one GPU (got target {t}, drafter {d})", field="role")
    t_offer, d_offer = _offer_for(catalog, t_sku, t + d), _offer_for(catalog, d_sku, t + d)
    if t_offer.name != d_offer.name:  # each role on its own node: each offer chosen for its own role's count
        t_offer, d_offer = _offer_for(catalog, t_sku, t), _offer_for(catalog, d_sku, d)
    job = role_job(problem, catalog)
    notes: tuple[str, ...] = ()
    if t_offer.name == d_offer.name:
        hw = offer_hardware(catalog, t_offer)
        checked = OfferPlan(t_offer.name, evaluate_split(job, hw, RoleSplit(t, d)))
        nodes = checked.plan.nodes
        if nodes > 1 and (why_not := not_rentable(t_offer, nodes, t_offer.gpus_per_node)):
            notes = (f"offer {t_offer.name} {why_not}: it cannot be rented there as it stands",)
        if launch := launch_note(job, hw, checked.plan.split):
            notes += (launch,)
    else:
        a, b = Seat.of(catalog, t_offer), Seat.of(catalog, d_offer)
        checked = OfferPlan(t_offer.name, mixed_split(job, a, b, RoleSplit(t, d)), d_offer.name)
        if network_binds(checked.plan):
            notes = (
                f"the network binds it: {needs_nvlink_reason(job, a, b, checked.plan)}; solve does not propose it",
            )
        if not job.across_offers:
            notes += ("solve weighs splits across offers where the job sets job.roles.across_offers: true",)
    plan = checked.plan
    optimum = _solve(problem, catalog, job).best
    why = _within(plan, problem)
    notes += (f"it breaks the job's constraints: {why}",) if why else ()
    return RolesResult(
        problem.job.name,
        problem.objective,
        _names(problem),
        best=checked,
        plans=(checked,),
        optimum=optimum,
        notes=notes,
        checked=True,
        workload=_workload(problem),
    )


def _workload(problem: Problem) -> str:
    return problem.job.roles.workload if problem.job.roles is not None else "drafter"


def one_model_only(problem: Problem, command: str) -> None:
    """``plan``, ``check`` and ``options`` (the CLI's solve, check --sku --gpus and options, the service's routes)
    plan one model on all the GPUs: on a job with roles that would plan its drafter alone, an answer to another
    question, so it is refused with the command that answers (solve_roles, check_roles)."""
    if problem.job.roles is None:
        return
    instead = {
        "check": "check a split with --role target=3xRTX-PRO-6000 --role drafter=1xRTX-PRO-6000",
        "options": "gpuplan solve lists every offer and GPU count's best split",
        "solve": "gpuplan solve (the API's solve_roles) answers with the split",
    }[command]
    raise ArgumentError(
        f"this job has roles (job.roles: its GPUs split between the target's forward pass and the drafter's "
        f"training), and gpuplan {command} plans one model on all of them; {instead} (docs/roles.md)",
        field="role" if command == "check" else "job",
    )
