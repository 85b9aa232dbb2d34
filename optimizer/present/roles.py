"""A role job's answer as a table and as data (issue 52, docs/roles.md): the split (GPUs per role), each stage's
rate and how busy it is, what binds (producers, consumers or the link), hours and cost.

The first line is the headline (``--quiet`` prints it alone): the chosen plan, or why none runs. ``checked``
reads ``gpuplan check``'s role flags into the API's request (the CLI layer holds no role code but the two
calls: cli.py's check and solve), ``SHOWN`` is the printer and the data the CLI's answer takes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import ArgumentError
from ..inputs.files import load_job, problem_catalog
from ..inputs.overrides import apply_overrides
from ..inputs.roles import parse_role_flag
from ..inputs.schema import Catalog, Problem
from ..planning.roles import RolePlan
from ..solver.roles import OfferPlan, RolesResult, check_roles, one_model_only, solve_roles


def _binding(result: RolesResult, plan: RolePlan) -> str:
    """What binds, by role name: 'the targets (qwen3.6-27b)', 'the drafter', 'the link'."""
    producer, consumer = result.roles
    return {"producers": f"targets ({producer})", "consumers": f"drafter ({consumer})", "link": "link"}[plan.binding]


def _bound(result: RolesResult, plan: RolePlan) -> str:
    """What binds in a table cell: the role's name, or the link."""
    return {"producers": result.roles[0], "consumers": result.roles[1], "link": "link"}[plan.binding]


def plan_line(result: RolesResult, chosen: OfferPlan) -> str:
    """One plan in a sentence: the split, its rate, what binds, days and cost."""
    p = chosen.plan
    producer, consumer = result.roles
    return (
        f"{p.split.producers} x {p.sku} {producer} + {p.split.consumers} x {p.sku} {consumer} on {chosen.offer} "
        f"({p.link} link): {p.tokens_per_s:,.0f} tokens/s, {p.days:,.2f} days, ${p.cost_usd:,.0f}; "
        f"bound by the {_binding(result, p)}"
    )


def headline(result: RolesResult, checked: bool = False) -> str:
    if result.best is None:
        return f"No plan for {result.job}: " + "; ".join(result.refused)
    if checked:
        return f"Checked {result.job}: {plan_line(result, result.best)}"
    by = "fastest" if result.objective == "time" else "cheapest"
    return f"The {by} plan for {result.job}: {plan_line(result, result.best)}"


def stages_line(result: RolesResult, p: RolePlan) -> str:
    """Each stage's rate and how busy it is."""
    producer, consumer = result.roles
    r = p.rate
    return (
        f"  {producer} {r.producer_tokens_per_s:,.0f} tokens/s ({r.producer_tokens_per_s / p.split.producers:,.0f} a "
        f"GPU, {r.utilisation('producers'):.0%} busy); {consumer} {r.consumer_tokens_per_s:,.0f} "
        f"({r.utilisation('consumers'):.0%} busy); link {r.link_tokens_per_s:,.0f} ({r.utilisation('link'):.0%} busy)"
    )


def print_roles(result: RolesResult, console: Console, headroom: Any = None) -> None:
    """The answer: headline, the chosen plan's stages, every split weighed (solve), what was left out."""
    checked = result.checked
    console.print(Text(headline(result, checked), style="bold"))
    if result.best is not None:
        console.print(stages_line(result, result.best.plan))
    for note in result.notes:
        console.print(f"  {note}")
    if checked and result.optimum is not None and result.best is not None:
        if result.optimum.plan == result.best.plan and result.optimum.offer == result.best.offer:
            console.print("  this is the best plan under the job's constraints")
        else:
            console.print(f"  the best plan under the job's constraints: {plan_line(result, result.optimum)}")
    if not checked and result.plans:
        producer, consumer = result.roles
        table = Table(title="Each offer and GPU count's best split (in target tokens/s)", title_justify="left")
        columns = ("GPUs", f"{producer} GPUs", f"{consumer} GPUs", "tokens/s", f"{producer} rate", f"{consumer} rate")
        for column in ("offer", "GPU", *columns, "link rate"):
            table.add_column(column, justify="left" if column in ("offer", "GPU") else "right")
        table.add_column("binds")
        table.add_column("days", justify="right")
        table.add_column("cost", justify="right")
        for row in result.plans:
            p = row.plan
            r = p.rate
            table.add_row(
                row.offer + (" *" if row == result.best else ""),
                p.sku,
                str(p.split.gpus),
                str(p.split.producers),
                str(p.split.consumers),
                f"{p.tokens_per_s:,.0f}",
                f"{r.producer_tokens_per_s:,.0f}",
                f"{r.consumer_tokens_per_s:,.0f}",
                f"{r.link_tokens_per_s:,.0f}",
                _bound(result, p),
                f"{p.days:,.2f}",
                f"${p.cost_usd:,.0f}",
            )
        console.print(table)
    for reason in result.refused if result.best is not None else ():
        console.print(f"  left out: {reason}")


