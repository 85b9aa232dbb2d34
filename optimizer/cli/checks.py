"""The checks a command makes before any work: each flag within its range, each GPU name in the catalog, each
output path writable and no input's, the --export kind known and its destination free of another answer."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cli_options import Format
from ..errors import ArgumentError, GpuplanError
from ..inputs import units
from ..inputs.catalog import find_sku, offers_for
from ..inputs.layout_fields import LAYOUT_RANGES
from ..inputs.reader import resolved
from ..present import output
from ..present.exports import find_launcher, unknown_kind
from ..present.plot import require_plotting
from .handling import check_working_folder, flag_of

# Flag (the API parameter it sets) -> its range in ``units.LIMITS``, and how its text reads as a number.
_FLAG_RANGES = {
    **LAYOUT_RANGES,  # check's layout flags (inputs/layout_fields.py)
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


def names(text: str | None, field: str = "gpu_types") -> list[str]:
    """A comma-separated flag as names; given but naming none (``,,,``) is bad input, not "no filter"."""
    names = [t.strip() for t in (text or "").split(",") if t.strip()]
    if text is not None and not names:
        raise ArgumentError(f"{text!r} names no GPU type; give one or more, e.g. B200,B300", field=field)
    return names
