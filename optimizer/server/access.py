"""Who may drive ``gpuplan serve``, and how many connections it holds: one ASGI middleware (``Guard``) and
one uvicorn protocol (``GuardedH11``).

A browser runs any page's script against any address it can reach, 127.0.0.1 included. So a request is
served only when it comes from the page's own origin, as a browser sends it:

- its ``Host`` is the bound address (on loopback: 127.0.0.1, localhost or [::1] with the bound port), or
  one of ``Access.allowed_hosts`` (a reverse proxy's name): a page of another name that resolves here (DNS
  rebinding) is 421;
- an ``Origin`` header, when there is one, is the server's own (``http://`` + its Host), or one of
  ``Access.cors_origins`` (then answered with CORS headers, preflight included): else 403;
- a POST's body is JSON or YAML by its ``Content-Type`` (what the page and the README send): a form,
  ``text/plain`` or multipart body, the kinds a page of another site may POST without asking, is 415;
- with a token (``Access.token``: always when bound beyond loopback), every POST carries
  ``Authorization: Bearer TOKEN``: else 401.

Each refusal is one line of JSON, ``{detail, field, reason}``, naming the header and the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
import time
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, replace
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import printable

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
BODY_TYPES = ("application/json", "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
TOKEN_ENV = "GPUPLAN_TOKEN"
ANY = "*"


@dataclass(frozen=True)
class Access:
    """Who may use the service (``create_app``, ``Running``, ``run``).

    ``host``/``port``: the bound address (port None: any, for an app not yet bound); ``allowed_hosts``: more
    Host names (a reverse proxy's; ``name`` any port, ``name:port`` that one, ``*`` any Host);
    ``cors_origins``: origins of other sites allowed to call the API (``https://app.example``; ``*`` any);
    ``token``: the bearer token every POST needs (None: none needed, loopback only)."""

    host: str = "127.0.0.1"
    port: int | None = None
    allowed_hosts: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ()
    token: str | None = None
    max_requests_in_flight: int = 64  # requests being answered at once (idle connections are not counted); 503 past it
    max_connections: int = 512  # connections held; past it the longest-idle one is closed
    header_timeout_s: float = 10.0  # for a connection to send its request's headers; closed past it

    def __post_init__(self) -> None:
        for origin in self.cors_origins:
            if origin != ANY and not _is_origin(origin):
                raise ValueError(
                    f"CORS origin {origin!r} is no origin: give scheme://host[:port] without a path "
                    "(https://app.example), or * for any"
                )
        for host in self.allowed_hosts:
            if host != ANY and split_host(host)[0] is None:
                raise ValueError(
                    f"allowed host {host!r} is no Host: give a name or address, with a port to allow that one "
                    "alone (plans.example, plans.example:443), or * for any"
                )
        if self.token is not None and len(self.token) < 16:
            raise ValueError("the token is shorter than 16 characters: give a longer one, or none to have one made")
        if self.token is not None and not (self.token.isascii() and self.token.isprintable() and " " not in self.token):
            # a header carries no control character, and the check strips the spaces it is sent with: no request
            # could have carried this token, and the service would have refused every POST
            raise ValueError(
                "the token has spaces, control or non-ASCII characters, which no request header carries: give "
                "one of letters, digits and punctuation, or none to have one made"
            )

    @property
    def loopback(self) -> bool:
        """Bound to this machine alone."""
        return _is_loopback(self.host)

    def host_allowed(self, header: str) -> bool:
        """Whether a request's Host header names this server."""
        name, port = split_host(header)
        if name is None:
            return False
        for entry in self.allowed_hosts:
            if entry == ANY:
                return True
            allowed, allowed_port = split_host(entry)
            if allowed == name and (allowed_port is None or allowed_port == port):
                return True
        if self.port is not None and port is not None and port != self.port:
            return False  # (no port: a client's own Host, never a browser's for a port other than 80)
        if name in LOOPBACK_NAMES or name == self.host.lower():
            return True
        # bound beyond loopback: the machine's own names and addresses (a rebinding page names a domain of its own)
        return not self.loopback and (_is_address(name) or name in _machine_names())

    def cors_allowed(self, origin: str) -> bool:
        return ANY in self.cors_origins or origin.lower() in (allowed.lower() for allowed in self.cors_origins)

    def expected_host(self) -> str:
        port = f":{self.port}" if self.port else ""
        shown = f"[{self.host}]" if ":" in self.host else self.host
        names = [f"{shown}{port}"] + [f"localhost{port}"] * (shown != "localhost" and self.loopback)
        return " or ".join(names + list(self.allowed_hosts))


def split_host(header: str) -> tuple[str | None, int | None]:
    """A Host header's name (lower case, an IPv6 address without brackets) and port (None if it gives none);
    (None, None) when it is not one."""
    text = header.strip().lower()
    if text.startswith("["):
        name, closed, rest = text[1:].partition("]")
        if not closed or not _is_address(name):
            return None, None
        port_text = rest[1:] if rest.startswith(":") else ("" if not rest else "x")
    else:
        name, _, port_text = text.partition(":")
    # a port is 1-5 ASCII digits: '²' passed str.isdigit and failed int(), 5,000 digits failed int() (a 500)
    if not name or any(c in name for c in "/\\@ ") or (port_text and not re.fullmatch(r"[0-9]{1,5}", port_text)):
        return None, None
    return name, int(port_text) if port_text else None


def _is_origin(text: str) -> bool:
    """scheme://host[:port], as a browser's Origin header writes it: no path, query, fragment or user."""
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # noqa: B018 (a bad port raises)
    except ValueError:
        return False
    plain = not (parts.path or parts.query or parts.fragment or "@" in parts.netloc or text.endswith(("?", "#")))
    return parts.scheme in ("http", "https") and bool(parts.hostname) and plain


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@functools.cache
def _machine_names() -> frozenset[str]:
    """This machine's names (once: getfqdn may ask a resolver)."""
    names = {socket.gethostname().lower()}
    with contextlib.suppress(OSError):  # no resolver: the host name alone
        names.add(socket.getfqdn().lower())
    return frozenset(names)


def with_token(access: Access, environ: MutableMapping[str, str] | None = None) -> tuple[Access, bool]:
    """``access`` with its token: the one given, else ``GPUPLAN_TOKEN``, else (bound beyond loopback) a new
    one; and whether it was made here (to be printed at start)."""
    if access.token is not None:
        return access, False
    given = (os.environ if environ is None else environ).get(TOKEN_ENV, "").strip()
    if given:
        return replace(access, token=given), False
    if access.loopback:
        return access, False
    return replace(access, token=secrets.token_urlsafe(24)), True


@dataclass
class Gate:
    """What the middleware and the routes share: whether the server is stopping, and the requests in flight."""

    stopping: bool = False
    in_flight: int = 0


Refusal = tuple[int, bytes, dict[str, str]]  # status, one line of JSON, headers


def refusal(status: int, header: str | None, reason: str, extra: dict[str, str] | None = None) -> Refusal:
    """A refusal as (status, one line of JSON, headers)."""
    detail = f"header '{header}': {reason}" if header else reason
    body = json.dumps({"detail": detail, "field": header, "reason": reason}, ensure_ascii=True)
    return status, body.encode(), {"content-type": "application/json", **(extra or {})}


class Guard:
    """The access checks of the module docstring, in front of every route; and 503 once the server stops."""

    def __init__(self, app: Callable[..., Awaitable[None]], access: Access, gate: Gate) -> None:
        self.app = app
        self.access = access
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refused, cors = self.check(scope["method"], headers)
        if refused is not None:
            await _answer(send, *refused, cors=cors)
            return
        if scope["method"] == "OPTIONS" and cors and "access-control-request-method" in headers:
            await _answer(send, 204, b"", {}, cors=cors, preflight=True)
            return
        if self.gate.in_flight >= self.access.max_requests_in_flight:
            reason = f"{self.gate.in_flight} requests are being answered, the most this service takes at once; retry"
            await _answer(send, *refusal(503, None, reason, {"retry-after": "2"}), cors=cors)
            return
        await self._serve(scope, receive, send, cors)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, cors: str | None) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if cors:
                    message["headers"] = list(message.get("headers", [])) + _cors_headers(cors, False)
            await send(message)

        self.gate.in_flight += 1
        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:  # the server stops (its grace is over): an answer, not uvicorn's 500
            if not started:
                reason = "the server is stopping; retry once it is back"
                await _answer(send, *refusal(503, None, reason, {"connection": "close"}))
        finally:
            self.gate.in_flight -= 1

    def check(self, method: str, headers: dict[str, str]) -> tuple[Refusal | None, str | None]:
        """The refusal of a request (None: served), and the origin to answer with CORS headers (None: none)."""
        access = self.access
        if self.gate.stopping:
            return refusal(503, None, "the server is stopping; retry once it is back", {"connection": "close"}), None
        host = headers.get("host", "")
        if not access.host_allowed(host):
            reason = (
                f"{printable(host)!r} is not this server's name ({access.expected_host()}); a page reaching it by "
                "another name (DNS rebinding) is refused: open the address gpuplan serve printed, or start it with "
                "--allowed-host NAME for a proxy's name"
            )
            return refusal(421, "Host", reason), None
        origin = headers.get("origin")
        cors = None
        if origin is not None and origin.lower() not in (f"http://{host.lower()}", f"https://{host.lower()}"):
            if not access.cors_allowed(origin):
                reason = (
                    f"{printable(origin)!r} is not this server's origin (http://{printable(host)}): a page of another "
                    f"site may not use this service; start gpuplan serve with --cors {printable(origin)} to allow it"
                )
                return refusal(403, "Origin", reason), None
            cors = origin
        if method != "POST":
            return None, cors
        return self._check_post(headers), cors

    def _check_post(self, headers: dict[str, str]) -> Refusal | None:
        token = self.access.token
        if token is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
                reason = (
                    f"{'a wrong token' if given else 'no token'}: this service needs 'Authorization: Bearer TOKEN' "
                    f"on every POST, with the token gpuplan serve printed at start (--token or {TOKEN_ENV})"
                )
                return refusal(401, "Authorization", reason, {"www-authenticate": "Bearer"})
        given_type = headers.get("content-type")
        media = (given_type or "").split(";")[0].strip().lower()
        if media not in BODY_TYPES:
            said = f"{printable(given_type)!r} is" if given_type else "none given is"
            reason = (
                f"{said} not a body this service reads: send the job as JSON (Content-Type: application/json) or "
                "YAML (Content-Type: application/yaml)"
            )
            return refusal(415, "Content-Type", reason)
        return None


def _cors_headers(origin: str, preflight: bool) -> list[tuple[bytes, bytes]]:
    headers = [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
    if preflight:
        headers += [
            (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
            (b"access-control-allow-headers", b"Content-Type, Authorization"),
            (b"access-control-max-age", b"600"),
        ]
    else:
        headers.append((b"access-control-expose-headers", b"Content-Disposition, Location, Retry-After"))
    return headers


async def _answer(
    send: Send, status: int, body: bytes, headers: dict[str, str], cors: str | None = None, preflight: bool = False
) -> None:
    raw = [(k.encode(), v.encode()) for k, v in headers.items()] + [(b"content-length", str(len(body)).encode())]
    if cors:
        raw += _cors_headers(cors, preflight)
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


# --------------------------------------------------------------------------- connections


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a time limit on a request's headers (``Access.header_timeout_s``) and a cap
    on connections held (``Access.max_connections``: past it the longest-idle one is closed), so that idle
    or trickling clients never keep others out. uvicorn arms no timer before a connection's first request,
    and counts idle connections against its ``limit_concurrency``."""

    access = Access()  # set per server by ``protocol_for``

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._idle_since = time.monotonic()
        self._watch_headers()
        if len(self.connections) > self.access.max_connections:
            idle = [c for c in self.connections if c is not self and isinstance(c, GuardedH11) and c._idle()]
            oldest = min(idle, key=lambda c: c._idle_since, default=self)
            oldest.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_headers()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._idle_since = time.monotonic()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """A request h11 cannot read (a malformed request line, header or chunk size): 400 with one line of JSON,
        as every refusal here, and the connection closed (uvicorn's own is text)."""
        reason = (
            "the request is not well-formed HTTP/1.1 (its request line, a header or a chunk's size); send the "
            "body with a Content-Length, or chunks as RFC 9112 section 7.1 frames them"
        )
        body = json.dumps({"detail": reason, "field": None, "reason": reason}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        with contextlib.suppress(h11.LocalProtocolError):  # a response already begun: the connection closes alone
            for event in (
                h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event))
        self.transport.close()

    def _idle(self) -> bool:
        """Between requests (or before the first): no request of its own is being answered."""
        return (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing()

    def _watch_headers(self) -> None:
        if not self._idle():
            self._stop_timer()
        elif self._header_timer is None and self.timeout_keep_alive_task is None:
            self._header_timer = self.loop.call_later(self.access.header_timeout_s, self._headers_too_slow)

    def _stop_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self._idle() and not self.transport.is_closing():
            self.transport.close()


def protocol_for(access: Access) -> type[GuardedH11]:
    """The protocol class a server of ``access`` runs (its limits as class attributes: uvicorn makes each
    connection's protocol from the class alone)."""
    return type("GuardedH11", (GuardedH11,), {"access": access})
