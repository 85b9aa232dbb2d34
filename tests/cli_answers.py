"""A command's JSON answer as the tests of the job flags compare them: through typer's runner, exit 0, the solver's
wall time (not a part of the answer) left out."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from optimizer.cli import app

runner = CliRunner()


def json_answer(command: str, *args: str) -> dict:
    """``gpuplan COMMAND ARGS -f json`` (solve under a 10 s time limit) as a dict, without ``solve_s``."""
    r = runner.invoke(app, [command, *args, "-f", "json", *(["--time-limit", "10"] if command == "solve" else [])])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    data.pop("solve_s", None)  # the solver's wall time, not the answer
    return data
