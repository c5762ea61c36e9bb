"""Serve a call through its fallback chain: retry, switch vendor, translate back.

The chain is the client's own target first, then the rule's targets, minus
those whose circuit breaker is open. Each target gets up to `retries` more
tries for retryable failures (`retry-after` honoured when it fits, otherwise
a short jittered backoff). Only before the first byte reaches the client can
a call move on; after that a broken stream ends with an error event in the
client's format and no end marker, never passed off as complete.

Every try is recorded: its `llm.request` exactly as sent (translated ones
included, with `attempt` and `translated_from`), its `llm.response`, and a
`failover` event for each switch. The client sees either a complete answer
or, when every target failed, the original error of its own vendor.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict

from proxy import errors
from proxy.attempts import (
    FINAL,
    OK,
    RETRY,
    Attempt,
    first_event_is_error,
    plan,
    retry_after,
    verdict,
)
from proxy.fallbacks import Rule, Target
from proxy.forward import Exchange, _ClientGone, _cut_off, _send
from proxy.state import BREAKERS, FALLBACKS, LIFECYCLE, POOL, RECORDER
from proxy.upstream import BrokenStream, classify, request_headers, response_headers
from recorder.bodies import parse_json
from recorder.events import FAILOVER, make_event
from recorder.exchange import LlmRequest, LlmResponse
from recorder.secrets import fingerprint, safe_headers
from recorder.translate.answers import chat_answer_to_messages, messages_answer_to_chat
from recorder.translate.requests import Untranslatable
from recorder.translate.streams import AnthropicToChatStream, ChatToAnthropicStream
from recorder.wire import api_module
from recorder.wire.sse import SseSplitter, parse_block
from recorder.writer import EventRecord

MAX_WAIT = 5.0  # never sleep longer than this for a retry


@dataclass
class Call:
    """The client's call, as the handler resolved it."""

    exchange: Exchange
    parsed: dict[str, Any]
    body: bytes
    headers: Any  # the client's CIMultiDictProxy
    key_fingerprint: str | None
    rule: Rule
    attempts: int = 0
    primary_error: tuple[int, CIMultiDict[str], bytes] | None = None
    last_reason: str = ""

    @property
    def api(self) -> str:
        return self.exchange.route.api


@dataclass
class _Try:
    """One upstream try: what came back, and the chunks with their arrival times."""

    attempt: Attempt
    number: int
    started: float = field(default_factory=time.perf_counter)
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    ttfb_ms: float | None = None

    def keep(self, chunk: bytes) -> None:
        at = (time.perf_counter() - self.started) * 1000
        self.ttfb_ms = at if self.ttfb_ms is None else self.ttfb_ms
        self.chunks.append((at, chunk))


async def serve_with_fallbacks(request: web.Request, call: Call) -> web.StreamResponse:
    route = call.exchange.route
    fallbacks, breakers = request.app[FALLBACKS], request.app[BREAKERS]
    primary = Target(fallbacks.providers[route.provider], str(call.parsed.get("model")))
    chain = [primary, *call.rule.targets]
    usable = [t for t in chain if breakers[str(t)].allows()] or [primary]
    if usable[0] is not primary:  # the call as the client made it is in the log all the same
        _record_original(request, call)
    previous: Target | None = None
    for target in usable:
        try:
            attempt = plan(
                target,
                route.provider,
                call.api,
                call.parsed,
                call.body,
                call.headers,
                route.upstream_url,
            )
        except Untranslatable as exc:
            _record_event(
                request,
                call,
                FAILOVER,
                **_switch(previous or primary, target),
                reason=f"not translatable: {exc}",
                attempt=None,
            )
            continue
        if previous is not None:
            _record_event(
                request,
                call,
                FAILOVER,
                **_switch(previous, target),
                reason=call.last_reason,
                attempt=call.attempts + 1,
            )
        response = await _try_target(request, call, attempt, target is primary)
        if response is not None:
            return response
        previous = target
    return _all_failed(call)


