"""The ``gpuplan`` command line: a thin client of the Python API.

Exit codes: 0 answered (an infeasible problem is an answer), 2 bad input, 1 internal error.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import functools
import io
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
import yaml
from rich.table import Table

from . import __version__, api, server, stops
from .cli_options import (
    BasisOpt,
    CatalogOpt,
    CompileOpt,
    ExportOpt,
    Format,
    FormatOpt,
    FrameworkOpt,
    GlobalBatchOpt,
    HeadroomOpt,
    JobArg,
    LoraRankOpt,
    MethodJobOpt,
    MethodOpt,
    ModelOpt,
    Objective,
    OffloadOpt,
    OptimizerOpt,
    OutOpt,
    PrecisionOpt,
    QuietOpt,
    SaveOpt,
    SeqLenOpt,
    SpotOpt,
    TokensOpt,
)
from .errors import ArgumentError, GpuplanError, printable
from .inputs import skypilot, units
from .inputs.catalog import catalog_entries, find_sku, offers_for, vendor_in
from .inputs.files import expand_models, load_catalog, load_job, load_portfolio, parse_model, problem_catalog
from .inputs.hf_models import presets
from .inputs.overrides import apply_overrides, parse_measurement
from .inputs.question import JOB_FLAGS, job_document, model_value, problem_of, saved_document
from .inputs.reader import forget_reads, resolved
from .inputs.requests import CheckRequest
from .inputs.schema import Constraints, ModelSpec
from .inputs.units import fmt_count, parse_bytes
from .planning.plans import headroom_gib
from .present import answers, output, render, roles
from .present.exports import export, find_launcher, unknown_kind
from .present.jsonschema import json_schema
from .present.plot import frontier_plot, memory_plot, portfolio_plot, require_plotting
from .present.report import html_report

app = typer.Typer(
    name="gpuplan",
    help="Plan which GPUs to rent for a training or fine-tuning job: how many, how sharded, what it costs, how long it takes.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's help: wraps at the terminal's width, never cuts a word to an ellipsis
)
_state = {"debug": False, "quiet": False, "stopped": False}  # stopped: the stop's line was said

# API parameter -> the flag that sets it, where the flag is not simply --name-with-dashes.
_FLAG_OF = {
    "time_limit_s": "--time-limit",
    "kind": "KIND",
    "name": "NAME",
    "export": "--export",
    "job": "JOB",
    "from_dir": "--from",
    "file": "FILE",
}


def flag_of(parameter: str) -> str:
    """The command-line flag a user typed for an API parameter."""
    return _FLAG_OF.get(parameter, "--" + parameter.replace("_", "-"))


def error_text(exc: GpuplanError) -> str:
    """One paragraph: a library error's location in the user's words (a file and field, or a flag)."""
    if isinstance(exc, ArgumentError) and not exc.source:
        flag = flag_of(exc.field or "")
        return printable(
            f"command line, {'option' if flag.startswith('-') else 'argument'} '{flag}': {exc.reason}", "\n"
        )
    return printable(str(exc), "\n")


# Flag (the API parameter it sets) -> its range in ``units.LIMITS``, and how its text reads as a number.
_FLAG_RANGES = {
    **units.LAYOUT_RANGES,
    "max_nodes": "nodes",
    "max_gpus": "gpus",
    "deadline": "duration",
    "budget": "budget",
    "min_memory": "memory",
    "reserve": "reserve",
    "bytes_per_param": "bytes_per_param",
    "time_limit_s": "time_limit",
    "workers": "workers",
}
_FLAG_PARSERS: dict[str, Callable[[Any], float]] = {
    "deadline": lambda v: units.parse_duration_s(v, "a deadline"),
    "budget": lambda v: units.parse_usd(v, "a budget"),
    "min_memory": lambda v: units.parse_bytes(v, "a memory size"),
    "time_limit_s": units.parse_time_limit_s,
    "reserve": lambda v: units.parse_bytes_or_fraction(v, "a memory size"),
}


def check_flags(**values: Any) -> None:
    """Every given flag within its sensible range (``units.LIMITS``), before any work: NaN, infinities,
    0 where 1 is the least (``--nodes 0``) and absurd magnitudes are bad input naming the flag."""
    for parameter, value in values.items():
        if value is None:
            continue
        if parameter == "measured":
            if len(value) > units.MAX_MEASUREMENTS:
                raise ArgumentError(
                    f"at most {units.MAX_MEASUREMENTS} measurements per command (got {len(value)}); each one "
                    "costs a calibration fit: keep the few that differ most in GPU type and count",
                    field="measured",
                )
            continue
        limit = units.LIMITS[_FLAG_RANGES[parameter]]
        try:
            number = _FLAG_PARSERS[parameter](value) if parameter in _FLAG_PARSERS else value
        except GpuplanError as exc:
            raise ArgumentError(f"{exc.reason}; it {limit.text()}", field=parameter) from None
        try:
            units.check_range(number, _FLAG_RANGES[parameter], value)
        except GpuplanError as exc:
            raise ArgumentError(exc.reason, field=parameter) from None


def check_gpu_names(catalog, parameter: str, names: list[str], *, offers: bool = False) -> None:
    """Every GPU name a flag gives exists in the catalog (``offers``: offer names and aliases count too),
    so that the error names the flag rather than a field of the job file."""
    for name in names:
        try:
            offers_for(catalog, name) if offers else find_sku(catalog, name)
        except GpuplanError as exc:
            raise ArgumentError(exc.reason, field=parameter) from None


def check_outputs(inputs: list[Path | None], **destinations: Path | None) -> None:
    """Every output path (``out``, ``report``, ``plot_path``) writable, of a known kind, not an input file,
    not one of gpuplan's own files and not the file of another output (through a link too), checked before
    any work so that a bad path fails fast and nothing else is written. ``--out -`` is standard output."""
    kinds = {
        "plot_path": (output.PLOT_SUFFIXES, "chart"),
        "report": (output.REPORT_SUFFIXES, "report"),
        "out": (None, "launcher config"),
        "save": ((".yaml", ".yml"), "job file"),
    }
    seen: list[tuple[Path, Path, str]] = []  # (the file written, as given, flag)
    for parameter, path in destinations.items():
        if path is None or (parameter == "out" and is_stdout(path)):
            continue
        suffixes, what = kinds[parameter]
        field = "plot" if parameter == "plot_path" else parameter
        if is_stdout(path):
            raise ArgumentError(
                f"'-' (standard output) cannot take a {what}, which is written to a file; give a file name ending "
                f"in {', '.join((suffixes or ())[:-1])} or {(suffixes or ('',))[-1]}",
                field=field,
            )
        check_working_folder(**{parameter: path})
        output.check_destination(path, field, suffixes=suffixes, inputs=inputs, what=what)
        if parameter == "plot_path":
            require_plotting()  # no matplotlib: say so before solving, not after
        written = Path(os.path.realpath(path))  # a link is written through to the file it names
        for other_written, other, other_field in seen:
            if written == other_written or _same_file(written, other_written):
                also = "" if str(other) == str(path) else f" ({output.shown(other)})"
                raise ArgumentError(
                    f"{output.shown(path)} is also the {flag_of(other_field)} file{also}; give each output its own "
                    "file",
                    field=field,
                )
        seen.append((written, path, field))


def check_followable(path: Path | None, parameter: str, what: str) -> None:
    """An input path that can be followed: a link loop, a dangling link or a name too long is bad input naming
    ``parameter`` (where ``Path.is_file`` would raise); nothing there at all is left to its reader to say."""
    try:
        if path is None or os.stat(path):
            return
    except FileNotFoundError:
        if not os.path.islink(path or ""):
            return
    except (OSError, ValueError):
        pass
    try:
        resolved(path or "", what)
    except GpuplanError as exc:
        raise ArgumentError(exc.reason, field=parameter) from None


def is_stdout(path: Path | None) -> bool:
    """``-`` for a path: standard output, by the Unix convention."""
    return path is not None and str(path) == "-"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Tables: print only the one-line answer."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print version and exit."),
) -> None:
    _state["debug"] = debug
    _state["quiet"] = quiet


def _emit(result: Any, fmt: Format, printer: Callable) -> None:
    if fmt == Format.table:
        console = render.console()
        if _state["quiet"]:
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


def _working_folder_gone() -> bool:
    """Whether the folder gpuplan was started in has been deleted (or moved) since: a relative path then
    names nothing, and ``os.getcwd`` (``os.path.abspath``, ``realpath``) raises FileNotFoundError."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


