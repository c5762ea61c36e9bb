"""Forward one call upstream and stream the answer back, teeing it to the log.

Bytes go to the client the moment they arrive, in the chunks they arrived
in; the recorder gets the same chunks with their arrival times and does all
parsing on its own thread. Only the chunk that completes the answer waits
until the answer is in the log (proxy.durable). Whatever happens (vendor
error, timeout, client gone, shutdown) exactly one `llm.response` is recorded
with the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from proxy import errors
from proxy.durable import EndGuard, logged
from proxy.routing import Route
from proxy.state import LIFECYCLE, POOL, RECORDER, RESOLVER, RESPONSES_HISTORY, SETTINGS
from proxy.upstream import UpstreamFailure, classify, response_headers
from recorder.events import ERROR, make_event
from recorder.exchange import Chunk, LlmResponse
from recorder.secrets import safe_headers
from recorder.wire.chaining import final_answer, response_id
from recorder.wire.sse import SseTooLarge
from recorder.writer import EventRecord


class ClientGone(Exception):
    """Writing to the client failed: it disconnected."""


@dataclass
class Exchange:
    """One client call on its way through the proxy."""

    route: Route
    session: str
    id: str
    secrets: tuple[bytes, ...]
    received: float  # perf_counter() when the client's request arrived
    parsed: Any = None  # the client's request body, parsed
    started: float = field(default_factory=time.perf_counter)  # the upstream call started
    chunks: list[Chunk] = field(default_factory=list)
    size: int = 0  # bytes in chunks
    delivered: int = 0  # chunks fully handed to the client
    ttfb_ms: float | None = None

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def keep(self, chunk: bytes) -> None:
        at = self.elapsed_ms()
        if self.ttfb_ms is None:
            self.ttfb_ms = at
        self.chunks.append((at, chunk))
        self.size += len(chunk)


async def send(response: web.StreamResponse, chunk: bytes) -> None:
    try:
        await response.write(chunk)
    except ConnectionResetError as exc:  # aiohttp's ClientConnectionResetError included
        raise ClientGone from exc


def _client_response(
    upstream: aiohttp.ClientResponse, headers: CIMultiDict[str]
) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason, headers=headers)
    if "content-length" in headers:
        response.content_length = int(headers["content-length"])
    return response


def cut_off(request: web.Request) -> None:
    """End the client's response without a clean end: it must not look complete."""
    if request.transport is not None:
        request.transport.close()


@dataclass
class _Answer:
    """What goes back to the client, and whether it is in the log yet."""

    status: int | None = None
    headers: CIMultiDict[str] = field(default_factory=CIMultiDict)
    response: web.StreamResponse | None = None
    recorded: bool = False

    def finish(
        self, request: web.Request, exchange: Exchange, outcome: str, error: str | None = None
    ) -> None:
        """Record the answer once, with the first outcome that applies."""
        if not self.recorded:
            self.recorded = True
            _record_answer(request, exchange, self.status, self.headers, outcome, error)


MIB = 1024 * 1024


class AnswerTooLarge(Exception):
    """The answer streamed more than `--max-answer-mb`."""