async def _try_target(
    request: web.Request, call: Call, attempt: Attempt, is_primary: bool
) -> web.StreamResponse | None:
    breaker = request.app[BREAKERS][str(attempt.target)]
    for retry in range(call.rule.retries + 1):
        call.attempts += 1
        response, outcome, wait = await _try_once(request, call, attempt, is_primary)
        if outcome == OK:
            breaker.succeeded()
            return response
        if response is not None:  # a final error of the client's own vendor, passed on as is
            return response
        if outcome == FINAL:
            return None
        breaker.failed()
        if retry == call.rule.retries or breaker.state == "open":
            return None
        delay = wait if wait is not None else min(2.0, 0.1 * 2**retry) * random.uniform(0.5, 1.0)
        if delay > MAX_WAIT:
            return None  # waiting that long is worse than another vendor
        await asyncio.sleep(delay)
    return None


async def _try_once(
    request: web.Request, call: Call, attempt: Attempt, is_primary: bool
) -> tuple[web.StreamResponse | None, str, float | None]:
    """(the client's response if one was sent, the verdict, seconds to wait before a retry)."""
    attempt_try = _Try(attempt, call.attempts)
    _record_request(request, call, attempt_try)
    upstream: aiohttp.ClientResponse | None = None
    try:
        async with asyncio.timeout(call.rule.ttfb_timeout):
            upstream = await request.app[POOL].request(
                "POST",
                attempt.url,
                data=attempt.body,
                headers=attempt.headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(sock_read=call.rule.idle_timeout),
            )
            status = upstream.status
            if status >= 400:
                body = await upstream.read()
                attempt_try.keep(body)
                outcome = verdict(status, parse_json(body))
            else:
                outcome = await _answer_start(upstream, attempt_try)
    except (aiohttp.ClientError, TimeoutError) as exc:
        failure = classify(exc)
        call.last_reason = failure.message
        _record_response(
            request, call, attempt_try, None, CIMultiDict(), failure.outcome, failure.message
        )
        if upstream is not None:
            upstream.close()
        return None, RETRY, None
    headers = response_headers(upstream)
    if outcome == OK:
        return await _relay(request, call, attempt_try, upstream, headers), OK, None
    upstream.release()
    error_body = b"".join(chunk for _, chunk in attempt_try.chunks)
    call.last_reason = (
        f"HTTP {status}" if status >= 400 else "error event at the start of the stream"
    )
    _record_response(
        request, call, attempt_try, status, headers, "upstream_error", call.last_reason
    )
    if is_primary and attempt.translation is None and status >= 400:
        call.primary_error = (status, headers, error_body)
        if outcome == FINAL:
            return _replay(call.primary_error), FINAL, None
    return None, outcome, retry_after(headers)


async def _answer_start(upstream: aiohttp.ClientResponse, attempt_try: _Try) -> str:
    """Read a stream up to its first event (an error there means the vendor failed), or a
    whole non-stream body (a cut body is a failure that another target can still fix)."""
    if not attempt_try.attempt.stream:
        attempt_try.keep(await upstream.read())
        return OK
    splitter = SseSplitter()
    async for chunk in upstream.content.iter_any():
        attempt_try.keep(chunk)
        for block in splitter.feed(chunk):
            event = parse_block(block)
            if event is not None:
                failed = first_event_is_error(attempt_try.attempt.api, event.event, event.data)
                return RETRY if failed else OK
    return RETRY  # the stream ended before its first event


class _Relayed:
    """A vendor stream passed on as it came, watched for its end marker or an error."""

    def __init__(self, api: str, streamed: bool) -> None:
        self.api = api
        self.splitter = SseSplitter() if streamed else None
        self.finished = not streamed  # a whole body is complete by HTTP framing
        self.error: bool = False

    def convert(self, chunk: bytes) -> bytes:
        if self.splitter is not None:
            for block in self.splitter.feed(chunk):
                event = parse_block(block)
                if event is None:
                    continue
                self.finished = self.finished or api_module(self.api).is_end(event)
                self.error = self.error or first_event_is_error(self.api, event.event, event.data)
        return chunk