_GONE_FIX = "cd to a folder that exists, or give an absolute path"


def check_working_folder(**values: Any) -> None:
    """Every relative path among a command's arguments (Path values; a catalog or model name that reads as
    a path) still names a place: where the working folder has been deleted none does, which is bad input
    naming the flag (it was exit 1 from inside ``os.path.abspath``, or 'job file not found')."""
    for parameter, value in values.items():
        if isinstance(value, Path):
            text = str(value)
        elif isinstance(value, str) and parameter in ("catalog", "name"):
            text = value
            if Path(text).suffix.lower() not in (".yaml", ".yml", ".json") and os.sep not in text:
                continue  # a bundled catalog or preset name
        else:
            continue
        if text == "-" or os.path.isabs(text) or not _working_folder_gone():
            continue
        raise ArgumentError(
            f"{printable(text)} is relative to the working folder, which no longer exists (deleted or moved "
            f"since gpuplan was started in it); {_GONE_FIX}",
            field="plot" if parameter == "plot_path" else parameter,
        )


def handled(fn: Callable) -> Callable:
    """Bad input -> one paragraph and exit 2; a bug -> exit 1 (traceback with --debug)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        forget_reads()  # outputs are checked against the files this command reads (``present.output``)
        try:
            check_working_folder(**kwargs)
            answer = fn(*args, **kwargs)
            sys.stdout.flush()  # a full disk under a redirected stdout shows here, not at exit
            return answer
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except OSError as exc:
            if exc.errno == errno.ENOENT and _working_folder_gone():  # a relative path no check above saw
                _say(
                    f"error: the working folder no longer exists (deleted or moved since gpuplan started); {_GONE_FIX}"
                )
                raise typer.Exit(2) from None
            if exc.errno not in STDOUT_UNWRITABLE:
                raise _internal(exc) from None
            raise typer.Exit(_stdout_full(exc)) from None
        except KeyboardInterrupt as exc:
            # Never an answer: a stopped solve would read as 'infeasible' or a worse plan.
            raise typer.Exit(_stopped(exc)) from None
        except GpuplanError as exc:
            if _state["debug"]:
                traceback.print_exc()
            _say(f"error: {error_text(exc)}")
            raise typer.Exit(2) from None
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            raise _internal(exc) from None

    return wrapper


# Errors of a write to a full device or a descriptor not open for writing: every file gpuplan writes goes
# through ``output.atomic_path``, which names the file, so one reaching the top is a write to stdout
# (redirected to a full disk, or opened read-only: ``1<file``).
STDOUT_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
STDOUT_UNWRITABLE = STDOUT_FULL | {errno.EBADF}


def _stopped(exc: BaseException) -> int:
    """Say why the command stopped before answering; the exit code (130 for ^C, 143 for SIGTERM, 129 for
    SIGHUP: ``stops.STOPS``)."""
    code, line = stops.stop_of(exc)
    _say(line)
    _state["stopped"] = True
    return code


def _say(text: str) -> None:
    """A line on stderr, if stderr takes it: where it cannot be written (``2>/dev/full``) the exit code
    alone tells, and a failed notice must not turn a written file or a refusal into exit 1."""
    with contextlib.suppress(OSError):
        typer.echo(text, err=True)


def _stdout_full(exc: OSError) -> int:
    """Say that standard output (redirected to a full disk, or not open for writing) took no answer; the
    exit code, 2."""
    _discard_stdout()
    fix = (
        "free some space where it goes, or redirect it to another device"
        if exc.errno in STDOUT_FULL
        else "open it for writing (gpuplan ... > answer.txt)"
    )
    _say(f"error: standard output: cannot write the answer ({exc.strerror}); {fix}")
    return 2


def _internal(exc: Exception) -> typer.Exit:
    """A bug: say so on stderr (the traceback with --debug) and exit 1."""
    if _state["debug"]:
        traceback.print_exception(exc)
    _say(f"internal error: {exc.__class__.__name__}: {exc} (rerun with --debug and report it)")
    return typer.Exit(1)


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so what is still buffered for it does not fail again at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _export_text(plan, kind: str, problem, catalog) -> str:
    """The launcher config ``kind`` for ``plan``: the MoE dispatcher its time assumed, its GPU's vendor."""
    facts = {"moe_dispatcher": problem.assumptions.moe_dispatcher, "vendor": vendor_in(catalog, plan.sku)}
    return export(plan, kind, job=problem.job, **facts)


