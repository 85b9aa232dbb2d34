"""The ``gpuplan`` app: its root options (--debug, --quiet, --version) and its commands, registered here one
by one in the order ``gpuplan --help`` lists them; each command group is its own module."""

from __future__ import annotations

import typer

from .. import __version__
from . import capacity, plan, portfolio, reference, serve
from .handling import state

app = typer.Typer(
    name="gpuplan",
    help="Plan which GPUs to rent for a training or fine-tuning job: how many, how sharded, what it costs, how long it takes.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's help: wraps at the terminal's width, never cuts a word to an ellipsis
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuplan {__version__}")
        raise typer.Exit()


def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Tables: print only the one-line answer."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print version and exit."),
) -> None:
    state["debug"] = debug
    state["quiet"] = quiet


app.callback()(_root)
app.command()(plan.check)
app.command()(plan.solve)
app.command()(plan.options)
app.command("catalog")(reference.catalog_cmd)
app.command()(capacity.capacity)
app.command("portfolio")(portfolio.portfolio_cmd)
app.command("models")(reference.models_cmd)
app.command("model")(reference.model_cmd)
app.command("schema")(reference.schema_cmd)
app.command("serve")(serve.serve_cmd)