class _Translated:
    """A vendor stream translated event by event into the client's API."""

    def __init__(self, call: Call, attempt: Attempt) -> None:
        names = attempt.translation.tool_names if attempt.translation else None
        self.splitter = SseSplitter()
        if call.api == "openai.chat":
            options = call.parsed.get("stream_options")
            usage = isinstance(options, dict) and options.get("include_usage") is True
            created = int(time.time())
            self.translator: Any = AnthropicToChatStream(
                include_usage=usage, created=created, tool_names=names
            )
        else:
            self.translator = ChatToAnthropicStream(model=attempt.target.model, tool_names=names)

    @property
    def finished(self) -> bool:
        return self.translator.finished

    @property
    def error(self) -> bool:
        return self.translator.error is not None

    def convert(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        for block in self.splitter.feed(chunk):
            event = parse_block(block)
            if event is None:
                continue
            if isinstance(self.translator, ChatToAnthropicStream) and event.data.startswith(
                "[DONE]"
            ):
                out.extend(self.translator.feed(None))
                continue
            data = parse_json(event.data.encode())
            if not isinstance(data, dict):
                raise BrokenStream("the vendor sent a malformed event")
            if isinstance(self.translator, AnthropicToChatStream):
                out.extend(self.translator.feed(event.event, data))
            else:
                out.extend(self.translator.feed(data))
        return b"".join(out)


async def _relay(
    request: web.Request,
    call: Call,
    attempt_try: _Try,
    upstream: aiohttp.ClientResponse,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    """Send a good answer to the client: as it came, or translated into the client's API."""
    attempt = attempt_try.attempt
    if attempt.translation is not None and not attempt.stream:
        return _relay_translated_body(request, call, attempt_try, upstream, headers)
    if attempt.translation is not None:
        stream: _Relayed | _Translated = _Translated(call, attempt)
        sent_headers = CIMultiDict(
            {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
        )
    else:
        stream = _Relayed(attempt.api, attempt.stream)
        sent_headers = CIMultiDict(headers)
        sent_headers.popall("content-length", None)
    response = web.StreamResponse(status=upstream.status, headers=sent_headers)
    outcome, error = "ok", None
    try:
        await response.prepare(request)
        pending = [chunk for _, chunk in attempt_try.chunks]
        async for chunk in _chunks(upstream, attempt_try, pending):
            await _send(response, stream.convert(chunk))
        if not stream.finished:
            raise BrokenStream("the stream ended before its end marker")
        await response.write_eof()
    except asyncio.CancelledError:
        outcome = "shutdown" if request.app[LIFECYCLE].stopping else "client_disconnected"
        raise
    except _ClientGone:
        outcome = "client_disconnected"
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        failure = classify(exc)
        outcome = failure.outcome
        error = str(exc) if isinstance(exc, BrokenStream) else failure.message
        if not stream.error:  # the vendor's own error event already told the client
            await _send_quietly(
                response, errors.stream_error_event(call.exchange.route.provider, error)
            )
        _cut_off(request)
    finally:
        upstream.close()
        _record_response(request, call, attempt_try, upstream.status, headers, outcome, error)
    return response


async def _chunks(upstream: aiohttp.ClientResponse, attempt_try: _Try, pending: list[bytes]):
    for chunk in pending:
        yield chunk
    async for chunk in upstream.content.iter_any():
        attempt_try.keep(chunk)
        yield chunk


def _relay_translated_body(
    request: web.Request,
    call: Call,
    attempt_try: _Try,
    upstream: aiohttp.ClientResponse,
    headers: CIMultiDict[str],
) -> web.Response:
    """A whole answer translated into the client's API."""
    body = b"".join(chunk for _, chunk in attempt_try.chunks)  # read whole by _answer_start
    upstream.release()
    answer = parse_json(body)
    names = attempt_try.attempt.translation.tool_names
    if call.api == "openai.chat":
        translated = messages_answer_to_chat(answer, created=int(time.time()), tool_names=names)
    else:
        translated = chat_answer_to_messages(answer, tool_names=names)
    _record_response(request, call, attempt_try, upstream.status, headers, "ok", None)
    return web.Response(body=orjson.dumps(translated), content_type="application/json")


async def _send_quietly(response: web.StreamResponse, data: bytes) -> None:
    with contextlib.suppress(_ClientGone):
        await _send(response, data)


def _replay(error: tuple[int, CIMultiDict[str], bytes]) -> web.Response:
    status, headers, body = error
    headers = CIMultiDict(headers)
    headers.popall("content-length", None)
    return web.Response(status=status, headers=headers, body=body)


def _all_failed(call: Call) -> web.Response:
    """Every target failed: the client's own vendor's error, else taplog's 502."""
    if call.primary_error is not None:
        return _replay(call.primary_error)
    message = f"every vendor in the fallback chain failed (last: {call.last_reason})"
    return errors.error_response(call.exchange.route.provider, 502, message, "all_targets_failed")


def _switch(source: Target, target: Target) -> dict[str, str]:
    return {
        "from_provider": source.provider.name,
        "from_model": source.model,
        "to_provider": target.provider.name,
        "to_model": target.model,
    }


def _record_event(request: web.Request, call: Call, kind: str, **payload: Any) -> None:
    event = make_event(kind, call.exchange.session, call.exchange.id, **payload)
    request.app[RECORDER].record(EventRecord(event))


def _record_request(request: web.Request, call: Call, attempt_try: _Try) -> None:
    attempt = attempt_try.attempt
    translation = attempt.translation
    record = LlmRequest(
        session=call.exchange.session,
        exchange=call.exchange.id,
        api=attempt.api,
        provider=attempt.target.provider.name,
        method="POST",
        path=call.exchange.route.path,
        upstream_url=attempt.url,
        headers=safe_headers(attempt.headers.items()),
        key_fingerprint=call.key_fingerprint
        if translation is None
        else fingerprint(attempt.target.provider.api_key()),
        body=attempt.body,
        parsed=attempt.parsed,
        attempt=attempt_try.number,
        secrets=call.exchange.secrets + _own_secret(attempt),
    )
    if translation is not None:
        record.event.update(translated_from=call.api, dropped=translation.dropped)
    request.app[RECORDER].record(record)


def _record_original(request: web.Request, call: Call) -> None:
    """The client's request, which went to no vendor as it was (attempt 0)."""
    route = call.exchange.route
    record = LlmRequest(
        session=call.exchange.session,
        exchange=call.exchange.id,
        api=route.api,
        provider=route.provider,
        method="POST",
        path=route.path,
        upstream_url=route.upstream_url,
        headers=safe_headers(request_headers(call.headers).items()),
        key_fingerprint=call.key_fingerprint,
        body=call.body,
        parsed=call.parsed,
        attempt=0,
        secrets=call.exchange.secrets,
    )
    record.event["sent"] = False
    request.app[RECORDER].record(record)


def _own_secret(attempt: Attempt) -> tuple[bytes, ...]:
    key = attempt.target.provider.api_key()
    return (key.encode(),) if key and attempt.translation is not None else ()


def _record_response(
    request: web.Request,
    call: Call,
    attempt_try: _Try,
    status: int | None,
    headers: CIMultiDict[str],
    outcome: str,
    error: str | None,
) -> None:
    attempt = attempt_try.attempt
    request.app[RECORDER].record(
        LlmResponse(
            session=call.exchange.session,
            exchange=call.exchange.id,
            api=attempt.api,
            provider=attempt.target.provider.name,
            status=status,
            headers=safe_headers(headers.items()),
            chunks=attempt_try.chunks,
            outcome=outcome,
            latency_ms=(time.perf_counter() - attempt_try.started) * 1000,
            ttfb_ms=attempt_try.ttfb_ms,
            error=error,
            secrets=call.exchange.secrets + _own_secret(attempt),
        )
    )