def _write_export(config: str, kind: str, out: Path) -> str:
    """The launcher config written to ``out``; what to say once every file is in place."""
    output.write_text(out, config, "out")
    return f"wrote {kind} config to {output.shown(out)}"


def check_export(kind: str | None, out: Path | None = None, fmt: Format | None = None) -> Path | None:
    """A known --export kind, checked before any work; without --out (or with ``--out -``) it takes stdout,
    where a JSON or YAML answer (-f) was asked for too: a script reading that got the launcher config
    instead. The file to write the config to: None for stdout."""
    if kind is not None and find_launcher(kind) is None:
        raise ArgumentError(unknown_kind(kind), field="export")
    to_stdout = out is None or is_stdout(out)
    if kind is not None and to_stdout and fmt is not None and fmt != Format.table:
        raise ArgumentError(
            f"{'--out - is' if out is not None else '--export without --out writes the launcher config to'} "
            f"standard output, where the {fmt.value} answer was asked for too; give --out FILE for the config, or "
            "drop --format",
            field="out" if out is not None else "export",
        )
    return None if to_stdout else out


def _spot_policy(spot: bool | None) -> str | None:
    """--spot: spot only; --no-spot: never; neither: the file's setting."""
    return None if spot is None else ("only" if spot else "never")


def _path(catalog: str | None) -> Path | None:
    """A --catalog given as a file (an input no output may overwrite); None for a bundled name."""
    return Path(catalog) if catalog and os.path.isfile(catalog) else None  # False for a name too long


def _inputs(job: Path | None, problem, catalog) -> list[Path | None]:
    """Every file a loaded job was read from: the job, its catalog files (includes and hardware) and its
    model's config.json; no output may overwrite one."""
    return [
        job,
        *map(Path, catalog.source_files),
        *([Path(problem.job.model.config_path)] if problem.job.model.config_path else []),
    ]


def _names(text: str | None, field: str = "gpu_types") -> list[str]:
    """A comma-separated flag as names; given but naming none (``,,,``) is bad input, not "no filter"."""
    names = [t.strip() for t in (text or "").split(",") if t.strip()]
    if text is not None and not names:
        raise ArgumentError(f"{text!r} names no GPU type; give one or more, e.g. B200,B300", field=field)
    return names


def _question(*values) -> dict:
    """The job flags' values, in ``question.JOB_FLAGS`` order, by field."""
    return dict(zip(JOB_FLAGS, values, strict=True))


