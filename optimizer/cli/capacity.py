"""``gpuplan capacity``: the largest model that fits on these GPUs, or the deepest version of a job's model."""

from __future__ import annotations

from pathlib import Path

import typer

from .. import api
from ..cli_options import BasisOpt, Format, FormatOpt, MethodOpt, QuietOpt
from ..errors import ArgumentError
from ..inputs.files import load_job, problem_catalog
from ..present import render
from .checks import check_flags, check_gpu_names
from .handling import flag_of, handled, state
from .shared import catalog_flag, emit


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
    zero: int | None = typer.Option(None, "--zero", min=0, max=3, help="Without a job: ZeRO stage (default 3)."),
    method: MethodOpt | None = typer.Option(None, "--method", help="Without a job: full (default), lora or qlora."),
    bytes_per_param: float | None = typer.Option(
        None, "--bytes-per-param", help="Without a job: default 16 (full), 2 (lora), ~0.52 (qlora)."
    ),
    reserve: str | None = typer.Option(
        None,
        "--reserve",
        help="Without a job: per-GPU memory kept for activations etc., a size (40GB) or a fraction (0.2) (default 0).",
    ),
    memory_basis: BasisOpt | None = typer.Option(
        None,
        "--memory-basis",
        help="Without a job: delivered, reported, label or board (B300's 2.1 TB) (default delivered).",
    ),
    nodes: int | None = typer.Option(None, "--nodes", help="With a job: nodes (default the fewest)."),
    catalog: str | None = typer.Option(None, "--catalog", "-c", help="Default: the job's catalog, else default."),
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """The largest model (parameters) that fits on these GPUs: training state plus reserve, or for a job file
    the deepest version of its model whose best layout fits."""
    state["quiet"] = state["quiet"] or quiet
    check_flags(gpus=gpus, nodes=nodes, bytes_per_param=bytes_per_param, reserve=reserve)
    state_flags = {
        "zero": zero,
        "method": method,
        "bytes_per_param": bytes_per_param,
        "reserve": reserve,
        "memory_basis": memory_basis,
    }
    if job is not None and (given := [name for name, value in state_flags.items() if value is not None]):
        # with a job the answer is check's memory model over the job's own settings: these would be ignored
        raise ArgumentError(
            f"{', '.join(flag_of(name) for name in given)} "
            f"{'describes' if len(given) == 1 else 'describe'} the training state without a job file; with one, "
            "the job file's own settings apply (method, optimizer, activation_reserve, framework): drop "
            f"{'this flag' if len(given) == 1 else 'these flags'} or change the job file",
            field=given[0],
        )
    if job is None and nodes is not None:
        raise ArgumentError(
            "applies with a job file only (the GPUs' node count for its layouts); without one, capacity counts "
            "the --gpus that share the training state, wherever they are",
            field="nodes",
        )
    problem = load_job(job) if job is not None else None
    cat = (
        problem_catalog(problem, catalog)
        if problem is not None
        else catalog_flag("default" if catalog is None else catalog)
    )
    check_gpu_names(cat, "sku", [sku], offers=True)
    result = api.capacity(
        sku,
        gpus,
        zero=3 if zero is None else zero,
        method=(method or MethodOpt.full).value,
        bytes_per_param=bytes_per_param,
        reserve=reserve or 0,
        memory_basis=(memory_basis or BasisOpt.delivered).value,
        catalog=cat,
        problem=problem,
        nodes=nodes,
    )
    emit(result, fmt, render.print_capacity)
