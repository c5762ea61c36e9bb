"""The vendor side: one shared connection pool, header hygiene, failure taxonomy.

Every failure of an upstream call is translated once, here, into what the
proxy does next:

    exception                                 outcome        before the answer starts
    ────────────────────────────────────────  ─────────────  ────────────────────────
    no answer within ttfb_timeout             timeout        504
    ConnectionTimeoutError (connect_timeout)  timeout        504
    SocketTimeoutError (silent for idle)      timeout        504
    TimeoutError (the try's total_timeout)    timeout        504
    ClientPayloadError (a broken body)        upstream_cut   502
    BrokenStream (malformed, cut, no end,     upstream_cut,  502
      an error event, over a limit)           upstream_error,
                                              too_large
    ClientConnectorError, disconnects, OS     unreachable    502

After the answer started, every one of them ends the client's answer without
a clean end (a stream first hears why in its own API's error event), so the
client never mistakes a broken answer for a complete one (`proxy.relay`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import aiohttp
from aiohttp.abc import AbstractStreamWriter
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from taplog.proxy.config import Settings
from taplog.proxy.failover.rules import Rule

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Recomputed by the client library (length, host) or chosen by it so that it
# can decode what comes back (accept-encoding).
_NOT_FORWARDED = frozenset({"host", "content-length", "accept-encoding"})
_NOT_SENT_UPSTREAM = HOP_BY_HOP | _NOT_FORWARDED


def open_pool(settings: Settings) -> aiohttp.ClientSession:
    """The one upstream client of the process; requests never pick their own."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
        timeout=aiohttp.ClientTimeout(
            total=None, connect=settings.connect_timeout, sock_read=settings.read_timeout
        ),
        auto_decompress=True,
        trust_env=False,
        skip_auto_headers=("User-Agent", "Content-Type"),
    )


def _listed_in_connection(headers: CIMultiDictProxy[str]) -> set[str]:
    return {
        token.strip().lower()
        for value in headers.getall("connection", ())
        for token in value.split(",")
    }


def request_headers(incoming: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """The client's headers as they go upstream: hop-by-hop and taplog's own removed."""
    listed = _listed_in_connection(incoming)
    dropped = _NOT_SENT_UPSTREAM | listed if listed else _NOT_SENT_UPSTREAM
    return CIMultiDict(
        (name, value)
        for name, value in incoming.items()
        if (lowered := name.lower()) not in dropped and not lowered.startswith("x-taplog-")
    )


def response_headers(upstream: aiohttp.ClientResponse) -> CIMultiDict[str]:
    """The vendor's headers as they go to the client.

    The body is decoded on the way (the log needs the JSON), so a
    Content-Encoding and the encoded Content-Length no longer apply.
    """
    listed = _listed_in_connection(upstream.headers)
    dropped = HOP_BY_HOP | listed if listed else HOP_BY_HOP
    if upstream.headers.get("content-encoding", "identity") != "identity":
        dropped = dropped | {"content-encoding", "content-length"}
    return CIMultiDict(
        (name, value) for name, value in upstream.headers.items() if name.lower() not in dropped
    )


class BrokenStream(Exception):
    """The vendor's answer cannot go on: malformed, an error event, over without its end."""

    def __init__(self, message: str, outcome: str = "upstream_cut") -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True, slots=True)
class UpstreamFailure:
    outcome: str  # timeout, unreachable, upstream_cut, too_large, upstream_error
    status: int  # what the client gets when nothing was sent yet
    message: str


def classify(
    exc: BaseException, rule: Rule, ttfb_expired: bool = False, started: bool = False
) -> UpstreamFailure:
    """What an upstream exception means for the call (see the module table); the
    timeouts are the rule's (a plain call's are the `--*-timeout` settings). Once the
    answer `started`, a lost connection is a cut answer, not an unreachable vendor."""
    if ttfb_expired:
        message = f"the vendor did not answer within {rule.ttfb_timeout:g} s ({rule.knob('ttfb')})"
        return UpstreamFailure("timeout", 504, message)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        seconds, knob = rule.connect_timeout, rule.knob("connect")
        return UpstreamFailure("timeout", 504, f"could not connect within {seconds:g} s ({knob})")
    if isinstance(exc, aiohttp.SocketTimeoutError):
        seconds, knob = rule.idle_timeout, rule.knob("idle")
        if started:
            message = f"the vendor sent nothing for {seconds:g} s ({knob})"
        else:
            message = f"the vendor did not answer within {seconds:g} s ({knob})"
        return UpstreamFailure("timeout", 504, message)
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        seconds, knob = rule.total_timeout, rule.knob("total")
        return UpstreamFailure("timeout", 504, f"the call took over {seconds:g} s ({knob})")
    if isinstance(exc, BrokenStream):
        return UpstreamFailure(exc.outcome, 502, str(exc))
    if started or isinstance(exc, aiohttp.ClientPayloadError):
        return UpstreamFailure("upstream_cut", 502, "the vendor's answer broke off")
    return UpstreamFailure("unreachable", 502, "cannot reach the vendor")


class Sendable(Protocol):
    """What `open_upstream` sends: a try of the failover (`proxy.failover.attempts.Attempt`)."""

    method: str
    url: str
    body: bytes
    encoded: bytes | None  # the client's bytes of `body`, sent instead of it (its Content-Encoding)
    headers: CIMultiDict[str]


async def open_upstream(
    pool: aiohttp.ClientSession, attempt: Sendable, rule: Rule, sent: Callable[[], None]
) -> aiohttp.ClientResponse:
    """Send one try upstream and wait for its headers, under the rule's timeouts.

    `sent()` as soon as the body is handed to the connection whole (at once for a call
    without one), and in any case before this returns or raises (the client gone, the
    vendor unreachable or answering early): it may be called twice."""
    body = (attempt.body if attempt.encoded is None else attempt.encoded) or None
    if body is None:
        sent()
    try:
        return await pool.request(
            attempt.method,
            URL(attempt.url, encoded=True),
            data=None if body is None else _Body(body, sent),
            headers=attempt.headers,
            allow_redirects=False,
            timeout=rule.client_timeout,
        )
    finally:
        sent()


class _Body(aiohttp.BytesPayload):
    """A request body that tells when it has been handed to the connection whole."""

    def __init__(self, value: bytes, sent: Callable[[], None]) -> None:
        super().__init__(value)
        self._sent = sent

    async def write_with_length(self, writer: AbstractStreamWriter, length: int | None) -> None:
        await super().write_with_length(writer, length)
        self._sent()
