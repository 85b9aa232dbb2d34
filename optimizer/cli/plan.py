"""The planning commands: ``check`` (a verdict on a hand-picked configuration), ``solve`` (the optimal plan and
the frontier) and ``options`` (every hardware row considered)."""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path

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
    OffloadOpt,
    OutOpt,
    QuietOpt,
    SaveOpt,
    SpotOpt,
)
from ..errors import ArgumentError, GpuplanError
from ..inputs import units
from ..inputs.overrides import parse_measurement
from ..inputs.requests import CheckRequest
from ..present import output, render, roles
from ..present.plot import frontier_plot, memory_plot
from ..present.report import html_report
from .checks import check_export, check_flags, check_gpu_names, check_outputs, names
from .handling import handled, state
from .shared import (
    answer,
    catalog_path,
    export_text,
    input_files,
    load_problem,
    spot_policy,
    with_job_flags,
    write_files,
)

# The options of check and solve alone; those several commands take are in cli_options.
SkuOpt = typer.Option(
    None,
    "--sku",
    help="GPU by name or alias (B200, h100, rtx-pro-6000-blackwell), or an offer by name (a plan's offer: "
    "nodus-b200, or 'nodus-b200 (spot)' for its spot price).",
)
GpusOpt = typer.Option(None, "--gpus", help="Total GPUs.")
RoleOpt = typer.Option(None, "--role", help="A role job's split: target=3xRTX-PRO-6000 (repeat).")
NodesOpt = typer.Option(None, "--nodes", help="Nodes; default the fewest that hold the GPUs.")
TpOpt = typer.Option(None, "--tp", help="Tensor-parallel degree (inside a node).")
PpOpt = typer.Option(None, "--pp", help="Pipeline-parallel degree.")
ZeroOpt = typer.Option(
    None, "--zero", min=0, max=3, help="ZeRO stage 0-3 over every data-parallel rank (FSDP no-shard .. full-shard)."
)
ShardDegreeOpt = typer.Option(
    None, "--shard-degree", min=1, help="Hybrid shard: ZeRO-3 inside groups of N GPUs (HSDP, ZeRO++ hpZ)."
)
CpOpt = typer.Option(None, "--cp", min=1, help="Context parallelism: GPUs that split each sequence.")
EpOpt = typer.Option(None, "--ep", min=1, help="Expert parallelism (MoE): GPUs that split the experts.")
ExpertTpOpt = typer.Option(
    None,
    "--expert-tp",
    min=1,
    help="Tensor parallelism inside each expert when it differs from --tp (Megatron-Core parallel folding: "
    "EP x expert TP over the TP x DP x CP GPUs).",
)
VirtualStagesOpt = typer.Option(
    None, "--virtual-stages", min=1, help="Interleaved pipeline chunks per GPU (1 = plain 1F1B)."
)
MicroBatchOpt = typer.Option(None, "--micro-batch", min=1, help="Sequences per micro-batch (any).")
GradAccumOpt = typer.Option(
    None,
    "--grad-accum",
    min=1,
    help="Micro-batches per optimizer step (gradient accumulation); with job.global_batch it must give that "
    "batch (DP x micro-batch x accumulation), without it at most the batch cap gpuplan chooses within.",
)
RecomputeOpt = typer.Option(
    None,
    "--recompute",
    help="Activation recompute: none, selective, full (every layer), op (per-op selective: torchtitan's SAC "
    "saves every other matmul's output) or layers:N (full recompute of N layers of each pipeline stage, the "
    "rest keep their activations; Megatron's block method, torchtune's every k-th layer); default: gpuplan "
    "chooses, the fewest layers that fit where the framework recomputes some only.",
)
OffloadChoiceOpt = typer.Option(
    None,
    "--offload",
    help="Optimizer state in CPU memory: none, optimizer, or auto (gpuplan decides); default: the job file's.",
)
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


def _recompute(text: str | None) -> str | None:
    """--recompute read as a strategy's recompute (none, selective, full, layers:N); bad input names the flag."""
    if text is None:
        return None
    try:
        return units.parse_recompute(text, "--recompute")
    except GpuplanError as exc:
        raise ArgumentError(exc.reason, field="recompute") from None


# The layout's numbers ``check_flags`` holds to their ranges, in the order it names the first one out of range.
_LAYOUT_NUMBERS = ("gpus", "nodes", "tp", "pp", "cp", "ep", "expert_tp", "shard_degree", "micro_batch", "grad_accum")


def _layout_numbers(request: CheckRequest) -> dict[str, int | None]:
    """The request's layout numbers by flag, for ``check_flags``."""
    return {name: getattr(request, name) for name in _LAYOUT_NUMBERS}


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
@with_job_flags
def check(
    job: Path | None = JobArg,
    question: dict | None = None,  # the job flags (shared.with_job_flags)
    save: Path | None = SaveOpt,
    headroom: str | None = HeadroomOpt,
    sku: str | None = SkuOpt,
    gpus: int | None = GpusOpt,
    role: list[str] | None = RoleOpt,
    nodes: int | None = NodesOpt,
    tp: int | None = TpOpt,
    pp: int | None = PpOpt,
    zero: int | None = ZeroOpt,
    shard_degree: int | None = ShardDegreeOpt,
    framework: str | None = FrameworkOpt,
    compile_model: bool | None = CompileOpt,
    cp: int | None = CpOpt,
    ep: int | None = EpOpt,
    expert_tp: int | None = ExpertTpOpt,
    virtual_stages: int | None = VirtualStagesOpt,
    micro_batch: int | None = MicroBatchOpt,
    grad_accum: int | None = GradAccumOpt,
    recompute: str | None = RecomputeOpt,
    offload: OffloadOpt | None = OffloadChoiceOpt,
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
    if role or sku is None or gpus is None:  # a role job's split (docs/roles.md), or --sku and --gpus missing
        wanted = roles.Outputs(export_kind, check_export(export_kind, out, fmt), plot_path)
        return roles.answered(answer, roles.checked(job, role, sku, gpus, catalog, deadline, budget, wanted), fmt)
    request = CheckRequest(
        sku,
        gpus,
        nodes=nodes,
        tp=tp,
        pp=pp,
        zero=zero,
        micro_batch=micro_batch,
        recompute=recompute,  # as typed, read once the files are (below)
        offload=offload.value if offload else None,
        compare=compare,
        spot=spot,
        shard_degree=shard_degree,
        framework=framework,
        cp=cp,
        ep=ep,
        expert_tp=expert_tp,
        virtual_stages=virtual_stages,
        grad_accum=grad_accum,
    )
    check_flags(**_layout_numbers(request), deadline=deadline, budget=budget, measured=measured)
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
    request = dataclasses.replace(request, recompute=_recompute(recompute))
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
        wanted = roles.Outputs(export_kind, out, plot_path or report)
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
