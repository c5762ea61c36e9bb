"""Send a good answer to the client: as it came, or translated into its API.

Bytes go out as they arrive, except the end of the answer: what completes it
waits until the answer is in the log (proxy.durable), as on the plain path.
A stream is watched for its end marker: one that breaks first (cut, stalled
past the idle timeout, malformed, or over without its end marker) is never
passed off as complete. With `midstream = "continue"`
the next target continues it (proxy.continuation); otherwise, or when that
fails, the client's stream ends with an error event in its own format and no
end marker.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict

from proxy import errors
from proxy.attempts import Attempt, first_event_is_error, plan
from proxy.call_log import Call, Try, record_event, record_request, record_response, switch
from proxy.continuation import (
    ClientView,
    Splice,
    client_view,
    continuation_request,
    end_marker,
    supports_prefill,
)
from proxy.fallbacks import Target
from proxy.forward import MIB, ClientGone, cut_off, end_answer, send
from proxy.state import BREAKERS, LIFECYCLE, POOL, RESOLVER, RESPONSES_HISTORY, SETTINGS
from proxy.translations import context, route_for
from proxy.upstream import BrokenStream, classify, response_headers
from recorder.bodies import parse_json
from recorder.events import FAILOVER
from recorder.translate.requests import Untranslatable
from recorder.wire import api_module
from recorder.wire.chaining import final_answer
from recorder.wire.sse import SseSplitter, SseTooLarge, parse_block

CONTINUABLE_APIS = frozenset({"openai.chat", "anthropic.messages"})


class Relayed:
    """A vendor stream passed on as it came, event by event, watched for its end marker.

    A vendor's error event is held back (BrokenStream): the call may still be
    continued elsewhere, and otherwise the client gets taplog's error event.
    """

    def __init__(self, api: str, splitter: SseSplitter | None) -> None:
        self.api = api
        self.splitter = splitter  # None: a whole body, complete by HTTP framing
        self.finished = splitter is None

    def convert(self, chunk: bytes) -> bytes:
        if self.splitter is None:
            return chunk
        out = []
        for block in split(self.splitter, chunk):
            event = parse_block(block)
            if event is not None:
                if first_event_is_error(self.api, event.event, event.data):
                    raise BrokenStream(f"the vendor sent an error mid-stream: {event.data[:300]}")
                self.finished = self.finished or api_module(self.api).is_end(event)
            out.append(block)
        return b"".join(out)


class Translated:
    """A vendor stream translated event by event into the client's API."""

    def __init__(self, call: Call, attempt: Attempt, splitter: SseSplitter) -> None:
        route = route_for(call.api, attempt.api)
        assert route is not None and attempt.translation is not None  # planned that way
        self.translator = route.stream(
            context(call.parsed, attempt.target.model, attempt.translation)
        )
        self.splitter = splitter

    @property
    def finished(self) -> bool:
        return self.translator.finished

    @property
    def answer(self) -> dict | None:
        return getattr(self.translator, "answer", None)

    def convert(self, chunk: bytes) -> bytes:
        out: list[bytes] = []
        for block in split(self.splitter, chunk):
            event = parse_block(block)
            if event is None:
                continue
            try:
                translated = self.translator.feed(event)
            except ValueError:
                raise BrokenStream("the vendor sent a malformed event") from None
            if self.translator.failed:
                raise BrokenStream(f"the vendor sent an error mid-stream: {event.data[:300]}")
            out.extend(translated)
        return b"".join(out)


