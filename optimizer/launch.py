"""The ``gpuplan`` command's entry point: a ^C while the CLI's modules load (about a second: ortools,
numpy, pydantic) ends the process as one during a command does, ``interrupted`` and exit 130, not a
traceback from inside an import."""

from __future__ import annotations

import signal
import sys


def main() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        from .cli import main as run
    finally:
        signal.signal(signal.SIGINT, previous)
    if seen:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run()
