"""How a signal stops gpuplan: a ^C (SIGINT), a ``kill`` or scheduler's SIGTERM and a closed terminal's
SIGHUP end it with one line on stderr and their own exit code (``STOPS``), from the first instruction
to the last: while the CLI's modules load (ortools, numpy, pydantic: a second or more, holding no
file), during a command, after the files were written and while the process exits.

Two modes. Until ``cli.process.main`` runs a command, and again once it has its exit code (``ending``), a
signal ends the process at once (``stop_now``: the atomic writer's temporary files removed, the line,
``os._exit``). During the command (``install(raising=True)``) it raises the signal's
``KeyboardInterrupt`` in the main thread, so that the command unwinds (``cli.handling.handled`` says the line),
and cli's watcher thread ends the process if the main thread is inside a solver call. ``finish`` ends
the process by ``os._exit`` after flushing its output, not through the interpreter's shutdown, in
which Python puts the signals back to their default action (a late ^C killed the process by SIGINT,
with no line). A signal ignored when gpuplan starts (``nohup`` ignores SIGHUP, a shell's background
job SIGINT) stays ignored. Nothing here imports more than the standard library: ``launch`` installs
it before the CLI's modules load.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
from typing import Any, NoReturn


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler or ``kill``): stopped like ^C, with exit 143 and 'terminated'."""


class HungUp(KeyboardInterrupt):
    """SIGHUP (the terminal closed): stopped like ^C, with exit 129 and 'hung up'."""


# signal -> (exit code, the line on stderr, the exception raised during a command); 128 + the number
STOPS: dict[int, tuple[int, str, type[KeyboardInterrupt]]] = {
    signal.SIGINT: (130, "interrupted", KeyboardInterrupt),
    signal.SIGTERM: (143, "terminated", Terminated),
}
if hasattr(signal, "SIGHUP"):
    STOPS[signal.SIGHUP] = (129, "hung up", HungUp)

_state: dict[str, Any] = {"raising": False, "first": None}


def stop_of(exc: BaseException) -> tuple[int, str]:
    """The exit code and line for a stopping exception (^C's for a plain KeyboardInterrupt)."""
    for code, line, kind in STOPS.values():
        if kind is not KeyboardInterrupt and isinstance(exc, kind):
            return code, line
    return STOPS[signal.SIGINT][:2]


def first_signal() -> int | None:
    """The first stop signal this process received, if any."""
    return _state["first"]


def stop_now(signum: int) -> NoReturn:
    """End the process now as ``signum`` asks: no temporary file of the atomic writer left, the line on
    stderr (if it takes it), the exit code."""
    code, line, _ = STOPS[signum]
    _discard_pending()
    with contextlib.suppress(OSError):
        os.write(2, line.encode() + b"\n")
    os._exit(code)


def _discard_pending() -> None:
    """Remove the atomic writer's temporary files still there (none once every write has ended)."""
    writer = sys.modules.get("optimizer.present.output")  # loaded only once a command may write files
    if writer is not None:
        with contextlib.suppress(Exception):
            writer.discard_pending()


def _on_signal(signum: int, frame: Any) -> None:
    if _state["first"] is not None:  # already stopping: the first signal decides how
        return
    _state["first"] = signum
    if _state["raising"]:
        raise STOPS[signum][2]
    stop_now(signum)


def _on_unraisable(unraisable: Any) -> None:
    """A stop raised where Python cannot raise it (a weakref callback such as importlib's module-lock ``cb``, a
    ``__del__``) would be printed as "Exception ignored" with its traceback and lost: end the process as its
    signal asks instead. Anything else goes to Python's own hook."""
    first = _state["first"]
    if first is not None and isinstance(unraisable.exc_value, KeyboardInterrupt):
        stop_now(first)
    sys.__unraisablehook__(unraisable)


def install(raising: bool = False) -> None:
    """Handle every stop signal not ignored at start; ``raising``: as exceptions (during a command), else
    by ending the process at once. Main thread only (elsewhere nothing changes)."""
    _state["raising"] = raising
    sys.unraisablehook = _on_unraisable
    for signum in STOPS:
        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(signum) != signal.SIG_IGN:
                signal.signal(signum, _on_signal)


def ending() -> None:
    """The command is over (its exit code known): from now a signal ends the process at once."""
    _state["raising"] = False


def finish(code: Any) -> NoReturn:
    """End the process with ``code`` (as ``sys.exit`` reads it) after flushing stdout and stderr, without
    the interpreter's shutdown; a signal meanwhile ends it with its own code and line."""
    ending()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        with contextlib.suppress(Exception):
            print(code, file=sys.stderr)
        code = 1
    _discard_pending()  # a signal that landed in a writer's clean-up: its temporary file is gone all the same
    with contextlib.suppress(Exception):  # what the interpreter's shutdown would have run (none of gpuplan's)
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
    os._exit(code)
