"""The ``gpuplan`` command line: a thin client of the Python API.

Exit codes: 0 answered (an infeasible problem is an answer), 2 bad input, 1 internal error.
"""

from __future__ import annotations

import functools
import io
import json
import sys
import traceback
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import typer
import yaml
from pydantic import BaseModel
from rich.table import Table

from . import __version__, api
from .errors import ArgumentError, GpuplanError
from .inputs.catalog import catalog_entries
from .inputs.files import expand_models, load_catalog, load_job, load_portfolio, parse_model, problem_catalog
from .inputs.hf_models import model_fields, presets
from .inputs.overrides import apply_overrides
from .inputs.schema import ModelSpec
from .inputs.units import fmt_count, parse_bytes
from .present import render
from .present.exports import export
from .present.jsonschema import json_schema
from .present.plot import frontier_plot, memory_plot, portfolio_plot
from .present.report import html_report

app = typer.Typer(
    name="gpuplan",
    help="Plan which GPUs to rent for a training or fine-tuning job: how many, how sharded, what it costs, how long it takes.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
_state = {"debug": False, "quiet": False}

# API parameter -> the flag that sets it, where the flag is not simply --name-with-dashes.
_FLAG_OF = {"time_limit_s": "--time-limit", "kind": "KIND"}


def flag_of(parameter: str) -> str:
    """The command-line flag a user typed for an API parameter."""
    return _FLAG_OF.get(parameter, "--" + parameter.replace("_", "-"))


def error_text(exc: GpuplanError) -> str:
    """One paragraph: a library error's location in the user's words (a file and field, or a flag)."""
    if isinstance(exc, ArgumentError) and not exc.source:
        return f"command line, option '{flag_of(exc.field or '')}': {exc.reason}"
    return str(exc)


class Format(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


class Objective(str, Enum):
    cost = "cost"
    time = "time"


class RecomputeOpt(str, Enum):
    none = "none"
    selective = "selective"
    full = "full"


class OffloadOpt(str, Enum):
    none = "none"
    optimizer = "optimizer"
    auto = "auto"


class MethodOpt(str, Enum):
    full = "full"
    lora = "lora"
    qlora = "qlora"


class BasisOpt(str, Enum):
    delivered = "delivered"
    reported = "reported"
    label = "label"
    board = "board"


ExportOpt = typer.Option(
    None,
    "--export",
    help="Write a launcher config for the plan: skypilot, kubernetes, deepspeed, accelerate or torchrun.",
)
OutOpt = typer.Option(None, "--out", help="File for --export (default: print it).")
FormatOpt = typer.Option(Format.table, "--format", "-f", help="table (for people), json or yaml (for scripts).")
CatalogOpt = typer.Option(
    None,
    "--catalog",
    "-c",
    help="Bundled catalog name (default, nodus-2026-11, ...) or a YAML path; overrides the job file.",
)
FrameworkOpt = typer.Option(
    None,
    "--framework",
    help="Plan only layouts this framework runs: megatron, deepspeed, torchtitan, fsdp, or auto (any; the default).",
)
SpotOpt = typer.Option(
    None,
    "--spot/--no-spot",
    help="--spot: spot capacity only; --no-spot: never spot; default: the file's constraints.spot (allow).",
)
JobArg = typer.Argument(..., help="Job file (YAML); see problems/ for examples.", show_default=False)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Tables: print only the one-line answer."),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    _state["debug"] = debug
    _state["quiet"] = quiet


def _emit(result: Any, fmt: Format, printer: Callable) -> None:
    if fmt == Format.table:
        console = render.console()
        if _state["quiet"]:
            console = render.Console(record=True, file=io.StringIO(), width=console.width)
            printer(result, console)
            lines = console.export_text().splitlines()
            typer.echo(lines[0] if lines else "")
            return
        printer(result, console)
        return
    data = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
    if fmt == Format.json:
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(yaml.safe_dump(data, sort_keys=False))


def handled(fn: Callable) -> Callable:
    """Bad input -> one paragraph and exit 2; a bug -> exit 1 (traceback with --debug)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except GpuplanError as exc:
            if _state["debug"]:
                traceback.print_exc()
            typer.echo(f"error: {error_text(exc)}", err=True)
            raise typer.Exit(2) from None
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            if _state["debug"]:
                traceback.print_exc()
            typer.echo(f"internal error: {exc.__class__.__name__}: {exc} (rerun with --debug and report it)", err=True)
            raise typer.Exit(1) from None

    return wrapper


def _write_export(plan, kind: str, out: Path | None, name: str) -> None:
    text = export(plan, kind, name=name)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        typer.echo(f"wrote {kind} config to {out}", err=True)


def _spot_policy(spot: bool | None) -> str | None:
    """--spot: spot only; --no-spot: never; neither: the file's setting."""
    return None if spot is None else ("only" if spot else "never")


def _problem(job: Path, **overrides):
    problem = load_job(job)
    return apply_overrides(problem, **overrides)


@app.command()
@handled
def check(
    job: Path = JobArg,
    sku: str = typer.Option(..., "--sku", help="GPU by name or alias (B200, h100, rtx-pro-6000-blackwell)."),
    gpus: int = typer.Option(..., "--gpus", help="Total GPUs."),
    nodes: int | None = typer.Option(None, "--nodes", help="Nodes; default the fewest that hold the GPUs."),
    tp: int | None = typer.Option(None, "--tp", help="Tensor-parallel degree (inside a node)."),
    pp: int | None = typer.Option(None, "--pp", help="Pipeline-parallel degree."),
    zero: int | None = typer.Option(
        None, "--zero", min=0, max=3, help="ZeRO stage 0-3 over every data-parallel rank (FSDP no-shard .. full-shard)."
    ),
    shard_degree: int | None = typer.Option(
        None, "--shard-degree", min=1, help="Hybrid shard: ZeRO-3 inside groups of N GPUs (HSDP, ZeRO++ hpZ)."
    ),
    framework: str | None = FrameworkOpt,
    micro_batch: int | None = typer.Option(None, "--micro-batch", min=1, help="Sequences per micro-batch."),
    recompute: RecomputeOpt | None = typer.Option(None, "--recompute", help="Activation recompute."),
    offload: OffloadOpt | None = typer.Option(
        None,
        "--offload",
        help="Optimizer state in CPU memory: none, optimizer, or auto (gpuplan decides); default: the job file's.",
    ),
    deadline: str | None = typer.Option(None, "--deadline", help="e.g. 5d, 36h."),
    budget: str | None = typer.Option(None, "--budget", help="e.g. 20000, $20k."),
    deadline_quantile: str | None = typer.Option(
        None, "--deadline-quantile", help="p50 or p90: which time must meet the deadline."
    ),
    compare: bool = typer.Option(
        True, "--compare/--no-compare", help="Compare with the best plan under the same constraints."
    ),
    spot: bool = typer.Option(False, "--spot", help="Use the offer's spot price (with expected preemptions)."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write the memory breakdown chart (PNG or SVG)."),
    export_kind: str | None = ExportOpt,
    out: Path | None = OutOpt,
    measured: list[str] | None = typer.Option(
        None,
        "--measured",
        help="A short-run measurement to calibrate from, e.g. '4xRTX-PRO-6000:14.8k tok/s' (repeatable).",
    ),
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
) -> None:
    """Verdict on a hand-picked configuration: fits or not, memory breakdown, speed, cost, distance to the optimum."""
    problem = _problem(job, deadline=deadline, budget=budget, measured=measured, deadline_quantile=deadline_quantile)
    cat = problem_catalog(problem, catalog)
    result = api.check(
        problem,
        sku,
        gpus,
        nodes=nodes,
        tp=tp,
        pp=pp,
        zero=zero,
        micro_batch=micro_batch,
        recompute=recompute.value if recompute else None,
        offload=offload.value if offload else None,
        catalog=cat,
        compare=compare,
        spot=spot,
        shard_degree=shard_degree,
        framework=framework,
    )
    if export_kind:
        _write_export(result.plan, export_kind, out, problem.job.name)
        if out is None:
            return
    if plot_path:
        memory_plot(result.plan, plot_path)
    if fmt == Format.table:
        _emit(result, fmt, render.print_check)
        return
    _emit(render.check_data(result), fmt, render.print_check)


@app.command()
@handled
def solve(
    job: Path = JobArg,
    objective: Objective | None = typer.Option(
        None, "--objective", help="Minimise cost or time (default: the file's, else cost)."
    ),
    deadline: str | None = typer.Option(None, "--deadline", help="Finish within, e.g. 5d, 36h."),
    budget: str | None = typer.Option(None, "--budget", help="Spend at most, e.g. 20000, $20k."),
    max_nodes: int | None = typer.Option(None, "--max-nodes", help="At most this many nodes."),
    max_gpus: int | None = typer.Option(None, "--max-gpus", help="At most this many GPUs."),
    gpu_types: str | None = typer.Option(None, "--gpu-types", help="Only these GPUs, comma-separated: B200,B300."),
    min_memory: str | None = typer.Option(
        None, "--min-memory", help="Only GPUs with at least this memory: 160Gi, 80GB."
    ),
    deadline_quantile: str | None = typer.Option(
        None, "--deadline-quantile", help="p50 or p90: which time must meet the deadline."
    ),
    measured: list[str] | None = typer.Option(
        None, "--measured", help="Short-run measurement, e.g. '4xRTX-PRO-6000:14.8k tok/s' (repeatable)."
    ),
    framework: str | None = FrameworkOpt,
    spot: bool | None = SpotOpt,
    time_limit: float = typer.Option(10.0, "--time-limit", help="CP-SAT time limit per solve, seconds."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write the frontier chart (PNG or SVG)."),
    report: Path | None = typer.Option(None, "--report", help="Write a self-contained HTML report."),
    export_kind: str | None = ExportOpt,
    out: Path | None = OutOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
) -> None:
    """The optimal plan, the cost/time Pareto frontier, and why the other GPUs lost."""
    problem = _problem(
        job,
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
        spot=_spot_policy(spot),
    )
    cat = problem_catalog(problem, catalog)
    table = api.candidate_table(problem, cat)
    result = api.plan(problem, catalog=cat, time_limit_s=time_limit, table=table)
    if export_kind:
        if result.best is None:
            raise ArgumentError(
                "no plan satisfies the constraints, so there is nothing to export; see 'gpuplan solve' "
                "without --export for what binds",
                field="export",
            )
        _write_export(result.best, export_kind, out, problem.job.name)
        if out is None:
            return
    _emit(result, fmt, render.print_solve)
    if plot_path:
        frontier_plot(result, plot_path)
    if report:
        report.write_text(html_report(f"gpuplan: {problem.job.name}", result, api.options(problem, table=table)))
        typer.echo(f"wrote report to {report}", err=True)


@app.command()
@handled
def options(
    job: Path = JobArg,
    deadline: str | None = typer.Option(None, "--deadline", help="e.g. 5d."),
    budget: str | None = typer.Option(None, "--budget", help="e.g. 20000."),
    max_nodes: int | None = typer.Option(None, "--max-nodes"),
    gpu_types: str | None = typer.Option(None, "--gpu-types", help="B200,B300"),
    min_memory: str | None = typer.Option(None, "--min-memory", help="160Gi"),
    framework: str | None = FrameworkOpt,
    spot: bool | None = SpotOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
) -> None:
    """Every hardware row considered, with its best strategy, time, cost and what rejected it."""
    problem = _problem(
        job,
        deadline=deadline,
        budget=budget,
        max_nodes=max_nodes,
        gpu_types=gpu_types,
        min_memory=min_memory,
        framework=framework,
        spot=_spot_policy(spot),
    )
    _emit(api.options(problem, catalog=problem_catalog(problem, catalog)), fmt, render.print_options)


@app.command("catalog")
@handled
def catalog_cmd(
    name: str = typer.Argument("default", help="Bundled catalog name or a YAML path."),
    min_memory: str | None = typer.Option(None, "--min-memory", help="Only GPUs with at least this memory (160Gi)."),
    types: str | None = typer.Option(None, "--types", help="Only these GPUs, comma-separated."),
    fmt: Format = FormatOpt,
) -> None:
    """List a catalog's GPUs and offers: memory in GB and GiB, dense BF16 TFLOPS, bandwidths, price."""
    cat = load_catalog(name)
    floor = None
    if min_memory:
        try:
            floor = parse_bytes(min_memory, "a memory size")
        except GpuplanError as exc:
            raise ArgumentError(exc.reason, field="min_memory") from None
    wanted = [t.strip() for t in types.split(",") if t.strip()] if types else None
    rows = render.catalog_rows(catalog_entries(cat, wanted, floor))
    if fmt == Format.table:
        render.print_catalog(cat.name, rows, render.console())
    else:
        _emit({"catalog": cat.name, "description": cat.description, "rows": rows}, fmt, lambda r, c: None)


@app.command()
@handled
def capacity(
    job: Path | None = typer.Argument(
        None,
        help="Optional job file: then the answer is the deepest version of its model that fits, by check's own "
        "memory model (activations and reserve included), and whether the job itself fits.",
        show_default=False,
    ),
    sku: str = typer.Option(..., "--sku", help="GPU by name or alias."),
    gpus: int = typer.Option(1, "--gpus", help="GPUs sharing the state."),
    zero: int = typer.Option(3, "--zero", min=0, max=3, help="ZeRO stage (3 = fully sharded)."),
    method: MethodOpt = typer.Option(MethodOpt.full, "--method"),
    bytes_per_param: float | None = typer.Option(
        None, "--bytes-per-param", help="Default 16 (full), 2 (lora), ~0.52 (qlora)."
    ),
    reserve: str = typer.Option("0", "--reserve", help="Per-GPU memory kept for activations etc., e.g. 40GB."),
    memory_basis: BasisOpt = typer.Option(
        BasisOpt.delivered, "--memory-basis", help="delivered, reported, label or board (B300's 2.1 TB)."
    ),
    nodes: int | None = typer.Option(None, "--nodes", help="With a job: nodes (default the fewest)."),
    catalog: str | None = typer.Option(None, "--catalog", "-c", help="Default: the job's catalog, else default."),
    fmt: Format = FormatOpt,
) -> None:
    """The largest model (parameters) that fits on these GPUs: training state plus reserve, or for a job file
    the deepest version of its model whose best layout fits."""
    problem = load_job(job) if job is not None else None
    cat = problem_catalog(problem, catalog) if problem is not None else load_catalog(catalog or "default")
    result = api.capacity(
        sku,
        gpus,
        zero=zero,
        method=method.value,
        bytes_per_param=bytes_per_param,
        reserve=reserve,
        memory_basis=memory_basis.value,
        catalog=cat,
        problem=problem,
        nodes=nodes,
    )
    _emit(result, fmt, render.print_capacity)


@app.command("portfolio")
@handled
def portfolio_cmd(
    file: Path = typer.Argument(..., help="Portfolio file (YAML): pools, budget, horizon, jobs.", show_default=False),
    time_limit: float = typer.Option(60.0, "--time-limit", help="CP-SAT time limit, seconds."),
    workers: int = typer.Option(2, "--workers", min=1, help="CP-SAT workers (1 = fully deterministic)."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write a Gantt + pool utilisation chart (PNG/SVG)."),
    spot: bool | None = SpotOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
) -> None:
    """Schedule many jobs on shared GPU pools within one budget: plan, start and end per job, what was dropped."""
    pf = load_portfolio(file)
    if spot is not None:
        pf = pf.model_copy(update={"spot": _spot_policy(spot)})
    cat = load_catalog(catalog) if catalog else None
    progress = _progress_printer() if fmt == Format.table else None
    result = api.portfolio(pf, catalog=cat, time_limit_s=time_limit, workers=workers, progress=progress)
    _emit(result, fmt, render.print_portfolio)
    if plot_path and result.schedule:
        portfolio_plot(result, plot_path)


@app.command("models")
@handled
def models_cmd(fmt: Format = FormatOpt) -> None:
    """List the bundled model presets (use them as job.model: {preset: NAME})."""
    rows = []
    for name, entry in presets().items():
        fields = model_fields(entry["config"], name)
        rows.append(
            {
                "name": name,
                "params": fields["params"],
                "active_params": fields.get("active_params", fields["params"]),
                "layers": fields["layers"],
                "hidden": fields["hidden"],
                "source": entry["published"]["source"],
            }
        )
    if fmt != Format.table:
        _emit({"models": rows}, fmt, lambda r, c: None)
        return
    table = Table(title="Model presets", title_justify="left")
    for col in ("name", "params", "active", "layers", "hidden", "source"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r["name"],
            fmt_count(r["params"]),
            fmt_count(r["active_params"]),
            str(r["layers"]),
            str(r["hidden"]),
            r["source"],
        )
    render.console().print(table)


@app.command("model")
@handled
def model_cmd(
    name: str = typer.Argument(..., help="A preset name or a path to a Hugging Face config.json."),
    fmt: Format = FormatOpt,
) -> None:
    """Show one model: total and active parameters and the shapes, from a preset or a config.json."""
    data = expand_models({"job": {"model": {"hf_config": name} if name.endswith(".json") else {"preset": name}}})
    spec = parse_model(ModelSpec, data["job"]["model"], name, "job.model")
    data = spec.model_dump(exclude_none=True)
    data.setdefault("active_params", data["params"])
    if fmt != Format.table:
        _emit(data, fmt, lambda r, c: None)
        return
    for key, value in data.items():
        shown = fmt_count(value) if key in ("params", "active_params") else value
        typer.echo(f"{key:>18}: {shown}")


@app.command("schema")
@handled
def schema_cmd(kind: str = typer.Argument(..., help="job, portfolio or catalog.")) -> None:
    """Print the JSON Schema of a file kind (for editor autocompletion and validation)."""
    typer.echo(json.dumps(json_schema(kind), indent=2))


def _progress_printer() -> Callable[[str], None] | None:
    """Progress lines on stderr when it is an interactive terminal, else nothing."""
    if sys.stderr.isatty():
        return lambda line: print(line, file=sys.stderr, flush=True)
    return None


def main() -> None:
    try:
        app()
    except SystemExit as exc:
        code = exc.code
        # click reports usage errors with code 2 already; keep codes as they are.
        sys.exit(code)


if __name__ == "__main__":
    main()