async def forward(
    request: web.Request, exchange: Exchange, body: bytes, headers: CIMultiDict[str]
) -> web.StreamResponse:
    app = request.app
    settings = app[SETTINGS]
    answer = _Answer()
    exchange.started = time.perf_counter()
    max_answer = int(settings.max_answer_mb * MIB)
    max_event = int(settings.max_sse_event_mb * MIB)
    guard: EndGuard | None = None
    try:
        async with (
            asyncio.timeout(settings.total_timeout) as deadline,
            app[POOL].request(
                request.method,
                URL(exchange.route.upstream_url, encoded=True),
                data=body or None,
                headers=headers,
                allow_redirects=False,
            ) as upstream,
        ):
            answer.status, answer.headers = upstream.status, response_headers(upstream)
            answer.response = _client_response(upstream, answer.headers)
            await answer.response.prepare(request)
            guard, held = EndGuard(exchange.route.api, answer.headers, max_event), []
            async for chunk in upstream.content.iter_any():
                exchange.keep(chunk)
                if exchange.size > max_answer:
                    raise AnswerTooLarge
                if held or guard.completes(chunk):
                    held.append(chunk)  # the answer's end waits for its record
                    continue
                await send(answer.response, chunk)
                exchange.delivered += 1
            # Recorded before the client's response ends, so the agent's next call
            # (carrying tool results, naming this answer) always finds it logged.
            answer.finish(request, exchange, "ok" if answer.status < 400 else "upstream_error")
            await end_answer(request, answer.response, exchange, held)
    except asyncio.CancelledError:
        stopping = app[LIFECYCLE].stopping
        answer.finish(request, exchange, "shutdown" if stopping else "client_disconnected")
        raise
    except ClientGone:
        answer.finish(request, exchange, "client_disconnected")
    except AnswerTooLarge:
        message = f"the answer streamed over {settings.max_answer_mb:g} MiB (--max-answer-mb)"
        await _stop(request, exchange, answer, guard, "too_large", message)
    except SseTooLarge:
        message = f"a stream event is over {settings.max_sse_event_mb:g} MiB (--max-sse-event-mb)"
        await _stop(request, exchange, answer, guard, "too_large", message)
    except (aiohttp.ClientError, TimeoutError) as exc:
        if deadline.expired():
            message = f"the call took over {settings.total_timeout:g} s (--total-timeout)"
            await _stop(request, exchange, answer, guard, "timeout", message)
        elif not answer.recorded:
            failure = classify(exc)
            if answer.response is None:
                _failure_answer(answer, exchange, failure)
            else:
                cut_off(request)
            answer.finish(request, exchange, failure.outcome, failure.message)
    finally:
        answer.finish(request, exchange, "proxy_error", "taplog failed on this call")
    return answer.response


async def _stop(
    request: web.Request,
    exchange: Exchange,
    answer: _Answer,
    guard: EndGuard | None,
    outcome: str,
    message: str,
) -> None:
    """End an answer taplog will not pass on whole: a stream hears why, then is cut off."""
    if answer.response is None:
        _failure_answer(answer, exchange, UpstreamFailure(outcome, 504, message))
    else:
        if guard is not None and guard.streamed:
            with contextlib.suppress(ClientGone):
                await send(answer.response, errors.stream_error_event(exchange.route.api, message))
        cut_off(request)
    answer.finish(request, exchange, outcome, message)


async def end_answer(
    request: web.Request, response: web.StreamResponse, exchange: Exchange, held: list[bytes]
) -> None:
    """Send the held end of a recorded answer once it is in the log (proxy.durable)."""
    app = request.app
    if not await logged(app[RECORDER], exchange.session) and app[SETTINGS].fsync == "always":
        cut_off(request)  # never a complete answer that the log lacks
        reason = "the client was cut off before the end of this answer: the log could not take it"
        app[RECORDER].record(
            EventRecord(make_event(ERROR, exchange.session, exchange.id, reason=reason))
        )
        return
    for chunk in held:
        await send(response, chunk)
        exchange.delivered += 1
    await response.write_eof()


def _failure_answer(answer: _Answer, exchange: Exchange, failure: UpstreamFailure) -> None:
    """taplog's own error answer when the vendor gave none; recorded like any other."""
    answer.response = errors.error_response(
        exchange.route.provider, failure.status, failure.message, failure.outcome
    )
    answer.status = failure.status
    answer.headers = CIMultiDict({"content-type": "application/json"})
    exchange.chunks.append((exchange.elapsed_ms(), answer.response.body))


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
        delivered_chunks=exchange.delivered,
        outcome=outcome,
        latency_ms=exchange.elapsed_ms(),
        overhead_ms=(exchange.started - exchange.received) * 1000,
        ttfb_ms=exchange.ttfb_ms,
        error=error,
        secrets=exchange.secrets,
    )
    app[RECORDER].record(answer)
    if status == 200:
        _remember_chain(app, exchange)


def _remember_chain(app: web.Application, exchange: Exchange) -> None:
    """A Responses answer that later calls may name by `previous_response_id`."""
    chained = response_id(exchange.route.api, exchange.chunks)
    if chained is None:
        return
    app[RESOLVER].remember_response(chained, exchange.session)
    whole = final_answer(exchange.route.api, exchange.chunks)
    if whole is not None and isinstance(exchange.parsed, dict):
        output = whole.get("output") if isinstance(whole.get("output"), list) else []
        app[RESPONSES_HISTORY].remember(chained, exchange.parsed, output)