def _problem(
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
        _say(f"wrote the job to {output.shown(save)}")
    return problem, cat


def _recompute(text: str | None) -> str | None:
    """--recompute read as a strategy's recompute (none, selective, full, layers:N); bad input names the flag."""
    if text is None:
        return None
    try:
        return units.parse_recompute(text, "--recompute")
    except GpuplanError as exc:
        raise ArgumentError(exc.reason, field="recompute") from None


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


def _exportable(result, export_kind: str | None, problem) -> None:
    """A checked configuration --export may write: one that fits, with the memory headroom, and runs."""
    if not export_kind:
        return
    if not result.fits:
        # a launcher config for a layout that runs out of memory would start and then fail
        m = result.plan.memory_gib
        keep = headroom_gib(problem.constraints.memory_headroom, m.capacity)
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


def _answer(result, problem, fmt: Format, printer: Callable, data: Callable | None = None) -> None:
    """``_emit`` with the printer told the job's memory headroom (stated in a note, a line on the memory bar, and
    'at the edge' where a plan has little memory left beyond it)."""
    headroom = problem.constraints.memory_headroom
    _emit(
        result if data is None or fmt == Format.table else data(result),
        fmt,
        functools.partial(printer, headroom=headroom),
    )


@app.command()
@handled
def check(
    job: Path | None = JobArg,
    model: str | None = ModelOpt,
    method: str | None = MethodJobOpt,
    tokens: str | None = TokensOpt,
    seq_len: str | None = SeqLenOpt,
    global_batch: str | None = GlobalBatchOpt,
    precision: str | None = PrecisionOpt,
    optimizer: str | None = OptimizerOpt,
    lora_rank: int | None = LoraRankOpt,
    save: Path | None = SaveOpt,
    headroom: str | None = HeadroomOpt,
    sku: str | None = typer.Option(
        None,
        "--sku",
        help="GPU by name or alias (B200, h100, rtx-pro-6000-blackwell), or an offer by name (a plan's offer: "
        "nodus-b200, or 'nodus-b200 (spot)' for its spot price).",
    ),
    gpus: int | None = typer.Option(None, "--gpus", help="Total GPUs."),
    role: list[str] | None = typer.Option(None, "--role", help="A role job's split: target=3xRTX-PRO-6000 (repeat)."),
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
    compile_model: bool | None = CompileOpt,
    cp: int | None = typer.Option(None, "--cp", min=1, help="Context parallelism: GPUs that split each sequence."),
    ep: int | None = typer.Option(None, "--ep", min=1, help="Expert parallelism (MoE): GPUs that split the experts."),
    expert_tp: int | None = typer.Option(
        None,
        "--expert-tp",
        min=1,
        help="Tensor parallelism inside each expert when it differs from --tp (Megatron-Core parallel folding: "
        "EP x expert TP over the TP x DP x CP GPUs).",
    ),
    virtual_stages: int | None = typer.Option(
        None, "--virtual-stages", min=1, help="Interleaved pipeline chunks per GPU (1 = plain 1F1B)."
    ),
    micro_batch: int | None = typer.Option(None, "--micro-batch", min=1, help="Sequences per micro-batch (any)."),
    grad_accum: int | None = typer.Option(
        None,
        "--grad-accum",
        min=1,
        help="Micro-batches per optimizer step (gradient accumulation); with job.global_batch it must give that "
        "batch (DP x micro-batch x accumulation), without it at most the batch cap gpuplan chooses within.",
    ),
    recompute: str | None = typer.Option(
        None,
        "--recompute",
        help="Activation recompute: none, selective, full (every layer), op (per-op selective: torchtitan's SAC "
        "saves every other matmul's output) or layers:N (full recompute of N layers of each pipeline stage, the "
        "rest keep their activations; Megatron's block method, torchtune's every k-th layer); default: gpuplan "
        "chooses, the fewest layers that fit where the framework recomputes some only.",
    ),
    offload: OffloadOpt | None = typer.Option(
        None,
        "--offload",
        help="Optimizer state in CPU memory: none, optimizer, or auto (gpuplan decides); default: the job file's.",
    ),
    deadline: str | None = typer.Option(None, "--deadline", help="Finish within, e.g. 5d, 36h."),
    budget: str | None = typer.Option(None, "--budget", help="Spend at most, e.g. 20000, $20k."),
    deadline_quantile: str | None = typer.Option(
        None, "--deadline-quantile", help="p50 or p90: which time must meet the deadline."
    ),
    compare: bool = typer.Option(
        True, "--compare/--no-compare", help="Compare with the best plan under the same constraints."
    ),
    spot: bool = typer.Option(False, "--spot", help="Use the offer's spot price (with expected preemptions)."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write the memory breakdown chart (PNG, SVG or PDF)."),
    export_kind: str | None = ExportOpt,
    out: Path | None = OutOpt,
    measured: list[str] | None = typer.Option(
        None,
        "--measured",
        help="A short-run measurement to calibrate from, e.g. '4xRTX-PRO-6000:14.8k tok/s' (repeatable).",
    ),
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Verdict on a hand-picked configuration: fits or not, memory breakdown, speed, cost, distance to the optimum."""
    _state["quiet"] = _state["quiet"] or quiet
    if role or sku is None or gpus is None:  # a role job's split (docs/roles.md), or --sku and --gpus missing
        wanted = roles.Outputs(export_kind, check_export(export_kind, out, fmt), plot_path)
        return roles.answered(_answer, roles.checked(job, role, sku, gpus, catalog, deadline, budget, wanted), fmt)
    check_flags(
        gpus=gpus,
        nodes=nodes,
        tp=tp,
        pp=pp,
        cp=cp,
        ep=ep,
        expert_tp=expert_tp,
        shard_degree=shard_degree,
        micro_batch=micro_batch,
        grad_accum=grad_accum,
        deadline=deadline,
        budget=budget,
        measured=measured,
    )
    out = check_export(export_kind, out, fmt)
    check_outputs([job, _path(catalog)], plot_path=plot_path, out=out if export_kind else None, save=save)
    problem, cat = _problem(
        job,
        _question(model, method, tokens, seq_len, global_batch, precision, optimizer, lora_rank),
        save,
        catalog,
        deadline=deadline,
        budget=budget,
        measured=measured,
        deadline_quantile=deadline_quantile,
        headroom=headroom,
        compile=compile_model,
    )
    check_outputs(_inputs(job, problem, cat), plot_path=plot_path, out=out if export_kind else None, save=save)
    roles.one_model(problem, "check")
    request = CheckRequest(
        sku,
        gpus,
        nodes=nodes,
        tp=tp,
        pp=pp,
        zero=zero,
        micro_batch=micro_batch,
        recompute=_recompute(recompute),
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
    check_gpu_names(cat, "sku", [request.sku], offers=True)  # a plan's "<offer> (spot)" named as that offer
    check_gpu_names(cat, "measured", [parse_measurement(m).sku for m in measured or []])
    result = api.check(problem, request, catalog=cat)
    _exportable(result, export_kind, problem)
    said: list[str] = []
    config = _export_text(result.plan, export_kind, problem, cat) if export_kind else None
    with output.together():  # all files or none: a full disk at the chart leaves the old config too
        if config is not None and out is not None:
            said.append(_write_export(config, export_kind or "", out))
        if plot_path:
            with output.atomic_path(plot_path, "plot") as tmp:
                memory_plot(result.plan, tmp)
    for line in said:
        _say(line)
    if config is not None and out is None:  # the config is the answer on stdout, after the chart is written
        typer.echo(config, nl=False)
        return
    _answer(result, problem, fmt, render.print_check, render.check_data)


def _exportable_best(result, export_kind: str | None) -> None:
    """A solve --export writes its best plan: none, nothing to export."""
    if export_kind and result.best is None:
        raise ArgumentError(
            "no plan satisfies the constraints, so there is nothing to export; see 'gpuplan solve' "
            "without --export for what binds",
            field="export",
        )


@app.command()
@handled
def solve(
    job: Path | None = JobArg,
    model: str | None = ModelOpt,
    method: str | None = MethodJobOpt,
    tokens: str | None = TokensOpt,
    seq_len: str | None = SeqLenOpt,
    global_batch: str | None = GlobalBatchOpt,
    precision: str | None = PrecisionOpt,
    optimizer: str | None = OptimizerOpt,
    lora_rank: int | None = LoraRankOpt,
    save: Path | None = SaveOpt,
    headroom: str | None = HeadroomOpt,
    objective: Objective | None = typer.Option(
        None, "--objective", help="Minimise cost or time (default: the file's, else cost)."
    ),
    deadline: str | None = typer.Option(None, "--deadline", help="Finish within, e.g. 5d, 36h."),
    budget: str | None = typer.Option(None, "--budget", help="Spend at most, e.g. 20000, $20k."),
    max_nodes: int | None = typer.Option(None, "--max-nodes", help="At most this many nodes."),
    max_gpus: int | None = typer.Option(None, "--max-gpus", help="At most this many GPUs."),
    gpu_types: str | None = typer.Option(None, "--gpu-types", help="Only these GPUs, comma-separated: B200,B300."),
    min_memory: str | None = typer.Option(None, "--min-memory", help="Only GPUs with at least this memory (160Gi)."),
    deadline_quantile: str | None = typer.Option(
        None, "--deadline-quantile", help="p50 or p90: which time must meet the deadline."
    ),
    measured: list[str] | None = typer.Option(
        None, "--measured", help="Short-run measurement, e.g. '4xRTX-PRO-6000:14.8k tok/s' (repeatable)."
    ),
    framework: str | None = FrameworkOpt,
    compile_model: bool | None = CompileOpt,
    spot: bool | None = SpotOpt,
    time_limit: str = typer.Option(
        "10", "--time-limit", help="Time limit for the whole command: seconds, or with a unit (90s, 2m)."
    ),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write the frontier chart (PNG, SVG or PDF)."),
    report: Path | None = typer.Option(None, "--report", help="Write a self-contained HTML report."),
    export_kind: str | None = ExportOpt,
    out: Path | None = OutOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """The optimal plan, the cost/time Pareto frontier, and why the other GPUs lost."""
    _state["quiet"] = _state["quiet"] or quiet
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
        [job, _path(catalog)], plot_path=plot_path, report=report, out=out if export_kind else None, save=save
    )
    problem, cat = _problem(
        job,
        _question(model, method, tokens, seq_len, global_batch, precision, optimizer, lora_rank),
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
        spot=_spot_policy(spot),
        headroom=headroom,
    )
    check_outputs(
        _inputs(job, problem, cat), plot_path=plot_path, report=report, out=out if export_kind else None, save=save
    )
    check_gpu_names(cat, "gpu_types", _names(gpu_types), offers=True)
    check_gpu_names(cat, "measured", [parse_measurement(m).sku for m in measured or []])
    if problem.job.roles is not None:  # GPUs split between roles (docs/roles.md)
        wanted = roles.Outputs(export_kind, out, plot_path or report)
        return roles.answered(_answer, roles.solved(problem, cat, wanted), fmt)
    limit_s = units.parse_time_limit_s(time_limit)
    table = api.candidate_table(problem, cat, time_limit_s=limit_s, started=started)
    result = api.plan(problem, catalog=cat, time_limit_s=limit_s, table=table, started=started)
    _exportable_best(result, export_kind)
    said: list[str] = []
    config = _export_text(result.best, export_kind, problem, cat) if export_kind else None
    # files first (a reader closing stdout early ends the process at its next write), all or none
    with output.together():
        if config is not None and out is not None:
            said.append(_write_export(config, export_kind or "", out))
        if plot_path:
            with output.atomic_path(plot_path, "plot") as tmp:
                frontier_plot(result, tmp)
        if report:
            page = html_report(f"gpuplan: {problem.job.name}", result, api.options(problem, table=table))
            output.write_text(report, page, "report")
            said.append(f"wrote report to {output.shown(report)}")
    for line in said:
        _say(line)
    if config is not None and out is None:  # the config is the answer on stdout, after the chart and report
        typer.echo(config, nl=False)
        return
    _answer(result, problem, fmt, render.print_solve)


@app.command()
@handled
def options(
    job: Path | None = JobArg,
    model: str | None = ModelOpt,
    method: str | None = MethodJobOpt,
    tokens: str | None = TokensOpt,
    seq_len: str | None = SeqLenOpt,
    global_batch: str | None = GlobalBatchOpt,
    precision: str | None = PrecisionOpt,
    optimizer: str | None = OptimizerOpt,
    lora_rank: int | None = LoraRankOpt,
    save: Path | None = SaveOpt,
    deadline: str | None = typer.Option(None, "--deadline", help="Finish within, e.g. 5d, 36h."),
    budget: str | None = typer.Option(None, "--budget", help="Spend at most, e.g. 20000, $20k."),
    max_nodes: int | None = typer.Option(None, "--max-nodes", help="At most this many nodes."),
    gpu_types: str | None = typer.Option(None, "--gpu-types", help="Only these GPUs, comma-separated: B200,B300."),
    min_memory: str | None = typer.Option(None, "--min-memory", help="Only GPUs with at least this memory (160Gi)."),
    framework: str | None = FrameworkOpt,
    compile_model: bool | None = CompileOpt,
    spot: bool | None = SpotOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Every hardware row considered, with its best strategy, time, cost and what rejected it."""
    _state["quiet"] = _state["quiet"] or quiet
    check_flags(deadline=deadline, budget=budget, max_nodes=max_nodes, min_memory=min_memory)
    problem, cat = _problem(
        job,
        _question(model, method, tokens, seq_len, global_batch, precision, optimizer, lora_rank),
        save,
        catalog,
        deadline=deadline,
        budget=budget,
        max_nodes=max_nodes,
        gpu_types=gpu_types,
        min_memory=min_memory,
        framework=framework,
        compile=compile_model,
        spot=_spot_policy(spot),
    )
    check_gpu_names(cat, "gpu_types", _names(gpu_types), offers=True)
    roles.one_model(problem, "options")
    _answer(api.options(problem, catalog=cat), problem, fmt, render.print_options)


@app.command("catalog")
@handled
def catalog_cmd(
    name: str = typer.Argument("default", help="Bundled catalog name or a YAML path; or 'import skypilot'."),
    source: str | None = typer.Argument(None, help="With 'import': skypilot.", show_default=False),
    min_memory: str | None = typer.Option(None, "--min-memory", help="Only GPUs with at least this memory (160Gi)."),
    types: str | None = typer.Option(None, "--types", help="Only these GPUs, comma-separated."),
    from_dir: Path | None = typer.Option(
        None, "--from", help="import: SkyPilot's catalog folder or a vms.csv (default ~/.sky/catalogs, newest vN)."
    ),
    clouds: str | None = typer.Option(None, "--clouds", help="import: only these clouds, e.g. aws,gcp,lambda,runpod."),
    regions: str | None = typer.Option(
        None, "--regions", help="import: an offer per region of these (default: each instance type's cheapest region)."
    ),
    max_nodes: int = typer.Option(
        1, "--max-nodes", min=1, help="import: the nodes one job may rent of each offer (SkyPilot publishes no supply)."
    ),
    out: Path | None = typer.Option(None, "--out", help="import: the catalog file to write (default: print it)."),
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """List a catalog's GPUs and offers: memory in GB and GiB, dense BF16 TFLOPS, bandwidths, price. 'gpuplan
    catalog import skypilot --out FILE' writes a catalog of SkyPilot's published prices."""
    _state["quiet"] = _state["quiet"] or quiet
    if name == "import":
        _import_catalog(source, from_dir, clouds, regions, max_nodes, out)
        return
    if source is not None:
        raise ArgumentError(f"unexpected {source!r}: 'catalog' takes one name (or 'import skypilot')", field="name")
    check_flags(min_memory=min_memory)
    cat = load_catalog(name)
    floor = None
    if min_memory:
        try:
            floor = parse_bytes(min_memory, "a memory size")
        except GpuplanError as exc:
            raise ArgumentError(exc.reason, field="min_memory") from None
    wanted = _names(types, "types") if types is not None else None
    check_gpu_names(cat, "types", wanted or [])
    rows = render.catalog_rows(catalog_entries(cat, wanted, floor))
    if fmt == Format.table and _state["quiet"]:
        typer.echo(render.catalog_headline(cat.name, rows))
    elif fmt == Format.table:
        render.print_catalog(cat.name, rows, render.console())
    else:
        _emit({"catalog": cat.name, "description": cat.description, "rows": rows}, fmt, lambda r, c: None)


def _import_catalog(
    source: str | None, from_dir: Path | None, clouds: str | None, regions: str | None, max_nodes: int, out: Path | None
) -> None:
    """``gpuplan catalog import skypilot``: SkyPilot's vms.csv prices as a catalog file."""
    if source != "skypilot":
        raise ArgumentError(
            f"catalog import reads SkyPilot's catalogs: 'gpuplan catalog import skypilot', got {source!r}", field="name"
        )
    check_flags(max_nodes=max_nodes)
    check_outputs([from_dir], out=out)
    check_followable(from_dir, "from_dir", "SkyPilot catalog")
    wanted_clouds = [c.strip().lower() for c in clouds.split(",") if c.strip()] if clouds else None
    wanted_regions = [r.strip() for r in regions.split(",") if r.strip()] if regions else None
    # never --out onto a vms.csv it reads (or a link to one): the import would overwrite its own input
    skypilot.check_out(out, skypilot.catalog_files(from_dir or skypilot.default_source(), wanted_clouds))
    document, imported = api.import_skypilot(from_dir, wanted_clouds, wanted_regions, max_nodes)
    left_out = "; ".join(f"{n} x {why}" for why, n in sorted(imported.left_out.items(), key=lambda kv: -kv[1]))
    header = [
        f"# {len(document['offers'])} offers imported by gpuplan {__version__} from SkyPilot's catalogs on "
        f"{dt.date.today().isoformat()}:",
        *(f"#   {f}" for f in imported.files),
        "# Prices per GPU-hour (the instance's price / its GPUs), each instance type's cheapest region"
        + (" of those asked for" if wanted_regions else "")
        + "; 'checked' is the file's date.",
        f"# max_nodes {max_nodes}: SkyPilot publishes no supply; set it to the nodes you can rent.",
    ]
    if left_out:
        header.append(f"# Rows left out: {left_out}"[:2000])
    text = "\n".join(header) + "\n" + yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    if out is None:
        typer.echo(text, nl=False)
        return
    output.write_text(out, text, "out")
    read_as = f"; {'; '.join(imported.notes)}" if imported.notes else ""
    _say(
        f"wrote {len(document['offers'])} offers to {printable(str(out))}"
        + (f" ({left_out})" if left_out else "")
        + read_as
    )


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
    _state["quiet"] = _state["quiet"] or quiet
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
    cat = problem_catalog(problem, catalog) if problem is not None else load_catalog(catalog or "default")
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
    _emit(result, fmt, render.print_capacity)


@app.command("portfolio")
@handled
def portfolio_cmd(
    file: Path = typer.Argument(..., help="Portfolio file (YAML): pools, budget, horizon, jobs.", show_default=False),
    time_limit: str = typer.Option(
        "60", "--time-limit", help="Time limit for the whole command: seconds, or with a unit (90s, 5m)."
    ),
    workers: int = typer.Option(2, "--workers", min=1, help="CP-SAT workers (1 = fully deterministic)."),
    plot_path: Path | None = typer.Option(None, "--plot", help="Write a Gantt + pool use chart (PNG, SVG or PDF)."),
    spot: bool | None = SpotOpt,
    catalog: str | None = CatalogOpt,
    fmt: Format = FormatOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Schedule many jobs on shared GPU pools within one budget: plan, start and end per job, what was dropped."""
    _state["quiet"] = _state["quiet"] or quiet
    started = time.perf_counter()  # --time-limit bounds the whole command, reading the files included
    check_flags(time_limit_s=time_limit, workers=workers)
    check_outputs([file, _path(catalog)], plot_path=plot_path)
    pf = load_portfolio(file)
    if spot is not None:
        pf = pf.model_copy(update={"spot": _spot_policy(spot)})
    cat = load_catalog(catalog) if catalog else None
    progress = _progress_printer() if fmt == Format.table else None
    result = api.portfolio(
        pf,
        catalog=cat,
        time_limit_s=units.parse_time_limit_s(time_limit),
        workers=workers,
        progress=progress,
        started=started,
    )
    if plot_path and result.schedule:  # files first, as in solve
        with output.atomic_path(plot_path, "plot") as tmp:
            portfolio_plot(result, tmp)
    _emit(result, fmt, render.print_portfolio)


@app.command("models")
@handled
def models_cmd(fmt: Format = FormatOpt) -> None:
    """List the bundled model presets (use them as job.model: {preset: NAME})."""
    rows = answers.model_rows(presets())
    if fmt != Format.table:
        _emit({"models": rows}, fmt, lambda r, c: None)
        return
    # the sources are sentences: in 'gpuplan model NAME' and the JSON, so the table fits 100 columns
    table = Table(title="Model presets (gpuplan model NAME shows one with its source)", title_justify="left")
    for col in ("name", "params", "active", "layers", "hidden", "experts"):
        table.add_column(col, justify="left" if col == "name" else "right")
    for r in rows:
        table.add_row(
            r["name"],
            fmt_count(r["params"]),
            fmt_count(r["active_params"]),
            str(r["layers"]),
            str(r["hidden"]),
            f"{r['experts']} (top {r['experts_per_token']})" if r["experts"] else "-",
        )
    render.console().print(table)


@app.command("model")
@handled
def model_cmd(
    name: str = typer.Argument(
        ...,
        help="A config.json or the model folder holding it (a path that exists comes first, as in solve --model), "
        "else a preset name, else a Hugging Face Hub id (meta-llama/Llama-3.1-8B).",
    ),
    fmt: Format = FormatOpt,
) -> None:
    """Show one model: total and active parameters and the shapes, from a preset or a config.json."""
    try:
        data = expand_models({"job": {"model": model_value(name)}})
    except GpuplanError as exc:
        if exc.source is None:  # the name itself (an unknown preset); errors inside a config.json name the file
            raise ArgumentError(exc.reason, field="name") from None
        raise
    spec = parse_model(ModelSpec, data["job"]["model"], name, "job.model")
    data = spec.model_dump(exclude_none=True)
    data.setdefault("active_params", data["params"])
    preset = presets().get(name.lower())
    if preset is not None:
        data["source"] = preset["published"]["source"]
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


@app.command("serve")
@handled
def serve_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (127.0.0.1: this machine alone)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port to listen on (0: any free one)."),
    catalog: list[str] | None = typer.Option(
        None,
        "--catalog",
        "-c",
        help="A catalog (bundled name or YAML path) requests may name, besides the bundled ones; the first is the "
        "default for a body that names none (repeatable).",
    ),
    open_page: bool = typer.Option(False, "--open", help="Open the page in the web browser once it listens."),
    allowed_host: list[str] | None = typer.Option(
        None,
        "--allowed-host",
        help="A Host name the service answers besides its own address, as a reverse proxy sends it (NAME, or "
        "NAME:PORT for that port alone; * any; repeatable). Other names are refused (421): a page of another "
        "domain that resolves here (DNS rebinding).",
    ),
    cors: list[str] | None = typer.Option(
        None,
        "--cors",
        help="An origin of another site whose pages may call the API (https://app.example; * any; repeatable). "
        "Requests with another Origin are refused (403).",
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        help="The token every POST must carry as 'Authorization: Bearer TOKEN' (16 characters or more; default "
        "GPUPLAN_TOKEN). Bound beyond loopback without one, one is made and printed, and the page's printed "
        "address carries it.",
    ),
) -> None:
    """Serve the planner over HTTP until ^C: a JSON API (POST /v1/solve, /v1/check, /v1/options, /v1/portfolio,
    /v1/export; GET /docs) and a page at / to explore plans. Only the page's own origin drives it (see
    --allowed-host, --cors, --token). Needs FastAPI and uvicorn, the serve extra."""
    server.serve(
        host, port, catalog or [], open_page, allowed_hosts=allowed_host or [], cors_origins=cors or [], token=token
    )


# Seconds between progress lines when stderr is not a terminal (a CI log): a 7-minute portfolio had printed
# nothing until it ended.
PIPED_PROGRESS_EVERY_S = 5.0


def _progress_printer() -> Callable[[str], None]:
    """Progress lines on stderr: each one at a terminal, at most one every ``PIPED_PROGRESS_EVERY_S`` seconds
    (and the first) where stderr is a file or a pipe."""
    if sys.stderr.isatty():
        return lambda line: _say(line)
    last = [-math.inf]

    def throttled(line: str) -> None:
        now = time.monotonic()
        if now - last[0] >= PIPED_PROGRESS_EVERY_S:
            last[0] = now
            _say(line)

    return throttled


# Seconds the main thread has to stop by itself after ^C before the process exits regardless: by then it
# is inside a solver call, which would only return at its time limit.
INTERRUPT_GRACE_S = 2.0


def _replace_unencodable() -> None:
    """Print characters the output encoding lacks (PYTHONIOENCODING=ascii, a C locale) as '?', not a crash."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="replace")


def _watch_interrupts() -> None:
    """^C, SIGTERM and SIGHUP become exit 130, 143 and 129 with their line on stderr (``stops.STOPS``),
    whatever is running, and never an answer.

    During the command the signal raises its KeyboardInterrupt in the main thread at its next Python line
    (``stops.install``; ``handled`` turns it into the exit code), but inside a solver call that line comes
    only at the time limit. So the signal also wakes a watcher thread (``signal.set_wakeup_fd``), which
    gives the main thread ``INTERRUPT_GRACE_S`` to stop by itself and otherwise removes half-written output
    files and ends the process itself."""
    if threading.current_thread() is not threading.main_thread():
        return
    stops.install(raising=True)
    try:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (AttributeError, OSError, ValueError):  # no pipes or wakeup fds here: KeyboardInterrupt alone
        return

    def watch() -> None:
        while True:  # the wakeup fd receives signal numbers
            seen = [signum for signum in os.read(read_fd, 64) if signum in stops.STOPS]
            if seen:
                break
        time.sleep(INTERRUPT_GRACE_S)
        stops.stop_now(stops.first_signal() or seen[0])

    threading.Thread(target=watch, name="gpuplan-interrupt", daemon=True).start()


def _die_on_closed_pipe() -> None:
    """A reader that closes stdout early (``gpuplan solve ... | head -1``) ends the process as it ends
    ``yes | head``: by SIGPIPE (status 141 in a shell), silently. Python ignores SIGPIPE, and rich and
    click then answer the failed write with exit 1, which by our codes is a bug. Output files are written
    before stdout and atomically, so none is left half-written."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def main() -> None:
    """Run the command line; exits with its code (``SystemExit``). The process entry point is
    ``launch.main``, which ends the process without the interpreter's shutdown."""
    _die_on_closed_pipe()
    if sys.stdout is None:  # started with stdout closed (``>&-``): no answer could be written anywhere
        _say("error: standard output is closed, so no answer can be written; run gpuplan with it open (> answer.txt)")
        sys.exit(2)
    _replace_unencodable()
    _watch_interrupts()
    code: Any = 0
    try:
        try:
            app()
        except SystemExit as exc:
            code = exc.code  # click reports usage errors with code 2 already; keep codes as they are
        except OSError as exc:  # --help or --version (click writes them before any command runs), or a file
            code = _before_any_command(exc)  # --install-completion writes
        stopped_by = stops.first_signal()
        if stopped_by is not None and not _state["stopped"]:
            # a signal outside a command: typer makes it exit 130 silently (after the command returned: the
            # context's clean-up), click 'Aborted!' with exit 1
            raise stops.STOPS[stopped_by][2]
        with contextlib.suppress(ValueError):  # what is still buffered for stdout, before the exit code is final
            sys.stdout.flush()
    except KeyboardInterrupt as exc:
        code = _stopped(exc)
    except OSError as exc:
        code = _stdout_full(exc) if exc.errno in STDOUT_UNWRITABLE else _internal(exc).exit_code
    stops.ending()  # from here a signal ends the process at once, with its code and line
    sys.exit(code)


def _before_any_command(exc: OSError) -> int:
    """The exit code for an OSError raised before any command ran: stdout not taking --help or --version,
    or --install-completion unable to write a shell's start-up file (a folder where ~/.bashrc should be, a
    read-only one); anything else is a bug."""
    if exc.errno in STDOUT_UNWRITABLE and exc.filename is None:
        return _stdout_full(exc)
    if exc.filename is not None and any(a.startswith("--install-completion") for a in sys.argv[1:]):
        name = printable(os.fsdecode(exc.filename))
        _say(
            f"error: command line, option '--install-completion': cannot write {name} "
            f"({exc.strerror or exc.__class__.__name__}); make it a file you can write, or install the completion "
            "by hand: gpuplan --show-completion SHELL prints the lines to add to your shell's start-up file"
        )
        return 2
    return _internal(exc).exit_code


if __name__ == "__main__":
    main()
