"""The HTTP face of ``gpuplan serve``: FastAPI routes over ``service.Service``, the page, and the server.

Bodies are read here with their bounds (``Limits.max_body_bytes``, 413 past it; ``Limits.body_timeout_s``,
408 past it), then handed to a solver thread (``Service.submit``: 503 when too many wait). Bad input is
422 with the paragraph ``gpuplan`` prints for the same file, and the field.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import signal
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi import Query as Param
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from pydantic import BaseModel
from starlette.requests import ClientDisconnect

from .. import __version__
from ..errors import ArgumentError, GpuplanError, printable
from ..present.answers import json_text
from ..present.jsonschema import json_schema
from ..results import CheckResult, OptionsResult, PortfolioResult, SolveResult
from .access import Access, Gate, Guard, protocol_for, with_token
from .bodies import CheckFields, ExportFields
from .service import Busy, Limits, Query, QueryError, Service, error_payload

STATIC = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"app.js": "text/javascript", "app.css": "text/css"}

# The page loads its script and style from here and talks to this origin alone; nothing inline runs.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

DESCRIPTION = """The gpuplan planner as a service. Each POST takes the text of a job or portfolio file (JSON with
`Content-Type: application/json`, or YAML with `application/yaml`; other types are 415) and answers what `gpuplan
solve|check|options|portfolio --format json` prints for it. Bad input: 422 with the paragraph the CLI prints and
the field. A body names no file of the server's machine: catalogs by name (GET /v1/catalogs), models as presets,
Hub ids or shapes. Requests come from the page's own origin (a foreign Host is 421, a foreign Origin 403 unless
the server allows it for CORS); a server started with a token, as every one bound beyond loopback is, takes a
POST with `Authorization: Bearer TOKEN` alone (401)."""


class ErrorBody(BaseModel):
    detail: str
    field: str | None = None
    reason: str = ""


class JobView(BaseModel):
    id: str
    kind: str
    status: str
    url: str
    queued_s: float
    elapsed_s: float
    progress: list[str]
    result: dict | None = None
    error: ErrorBody | None = None


class TooLarge(Exception):
    pass


class TooSlow(Exception):
    pass


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(json_text(data, indent=None), status_code=status, media_type="application/json", headers=headers)


def _body_spec(schema: dict, what: str) -> dict:
    return {
        "requestBody": {
            "required": True,
            "description": what,
            "content": {"application/json": {"schema": schema}, "application/yaml": {"schema": {"type": "string"}}},
        }
    }


def _with(key: str, model: type[BaseModel], what: str) -> dict:
    return {
        "type": "object",
        "description": f"A job document (GET /v1/schema/job) with '{key}:' beside 'job:'; {what}",
        "properties": {key: model.model_json_schema(), "job": {"$ref": "/v1/schema/job#/properties/job"}},
        "required": ["job", key],
    }


JOB_BODY = _body_spec({"$ref": "/v1/schema/job"}, "A job file's content (problems/*.yaml), as JSON or YAML.")
PORTFOLIO_BODY = _body_spec(
    {"$ref": "/v1/schema/portfolio"},
    "A portfolio file's content (problems/portfolio-*.yaml); 'file:' entries name bundled job files.",
)
CHECK_BODY = _body_spec(_with("check", CheckFields, "the flags of gpuplan check."), "A job and the layout to check.")
EXPORT_BODY = _body_spec(
    _with("export", ExportFields, "the launcher kind and the plan (default: the best)."), "A job and its export."
)
ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "Bad input: the message gpuplan prints, and the field"},
    413: {"model": ErrorBody, "description": "The body is larger than the service reads"},
    503: {"model": ErrorBody, "description": "Too many requests wait for a solver, or the server stops; retry"},
    401: {"model": ErrorBody, "description": "No token, or a wrong one: Authorization: Bearer TOKEN"},
    403: {"model": ErrorBody, "description": "An Origin other than the server's own or one it allows"},
    415: {"model": ErrorBody, "description": "A body that is not JSON or YAML by its Content-Type"},
    421: {"model": ErrorBody, "description": "A Host other than the server's address (DNS rebinding)"},
}


async def _body(request: Request, limits: Limits) -> tuple[bytes, str | None]:
    """The request body, at most ``max_body_bytes`` (413), received within ``body_timeout_s`` (408), and its
    Content-Type."""
    length = request.headers.get("content-length")
    if length is not None:
        if not length.isdigit():
            raise GpuplanError(f"Content-Length {printable(length)!r} is not a byte count", source="request")
        if int(length) > limits.max_body_bytes:
            raise TooLarge(int(length), False)
    chunks: list[bytes] = []
    size = 0

    async def receive() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_body_bytes:
                raise TooLarge(limits.max_body_bytes, True)
            chunks.append(chunk)

    try:
        await asyncio.wait_for(receive(), limits.body_timeout_s)
    except asyncio.TimeoutError:
        raise TooSlow from None
    except ClientDisconnect:  # reset or closed mid-body: no one to answer, nothing to log but the 499
        raise ClientGone from None
    return b"".join(chunks), request.headers.get("content-type")


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


async def _disconnected(request: Request) -> None:
    """Return when the client goes away (the body has been read: what comes next is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Stopping(Exception):
    """The server stops (SIGTERM, SIGHUP, ^C) before this request's answer was ready: 503."""


async def _solved(request: Request, service: Service, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` on a solver thread. A client that goes away while its request waits for a thread takes
    the request with it (the queued call is cancelled); one already solving finishes on its thread,
    answered to no one. Once the server stops, a request still waiting is answered 503 at once."""
    gate: Gate = request.app.state.gate
    answer = asyncio.wrap_future(service.submit(fn, *args))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        while not (answer.done() or gone.done() or gate.stopping):
            await asyncio.wait({answer, gone}, timeout=0.1, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not answer.done():
        answer.cancel()  # still queued: never runs; already running: runs to its end, unread
        raise Stopping if gate.stopping else ClientGone
    return answer.result()


def _filename(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)[:120] or "export"


def create_app(service: Service | None = None, access: Access | None = None) -> FastAPI:
    """The app: the JSON API under /v1, the page at /, OpenAPI at /openapi.json (and /docs); who may use it
    as ``access`` says (default: the page's own origin on loopback, any port)."""
    service = service or Service()
    limits = service.limits
    app = FastAPI(title="gpuplan", version=__version__, description=DESCRIPTION)
    app.state.service, app.state.gate = service, Gate()
    app.add_middleware(Guard, access=access or Access(), gate=app.state.gate)
    index = (STATIC / "index.html").read_text(encoding="utf-8")
    static = {name: (STATIC / name).read_bytes() for name in STATIC_FILES}

    @app.exception_handler(GpuplanError)
    async def _bad_input(request: Request, exc: GpuplanError) -> Response:
        return _json(error_payload(exc), 422)

    @app.exception_handler(RequestValidationError)
    async def _bad_parameter(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0]
        loc = [str(part) for part in first.get("loc", ())]
        name = loc[-1] if loc else ""
        return _json(error_payload(QueryError(first.get("msg", "invalid"), field=name)), 422)

    @app.exception_handler(TooLarge)
    async def _too_large(request: Request, exc: TooLarge) -> Response:
        size, streamed = exc.args
        reason = (
            f"the body is {'more than ' if streamed else ''}{size:,} bytes, past the {limits.max_body_bytes:,} this "
            "service reads; a job file is a few KiB: send the job, not its data"
        )
        return _json(
            {"detail": f"request body: {reason}", "field": None, "reason": reason}, 413, {"Connection": "close"}
        )

    @app.exception_handler(TooSlow)
    async def _too_slow(request: Request, exc: TooSlow) -> Response:
        reason = f"the body did not arrive within {limits.body_timeout_s:g} s"
        return _json(
            {"detail": f"request body: {reason}", "field": None, "reason": reason}, 408, {"Connection": "close"}
        )

    @app.exception_handler(ClientGone)
    async def _gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nginx's "client closed request": written to no one, logged

    @app.exception_handler(Busy)
    @app.exception_handler(Stopping)
    async def _busy(request: Request, exc: Exception) -> Response:
        said = str(exc) or "the server is stopping; retry once it is back"
        return _json({"detail": said, "field": None, "reason": said}, 503, {"Retry-After": "2"})

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> Response:
        detail = f"internal error: {exc.__class__.__name__}: {exc} (report it with the request body)"
        return _json({"detail": detail, "field": None, "reason": ""}, 500)

    # ------------------------------------------------------------------ the page

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page() -> Response:
        return HTMLResponse(index, headers=PAGE_HEADERS)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/static/{name}", include_in_schema=False)
    async def static_file(name: str) -> Response:
        if name not in static:
            return _json({"detail": f"no static file {printable(name)!r}", "field": None, "reason": ""}, 404)
        return Response(static[name], media_type=STATIC_FILES[name], headers=PAGE_HEADERS)

    @app.post("/page/solve", tags=["page"], openapi_extra=JOB_BODY, responses=ERRORS)
    async def page_solve(request: Request, time_limit: str | None = None, catalog: str | None = None) -> Response:
        """A solve as the page shows it: /v1/solve's answer with the verdict, the charts and the job file."""
        raw, media = await _body(request, limits)
        query = Query(time_limit=time_limit, catalog=catalog)
        return _json(await _solved(request, service, service.page, raw, media, query))

    # ------------------------------------------------------------------ reference data

    @app.get("/v1/health", tags=["service"])
    async def health() -> dict:
        return {"status": "ok", "version": __version__, "waiting": service.waiting}

    @app.get("/v1/info", tags=["service"])
    async def info() -> dict:
        """Version, catalogs, export kinds, frameworks and the service's limits."""
        return service.info()

    @app.get("/v1/catalogs", tags=["reference"])
    def catalogs() -> Response:
        """The catalogs a body may name: those given to gpuplan serve --catalog, then the bundled ones."""
        return _json(service.catalogs())

    @app.get("/v1/catalogs/{name}", tags=["reference"], responses={404: {"model": ErrorBody}})
    def catalog_listing(name: str) -> Response:
        """A catalog's GPUs and offers: what gpuplan catalog NAME --format json prints."""
        try:
            return _json(service.catalog_listing(name))
        except GpuplanError as exc:
            return _json(error_payload(exc), 404)

    @app.get("/v1/models", tags=["reference"])
    def models() -> Response:
        """The bundled model presets: what gpuplan models --format json prints."""
        return _json(service.models())

    @app.get("/v1/schema/{kind}", tags=["reference"], responses={404: {"model": ErrorBody}})
    async def schema(kind: str) -> Response:
        """The JSON Schema of a document kind (job, portfolio, catalog): gpuplan schema KIND."""
        try:
            return _json(json_schema(kind))
        except ArgumentError as exc:
            return _json(error_payload(exc), 404)

    # ------------------------------------------------------------------ planning

    @app.post(
        "/v1/solve",
        tags=["planning"],
        openapi_extra=JOB_BODY,
        responses={200: {"model": SolveResult}, 202: {"model": JobView}, **ERRORS},
    )
    async def solve(
        request: Request,
        time_limit: str | None = Param(None, description="CP-SAT time limit: seconds or 90s, 2m (default 10)."),
        catalog: str | None = Param(None, description="A catalog by name, over the body's (gpuplan --catalog)."),
        as_job: bool = Param(False, alias="async", description="Answer 202 with a job to poll at /v1/jobs/{id}."),
    ) -> Response:
        """The best plan, the cost/time frontier and the runners-up: gpuplan solve JOB --format json. Past its
        time limit the answer is 200 with status feasible or unknown."""
        raw, media = await _body(request, limits)
        query = Query(time_limit=time_limit, catalog=catalog)
        if as_job:  # read and checked now (bad input: 422), solved later
            await _solved(request, service, service.check_request, "solve", raw, media, query)
            return _accepted(service.start_job("solve", raw, media, query))
        return _json(await _solved(request, service, service.solve, raw, media, query))

    @app.post(
        "/v1/options",
        tags=["planning"],
        openapi_extra=JOB_BODY,
        responses={200: {"model": OptionsResult}, **ERRORS},
    )
    async def options(request: Request, catalog: str | None = None) -> Response:
        """Every hardware row with its best strategy, hours, cost and what rejected it: gpuplan options JOB."""
        raw, media = await _body(request, limits)
        query = Query(catalog=catalog)
        return _json(await _solved(request, service, service.options, raw, media, query))

    @app.post(
        "/v1/check",
        tags=["planning"],
        openapi_extra=CHECK_BODY,
        responses={200: {"model": CheckResult}, **ERRORS},
    )
    async def check(request: Request, catalog: str | None = None) -> Response:
        """The verdict on a hand-picked layout (the body's check: mapping holds gpuplan check's flags: sku, gpus,
        nodes, tp, pp, zero, micro_batch, ...): gpuplan check JOB --format json."""
        raw, media = await _body(request, limits)
        query = Query(catalog=catalog)
        return _json(await _solved(request, service, service.check, raw, media, query))

    @app.post(
        "/v1/portfolio",
        tags=["planning"],
        openapi_extra=PORTFOLIO_BODY,
        responses={200: {"model": PortfolioResult}, 202: {"model": JobView}, **ERRORS},
    )
    async def portfolio(
        request: Request,
        time_limit: str | None = Param(None, description="Time limit for the whole solve (default 60 s)."),
        workers: int | None = Param(None, description="CP-SAT workers (default 2; 1 is deterministic)."),
        catalog: str | None = None,
        as_job: bool = Param(False, alias="async", description="Answer 202 with a job to poll at /v1/jobs/{id}."),
    ) -> Response:
        """Many jobs on shared pools within one budget: gpuplan portfolio FILE --format json."""
        raw, media = await _body(request, limits)
        query = Query(time_limit=time_limit, catalog=catalog, workers=workers)
        if as_job:  # read and checked now (bad input: 422), solved later
            await _solved(request, service, service.check_request, "portfolio", raw, media, query)
            return _accepted(service.start_job("portfolio", raw, media, query))
        return _json(await _solved(request, service, service.portfolio, raw, media, query))

    @app.post(
        "/v1/export",
        tags=["planning"],
        openapi_extra=EXPORT_BODY,
        responses={200: {"content": {"text/plain": {}}, "description": "The launcher config"}, **ERRORS},
    )
    async def export(request: Request, time_limit: str | None = None, catalog: str | None = None) -> Response:
        """A plan's launcher config (skypilot, kubernetes, deepspeed, ...): gpuplan solve JOB --export KIND."""
        raw, media = await _body(request, limits)
        query = Query(time_limit=time_limit, catalog=catalog)
        text, name = await _solved(request, service, service.export, raw, media, query)
        disposition = f'inline; filename="{_filename(name)}"'
        return Response(text, media_type="text/plain; charset=utf-8", headers={"Content-Disposition": disposition})

    # ------------------------------------------------------------------ jobs

    @app.get("/v1/jobs", tags=["jobs"])
    async def jobs() -> Response:
        """The jobs this process keeps, without their answers."""
        return _json({"jobs": [job.view(with_result=False) for job in service.jobs.all()]})

    @app.get("/v1/jobs/{job_id}", tags=["jobs"], responses={200: {"model": JobView}, 404: {"model": ErrorBody}})
    async def job(job_id: str) -> Response:
        """A job's status (queued, running, done, failed), progress lines, and its answer once done."""
        found = service.jobs.get(job_id)
        if found is None:
            detail = f"no job {printable(job_id)!r} here (jobs are kept while the server runs, the newest {limits.jobs_kept})"
            return _json({"detail": detail, "field": None, "reason": detail}, 404)
        return _json(found.view())

    return app


def _accepted(job: Any) -> Response:
    return _json(job.view(), 202, {"Location": f"/v1/jobs/{job.id}"})


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
