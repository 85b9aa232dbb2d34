"""The HTTP face of ``gpuplan serve``: the app (``create_app``) and the server that runs it.

The app is assembly: the access rules (``access.Guard``), the errors' statuses (``replies``: bad input 422
with the paragraph ``gpuplan`` prints for the same file and the field, a body past its bounds 413 or 408,
too many waiting 503) and the routes (``routes``, each a call of ``service.Service``). The server: uvicorn
on a socket bound here (``listen``), stopping on SIGHUP as on SIGTERM and ^C; ``Running`` on a thread.
"""

from __future__ import annotations

import functools
import ipaddress
import signal
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import uvicorn
from fastapi import FastAPI

from .. import __version__
from ..errors import ArgumentError
from .access import Access, Gate, Guard, protocol_for, with_token
from .replies import add_error_handlers
from .routes import ROUTERS, registry_bodies
from .service import Service

DESCRIPTION = """The gpuplan planner as a service. Each POST takes the text of a job or portfolio file (JSON with
`Content-Type: application/json`, or YAML with `application/yaml`; other types are 415) and answers what `gpuplan
solve|check|options|portfolio --format json` prints for it. Bad input: 422 with the paragraph the CLI prints and
the field. A body names no file of the server's machine: catalogs by name (GET /v1/catalogs), models as presets,
Hub ids or shapes. Requests come from the page's own origin (a foreign Host is 421, a foreign Origin 403 unless
the server allows it for CORS); a server started with a token, as every one bound beyond loopback is, takes a
POST with `Authorization: Bearer TOKEN` alone (401)."""


def create_app(service: Service | None = None, access: Access | None = None) -> FastAPI:
    """The app: the JSON API under /v1, the page at /, OpenAPI at /openapi.json (and /docs); who may use it
    as ``access`` says (default: the page's own origin on loopback, any port). Its routes are ``routes``'
    routers, which reach the service as a dependency (``app.state.service``); its errors' statuses are
    ``replies``'."""
    app = FastAPI(title="gpuplan", version=__version__, description=DESCRIPTION)
    app.state.service, app.state.gate = service or Service(), Gate()
    app.add_middleware(Guard, access=access or Access(), gate=app.state.gate)
    add_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    app.openapi = functools.partial(_openapi, app)  # type: ignore[method-assign]
    return app


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's OpenAPI document of ``app``, written on its first request, with the exports registry's kinds
    as they are then (``routes.registry_bodies``)."""
    if app.openapi_schema is None:
        registry_bodies(FastAPI.openapi(app))
    return app.openapi_schema or {}


# --------------------------------------------------------------------------- serving


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free one); a bad host or a taken port is bad input."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise ArgumentError(
            f"cannot resolve {host!r} ({exc}); give an address such as 127.0.0.1", field="host"
        ) from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ArgumentError(
            f"cannot listen on {host}:{port} ({exc.strerror}); choose another --port, or 0 for any free one",
            field="port",
        ) from None
    return sock


def _config(app: FastAPI, log_level: str, access: Access) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        http=protocol_for(access),  # h11, with a time limit on headers and a cap on idle connections
        ws="none",
        lifespan="off",
        log_level=log_level,
        # idle connections are capped by the protocol and requests in flight by the app (Access): this is the
        # backstop past both, answered 503 by uvicorn
        limit_concurrency=2 * access.max_connections,
        h11_max_incomplete_event_size=16 * 1024,  # a request's headers: 431 past 16 KiB
        timeout_keep_alive=5,
        timeout_graceful_shutdown=2,
    )


class _Server(uvicorn.Server):
    """uvicorn's server, stopping on SIGHUP as on SIGTERM and ^C (uvicorn takes the last two alone: a hang-up
    raised KeyboardInterrupt inside the requests, which uvicorn answered 500), and telling the app it stops,
    so that requests still waiting for a solver are answered 503 at once."""

    def __init__(self, config: uvicorn.Config, gate: Gate) -> None:
        super().__init__(config)
        self.gate = gate

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.gate.stopping = True
        super().handle_exit(sig, frame)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        hup = getattr(signal, "SIGHUP", None)
        if hup is None or threading.current_thread() is not threading.main_thread():
            await super().serve(sockets)
            return
        before = signal.getsignal(hup)
        if before != signal.SIG_IGN:  # nohup's ignored hang-up stays ignored
            signal.signal(hup, self.handle_exit)
        try:
            await super().serve(sockets)
        finally:
            signal.signal(hup, before)
        if hup in self._captured_signals:  # as uvicorn does for its signals: the process ends as the signal says
            signal.raise_signal(hup)


def _server(service: Service, access: Access, log_level: str) -> _Server:
    app = create_app(service, access)
    return _Server(_config(app, log_level, access), app.state.gate)


class Running:
    """A server on a thread of this process (tests, benchmarks): ``url``, then ``stop()``. Loopback only."""

    def __init__(
        self, service: Service | None = None, host: str = "127.0.0.1", port: int = 0, access: Access | None = None
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"a server on a thread listens on a loopback address, not {host}")
        self.service = service or Service()
        sock = listen(host, port)
        self.port = sock.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        self.access = replace(access or Access(), host=host, port=self.port)
        self.server = _server(self.service, self.access, "warning")
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start within 20 s")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.gate.stopping = True
        self.server.should_exit = True
        self.thread.join(10)
        self.service.close()

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run(
    host: str, port: int, catalogs: Sequence[str] = (), open_page: bool = False, access: Access | None = None
) -> None:
    """``gpuplan serve``: the service on ``host:port`` until ^C (or SIGTERM, SIGHUP). ``access``: who may use
    it (its host and port are the bound ones); bound beyond loopback without a token (``access.token``,
    else ``GPUPLAN_TOKEN``), one is made and printed."""
    service = Service(catalogs)
    sock = listen(host, port)
    bound = sock.getsockname()
    access, made = with_token(replace(access or Access(), host=bound[0], port=bound[1]))
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"http://{shown}:{bound[1]}/"
    if not access.loopback:
        said = "made for this run" if made else "given"
        print(
            f"gpuplan serve: listening on {bound[0]}, beyond this machine: every POST needs "
            f"'Authorization: Bearer {access.token}' (the token {said}; the page's address below carries it)",
            file=sys.stderr,
        )
    page = f"{url}#token={access.token}" if access.token else url
    print(f"gpuplan serve: {page} (the API at {url}docs); ^C stops it", file=sys.stderr, flush=True)
    server = _server(service, access, "info")
    if open_page:
        threading.Thread(target=_open_when_started, args=(server, page), daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        service.close()


def _open_when_started(server: uvicorn.Server, url: str) -> None:
    for _ in range(200):  # 20 s at most
        if server.started:
            webbrowser.open(url)
            return
        time.sleep(0.1)
