"""The vendor side: one shared connection pool, header hygiene, failure taxonomy.

Every failure of an upstream call is translated once, here, into what the
proxy does next:

    exception                               before the answer starts   after
    ───────────────────────────────────────  ────────────────────────  ─────────────────
    TimeoutError (connect, silent vendor)    504  outcome "timeout"     cut the client off
    ClientConnectorError, disconnects, OS    502  "unreachable"         cut the client off
    ClientPayloadError (broken body)         502  "upstream_cut"        cut the client off
    BrokenStream (malformed, no end marker)  -                          cut the client off

"Cut the client off" closes the client connection without a clean end, so the
client sees the same truncation taplog saw and never mistakes it for a
complete answer.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy

from proxy.config import Settings

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
    """The vendor's stream cannot go on: malformed, or over without its end marker."""


@dataclass(frozen=True, slots=True)
class UpstreamFailure:
    outcome: str  # timeout, unreachable, upstream_cut
    status: int  # what the client gets when nothing was sent yet
    message: str


def classify(exc: BaseException) -> UpstreamFailure:
    """What an upstream exception means for the call (see the module table)."""
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return UpstreamFailure("timeout", 504, "the vendor did not answer in time")
    if isinstance(exc, aiohttp.ClientPayloadError | BrokenStream):
        return UpstreamFailure("upstream_cut", 502, "the vendor's answer broke off")
    return UpstreamFailure("unreachable", 502, "cannot reach the vendor")
