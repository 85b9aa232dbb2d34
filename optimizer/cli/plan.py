"""The planning commands: ``check`` (a verdict on a hand-picked configuration), ``solve`` (the optimal plan and
the frontier) and ``options`` (every hardware row considered)."""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

import typer

from .. import api
from ..cli_options import (
    BudgetOpt,
    CatalogOpt,
    CompileOpt,
    DeadlineOpt,
    DeadlineQuantileOpt,
    ExportOpt,
    Format,
    FormatOpt,
    FrameworkOpt,
    GpuTypesOpt,
    HeadroomOpt,
    JobArg,
    MaxNodesOpt,
    MinMemoryOpt,
    Objective,
    OutOpt,
    QuietOpt,
    SaveOpt,
    SpotOpt,
)
from ..errors import ArgumentError, GpuplanError
from ..inputs import units
from ..inputs.layout_fields import LAYOUT_FIELDS, LAYOUT_RANGES
from ..inputs.overrides import parse_measurement
from ..inputs.requests import CheckRequest
from ..inputs.schema.problem import Problem, unread_by_roles
from ..present import output, render, roles
from ..present.plot import frontier_plot, memory_plot
from ..present.report import html_report
from .checks import check_export, check_flags, check_gpu_names, check_outputs, names
from .handling import flag_of, handled, state
from .shared import (
    answer,
    catalog_path,
    export_text,
    input_files,
    load_problem,
    spot_policy,
    with_check_job_flags,
    with_job_flags,
    with_layout_flags,
    write_files,
)

# The options of check and solve alone; those several commands take are in cli_options.
SkuOpt = typer.Option(
    None,
    "--sku",
    help="GPU by name or alias (B200, h100, rtx-pro-6000-blackwell), or an offer by name (a plan's offer: "
    "nodus-b200, or 'nodus-b200 (spot)' for its spot price).",
)
RoleOpt = typer.Option(None, "--role", help="A role job's split: target=3xRTX-PRO-6000 (repeat).")
CompareOpt = typer.Option(True, "--compare/--no-compare", help="Compare with the best plan under the same constraints.")
SpotPriceOpt = typer.Option(False, "--spot", help="Use the offer's spot price (with expected preemptions).")
MemoryPlotOpt = typer.Option(None, "--plot", help="Write the memory breakdown chart (PNG, SVG or PDF).")
CalibrateOpt = typer.Option(
    None,
    "--measured",
    help="A short-run measurement to calibrate from, e.g. '4xRTX-PRO-6000:14.8k tok/s' (repeatable).",
)
ObjectiveOpt = typer.Option(None, "--objective", help="Minimise cost or time (default: the file's, else cost).")
MaxGpusOpt = typer.Option(None, "--max-gpus", help="At most this many GPUs.")
MeasuredOpt = typer.Option(
    None, "--measured", help="Short-run measurement, e.g. '4xRTX-PRO-6000:14.8k tok/s' (repeatable)."
)
SolveTimeLimitOpt = typer.Option(
    "10", "--time-limit", help="Time limit for the whole command: seconds, or with a unit (90s, 2m)."
)
FrontierPlotOpt = typer.Option(None, "--plot", help="Write the frontier chart (PNG, SVG or PDF).")
ReportOpt = typer.Option(None, "--report", help="Write a self-contained HTML report.")


def _parsed(layout: dict[str, Any]) -> dict[str, Any]:
    """The layout flags given as text read as the planner takes them (--recompute layers:4); bad input names the
    flag."""
    parsed = {}
    for field in LAYOUT_FIELDS:
        if field.parse is not None and layout.get(field.name) is not None:
            try:
                parsed[field.name] = field.parse(layout[field.name], field.flag)
            except GpuplanError as exc:
                raise ArgumentError(exc.reason, field=field.name) from None
    return parsed


def _write_report(path: Path, problem, result, table) -> str:
    """solve --report: the HTML report written to ``path``; what to say once every file is in place."""
    page = html_report(f"gpuplan: {problem.job.name}", result, api.options(problem, table=table))
    output.write_text(path, page, "report")
    return f"wrote report to {output.shown(path)}"


def _exportable(result, export_kind: str | None, problem) -> None:
    """A checked configuration --export may write: one that fits, with the memory headroom, and runs."""
    if not export_kind:
        return
    if not result.fits:
        # a launcher config for a layout that runs out of memory would start and then fail
        m = result.plan.memory_gib
        keep = api.memory_kept_gib(problem, m.capacity)
        raise ArgumentError(
            f"this configuration does not fit ({m.total:,.1f} of {m.capacity:,.1f} GiB per GPU"
            f"{f', with {keep:,.1f} GiB of headroom to keep' if keep > 0 else ''}), so there is nothing to export; "
            "see 'gpuplan check' without --export for what does not fit, or 'gpuplan solve' for a plan that does",
            field="export",
        )
    if not result.runnable:
        raise ArgumentError(
            f"the framework would refuse this configuration ({'; '.join(result.not_runnable_because)}), so "
            "there is nothing to export; see 'gpuplan check' without --export, or 'gpuplan solve "
            "--framework ...' for a plan it runs",
            field="export",
        )


