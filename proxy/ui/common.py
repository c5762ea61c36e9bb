"""What every page and endpoint of the web UI shares: its state, the guard, JSON answers.

The guard lets a request in only with a token when tokens are configured (the
rule of `/metrics`, proxy.auth), and, on a loopback-only UI without tokens,
only when the Host header names loopback too: a web page elsewhere that
rebinds its own name to 127.0.0.1 cannot read the sessions. Every answer
carries headers that keep recorded content inert: a Content-Security-Policy
allowing nothing but the UI's own files, no MIME sniffing, no framing, no
Referer (which would carry a `/t/<token>/` path).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from taplog.proxy import auth
from taplog.proxy.auth import Tokens
from taplog.recorder.sessions import SESSION_ID
from taplog.recorder.store.lognames import log_path

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
NEEDS_TOKEN = (
    "this taplog UI needs a token: open http://HOST:PORT/t/<token>/ui/ "
    "(the token is one of TAPLOG_AUTH_TOKEN's)"
)


@dataclass
class UiState:
    """Where the UI reads from and who may read it."""

    data_dir: Path
    tokens: Tokens
    loopback_only: bool  # listening on loopback alone: check the Host header too
    closing: asyncio.Event = field(default_factory=asyncio.Event)  # ends live streams

    @property
    def sessions_dir(self) -> Path:
        return self.data_dir / "sessions"


UI = web.AppKey("ui", UiState)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _host_is_loopback(request: web.Request) -> bool:
    host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
    return auth.is_loopback(host.strip("[]"))


def guarded(handler: Handler) -> Handler:
    """The handler behind the token check (and the Host check on loopback)."""

    @functools.wraps(handler)
    async def guard(request: web.Request) -> web.StreamResponse:
        state = request.app[UI]
        if state.tokens.required:
            if not state.tokens.accepts(*auth.presented(request)):
                return refuse(401, NEEDS_TOKEN)
        elif state.loopback_only and not _host_is_loopback(request):
            return refuse(421, "this taplog UI answers only to localhost or 127.0.0.1")
        response = await handler(request)
        if not response.prepared:
            response.headers.update(SECURITY_HEADERS)
        return response

    return guard


def refuse(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=f"taplog: {message}\n", headers=SECURITY_HEADERS.copy())


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


def json_response(value: Any, status: int = 200) -> web.Response:
    """JSON with times in UTC (`…+00:00`), so the browser shows them in its own zone."""
    body = orjson.dumps(value, default=_plain, option=orjson.OPT_NAIVE_UTC)
    return web.Response(body=body, status=status, content_type="application/json")


def json_error(status: int, message: str) -> web.Response:
    return json_response({"error": message}, status)


def session_file(request: web.Request) -> Path | None:
    """The log of the session named in the URL; None when the id is not one or has no log."""
    session = request.match_info["session"]
    if not SESSION_ID.fullmatch(session):
        return None
    path = log_path(request.app[UI].sessions_dir, session)
    return path if path.is_file() else None
