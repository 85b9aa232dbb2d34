"""The ``gpuplan`` command line: a thin client of the Python API.

Exit codes: 0 answered (an infeasible problem is an answer), 2 bad input, 1 internal error.

``application`` holds the app and registers the commands, one module per command group: ``plan`` (check, solve,
options), ``reference`` (catalog, models, model, schema), ``capacity``, ``portfolio`` and ``serve``. What they
share: ``shared`` (the problem from a job file and flags, the answer's formats, the export), ``checks`` (the
checks before any work) and ``handling`` (exit codes and lines); the options several commands take are declared
once in ``optimizer/cli_options.py``. ``process.main`` runs it as the ``gpuplan`` process.
"""

from __future__ import annotations

from .application import app
from .process import main

__all__ = ["app", "main"]
