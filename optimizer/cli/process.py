"""The command line as a process: ``main`` runs the app with SIGPIPE, unencodable characters, ^C/SIGTERM/SIGHUP
and a standard output that takes nothing each given its exit code and line (``stops``)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Any

from .. import stops
from ..errors import printable
from .application import app
from .handling import STDOUT_UNWRITABLE, internal, say, state, stdout_full, stopped

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
        say("error: standard output is closed, so no answer can be written; run gpuplan with it open (> answer.txt)")
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
        if stopped_by is not None and not state["stopped"]:
            # a signal outside a command: typer makes it exit 130 silently (after the command returned: the
            # context's clean-up), click 'Aborted!' with exit 1
            raise stops.STOPS[stopped_by][2]
        with contextlib.suppress(ValueError):  # what is still buffered for stdout, before the exit code is final
            sys.stdout.flush()
    except KeyboardInterrupt as exc:
        code = stopped(exc)
    except OSError as exc:
        code = stdout_full(exc) if exc.errno in STDOUT_UNWRITABLE else internal(exc).exit_code
    stops.ending()  # from here a signal ends the process at once, with its code and line
    sys.exit(code)


def _before_any_command(exc: OSError) -> int:
    """The exit code for an OSError raised before any command ran: stdout not taking --help or --version,
    or --install-completion unable to write a shell's start-up file (a folder where ~/.bashrc should be, a
    read-only one); anything else is a bug."""
    if exc.errno in STDOUT_UNWRITABLE and exc.filename is None:
        return stdout_full(exc)
    if exc.filename is not None and any(a.startswith("--install-completion") for a in sys.argv[1:]):
        name = printable(os.fsdecode(exc.filename))
        say(
            f"error: command line, option '--install-completion': cannot write {name} "
            f"({exc.strerror or exc.__class__.__name__}); make it a file you can write, or install the completion "
            "by hand: gpuplan --show-completion SHELL prints the lines to add to your shell's start-up file"
        )
        return 2
    return internal(exc).exit_code
