"""How a command ends: bad input as one paragraph and exit 2, a bug as exit 1 (its traceback with --debug), a
stop (^C, SIGTERM, SIGHUP) as its code and line, and a standard output that takes no answer as exit 2
(``handled`` wraps every command). ``state`` holds the root options (--debug, --quiet) and whether the stop's
line was said."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from .. import stops
from ..errors import ArgumentError, GpuplanError, printable
from ..inputs.reader import forget_reads

state = {"debug": False, "quiet": False, "stopped": False}  # stopped: the stop's line was said

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
                say(f"error: the working folder no longer exists (deleted or moved since gpuplan started); {_GONE_FIX}")
                raise typer.Exit(2) from None
            if exc.errno not in STDOUT_UNWRITABLE:
                raise internal(exc) from None
            raise typer.Exit(stdout_full(exc)) from None
        except KeyboardInterrupt as exc:
            # Never an answer: a stopped solve would read as 'infeasible' or a worse plan.
            raise typer.Exit(stopped(exc)) from None
        except GpuplanError as exc:
            if state["debug"]:
                traceback.print_exc()
            say(f"error: {error_text(exc)}")
            raise typer.Exit(2) from None
        except Exception as exc:  # noqa: BLE001 - the last line of defence
            raise internal(exc) from None

    return wrapper


# Errors of a write to a full device or a descriptor not open for writing: every file gpuplan writes goes
# through ``output.atomic_path``, which names the file, so one reaching the top is a write to stdout
# (redirected to a full disk, or opened read-only: ``1<file``).
STDOUT_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


STDOUT_UNWRITABLE = STDOUT_FULL | {errno.EBADF}


def stopped(exc: BaseException) -> int:
    """Say why the command stopped before answering; the exit code (130 for ^C, 143 for SIGTERM, 129 for
    SIGHUP: ``stops.STOPS``)."""
    code, line = stops.stop_of(exc)
    say(line)
    state["stopped"] = True
    return code


def say(text: str) -> None:
    """A line on stderr, if stderr takes it: where it cannot be written (``2>/dev/full``) the exit code
    alone tells, and a failed notice must not turn a written file or a refusal into exit 1."""
    with contextlib.suppress(OSError):
        typer.echo(text, err=True)


def stdout_full(exc: OSError) -> int:
    """Say that standard output (redirected to a full disk, or not open for writing) took no answer; the
    exit code, 2."""
    discard_stdout()
    fix = (
        "free some space where it goes, or redirect it to another device"
        if exc.errno in STDOUT_FULL
        else "open it for writing (gpuplan ... > answer.txt)"
    )
    say(f"error: standard output: cannot write the answer ({exc.strerror}); {fix}")
    return 2


def internal(exc: Exception) -> typer.Exit:
    """A bug: say so on stderr (the traceback with --debug) and exit 1."""
    if state["debug"]:
        traceback.print_exception(exc)
    say(f"internal error: {exc.__class__.__name__}: {exc} (rerun with --debug and report it)")
    return typer.Exit(1)


def discard_stdout() -> None:
    """Point stdout at /dev/null, so what is still buffered for it does not fail again at exit."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
