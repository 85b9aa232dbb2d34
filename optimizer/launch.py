"""The ``gpuplan`` command's entry point: the signal handlers first (``stops``), then the CLI's modules,
then the command; the process ends by ``stops.finish``, so that a ^C, SIGTERM or SIGHUP at any moment,
the second the modules take to load included, gives its exit code and line (130 'interrupted', 143
'terminated', 129 'hung up'), never a traceback from inside an import or a death by the signal."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from . import stops


def main() -> None:
    stops.install()
    try:
        from .cli import main as run

        run()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt as exc:  # a signal in cli.main's last instructions: it had not said why
        code, line = stops.stop_of(exc)
        with contextlib.suppress(OSError):
            os.write(2, line.encode() + b"\n")
    stops.finish(code)
