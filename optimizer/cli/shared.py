"""What the planning commands share: the problem their job file and flags state (``load_problem``), the answer in
the format asked for (``emit``, ``answer``) and the launcher config an --export writes."""

from __future__ import annotations

import functools
import inspect
import io
import os
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

import typer
import yaml

from ..cli_options import (
    LAYOUT_OPTIONS,
    Format,
    GlobalBatchOpt,
    GradientDtypeOpt,
    LoraRankOpt,
    LoraTargetsOpt,
    MasterWeightsOpt,
    MethodJobOpt,
    ModelOpt,
    OptimizerOpt,
    PrecisionOpt,
    SeqLenOpt,
    TokensOpt,
)
from ..errors import ArgumentError, CatalogError, GpuplanError
from ..inputs.catalog import vendor_in
from ..inputs.files import load_catalog, load_job, problem_catalog
from ..inputs.layout_fields import LAYOUT_FIELDS
from ..inputs.overrides import apply_overrides
from ..inputs.question import job_document, problem_of, saved_document
from ..inputs.schema import Constraints
from ..present import answers, output, render
from ..present.exports import export
from .handling import say, state
from .job_options import (
    ActivationOffloadOpt,
    AttentionOpt,
    ContextParallelOpt,
    DatasetTokensOpt,
    EpochsOpt,
    LoraAdapterDtypeOpt,
    LoraDropoutOpt,
    LossOpt,
    OffloadOpt,
    OptimizerImplementationOpt,
    VariableLengthsOpt,
)


def emit(result: Any, fmt: Format, printer: Callable) -> None:
    """The answer on stdout: ``printer``'s table (with --quiet its first line alone), or the JSON or YAML of the
    answer's data."""
    if fmt == Format.table:
        console = render.console()
        if state["quiet"]:
            # as wide as the answer: at the terminal's width the one line was cut, cost and time with it
            console = render.Console(
                record=True, file=io.StringIO(), width=render.PIPED_WIDTH, markup=False, emoji=False, highlight=False
            )
            printer(result, console)
            lines = console.export_text().splitlines()
            typer.echo(lines[0] if lines else "")
            return
        printer(result, console)
        return
    data = answers.answer_data(result)
    if fmt == Format.json:
        typer.echo(answers.json_text(data))
    else:
        # libyaml's emitter where PyYAML has it: the same text, 2.5 times as fast (a 5,000-job portfolio: 3.8 s)
        typer.echo(yaml.dump(data, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False))


def answer(result, problem, fmt: Format, printer: Callable, data: Callable | None = None) -> None:
    """``emit`` with the printer told the job's memory headroom (stated in a note, a line on the memory bar, and
    'at the edge' where a plan has little memory left beyond it)."""
    headroom = problem.constraints.memory_headroom
    emit(
        result if data is None or fmt == Format.table else data(result),
        fmt,
        functools.partial(printer, headroom=headroom),
    )


def export_text(plan, kind: str, problem, catalog) -> str:
    """The launcher config ``kind`` for ``plan``: the MoE dispatcher its time assumed, its GPU's vendor."""
    facts = {"moe_dispatcher": problem.assumptions.moe_dispatcher, "vendor": vendor_in(catalog, plan.sku)}
    return export(plan, kind, job=problem.job, **facts)


def write_export(config: str, kind: str, out: Path) -> str:
    """The launcher config written to ``out``; what to say once every file is in place."""
    output.write_text(out, config, "out")
    return f"wrote {kind} config to {output.shown(out)}"


def spot_policy(spot: bool | None) -> str | None:
    """--spot: spot only; --no-spot: never; neither: the file's setting."""
    return None if spot is None else ("only" if spot else "never")


def catalog_path(catalog: str | None) -> Path | None:
    """A --catalog given as a file (an input no output may overwrite); None for a bundled name."""
    return Path(catalog) if catalog and os.path.isfile(catalog) else None  # False for a name too long


def input_files(job: Path | None, problem, catalog) -> list[Path | None]:
    """Every file a loaded job was read from: the job, its catalog files (includes and hardware) and its
    model's config.json; no output may overwrite one."""
    return [
        job,
        *map(Path, catalog.source_files),
        *([Path(problem.job.model.config_path)] if problem.job.model.config_path else []),
    ]


# The job flags (``question.JOB_FLAGS``: a question without a file, or fields over the file's), each with its
# type and option, declared once for every command that asks a question (``with_job_flags``).
JOB_FLAG_OPTIONS: dict[str, tuple[str, Any]] = {
    "model": ("str | None", ModelOpt),
    "method": ("str | None", MethodJobOpt),
    "tokens": ("str | None", TokensOpt),
    "dataset_tokens": ("str | None", DatasetTokensOpt),
    "epochs": ("str | None", EpochsOpt),
    "seq_len": ("str | None", SeqLenOpt),
    "global_batch": ("str | None", GlobalBatchOpt),
    "precision": ("str | None", PrecisionOpt),
    "optimizer": ("str | None", OptimizerOpt),
    "lora_rank": ("int | None", LoraRankOpt),
    "lora_targets": ("str | None", LoraTargetsOpt),
    "lora_dropout": ("float | None", LoraDropoutOpt),
    "lora_adapter_dtype": ("str | None", LoraAdapterDtypeOpt),
    "master_weights": ("bool | None", MasterWeightsOpt),
    "gradient_dtype": ("str | None", GradientDtypeOpt),
    "loss": ("str | None", LossOpt),
    "attention": ("str | None", AttentionOpt),
    "context_parallel": ("str | None", ContextParallelOpt),
    "optimizer_implementation": ("str | None", OptimizerImplementationOpt),
    "variable_lengths": ("bool | None", VariableLengthsOpt),
    "activation_offload": ("bool | None", ActivationOffloadOpt),
    "offload": ("str | None", OffloadOpt),
}
# The job fields check pins as a layout flag of its own (--offload: inputs/layout_fields.py), which its job flags
# leave to that flag (one option a name).
CHECK_LAYOUT_JOB_FIELDS = frozenset(f.job_field for f in LAYOUT_FIELDS if f.job_field is not None)