@handled
@with_check_job_flags
@with_layout_flags
def check(
    job: Path | None = JobArg,
    question: dict | None = None,  # the job flags but --offload, a layout flag here (shared.with_check_job_flags)
    save: Path | None = SaveOpt,
    headroom: str | None = HeadroomOpt,
    sku: str | None = SkuOpt,
    role: list[str] | None = RoleOpt,
    layout: dict | None = None,  # --gpus, --nodes, --tp ... --framework (shared.with_layout_flags)
    compile_model: bool | None = CompileOpt,
    deadline: str | None = DeadlineOpt,
    budget: str | None = BudgetOpt,
    deadline_quantile: str | None = DeadlineQuantileOpt,
    compare: bool = CompareOpt,
    spot: bool = SpotPriceOpt,
    plot_path: Path | None = MemoryPlotOpt,
    export_kind: str | None = ExportOpt,
    out: Path | None = OutOpt,
    measured: list[str] | None = CalibrateOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Verdict on a hand-picked configuration: fits or not, memory breakdown, speed, cost, distance to the optimum."""
    state["quiet"] = state["quiet"] or quiet
    layout = layout or {}
    gpus = layout.get("gpus")
    if role or sku is None or gpus is None:  # a role job's split (docs/roles.md), or --sku and --gpus missing
        if role:
            flags = {**(question or {}), **layout, "save": save, "headroom": headroom, "compile": compile_model}
            flags.update(deadline_quantile=deadline_quantile, measured=measured, spot=spot or None)
            _read_by_a_split(flags, compare)
        wanted = roles.Outputs(export_kind, check_export(export_kind, out, fmt), "plot" if plot_path else None)
        return roles.answered(answer, _split_checked(job, role, sku, gpus, catalog, deadline, budget, wanted), fmt)
    # the layout as typed (--recompute's text read once the files are: below)
    request = CheckRequest(sku, **layout, compare=compare, spot=spot)
    numbers = {name: layout[name] for name in LAYOUT_RANGES}
    check_flags(**numbers, deadline=deadline, budget=budget, measured=measured)
    out = check_export(export_kind, out, fmt)
    check_outputs([job, catalog_path(catalog)], plot_path=plot_path, out=out if export_kind else None, save=save)
    problem, cat = load_problem(
        job,
        question,
        save,
        catalog,
        deadline=deadline,
        budget=budget,
        measured=measured,
        deadline_quantile=deadline_quantile,
        headroom=headroom,
        compile=compile_model,
    )
    check_outputs(input_files(job, problem, cat), plot_path=plot_path, out=out if export_kind else None, save=save)
    roles.one_model(problem, "check")
    request = dataclasses.replace(request, **_parsed(layout))
    check_gpu_names(cat, "sku", [request.sku], offers=True)  # a plan's "<offer> (spot)" named as that offer
    check_gpu_names(cat, "measured", [parse_measurement(m).sku for m in measured or []])
    result = api.check(problem, request, catalog=cat)
    _exportable(result, export_kind, problem)
    config = export_text(result.plan, export_kind, problem, cat) if export_kind else None
    write_files(config, export_kind, out, plot_path, functools.partial(memory_plot, result.plan))
    if config is not None and out is None:  # the config is the answer on stdout, after the chart is written
        typer.echo(config, nl=False)
        return
    answer(result, problem, fmt, render.print_check, render.check_data)


def _split_checked(*args: Any) -> Any:
    """``roles.checked``, an error of the split itself (more GPUs than a node, a colocated GRPO job's two counts,
    a role that does not fit its GPUs: raised naming nothing) named as --role, as the service names it check.roles
    (server/roles.py); an error of the job file keeps its file and field."""
    try:
        return roles.checked(*args)
    except GpuplanError as exc:
        if not isinstance(exc, ArgumentError) and exc.source is None and exc.field is None:
            raise ArgumentError(exc.reason, field="role") from None
        raise


def _read_by_a_split(flags: dict[str, Any], compare: bool) -> None:
    """``check --role`` checks the split of the job file's roles as the file gives them, reading the catalog, the
    deadline, the budget and the outputs: any other flag given is refused, naming it (each was dropped without a
    word: --save wrote nothing, --spot priced on demand, --tp 2 and --measured changed nothing)."""
    if not compare:
        flags = {**flags, "no_compare": True}
    for name, value in flags.items():
        if value is not None and name != "gpus":  # --gpus beside --role has its own message
            raise ArgumentError(
                f"check --role checks the split of the job file's roles as the file gives them, and reads no "
                f"{flag_of(name)}: drop it, or give the job's settings in its file (docs/roles.md)",
                field=name,
            )


def _roles_read_the_flags(problem: Problem) -> None:
    """A job with roles planned with none of the settings its planning does not read (``ROLE_UNREAD``): one that
    a flag set is refused naming the flag (the file's own are refused as it is read)."""
    unread = unread_by_roles(problem)
    if unread is not None:
        raise ArgumentError(unread[2], field=unread[1])


def _exportable_best(result, export_kind: str | None) -> None:
    """A solve --export writes its best plan: none, nothing to export."""
    if export_kind and result.best is None:
        raise ArgumentError(
            "no plan satisfies the constraints, so there is nothing to export; see 'gpuplan solve' "
            "without --export for what binds",
            field="export",
        )


@handled
@with_job_flags
def solve(
    job: Path | None = JobArg,
    question: dict | None = None,  # the job flags (shared.with_job_flags)
    save: Path | None = SaveOpt,
    headroom: str | None = HeadroomOpt,
    objective: Objective | None = ObjectiveOpt,
    deadline: str | None = DeadlineOpt,
    budget: str | None = BudgetOpt,
    max_nodes: int | None = MaxNodesOpt,
    max_gpus: int | None = MaxGpusOpt,
    gpu_types: str | None = GpuTypesOpt,
    min_memory: str | None = MinMemoryOpt,
    deadline_quantile: str | None = DeadlineQuantileOpt,
    measured: list[str] | None = MeasuredOpt,
    framework: str | None = FrameworkOpt,
    compile_model: bool | None = CompileOpt,
    spot: bool | None = SpotOpt,
    time_limit: str = SolveTimeLimitOpt,
    plot_path: Path | None = FrontierPlotOpt,
    report: Path | None = ReportOpt,
    export_kind: str | None = ExportOpt,
    out: Path | None = OutOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """The optimal plan, the cost/time Pareto frontier, and why the other GPUs lost."""
    state["quiet"] = state["quiet"] or quiet
    started = time.perf_counter()  # --time-limit bounds the whole command, reading the files included
    check_flags(
        deadline=deadline,
        budget=budget,
        max_nodes=max_nodes,
        max_gpus=max_gpus,
        min_memory=min_memory,
        measured=measured,
        time_limit_s=time_limit,
    )
    out = check_export(export_kind, out, fmt)
    check_outputs(
        [job, catalog_path(catalog)], plot_path=plot_path, report=report, out=out if export_kind else None, save=save
    )
    problem, cat = load_problem(
        job,
        question,
        save,
        catalog,
        objective=objective.value if objective else None,
        deadline=deadline,
        budget=budget,
        max_nodes=max_nodes,
        max_gpus=max_gpus,
        gpu_types=gpu_types,
        min_memory=min_memory,
        deadline_quantile=deadline_quantile,
        measured=measured,
        framework=framework,
        compile=compile_model,
        spot=spot_policy(spot),
        headroom=headroom,
    )
    check_outputs(
        input_files(job, problem, cat), plot_path=plot_path, report=report, out=out if export_kind else None, save=save
    )
    check_gpu_names(cat, "gpu_types", names(gpu_types), offers=True)
    check_gpu_names(cat, "measured", [parse_measurement(m).sku for m in measured or []])
    if problem.job.roles is not None:  # GPUs split between roles (docs/roles.md)
        _roles_read_the_flags(problem)
        wanted = roles.Outputs(export_kind, out, "plot" if plot_path else "report" if report else None)
        return roles.answered(answer, roles.solved(problem, cat, wanted), fmt)
    limit_s = units.parse_time_limit_s(time_limit)
    table = api.candidate_table(problem, cat, time_limit_s=limit_s, started=started)
    result = api.plan(problem, catalog=cat, time_limit_s=limit_s, table=table, started=started)
    _exportable_best(result, export_kind)
    config = export_text(result.best, export_kind, problem, cat) if export_kind else None
    page = functools.partial(_write_report, report, problem, result, table) if report else None
    write_files(config, export_kind, out, plot_path, functools.partial(frontier_plot, result), page)
    if config is not None and out is None:  # the config is the answer on stdout, after the chart and report
        typer.echo(config, nl=False)
        return
    answer(result, problem, fmt, render.print_solve)


@handled
@with_job_flags
def options(
    job: Path | None = JobArg,
    question: dict | None = None,  # the job flags (shared.with_job_flags)
    save: Path | None = SaveOpt,
    deadline: str | None = DeadlineOpt,
    budget: str | None = BudgetOpt,
    max_nodes: int | None = MaxNodesOpt,
    gpu_types: str | None = GpuTypesOpt,
    min_memory: str | None = MinMemoryOpt,
    framework: str | None = FrameworkOpt,
    compile_model: bool | None = CompileOpt,
    spot: bool | None = SpotOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Every hardware row considered, with its best strategy, time, cost and what rejected it."""
    state["quiet"] = state["quiet"] or quiet
    check_flags(deadline=deadline, budget=budget, max_nodes=max_nodes, min_memory=min_memory)
    problem, cat = load_problem(
        job,
        question,
        save,
        catalog,
        deadline=deadline,
        budget=budget,
        max_nodes=max_nodes,
        gpu_types=gpu_types,
        min_memory=min_memory,
        framework=framework,
        compile=compile_model,
        spot=spot_policy(spot),
    )
    check_gpu_names(cat, "gpu_types", names(gpu_types), offers=True)
    roles.one_model(problem, "options")
    answer(api.options(problem, catalog=cat), problem, fmt, render.print_options)
