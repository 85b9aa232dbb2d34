"""The Python API: ``plan``, ``options``, ``check``, ``capacity``, ``portfolio``.

Each call loads what it needs (the problem's catalog), builds and calibrates the job context, runs
the planning and solver layers and turns their data into sentences with ``explain``. Nothing here
knows about command-line flags: a bad argument raises ``ArgumentError`` naming the parameter.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from pathlib import Path

from .errors import ArgumentError, JobError
from .explain import (
    added_sentence,
    aeons_notes,
    check_notes,
    export_label_note,
    fill_drop_reasons,
    fix_notes,
    framework_reason,
    infeasibility,
    measured_summary,
    outside_search_notes,
    plan_notes,
    portfolio_infeasibility,
    recompute_note,
    spot_note,
)
from .inputs import skypilot
from .inputs.catalog import sku_for
from .inputs.files import load_catalog, problem_catalog
from .inputs.layout_fields import LAYOUT, pinned
from .inputs.requests import CheckRequest
from .inputs.schema import Catalog, Portfolio, Problem
from .physics.memory import MEMORY_HEADROOM_DEFAULT as MEMORY_HEADROOM_DEFAULT  # for the faces' help texts
from .planning import capacity as capacity_planning
from .planning.calibration import job_context
from .planning.candidates import CandidateTable, build_table, restricted
from .planning.check import Fixed, added_dimensions, check_row, nearest_fixes, versus_measured
from .planning.frameworks import LORA_EXPORT_GAPS, PREFERENCE
from .planning.plans import headroom_gib, headroom_note, plan_from
from .results import (
    CapacityResult,
    CheckResult,
    DroppedJob,
    Infeasibility,
    OptionsResult,
    Plan,
    PortfolioResult,
    SolveResult,
)
from .solver.portfolio.solve import solve_portfolio
from .solver.roles import check_roles as check_roles  # a hand-picked split of a job with roles, for the faces
from .solver.roles import one_model_only
from .solver.single import best_candidate, options_table, solve_table

# What the faces (cli, server) need of the layers below comes through this module (tests/test_layers.py):
# ``CandidateTable`` (a table they keep), ``check_roles``, ``MEMORY_HEADROOM_DEFAULT`` and ``memory_kept_gib``.

# Share of a solve's time limit the candidate table may take before it stops evaluating rows; the rest is
# the solver's (the model, the best plan, the frontier, the runners-up) and the output's.
TABLE_SHARE = 0.8


def candidate_table(
    problem: Problem,
    catalog: Catalog | None = None,
    *,
    time_limit_s: float | None = None,
    started: float | None = None,
) -> CandidateTable:
    """Every hardware row the problem's catalog offers, each with its best layout (rejected rows kept). With
    a ``time_limit_s`` (running from ``started``, a ``time.perf_counter()`` time, default now), rows are
    evaluated for ``TABLE_SHARE`` of it at most: the table then holds those evaluated and counts the others
    as ``unevaluated``."""
    started = time.perf_counter() if started is None else started
    until = None if time_limit_s is None else started + TABLE_SHARE * time_limit_s
    catalog = catalog or problem_catalog(problem)
    if not catalog.offers:
        raise JobError(
            f"catalog '{catalog.name}' has no offers (prices), so there is nothing to plan with; "
            "use a price sheet such as 'default' or 'nodus-2026-11'",
            source=problem.source_path,
            field="catalog",
        )
    return build_table(job_context(problem, catalog), keep_rejected=True, until=until)


def memory_kept_gib(problem: Problem, capacity_gib: float) -> float:
    """The memory each GPU of ``capacity_gib`` GiB keeps free beyond a plan's peak under ``problem``'s
    ``constraints.memory_headroom`` (else gpuplan's default), GiB."""
    return headroom_gib(problem.constraints.memory_headroom, capacity_gib)


def plan(
    problem: Problem,
    *,
    catalog: Catalog | None = None,
    time_limit_s: float = 10.0,
    runners_up: bool = True,
    table: CandidateTable | None = None,
    started: float | None = None,
) -> SolveResult:
    """The best plan for the problem's objective, the cost/time frontier and the runners-up. The time limit
    bounds the whole call, building the table included, counted from ``started`` (a ``time.perf_counter()``
    value, e.g. when the command began, before it read its files; default: now)."""
    started = time.perf_counter() if started is None else started
    if not time_limit_s > 0:
        raise ArgumentError("must be a positive number of seconds", field="time_limit_s")
    one_model_only(problem, "solve")
    table = table or candidate_table(problem, catalog, time_limit_s=time_limit_s, started=started)
    outcome = solve_table(table, time_limit_s=time_limit_s, runners_up=runners_up, started=started)
    result = outcome.result
    if result.status == "infeasible":
        result.infeasible = infeasibility(table, outcome.binding)
    elif result.status == "unknown" and not table.unevaluated:  # (else solve_table's note says how far it got)
        result.notes.append(
            f"the solver stopped after {time_limit_s:g} s without a plan or a proof that none "
            "exists; raise the time limit"
        )
    if table.ctx.constraints.deadline_quantile == "p90":
        result.notes.append("the deadline must hold at p90")
    result.notes += plan_notes(table.ctx, result.best) + aeons_notes(table, result.best)
    result.notes += _export_label_notes(table, result.best, max(1.0, started + time_limit_s - time.perf_counter()))
    return result


def _export_label_notes(table: CandidateTable, best: Plan | None, time_limit_s: float) -> list[str]:
    """Under framework auto, a LoRA plan in a framework whose export gpuplan does not write for LoRA (torchtitan,
    Megatron-LM): the best plan in the frameworks it does export, and what choosing it costs."""
    job = table.ctx.job
    if (
        best is None
        or job.framework != "auto"
        or job.method != "lora"
        or best.strategy.framework not in LORA_EXPORT_GAPS
    ):
        return []
    writable = tuple(name for name in PREFERENCE if name not in LORA_EXPORT_GAPS)
    alternative = best_candidate(restricted(table, writable), time_limit_s)
    alt_plan = (
        None if alternative is None else plan_from(table.ctx, alternative.row, table.evaluation, alternative.index)
    )
    return [export_label_note(best, LORA_EXPORT_GAPS[best.strategy.framework], alt_plan, writable)]


def options(problem: Problem, *, catalog: Catalog | None = None, table: CandidateTable | None = None) -> OptionsResult:
    """Every hardware row considered, with its best strategy, hours, cost and what rejected it."""
    one_model_only(problem, "options")
    table = table or candidate_table(problem, catalog)
    result = options_table(table)
    # hardware no layout of the job's framework runs has no row (no strategy to show): say so, with the rules
    blocked = [c for c in table.candidates if c.index < 0 and c.rejected_by == "framework" and c.row.offer is not None]
    if blocked:
        result.notes.append(f"{len(blocked)} hardware options have no row: {framework_reason(table.ctx, blocked[0])}")
    unshown = sum(1 for c in table.candidates if c.index < 0 and c.rejected_by == "global_batch")
    if unshown:
        result.notes.append(
            f"{unshown:,} more hardware options fit no layout of the global batch and are not listed "
            "(their numbers without the batch are shown for the first ones only)"
        )
    if table.unevaluated:
        result.notes.append(f"{table.unevaluated:,} hardware options were not evaluated: the time limit ran out first")
    result.notes.append(headroom_note(table.ctx.constraints.memory_headroom, None))
    return result


def _choice(name: str, value: object) -> object:
    """A job field a check request pins (--framework, --offload), one of its choices in any case, as a job file's
    is read: set on the job unchecked, '--framework nope' was a KeyError deep in the planner (exit 1)."""
    choices = LAYOUT[name].choices
    if choices is None or value in choices:
        return value
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    raise ArgumentError(f"must be one of {', '.join(choices)} (got {value!r})", field=name)


def check(problem: Problem, request: CheckRequest, *, catalog: Catalog | None = None) -> CheckResult:
    """Does this configuration fit, how fast and how dear is it, and how far from the best plan?"""
    one_model_only(problem, "check")
    r = request
    sku, gpus, nodes, spot, recompute, zero = r.sku, r.gpus, r.nodes, r.spot, r.recompute, r.zero
    catalog = catalog or problem_catalog(problem)
    # the job fields the request pins (inputs/layout_fields.py: offload, framework)
    job_updates: dict[str, object] = {k: _choice(k, getattr(r, k)) for k in pinned("job") if getattr(r, k) is not None}
    if r.framework is not None and problem.job.framework == "auto":
        job_updates["framework_pinned"] = True  # costed as the auto question costs it (its comparison too)
    if job_updates:
        problem = problem.model_copy(update={"job": problem.job.model_copy(update=job_updates)})
    ctx = job_context(problem, catalog)
    fixed = Fixed.of(r)
    checked = check_row(ctx, sku, gpus, nodes, spot, fixed)
    plan_ = checked.plan
    result = CheckResult(
        plan=plan_,
        fits=plan_.fits,
        runnable=checked.runnable,
        not_runnable_because=checked.because,
        chosen=_chosen(plan_, fixed, nodes),
        notes=check_notes(ctx, plan_) + recompute_note(ctx, recompute),
    )
    added, without = added_dimensions(ctx, sku, gpus, nodes, spot, fixed, plan_)
    if added:
        runs = without is not None and without.runnable
        result.added = added_sentence(vars(fixed), added, without.plan if without else None, runs, plan_)
    if zero and plan_.strategy.dp * plan_.strategy.cp == 1:
        result.notes.append(
            f"ZeRO-{zero} shards over data-parallel ranks, and TP x PP = {plan_.gpus} GPUs leaves one: this "
            "layout runs as ZeRO-0 (lower TP or PP for data parallelism to shard over)"
        )
    if not plan_.fits:
        result.notes += fix_notes(nearest_fixes(ctx, sku, gpus, nodes, spot, fixed))
    result.notes += outside_search_notes(ctx, plan_.strategy)
    comparison = versus_measured(ctx, sku, gpus, nodes, plan_)
    if comparison is not None:
        base = ctx.job.measured[0]
        comparison.summary = measured_summary(ctx, sku_for(catalog, sku), sku_for(catalog, base.sku), comparison)
        result.vs_measured = comparison
    if r.compare:
        _compare_with_optimum(problem, catalog, result)
    return result


def _chosen(plan_, fixed: Fixed, nodes: int | None) -> list[str]:
    """What gpuplan chose for the options the user left open."""
    s = plan_.strategy
    sharding = f"ZeRO-{s.zero_stage} over {s.shard_degree} GPUs" if s.dp > 1 else "no data parallelism to shard over"
    auto = {
        "tp": f"TP {s.tp}",
        "pp": f"PP {s.pp}",
        "zero": sharding,
        "micro_batch": f"micro-batch {s.micro_batch}",
        "grad_accum": f"{s.grad_accum} micro-batch(es) per step (batch {s.global_batch})",
        "recompute": f"recompute {s.recompute_label}",
    }
    chosen = [text for name, text in auto.items() if getattr(fixed, name) is None]
    # the MoE and long-sequence splits, where the plan uses them
    if fixed.cp is None and s.cp > 1:
        chosen.append(f"CP {s.cp}")
    if fixed.ep is None and s.ep > 1:
        chosen.append(f"EP {s.ep}")
    if fixed.expert_tp is None and s.ep > 1 and s.tp > 1:
        chosen.append(f"expert TP {s.expert_tp or s.tp}")
    if fixed.tp is None and fixed.pp is None and fixed.zero is None:
        chosen.append(f"framework {s.framework}")
    if nodes is None:
        chosen.append(f"{plan_.nodes} node(s) of {plan_.gpus_per_node}")
    return chosen


def _compare_with_optimum(problem: Problem, catalog: Catalog, result: CheckResult) -> None:
    """The best plan under the same constraints, the extra cost, and the frontier plans that dominate."""
    try:
        answer = plan(problem, catalog=catalog, runners_up=False)
    except JobError as exc:  # e.g. a hardware-only catalog: the verdict stands, the comparison cannot be made
        result.notes.append(f"no comparison with the best plan: {exc.reason}")
        return
    if answer.best is None:
        return
    result.optimum = answer.best
    mine = result.plan
    if mine.cost_usd is not None and answer.best.cost_usd is not None:
        result.extra_cost_vs_optimum_usd = round(mine.cost_usd.p50 - answer.best.cost_usd.p50, 2)
    if mine.cost_usd is not None:
        result.dominated_by = [
            p
            for p in answer.frontier
            if p.cost_usd is not None
            and p.hours.p50 <= mine.hours.p50
            and p.cost_usd.p50 <= mine.cost_usd.p50
            and (p.hours.p50 < mine.hours.p50 or p.cost_usd.p50 < mine.cost_usd.p50)
        ]


def import_skypilot(
    source: Path | None = None, clouds: list[str] | None = None, regions: list[str] | None = None, max_nodes: int = 1
) -> tuple[dict, skypilot.Imported]:
    """A catalog of SkyPilot's published prices (its cached ``vms.csv`` files, or those under ``source``): the
    catalog file's content and what was read and left out."""
    today = dt.date.today()
    imported = skypilot.read_offers(skypilot.catalog_files(source or skypilot.default_source(), clouds), regions)
    if not imported.offers:
        raise ArgumentError(
            f"no row of {', '.join(imported.files)} maps to a GPU gpuplan knows ({_left_out_text(imported)}); "
            "choose other clouds (--clouds) or regions (--regions)",
            field="clouds",
        )
    return skypilot.catalog_document(imported, f"skypilot-{today.isoformat()}", max_nodes, today), imported


def _left_out_text(imported: skypilot.Imported) -> str:
    return "; ".join(f"{n} x {why}" for why, n in imported.left_out.most_common(5)) or "no GPU rows"


def capacity(
    sku: str,
    gpus: int = 1,
    *,
    zero: int = 3,
    method: str = "full",
    bytes_per_param: float | None = None,
    reserve: str | float = 0,
    memory_basis: str = "delivered",
    catalog: Catalog | None = None,
    problem: Problem | None = None,
    nodes: int | None = None,
) -> CapacityResult:
    """Largest parameter count that fits on ``gpus`` GPUs of ``sku``: training state alone (adapters ignored
    for LoRA), or, given a job, the deepest version of its model whose best layout fits (check's verdict)."""
    if problem is not None:
        if problem.job.roles is not None:  # as check and options refuse one (solver/roles.py one_model_only)
            raise ArgumentError(
                "this job has roles (job.roles: its GPUs split between two models), and capacity finds the deepest "
                "version of one model on all of them, an answer for the trained model alone; gpuplan solve "
                "answers with the split, check --role checks one (docs/roles.md)",
                field="job",
            )
        catalog = catalog or problem_catalog(problem)
        return capacity_planning.job_capacity(job_context(problem, catalog), sku, gpus, nodes)
    return capacity_planning.capacity(
        sku,
        gpus,
        zero=zero,
        method=method,
        bytes_per_param=bytes_per_param,
        reserve=reserve,
        memory_basis=memory_basis,
        catalog=catalog or load_catalog("default"),
    )


def portfolio(
    pf: Portfolio,
    *,
    catalog: Catalog | None = None,
    time_limit_s: float = 60.0,
    workers: int = 2,
    progress: Callable[[str], None] | None = None,
    started: float | None = None,
) -> PortfolioResult:
    """Schedule every job of the portfolio: which option, when, at what cost; what was dropped and why.
    The time limit bounds the whole call (options, search, extraction), counted from ``started`` (a
    ``time.perf_counter()`` value, e.g. when the command began; default: now)."""
    started = time.perf_counter() if started is None else started
    if not time_limit_s > 0:
        raise ArgumentError("must be a positive number of seconds", field="time_limit_s")
    outcome = solve_portfolio(
        pf,
        catalog or problem_catalog(pf),
        time_limit_s=time_limit_s,
        workers=workers,
        progress=progress,
        started=started,
    )
    result, pm = outcome.result, outcome.model
    if "spot" in pf.model_fields_set or not any(entry.file for entry in pf.jobs):
        result.notes.append(spot_note(pf.spot, "spot"))
    else:  # each job file keeps its own constraints.spot (inline jobs: allow)
        result.notes.append(
            "spot capacity as each job file's constraints.spot says (allow where it says nothing; the "
            "portfolio's spot, --spot or --no-spot would set it for every job)"
        )
    required = {job.name for job in pm.jobs if job.required}
    missing = [d.job for d in result.dropped if d.job in required]
    proven = outcome.dropped_proven
    if missing:
        # Each rule is a necessary condition (a job alone or after the jobs it waits for, the cheapest
        # total, one pool's GPU-hours): one that fails proves that no schedule places every required job,
        # whatever the solver got to.
        rules = portfolio_infeasibility(pf, pm.jobs, pm.pools, pm.horizon)
        proven = proven or any(rule.constraint != "schedule" for rule in rules)
        result.status = "infeasible" if proven else "unknown"
        # the bound was for schedules leaving those jobs out, not for the problem asked: none is stated
        result.bound_usd, result.bound_source, result.gap = None, "", 1.0
        # "schedule" (each job fits alone, not all together) is a claim only a proof may make
        result.infeasible = rules if proven else []
        if not proven:
            result.infeasible.append(
                Infeasibility(
                    constraint="time_limit",
                    detail=(
                        f"required jobs {', '.join(missing)} were not placed within {time_limit_s:g} s; "
                        "raise the time limit, coarsen time_step or add capacity"
                    ),
                )
            )
    skipped = [pf.jobs[i] for i in outcome.unevaluated]
    if skipped:
        _left_unevaluated(result, skipped, len(pm.jobs), time_limit_s)
    fill_drop_reasons(result, pf, pm.jobs, proven)
    names = {entry.name for entry in skipped}
    for entry in skipped:  # (not explained from options they do not have: they were never evaluated)
        waits = [name for name in entry.after if name in names]
        result.dropped.append(
            DroppedJob(
                job=entry.name,
                reason=(
                    f"waits ('after:') for {', '.join(map(repr, waits))}, whose options were not evaluated within "
                    "the time limit"
                    if waits
                    else "not scheduled: the time limit ran out before its options were evaluated"
                ),
            )
        )
    result.solve_s = time.perf_counter() - started
    return result


def _left_unevaluated(result: PortfolioResult, skipped: list, evaluated: int, time_limit_s: float) -> None:
    """The status where the time limit left jobs unevaluated (``solve_portfolio`` schedules the others): never
    optimal; unknown, with a ``time_limit`` entry, when required jobs are among them (unless the jobs evaluated
    already prove the portfolio infeasible); the bound and gap hold for the jobs evaluated only."""
    required = [entry.name for entry in skipped if entry.required]
    if required and result.status != "infeasible":
        shown = ", ".join(required[:5]) + (f" and {len(required) - 5:,} more" if len(required) > 5 else "")
        result.status = "unknown"
        result.bound_usd, result.bound_source, result.gap = None, "", 1.0
        result.infeasible.append(
            Infeasibility(
                constraint="time_limit",
                detail=(
                    f"required jobs {shown} were not evaluated within {time_limit_s:g} s, so not placed; raise "
                    "--time-limit"
                ),
            )
        )
    elif result.status == "optimal":
        result.status = "feasible"  # optimal for the jobs evaluated; the others are left out
    if result.bound_usd is not None:
        result.notes.append(f"the bound and the gap are for the {evaluated:,} jobs evaluated")
