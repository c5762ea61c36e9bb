"""Who may call through taplog: inbound tokens, and where taplog may listen without them.

A client presents a token in one of two ways, so that an unchanged SDK can:

    header        X-Taplog-Token: <token>        (SDKs: default_headers)
    path prefix   /t/<token>/…                   (OPENAI_BASE_URL=http://host:8787/t/<token>/v1)

`/metrics` also takes `Authorization: Bearer <token>` (Prometheus'
`authorization` setting); on API paths that header carries the vendor key and
is left alone. Tokens are compared in constant time (`hmac.compare_digest`),
against every configured token. The `/t/<token>/` prefix is always taken off
the path, with or without tokens configured, so it never reaches a vendor;
`X-Taplog-*` headers are never forwarded (proxy.upstream), and secret header
values are kept out of the log (recorder.secrets). A refused call gets a 401
in the client's API error shape before anything is recorded or forwarded.
`/healthz` and `/readyz` stay open: they reveal nothing.

Listening beyond loopback without tokens is refused at start
(`binding_problem`) unless `insecure_no_auth` says otherwise, loudly.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from aiohttp import web

from taplog.proxy.config import MAKE_TOKEN, Settings

TOKEN_HEADER = "x-taplog-token"
PREFIX = "/t/"
REFUSED = (
    "this taplog needs a token: send it in an X-Taplog-Token header, "
    "or start the base URL's path with /t/<token>/ (see --auth-token)"
)


class Tokens:
    """The configured inbound tokens; none configured means every caller is let in."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self._tokens = tuple(token.encode() for token in tokens)

    @property
    def required(self) -> bool:
        return bool(self._tokens)

    def accepts(self, *presented: str | None) -> bool:
        """Whether any presented value is a configured token (constant time per token)."""
        if not self._tokens:
            return True
        found = False
        for value in presented:
            if value:
                given = value.encode("utf-8", "surrogateescape")
                for token in self._tokens:
                    found |= hmac.compare_digest(given, token)
        return found


def split_token(raw_target: str) -> tuple[str | None, str]:
    """A `/t/<token>/` prefix taken off a raw request target: (token, the rest)."""
    if not raw_target.startswith(PREFIX):
        return None, raw_target
    token, slash, rest = raw_target[len(PREFIX) :].partition("/")
    return token, slash + rest


def bearer(value: str | None) -> str | None:
    if value and value[:7].lower() == "bearer ":
        return value[7:].strip()
    return None


def presented(request: web.Request) -> tuple[str | None, ...]:
    """The tokens a request to one of taplog's own pages offers: the `/t/<token>/` path
    prefix (matched as `{token}`), the X-Taplog-Token header, or a bearer token."""
    return (
        request.match_info.get("token"),
        request.headers.get(TOKEN_HEADER),
        bearer(request.headers.get("authorization")),
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name could resolve to anything


@dataclass(frozen=True)
class Exposure:
    """What a server without tokens would let anyone do, and where its users put a token."""

    exposes: str
    token_use: str


SERVE = Exposure(
    "call vendors through taplog and read its metrics",
    "give clients http://HOST:PORT/t/<token>/v1 as their base URL (or an X-Taplog-Token header)",
)


def binding_problem(settings: Settings, exposure: Exposure = SERVE) -> str | None:
    """Why a server must not start as configured, and how to fix it; None when it may."""
    if is_loopback(settings.host) or settings.auth_tokens or settings.insecure_no_auth:
        return None
    return (
        f"refusing to listen on {settings.host or 'every interface'} without inbound tokens: "
        f"anyone who reaches the port could {exposure.exposes}. "
        "Set TAPLOG_AUTH_TOKEN (or --auth-token) to one or more tokens, e.g. "
        f"export TAPLOG_AUTH_TOKEN=$({MAKE_TOKEN}), and {exposure.token_use}; "
        "or listen on 127.0.0.1. Only on a network you fully trust: --insecure-no-auth."
    )


INSECURE_WARNING = (
    "INSECURE: listening on %s without inbound tokens (--insecure-no-auth): anyone who "
    "reaches this port can call vendors through taplog and read /metrics"
)
