"""``gpuplan portfolio``: many jobs scheduled on shared GPU pools within one budget, with progress on stderr."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import typer

from .. import api
from ..cli_options import CatalogOpt, Format, FormatOpt, QuietOpt, SpotOpt
from ..inputs import units
from ..inputs.files import load_portfolio
from ..present import output, render
from ..present.plot import portfolio_plot
from .checks import check_flags, check_outputs
from .handling import handled, say, state
from .shared import catalog_flag, catalog_path, emit, spot_policy


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
    state["quiet"] = state["quiet"] or quiet
    started = time.perf_counter()  # --time-limit bounds the whole command, reading the files included
    check_flags(time_limit_s=time_limit, workers=workers)
    check_outputs([file, catalog_path(catalog)], plot_path=plot_path)
    pf = load_portfolio(file)
    if spot is not None:
        pf = pf.model_copy(update={"spot": spot_policy(spot)})
    cat = catalog_flag(catalog) if catalog is not None else None  # '' is refused, not read as the file's
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
    emit(result, fmt, render.print_portfolio)


# Seconds between progress lines when stderr is not a terminal (a CI log): a 7-minute portfolio had printed
# nothing until it ended.
PIPED_PROGRESS_EVERY_S = 5.0


def _progress_printer() -> Callable[[str], None]:
    """Progress lines on stderr: each one at a terminal, at most one every ``PIPED_PROGRESS_EVERY_S`` seconds
    (and the first) where stderr is a file or a pipe."""
    if sys.stderr.isatty():
        return lambda line: say(line)
    last = [-math.inf]

    def throttled(line: str) -> None:
        now = time.monotonic()
        if now - last[0] >= PIPED_PROGRESS_EVERY_S:
            last[0] = now
            say(line)

    return throttled