def _plan_data(result: RolesResult, row: OfferPlan) -> dict:
    p = row.plan
    producer, consumer = result.roles
    r = p.rate
    return {
        "offer": row.offer,
        "sku": p.sku,
        "gpus": p.split.gpus,
        "roles": [
            {
                "role": producer,
                "mode": "forward",
                "gpus": p.split.producers,
                "tokens_per_s": r.producer_tokens_per_s,
                "utilisation": r.utilisation("producers"),
            },
            {
                "role": consumer,
                "mode": "train",
                "gpus": p.split.consumers,
                "tokens_per_s": r.consumer_tokens_per_s,
                "utilisation": r.utilisation("consumers"),
            },
        ],  # fmt: skip
        "link": {"kind": p.link, "tokens_per_s": r.link_tokens_per_s, "utilisation": r.utilisation("link")},
        "binding": p.binding,
        "tokens_per_s": p.tokens_per_s,
        "hours": p.hours,
        "days": p.days,
        "cost_usd": p.cost_usd,
        "price_usd_per_gpu_hour": p.price_usd_per_gpu_hour,
    }


def roles_data(result: RolesResult) -> dict:
    """The answer as JSON-ready data: the chosen plan's split (``strategy.roles``), every split weighed."""
    return {
        "job": result.job,
        "objective": result.objective,
        "headline": headline(result, result.checked),
        "best": _plan_data(result, result.best) if result.best else None,
        "plans": [_plan_data(result, row) for row in result.plans],
        "optimum": _plan_data(result, result.optimum) if result.optimum else None,
        "refused": list(result.refused),
        "notes": list(result.notes),
    }


SHOWN = (print_roles, roles_data)


def checked(
    job: Path | None,
    role: list[str] | None,
    sku: str | None,
    gpus: int | None,
    catalog: str | None,
    deadline: str | None = None,
    budget: str | None = None,
    output: object = None,
) -> tuple[RolesResult, Problem]:
    """``gpuplan check JOB --role target=3xRTX-PRO-6000 --role drafter=1xRTX-PRO-6000``: the split checked, and
    the problem it was checked on; without --role, --sku and --gpus are what is missing."""
    if not role:
        missing = " and ".join(f for f, v in (("--sku", sku), ("--gpus", gpus)) if v is None)
        raise ArgumentError(
            f"{missing} missing: check takes a GPU and a count (--sku B200 --gpus 8), or for a job with roles: "
            "each role's GPUs (--role target=3xRTX-PRO-6000 --role drafter=1xRTX-PRO-6000)",
            field="sku" if sku is None else "gpus",
        )
    if sku is not None or gpus is not None:
        raise ArgumentError("--role gives each role's GPUs: drop --sku and --gpus", field="role")
    _no_outputs(output)
    requests = [parse_role_flag(text) for text in role]
    if job is None:
        raise ArgumentError("--role splits a job file's roles: give the job file (JOB)", field="job")
    problem = apply_overrides(load_job(job), deadline=deadline, budget=budget)
    if problem.job.roles is None:
        raise ArgumentError(
            f"{job} has no roles: section, so there is nothing to split; check it with --sku and --gpus, or add "
            "job.roles (docs/roles.md)",
            field="role",
        )
    return check_roles(problem, requests, catalog=problem_catalog(problem, catalog)), problem


def _no_outputs(output: object) -> None:
    """A role job's answer is its text or data: exports per role, charts and reports come later (docs/roles.md)."""
    if output:
        raise ArgumentError(
            "a job with roles is answered as text, JSON or YAML only: exports per role (a JobSet, a Slurm "
            "heterogeneous job), charts and reports are not written for it yet (docs/roles.md); drop --export, "
            "--plot and --report",
            field="export",
        )


def solved(problem: Problem, catalog: Catalog, output: object = None) -> RolesResult:
    """``gpuplan solve`` on a job with roles: the API's answer (``solve_roles``)."""
    _no_outputs(output)
    return solve_roles(problem, catalog=catalog)


def one_model(problem: Problem, command: str) -> None:
    """``check --sku --gpus`` and ``options`` plan one model on all the GPUs: refused on a job with roles
    (solver/roles.py one_model_only)."""
    one_model_only(problem, command)
