"""``gpuplan serve``: the planner as an HTTP service (JSON API under /v1) and a page to explore it (at /).

FastAPI and uvicorn are an optional extra (``pip install 'gpuplan[serve]'``): this module loads without them
and says so when they are missing; ``app`` (routes and server) and ``service`` (what each request does)
load only for the command. See docs/design.md section 11.1.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from ..errors import ArgumentError, GpuplanError

EXTRA = "pip install 'gpuplan[serve]'"
NEEDS = ("fastapi", "uvicorn")


def missing() -> list[str]:
    """The packages of the serve extra that are not installed."""
    return [name for name in NEEDS if importlib.util.find_spec(name) is None]


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    catalogs: Sequence[str] = (),
    open_page: bool = False,
    allowed_hosts: Sequence[str] = (),
    cors_origins: Sequence[str] = (),
    token: str | None = None,
) -> None:
    """Serve until ^C; bad input (a taken port, a bad catalog, a bad origin or token, the extra not installed) is
    a ``GpuplanError``. ``allowed_hosts``: Host names besides the bound address (a reverse proxy's);
    ``cors_origins``: other sites' origins that may call the API; ``token``: the bearer token every POST needs
    (default ``GPUPLAN_TOKEN``; bound beyond loopback without one, one is made and printed)."""
    gone = missing()
    if gone:
        raise GpuplanError(
            f"gpuplan serve needs {' and '.join(gone)}, not installed here: {EXTRA} (or '.[serve]' from a checkout)"
        )
    # the deferred imports: FastAPI and uvicorn load for this command alone
    from .app import Access, run

    try:
        access = Access(
            allowed_hosts=tuple(allowed_hosts), cors_origins=tuple(cors_origins), token=token
        )  # --token "" is refused, not read as none
    except ValueError as exc:
        # named as the flags that give them (--token, --allowed-host, --cors), which cli.handling.flag_of derives
        field = "token" if "token" in str(exc) else "allowed_host" if "allowed host" in str(exc) else "cors"
        raise ArgumentError(str(exc), field=field) from None
    run(host, port, catalogs, open_page, access)
