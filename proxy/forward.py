"""Forward one call upstream and stream the answer back, teeing it to the log.

Bytes go to the client the moment they arrive, in the chunks they arrived
in; the recorder gets the same chunks with their arrival times and does all
parsing on its own thread. Whatever happens (vendor error, timeout, client
gone, shutdown) exactly one `llm.response` is recorded with the outcome.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from proxy import errors
from proxy.routing import Route
from proxy.state import LIFECYCLE, POOL, RECORDER, RESOLVER
from proxy.upstream import UpstreamFailure, classify, response_headers
from recorder.exchange import Chunk, LlmResponse
from recorder.secrets import safe_headers
from recorder.wire.chaining import response_id


class _ClientGone(Exception):
    """Writing to the client failed: it disconnected."""


@dataclass
class Exchange:
    """One client call on its way through the proxy."""

    route: Route
    session: str
    id: str
    secrets: tuple[bytes, ...]
    started: float = field(default_factory=time.perf_counter)
    chunks: list[Chunk] = field(default_factory=list)
    ttfb_ms: float | None = None

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def keep(self, chunk: bytes) -> None:
        at = self.elapsed_ms()
        if self.ttfb_ms is None:
            self.ttfb_ms = at
        self.chunks.append((at, chunk))


async def _send(response: web.StreamResponse, chunk: bytes) -> None:
    try:
        await response.write(chunk)
    except ConnectionResetError as exc:  # aiohttp's ClientConnectionResetError included
        raise _ClientGone from exc


def _answer(upstream: aiohttp.ClientResponse, headers: CIMultiDict[str]) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    if "content-length" in headers:
        response.content_length = int(headers["content-length"])
    return response


def _cut_off(request: web.Request) -> None:
    """End the client's response without a clean end: it must not look complete."""
    if request.transport is not None:
        request.transport.close()


async def forward(
    request: web.Request, exchange: Exchange, body: bytes, headers: CIMultiDict[str]
) -> web.StreamResponse:
    app = request.app
    status: int | None = None
    answer_headers: CIMultiDict[str] = CIMultiDict()
    response: web.StreamResponse | None = None
    outcome, error = "ok", None
    try:
        async with app[POOL].request(
            request.method,
            URL(exchange.route.upstream_url, encoded=True),
            data=body or None,
            headers=headers,
            allow_redirects=False,
        ) as upstream:
            status, answer_headers = upstream.status, response_headers(upstream)
            response = _answer(upstream, answer_headers)
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                exchange.keep(chunk)
                await _send(response, chunk)
            await response.write_eof()
            outcome = "ok" if status < 400 else "upstream_error"
    except asyncio.CancelledError:
        outcome = "shutdown" if app[LIFECYCLE].stopping else "client_disconnected"
        raise
    except _ClientGone:
        outcome = "client_disconnected"
    except (aiohttp.ClientError, TimeoutError) as exc:
        failure = classify(exc)
        outcome, error = failure.outcome, failure.message
        if response is None:
            status, answer_headers, response = _failure_answer(exchange, failure)
        else:
            _cut_off(request)
    finally:
        _record_answer(request, exchange, status, answer_headers, outcome, error)
    return response


def _failure_answer(
    exchange: Exchange, failure: UpstreamFailure
) -> tuple[int, CIMultiDict[str], web.Response]:
    """taplog's own error answer when the vendor gave none; recorded like any other."""
    response = errors.error_response(
        exchange.route.provider, failure.status, failure.message, failure.outcome
    )
    exchange.chunks.append((exchange.elapsed_ms(), response.body))
    headers = CIMultiDict({"content-type": "application/json"})
    return failure.status, headers, response


def _record_answer(
    request: web.Request,
    exchange: Exchange,
    status: int | None,
    headers: CIMultiDict[str],
    outcome: str,
    error: str | None,
) -> None:
    app = request.app
    answer = LlmResponse(
        session=exchange.session,
        exchange=exchange.id,
        api=exchange.route.api,
        provider=exchange.route.provider,
        status=status,
        headers=safe_headers(headers.items()),
        chunks=exchange.chunks,
        outcome=outcome,
        latency_ms=exchange.elapsed_ms(),
        ttfb_ms=exchange.ttfb_ms,
        error=error,
        secrets=exchange.secrets,
    )
    app[RECORDER].record(answer)
    if status == 200:
        chained = response_id(exchange.route.api, exchange.chunks)
        if chained is not None:
            app[RESOLVER].remember_response(chained, exchange.session)