async def relay(
    request: web.Request,
    call: Call,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    """Send a good answer to the client: as it came, or translated into the client's API."""
    attempt = attempt_try.attempt
    if attempt.translation is not None and not attempt.stream:
        return await _relay_translated_body(request, call, attempt_try, upstream, headers)
    if attempt.translation is not None:
        stream: Relayed | Translated = Translated(call, attempt, splitter(request))
        sent_headers = CIMultiDict(
            {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
        )
    else:
        stream = Relayed(attempt.api, splitter(request) if attempt.stream else None)
        sent_headers = CIMultiDict(headers)
        sent_headers.popall("content-length", None)
    response = web.StreamResponse(status=upstream.status, headers=sent_headers)
    outcome, error, sent, held = "ok", None, bytearray(), []
    try:
        await response.prepare(request)
        pending = [chunk for _, chunk in attempt_try.chunks]
        chunks = _chunks(request, upstream, attempt_try, pending)
        await _pipe(response, chunks, stream.convert, lambda: stream.finished, sent, held)
        if not stream.finished:
            raise BrokenStream("the stream ended before its end marker")
        if isinstance(stream, Translated):
            remember_answer(request, call, stream.answer)
        else:
            remember_answer(request, call, final_answer(attempt.api, attempt_try.chunks))
        record_response(request, call, attempt_try, upstream.status, headers, "ok", None)
        outcome = "recorded"
        await end_answer(request, response, call.exchange, held)
    except asyncio.CancelledError:
        if outcome != "recorded":  # else it went wrong while the held end went out
            outcome = "shutdown" if request.app[LIFECYCLE].stopping else "client_disconnected"
        raise
    except ClientGone:
        if outcome != "recorded":
            outcome = "client_disconnected"
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        failure = classify(exc)
        outcome = failure.outcome
        error = str(exc) if isinstance(exc, BrokenStream) else failure.message
        upstream.close()
        record_response(request, call, attempt_try, upstream.status, headers, outcome, error)
        outcome = "recorded"
        await _end_broken_stream(request, call, attempt, response, bytes(sent), error)
    finally:
        upstream.close()
        if outcome != "recorded":
            record_response(request, call, attempt_try, upstream.status, headers, outcome, error)
    return response


async def _pipe(
    response: web.StreamResponse,
    chunks: AsyncIterator[bytes],
    convert: Callable[[bytes], bytes],
    finished: Callable[[], bool],
    sent: bytearray,
    held: list[bytes],
) -> None:
    """Convert and send every chunk, keeping a copy of what the client received.

    Output from the chunk that finishes the answer on is kept in `held` instead:
    it goes out once the answer is in the log (`end_answer`).
    """
    async for chunk in chunks:
        out = convert(chunk)
        if held or finished():
            held.append(out)
        elif out:
            await send(response, out)
            sent += out


async def _end_broken_stream(
    request: web.Request,
    call: Call,
    broken: Attempt,
    response: web.StreamResponse,
    sent: bytes,
    error: str,
) -> None:
    """Continue the answer elsewhere if the rule says so; else end it with an error event."""
    if call.rule.midstream == "continue" and await continue_elsewhere(
        request, call, broken, response, sent, error
    ):
        return
    await _send_quietly(response, errors.stream_error_event(call.api, error))
    cut_off(request)


async def continue_elsewhere(
    request: web.Request,
    call: Call,
    broken: Attempt,
    response: web.StreamResponse,
    sent: bytes,
    error: str,
) -> bool:
    """Ask the next targets to continue the client's partial answer; True once one did."""
    if call.api not in CONTINUABLE_APIS:
        return False
    view = client_view(call.api, sent)
    if view.ended:  # the whole answer is there; only its end marker was lost
        await end_answer(request, response, call.exchange, [end_marker(call.api)])
        return True
    if not view.continuable:
        return False
    breakers = request.app[BREAKERS]
    for target in call.chain:
        if target == broken.target or not breakers[str(target)].allows():
            continue
        prefill_first = supports_prefill(target.provider.type, target.model)
        for prefill in (True, False) if prefill_first else (False,):
            result = await _continue_on(request, call, broken, target, view, prefill, error)
            if result is not None:
                return await _splice(request, call, response, view, *result)
    return False


async def _continue_on(
    request: web.Request,
    call: Call,
    broken: Attempt,
    target: Target,
    view: ClientView,
    prefill: bool,
    error: str,
) -> tuple[Try, aiohttp.ClientResponse] | None:
    """Open the continuation on `target`: its response when it answered 2xx, else None."""
    body = continuation_request(call.api, call.parsed, view.text, prefill)
    route = call.exchange.route
    try:
        attempt = plan(
            target,
            route.provider,
            call.api,
            body,
            orjson.dumps(body),
            call.headers,
            route.upstream_url,
            prefill,
            call.history,
        )
    except Untranslatable:
        return None
    reason = f"continuing a broken stream ({error})" + (" with a prefill" if prefill else "")
    record_event(
        request,
        call,
        FAILOVER,
        **switch(broken.target, target),
        reason=reason,
        attempt=call.attempts + 1,
    )
    call.attempts += 1
    attempt_try = Try(attempt, call.attempts)
    record_request(request, call, attempt_try)
    try:
        upstream = await open_upstream(request, call, attempt)
    except (aiohttp.ClientError, TimeoutError) as exc:
        failure = classify(exc)
        record_response(
            request, call, attempt_try, None, CIMultiDict(), failure.outcome, failure.message
        )
        return None
    if upstream.status >= 400:  # a refused prefill among others: never shown to the client
        attempt_try.keep(await upstream.read())
        upstream.release()
        record_response(
            request,
            call,
            attempt_try,
            upstream.status,
            response_headers(upstream),
            "upstream_error",
            f"HTTP {upstream.status}",
        )
        return None
    return attempt_try, upstream


async def _splice(
    request: web.Request,
    call: Call,
    response: web.StreamResponse,
    view: ClientView,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
) -> bool:
    """Stream the continuation into the client's open stream."""
    attempt = attempt_try.attempt
    events = splitter(request)
    stream = (
        Translated(call, attempt, events) if attempt.translation else Relayed(attempt.api, events)
    )
    splice = Splice(call.api, view)
    outcome, error, held = "ok", None, []
    headers = response_headers(upstream)
    try:
        chunks = _chunks(request, upstream, attempt_try, [])
        convert = lambda chunk: splice.convert(stream.convert(chunk))  # noqa: E731
        await _pipe(response, chunks, convert, lambda: stream.finished, bytearray(), held)
        if not stream.finished:
            raise BrokenStream("the continuation ended before its end marker")
        record_response(request, call, attempt_try, upstream.status, headers, "ok", None)
        outcome = "recorded"
        await end_answer(request, response, call.exchange, held)
        return True
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        outcome, error = classify(exc).outcome, str(exc) or classify(exc).message
        return False
    except ClientGone:
        if outcome != "recorded":
            outcome = "client_disconnected"
        return True
    finally:
        upstream.close()
        if outcome != "recorded":
            record_response(request, call, attempt_try, upstream.status, headers, outcome, error)


async def open_upstream(
    request: web.Request, call: Call, attempt: Attempt
) -> aiohttp.ClientResponse:
    """Send one try upstream and wait for its headers, within the rule's timeouts."""
    async with asyncio.timeout(call.rule.ttfb_timeout):
        return await request.app[POOL].request(
            "POST",
            attempt.url,
            data=attempt.body,
            headers=attempt.headers,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(
                total=call.rule.total_timeout,
                sock_connect=call.rule.connect_timeout,
                sock_read=call.rule.idle_timeout,
            ),
        )


def splitter(request: web.Request) -> SseSplitter:
    """A stream's event splitter, bounded by `--max-sse-event-mb` as on the plain path."""
    return SseSplitter(int(request.app[SETTINGS].max_sse_event_mb * MIB))


def split(splitter: SseSplitter, chunk: bytes) -> list[bytes]:
    """The events `chunk` completes; one over the size limit breaks the stream."""
    try:
        return splitter.feed(chunk)
    except SseTooLarge as exc:
        limit = f"{exc.limit / MIB:.3g} MiB (--max-sse-event-mb)"
        raise BrokenStream(f"a stream event is over {limit}") from None


async def _chunks(
    request: web.Request, upstream: aiohttp.ClientResponse, attempt_try: Try, pending: list[bytes]
):
    """The try's chunks, those read already first; more than `--max-answer-mb` breaks it."""
    max_mb = request.app[SETTINGS].max_answer_mb
    size = 0
    for chunk in pending:
        size += len(chunk)
        yield chunk
    async for chunk in upstream.content.iter_any():
        attempt_try.keep(chunk)
        size += len(chunk)
        if size > max_mb * MIB:
            raise BrokenStream(f"the answer streamed over {max_mb:g} MiB (--max-answer-mb)")
        yield chunk


async def _relay_translated_body(
    request: web.Request,
    call: Call,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
    headers: CIMultiDict[str],
) -> web.StreamResponse:
    """A whole answer translated into the client's API, sent once it is in the log."""
    attempt = attempt_try.attempt
    body = b"".join(chunk for _, chunk in attempt_try.chunks)  # read whole by _answer_start
    upstream.release()
    route = route_for(call.api, attempt.api)
    assert route is not None and attempt.translation is not None  # planned that way
    ctx = context(call.parsed, attempt.target.model, attempt.translation)
    answer = route.answer(parse_json(body), ctx)
    remember_answer(request, call, answer)
    translated = orjson.dumps(answer)
    record_response(request, call, attempt_try, upstream.status, headers, "ok", None)
    response = web.StreamResponse(headers={"content-type": "application/json"})
    response.content_length = len(translated)
    with contextlib.suppress(ClientGone):
        await response.prepare(request)
        await end_answer(request, response, call.exchange, [translated])
    return response


def remember_answer(request: web.Request, call: Call, answer: dict | None) -> None:
    """A Responses answer taplog made: later calls may chain to it by id."""
    if call.api != "openai.responses" or not isinstance(answer, dict):
        return
    output = answer.get("output") if isinstance(answer.get("output"), list) else []
    request.app[RESPONSES_HISTORY].remember(answer["id"], call.parsed, output)
    request.app[RESOLVER].remember_response(answer["id"], call.exchange.session)


async def _send_quietly(response: web.StreamResponse, data: bytes) -> None:
    with contextlib.suppress(ClientGone):
        await send(response, data)