def with_options(placeholder: str, options: dict[str, tuple[Any, Any]]) -> Callable[[Callable], Callable]:
    """A decorator: ``command`` takes the values of ``options`` as one dict, its parameter ``placeholder`` (by
    name; an enum's choice as its text); the command typer reads takes each option itself in that parameter's
    place, named by its key, with its type and option."""

    def decorate(command: Callable) -> Callable:
        signature = inspect.signature(command)
        parameters = list(signature.parameters.values())
        at = [p.name for p in parameters].index(placeholder)
        flags = [
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=kind)
            for name, (kind, option) in options.items()
        ]

        @functools.wraps(command)
        def asked(**values: Any) -> Any:
            given = {name: _plain(values.pop(name)) for name in options}
            return command(**{placeholder: given}, **values)

        asked.__signature__ = signature.replace(parameters=[*parameters[:at], *flags, *parameters[at + 1 :]])  # type: ignore[attr-defined]
        annotations = {name: kind for name, kind in command.__annotations__.items() if name != placeholder}
        asked.__annotations__ = {**annotations, **{name: kind for name, (kind, _) in options.items()}}
        return asked

    return decorate


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


# ``command`` takes its job question as ``question`` (the job flags' values by field); the command typer reads
# takes the job flags of ``JOB_FLAG_OPTIONS`` themselves in that parameter's place, named by field.
with_job_flags = with_options("question", JOB_FLAG_OPTIONS)
# check's job flags: those of ``JOB_FLAG_OPTIONS`` but the job fields it pins as layout flags (``--offload``).
with_check_job_flags = with_options(
    "question", {name: option for name, option in JOB_FLAG_OPTIONS.items() if name not in CHECK_LAYOUT_JOB_FIELDS}
)
# ``command`` takes check's layout flags as ``layout`` (inputs/layout_fields.py: their values by field).
with_layout_flags = with_options("layout", LAYOUT_OPTIONS)


def catalog_flag(name: str):
    """``--catalog NAME`` read as solve reads it: a name that names no catalog ('', 'nope') is refused naming the
    flag (capacity and portfolio said 'unknown catalog' alone, and read '' as none given)."""
    try:
        return load_catalog(name)
    except CatalogError as exc:
        if exc.source is None:
            raise ArgumentError(exc.reason, field="catalog") from None
        raise


def load_problem(
    job: Path | None, question: dict | None = None, save: Path | None = None, catalog: str | None = None, **overrides
):
    """The problem a job file, the job flags over it (``question``) and the constraint flags state, and its
    catalog (``catalog``: --catalog over the file's); with ``save``, the whole question written there as a job
    file (``question.saved_document``), once the catalog is read (so that no input it names is overwritten)."""
    question = question or {}
    headroom = _headroom(overrides.pop("headroom", None))
    if job is not None and save is None and not any(v is not None for v in question.values()):
        problem = _with_headroom(apply_overrides(load_job(job), **overrides), headroom)
        return problem, problem_catalog(problem, catalog)
    document = job_document(job, question)
    problem = _with_headroom(apply_overrides(problem_of(document, job, question), **overrides), headroom)
    overrides["headroom"] = headroom  # (as the constraint flags, written where a job file says it)
    cat = problem_catalog(problem, catalog)
    if save is not None:
        saved = saved_document(document, overrides, catalog=catalog, base=job.parent if job else None, to=save)
        output.write_text(save, yaml.safe_dump(saved, sort_keys=False, allow_unicode=True), "save")
        say(f"wrote the job to {output.shown(save)}")
    return problem, cat


def _headroom(text: str | None) -> str | float | None:
    """--headroom read as constraints.memory_headroom reads it (10%, 8GiB, 8GB); bad input names the flag."""
    if text is None:
        return None
    try:
        return Constraints.model_validate({"memory_headroom": text}).memory_headroom
    except GpuplanError as exc:
        raise ArgumentError(exc.reason, field="headroom") from None
    except ValueError as exc:  # pydantic's ValidationError
        message = exc.errors()[0]["msg"] if hasattr(exc, "errors") else str(exc)
        raise ArgumentError(message.removeprefix("Value error, "), field="headroom") from None


def _with_headroom(problem, headroom: str | float | None):
    """``problem`` with --headroom over its constraints.memory_headroom (None: as it is)."""
    if headroom is None:
        return problem
    constraints = problem.constraints.model_copy(update={"memory_headroom": headroom})
    return problem.model_copy(update={"constraints": constraints})


def write_files(
    config: str | None,
    kind: str | None,
    out: Path | None,
    plot_path: Path | None,
    plot: Callable[[Path], None],
    report: Callable[[], str] | None = None,
) -> None:
    """A planning command's files, before its answer (a reader closing stdout early ends the process at its next
    write), all or none (a full disk at the chart leaves the old config too): the launcher config where --out
    names a file, the chart (``plot`` draws it) and what ``report`` writes; then what each one says."""
    said: list[str] = []
    with output.together():
        if config is not None and out is not None:
            said.append(write_export(config, kind or "", out))
        if plot_path:
            with output.atomic_path(plot_path, "plot") as tmp:
                plot(tmp)
        if report is not None:
            said.append(report())
    for line in said:
        say(line)
