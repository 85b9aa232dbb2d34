"""``gpuplan serve``: the planner over HTTP (``optimizer.server``, which loads FastAPI only when it runs)."""

from __future__ import annotations

import typer

from .. import server
from .handling import handled


@handled
def serve_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (127.0.0.1: this machine alone)."),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="Port to listen on (0: any free one)."),
    catalog: list[str] | None = typer.Option(
        None,
        "--catalog",
        "-c",
        help="A catalog (bundled name or YAML path) requests may name, besides the bundled ones; the first is the "
        "default for a body that names none (repeatable).",
    ),
    open_page: bool = typer.Option(False, "--open", help="Open the page in the web browser once it listens."),
    allowed_host: list[str] | None = typer.Option(
        None,
        "--allowed-host",
        help="A Host name the service answers besides its own address, as a reverse proxy sends it (NAME, or "
        "NAME:PORT for that port alone; * any; repeatable). Other names are refused (421): a page of another "
        "domain that resolves here (DNS rebinding).",
    ),
    cors: list[str] | None = typer.Option(
        None,
        "--cors",
        help="An origin of another site whose pages may call the API (https://app.example; * any; repeatable). "
        "Requests with another Origin are refused (403).",
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        help="The token every POST must carry as 'Authorization: Bearer TOKEN' (16 characters or more; default "
        "GPUPLAN_TOKEN). Bound beyond loopback without one, one is made and printed, and the page's printed "
        "address carries it.",
    ),
) -> None:
    """Serve the planner over HTTP until ^C: a JSON API (POST /v1/solve, /v1/check, /v1/options, /v1/portfolio,
    /v1/export; GET /docs) and a page at / to explore plans. Only the page's own origin drives it (see
    --allowed-host, --cors, --token). Needs FastAPI and uvicorn, the serve extra."""
    server.serve(
        host, port, catalog or [], open_page, allowed_hosts=allowed_host or [], cors_origins=cors or [], token=token
    )
