"""How the service reads a request and answers it: the body within its bounds, the solver thread, the errors.

A body is read with its bounds (``Limits.max_body_bytes``, 413 past it; ``Limits.body_timeout_s``, 408
past it), then handed to a solver thread (``solved``: ``Service.submit``, 503 when too many wait). Each
failure has its status (``add_error_handlers``): bad input 422 with the paragraph ``gpuplan`` prints for
the same file and the field, a client gone 499, the server stopping 503, anything else 500.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.requests import ClientDisconnect

from ..errors import GpuplanError, printable
from ..present.answers import json_text
from .access import Gate
from .service import Limits, QueryError, Service, error_payload
from .store import Busy


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
    """A body past ``Limits.max_body_bytes``: its size, and whether it was counted while streaming (413)."""


class TooSlow(Exception):
    """A body that did not arrive within ``Limits.body_timeout_s`` (408)."""


class ClientGone(Exception):
    """The client closed the connection before its answer was ready."""


class Stopping(Exception):
    """The server stops (SIGTERM, SIGHUP, ^C) before this request's answer was ready: 503."""


def json_reply(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """``data`` as the CLI's ``--format json`` writes it, on one line."""
    return Response(json_text(data, indent=None), status_code=status, media_type="application/json", headers=headers)


def error_reply(detail: str, status: int, reason: str = "", headers: dict[str, str] | None = None) -> Response:
    """An error that names no field (a body too large or too slow, a thing not found, a server busy)."""
    return json_reply({"detail": detail, "field": None, "reason": reason}, status, headers)


async def read_body(request: Request, limits: Limits) -> tuple[bytes, str | None]:
    """The request body, at most ``max_body_bytes`` (413), received within ``body_timeout_s`` (408), and its
    Content-Type."""
    length = request.headers.get("content-length")
    if length is not None:
        # ASCII digits ('²' is a digit to str.isdigit, not to int()); past 18 of them (int() refuses 4,300)
        # the length is more than any limit, said without reading it
        if not (length.isascii() and length.isdigit()):
            raise GpuplanError(f"Content-Length {printable(length)!r} is not a byte count", source="request")
        if len(length.lstrip("0")) > 18:
            raise TooLarge(limits.max_body_bytes, True)
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


async def _disconnected(request: Request) -> None:
    """Return when the client goes away (the body has been read: what comes next is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def solved(request: Request, service: Service, fn: Any, *args: Any) -> Any:
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


# --------------------------------------------------------------------------- the errors' statuses


def _limits(request: Request) -> Limits:
    service: Service = request.app.state.service
    return service.limits


async def _bad_input(request: Request, exc: GpuplanError) -> Response:
    return json_reply(error_payload(exc), 422)


async def _bad_parameter(request: Request, exc: RequestValidationError) -> Response:
    first = exc.errors()[0]
    loc = [str(part) for part in first.get("loc", ())]
    name = loc[-1] if loc else ""
    return json_reply(error_payload(QueryError(first.get("msg", "invalid"), field=name)), 422)


async def _too_large(request: Request, exc: TooLarge) -> Response:
    size, streamed = exc.args
    reason = (
        f"the body is {'more than ' if streamed else ''}{size:,} bytes, past the {_limits(request).max_body_bytes:,} "
        "this service reads; a job file is a few KiB: send the job, not its data"
    )
    return error_reply(f"request body: {reason}", 413, reason, {"Connection": "close"})


async def _too_slow(request: Request, exc: TooSlow) -> Response:
    reason = f"the body did not arrive within {_limits(request).body_timeout_s:g} s"
    return error_reply(f"request body: {reason}", 408, reason, {"Connection": "close"})


async def _gone(request: Request, exc: ClientGone) -> Response:
    return Response(status_code=499)  # nginx's "client closed request": written to no one, logged


async def _busy(request: Request, exc: Exception) -> Response:
    said = str(exc) or "the server is stopping; retry once it is back"
    return error_reply(said, 503, said, {"Retry-After": "2"})


async def _internal(request: Request, exc: Exception) -> Response:
    detail = f"internal error: {exc.__class__.__name__}: {exc} (report it with the request body)"
    return error_reply(detail, 500)


HANDLERS: tuple[tuple[type[Exception], Any], ...] = (
    (GpuplanError, _bad_input),
    (RequestValidationError, _bad_parameter),
    (TooLarge, _too_large),
    (TooSlow, _too_slow),
    (ClientGone, _gone),
    (Stopping, _busy),
    (Busy, _busy),
    (Exception, _internal),
)


def add_error_handlers(app: FastAPI) -> None:
    """Each failure's status and body (``HANDLERS``)."""
    for kind, handler in HANDLERS:
        app.add_exception_handler(kind, handler)
