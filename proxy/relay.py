"""Send an answer to the client, as it came or translated into its API: the stream contract.

    vendor chunks ──▶ watch (recorder.vendors.watch) ──▶ whole events ──▶ [translated] ──▶ client
                          │
                          ├─ ended            the record first, then the held end (proxy.end_guard)
                          ├─ finished, but    the answer is whole: taplog adds the end marker,
                          │  no end marker    recorded `ok` with `end_marker_added`
                          ├─ finished, and    the client had the whole answer: the rest is read
                          │  the client left  into the record, `ok` with `client_left_at_end`
                          └─ broken           continued on another target (failover.continuation)
                                              where the rule says `midstream = "continue"`,
                                              else an error event in the client's format

A client's stream ends cleanly only when the vendor's did, or taplog
completed it. A broken one (reset, closed, stalled past the idle timeout,
over a limit, the vendor's error event, or over without its end marker) gets
an error event, starting at an event boundary since only whole events are
ever passed on, and then its body ends without the chunked terminator, so no
SDK takes it for complete. The error event is the vendor's own when it sent
one in the client's format, else taplog's, naming the cause. A malformed
event breaks the stream only where the call could still move on or be
continued (`can_continue`); elsewhere it goes on as it came, for the client's
SDK to fail on as it would without taplog. A body that is not a stream is
cut off the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict

from taplog.proxy import errors
from taplog.proxy.call import Call, Try
from taplog.proxy.config import Settings
from taplog.proxy.end_guard import ClientGone, cut_off, deliver_end, send
from taplog.proxy.failover.attempts import Attempt, plan
from taplog.proxy.failover.continuation import (
    CONTINUABLE_APIS,
    Restarted,
    Splice,
    client_view,
    continuation_request,
)
from taplog.proxy.failover.rules import Target
from taplog.proxy.tool_gate import StreamGate
from taplog.proxy.tool_gating import CallGate, gate_for
from taplog.proxy.upstream import BrokenStream, classify, open_upstream, response_headers
from taplog.recorder.bodies import parse_json
from taplog.recorder.vendors.apis import streams_sse
from taplog.recorder.vendors.routes import answer_context, route_for
from taplog.recorder.vendors.splice import ClientView
from taplog.recorder.vendors.sse import SseTooLarge, parse_block
from taplog.recorder.vendors.translation import Untranslatable
from taplog.recorder.vendors.watch import BodyWatch, Passed, StreamWatch

MIB = 1024 * 1024
REST_SECONDS = 2.0  # reading the end of an answer whose client left once it had it whole
SSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
JSON_STREAM_HEADERS = {"content-type": "application/json; charset=UTF-8"}  # Gemini's, no alt=sse


def can_continue(call: Call) -> bool:
    """Whether a broken stream of this call could be continued on another target."""
    rule = call.rule
    return rule.midstream == "continue" and bool(rule.targets) and call.api in CONTINUABLE_APIS


def watch_for(
    settings: Settings, attempt: Attempt, upstream: aiohttp.ClientResponse, every: bool
) -> StreamWatch | BodyWatch:
    """The watch that tells how this answer ends: by its events, or as a body. `every`:
    each event is checked whole (see `recorder.vendors.watch`)."""
    api = attempt.api
    if upstream.content_type == "text/event-stream":
        return StreamWatch(api, int(settings.max_sse_event_mb * MIB), every, attempt.parsed)
    headers = upstream.headers
    length = headers.get("content-length", "")
    known = int(length) if length.isdigit() and "content-encoding" not in headers else None
    close_delimited = not length and "chunked" not in headers.get("transfer-encoding", "")
    return BodyWatch(api, known, close_delimited)


class RelayedStream:
    """The vendor's events (or body) as they came: the client speaks its API."""

    answer: dict | None = None

    def convert(self, passed: Passed) -> bytes:
        return b"".join(passed)

    def blocks(self, passed: Passed) -> list[bytes]:
        return passed


RELAYED = RelayedStream()  # it holds nothing: one serves every call


class TranslatedStream:
    """The vendor's events translated one by one into the client's API."""

    def __init__(self, call: Call, attempt_try: Try) -> None:
        attempt = attempt_try.attempt
        route = route_for(call.api, attempt.api)
        assert route is not None and attempt.translation is not None  # planned that way
        sse = streams_sse(call.api, call.route.path)
        self.translator = route.stream(
            answer_context(call.parsed, attempt.target.model, attempt.translation, sse=sse)
        )
        self.headers = SSE_HEADERS if sse else JSON_STREAM_HEADERS

    @property
    def answer(self) -> dict | None:
        """The whole answer in the client's API, once known (Responses clients)."""
        return self.translator.answer

    def convert(self, passed: Passed) -> bytes:
        return b"".join(self.blocks(passed))

    def blocks(self, passed: Passed) -> list[bytes]:
        """The client's events for the vendor's `passed`."""
        out: list[bytes] = []
        for block in passed:
            event = parse_block(block)
            if event is None:
                continue
            try:
                out.extend(self.translator.feed(event))
            except ValueError:
                raise BrokenStream("the vendor sent a malformed event") from None
        return out


def gated(stream: RelayedStream | TranslatedStream, gate: StreamGate) -> Callable[[Passed], bytes]:
    """`stream`'s conversion with the tool policy's gate after it, in the client's API."""
    return lambda passed: b"".join(gate.feed(stream.blocks(passed)))


@dataclass(slots=True)
class Sent:
    """What the client has received of this answer: its size, and its bytes when they
    differ from the vendor's (a translated stream), for a rescue to read back."""

    size: int = 0
    copy: bytearray | None = None

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if self.copy is not None:
            self.copy += data

    def view(self, call: Call, attempt_try: Try) -> ClientView:
        data = bytes(self.copy) if self.copy is not None else attempt_try.body()[: self.size]
        return client_view(call.api, data)


@dataclass(slots=True)
class Delivery:
    """The client's open response, how vendor events become its bytes, and what is held
    back for its end."""

    request: web.Request
    response: web.StreamResponse
    convert: Callable[[Passed], bytes]
    held: list[bytes] = field(default_factory=list)
    release: Callable[[], list[bytes]] | None = None  # what a gate still holds at the end

    def add_end(self, watch: StreamWatch | BodyWatch) -> None:
        """The end marker the vendor left out, converted like its own events."""
        self.held.append(self.convert([watch.end_event or b""]))


async def relay(
    request: web.Request,
    call: Call,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
    watch: StreamWatch | BodyWatch,
    ready: Passed,
) -> web.StreamResponse:
    """Send a good answer to the client (`ready`: what the watch passed already)."""
    attempt = attempt_try.attempt
    call.served = attempt_try
    translated = attempt.translation is not None
    gate = gate_for(call) if upstream.status < 400 else None
    if translated and not attempt.stream:
        return await _relay_translated_body(request, call, attempt_try, upstream, gate)
    if gate is not None and not watch.streamed:
        return await _relay_gated_body(request, call, attempt_try, upstream, watch, ready, gate)
    stream: RelayedStream | TranslatedStream = RELAYED
    headers = attempt_try.headers
    if translated:
        stream = TranslatedStream(call, attempt_try)
        headers = CIMultiDict(stream.headers)
    if watch.streamed and "content-length" in headers:  # a stream's end is its own
        headers = CIMultiDict(headers)
        headers.popall("content-length")
    response = web.StreamResponse(status=upstream.status, headers=headers)
    if "content-length" in headers:
        response.content_length = int(headers["content-length"])
    delivery = Delivery(request, response, stream.convert)
    stream_gate = gate.stream() if gate is not None else None
    if stream_gate is not None:
        delivery.convert, delivery.release = gated(stream, stream_gate), stream_gate.finish
    sent = Sent(copy=bytearray() if translated or stream_gate is not None else None)
    try:
        await response.prepare(request)
        await _pipe(call, attempt_try, upstream, watch, ready, delivery, sent)
        facts = _complete(watch, delivery)
        _remember(call, attempt_try, watch, stream)
        attempt_try.finish("ok" if upstream.status < 400 else "upstream_error", **facts)
        if gate is not None:
            gate.record(attempt_try)
        await deliver_end(call, request, response, delivery.held)
    except asyncio.CancelledError:
        lifecycle = call.services.lifecycle
        if lifecycle.stopping:
            attempt_try.finish("shutdown")
        else:
            await asyncio.shield(_client_left(attempt_try, upstream, watch))
        raise
    except ClientGone:  # a write failed: what it held did not reach the client
        attempt_try.finish("client_disconnected")
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        upstream.close()
        await _broken(call, attempt_try, watch, delivery, sent, exc, gate)
    finally:
        upstream.close()
        attempt_try.finish("proxy_error", "taplog failed on this call")
        if gate is not None:  # what was decided before the stream broke or the client left
            gate.record(attempt_try)
        call.gated = gate is not None and gate.changed
        if (translated or call.gated) and sent.copy is not None and call.served is attempt_try:
            call.client_bytes = bytes(sent.copy) + b"".join(delivery.held)  # (its end held)
    return response


async def _client_left(
    attempt_try: Try, upstream: aiohttp.ClientResponse, watch: StreamWatch | BodyWatch
) -> None:
    """The client went away while taplog waited on the vendor, with all it was sent. One
    that had the whole answer (every stop reason: only the end marker was still to come,
    as litellm leaves) did not fail: the vendor's rest is read into the record, for at
    most `REST_SECONDS`, and the answer recorded `ok`."""
    if not watch.finished or watch.failure is not None:
        attempt_try.finish("client_disconnected")
        return
    with contextlib.suppress(aiohttp.ClientError, TimeoutError, SseTooLarge):
        async with asyncio.timeout(REST_SECONDS):
            async for chunk in upstream.content.iter_any():
                attempt_try.keep(chunk)
                watch.feed(chunk)
    attempt_try.finish("ok", client_left_at_end=True)


async def _pipe(
    call: Call,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
    watch: StreamWatch | BodyWatch,
    ready: Passed,
    delivery: Delivery,
    sent: Sent,
) -> None:
    """Pass every whole event (or body chunk) on as it arrives, until the vendor's body
    ends; from the one that completes the answer on, hold them for its end. The answer
    limits break the stream. (One loop, no layers: this runs for every chunk.)"""
    settings = call.services.settings
    max_answer = int(settings.max_answer_mb * MIB)
    convert, response, held = delivery.convert, delivery.response, delivery.held
    pending = [ready] if ready else []
    chunks = upstream.content.iter_any()
    while True:
        if pending:
            passed = pending.pop()
        else:
            try:
                chunk = await chunks.__anext__()
            except StopAsyncIteration:
                break
            attempt_try.keep(chunk)
            if attempt_try.size > max_answer:
                limit = f"{settings.max_answer_mb:g} MiB (--max-answer-mb)"
                raise BrokenStream(f"the answer streamed over {limit}", "too_large")
            try:
                passed = watch.feed(chunk)
            except SseTooLarge:
                limit = f"{settings.max_sse_event_mb:g} MiB (--max-sse-event-mb)"
                raise BrokenStream(f"a stream event is over {limit}", "too_large") from None
        out = convert(passed)
        if held or watch.ended:
            held.append(out)
        elif out:
            await send(response, out)
            sent.add(out)
        if watch.failure is not None:
            outcome = "upstream_error" if watch.vendor_error is not None else "upstream_cut"
            raise BrokenStream(watch.failure, outcome)
    held.append(convert(watch.close()))
    if delivery.release is not None:
        held.extend(delivery.release())


def _complete(watch: StreamWatch | BodyWatch, delivery: Delivery) -> dict[str, bool]:
    """At the end of the vendor's body: ended, or whole but for its end marker (which
    taplog adds, `end_marker_added`), or broken."""
    if watch.ended:
        return {}
    if _only_the_end_is_missing(watch):
        delivery.add_end(watch)
        return {"end_marker_added": True}
    if watch.streamed:
        raise BrokenStream("the stream ended before its end marker")
    raise BrokenStream("the body ended before it was whole")


def _only_the_end_is_missing(watch: StreamWatch | BodyWatch) -> bool:
    return watch.finished and watch.vendor_error is None and watch.end_event is not None


def _remember(
    call: Call,
    attempt_try: Try,
    watch: StreamWatch | BodyWatch,
    stream: RelayedStream | TranslatedStream,
) -> None:
    """A Responses answer later calls may chain to (`previous_response_id`)."""
    if call.api != "openai.responses" or attempt_try.status != 200:
        return
    if isinstance(stream, TranslatedStream):
        call.remember(stream.answer)
    elif watch.progress is not None:
        call.remember(watch.progress.answer)
    else:
        call.remember(parse_json(attempt_try.body()))


async def _broken(
    call: Call,
    attempt_try: Try,
    watch: StreamWatch | BodyWatch,
    delivery: Delivery,
    sent: Sent,
    exc: BaseException,
    gate: CallGate | None = None,
) -> None:
    """A broken answer: delivered when it was whole already (its end marker came, or only
    the marker is missing), continued elsewhere when the rule says so (not under the tool
    policy: a continuation's tool calls would pass ungated), else ended with an error event
    (a stream) and cut off."""
    failure = classify(exc, call.rule, started=True)
    if watch.ended or _only_the_end_is_missing(watch):
        facts = {} if watch.ended else {"end_marker_added": True}
        if delivery.release is not None:
            delivery.held.extend(delivery.release())
        if not watch.ended:
            delivery.add_end(watch)
        attempt_try.finish("ok", failure.message, **facts)
        if gate is not None:
            gate.record(attempt_try)
        with contextlib.suppress(ClientGone):
            await deliver_end(call, delivery.request, delivery.response, delivery.held)
        return
    continuing = watch.streamed and call.rule.midstream == "continue" and gate is None
    view = sent.view(call, attempt_try) if continuing and call.api in CONTINUABLE_APIS else None
    attempt_try.finish(failure.outcome, failure.message)
    if not watch.streamed:
        cut_off(delivery.request)
        return
    if view is not None and await _continue_elsewhere(
        call, attempt_try, delivery, view, failure.message
    ):
        return
    own = attempt_try.attempt.translation is None
    await _end_with_error(call, delivery, failure.message, watch.vendor_error if own else None)


async def _end_with_error(
    call: Call, delivery: Delivery, message: str, event: bytes | None = None
) -> None:
    """The client's stream hears why, in its API's format, and ends without its end."""
    with contextlib.suppress(ClientGone):
        sse = streams_sse(call.api, call.route.path)
        await send(delivery.response, event or errors.stream_error_event(call.api, message, sse))
    cut_off(delivery.request)


# -- continuing a broken stream on another target --------------------------------------


async def _continue_elsewhere(
    call: Call, broken: Try, delivery: Delivery, view: ClientView, error: str
) -> bool:
    """Ask the other targets to continue the client's partial answer (`view`); True once
    a continuation took the client's stream over (ending it one way or another)."""
    if not view.continuable:
        return False
    breakers = call.services.breakers
    for target in call.chain:
        if target == broken.attempt.target or not breakers[str(target)].allows():
            continue
        for prefill in (True, False) if view.text and target.takes_prefill() else (False,):
            opened = await _open_continuation(call, broken, target, view, prefill, error)
            if opened is not None:
                await _splice(call, delivery, view, prefill, error, *opened)
                return True
    return False


async def _open_continuation(
    call: Call, broken: Try, target: Target, view: ClientView, prefill: bool, error: str
) -> tuple[Try, aiohttp.ClientResponse] | None:
    """The continuation's answer from `target` when it is a 2xx stream, else None (a
    refused prefill among others: never shown to the client)."""
    body = continuation_request(call.api, call.parsed, view.text, prefill)
    await call.load_history()
    try:
        attempt = plan(
            target,
            call.provider,
            call.api,
            body,
            orjson.dumps(body),
            call.headers,
            call.route.upstream_url,
            prefill,
            call.history,
        )
    except Untranslatable:
        return None
    reason = f"continuing a broken stream ({error})" + (" with a prefill" if prefill else "")
    call.record_failover(broken.attempt.target, target, reason)
    attempt_try = call.start_try(attempt)
    opening = asyncio.timeout(call.rule.ttfb_timeout)
    try:
        async with opening:
            upstream = await open_upstream(
                call.services.pool, attempt, call.rule, attempt_try.record_request
            )
    except (aiohttp.ClientError, TimeoutError) as exc:
        failure = classify(exc, call.rule, opening.expired())
        attempt_try.finish(failure.outcome, failure.message)
        return None
    except asyncio.CancelledError:  # the client left (or taplog stops) while it opened
        attempt_try.finish(
            "shutdown" if call.services.lifecycle.stopping else "client_disconnected"
        )
        raise
    attempt_try.status, attempt_try.headers = upstream.status, response_headers(upstream)
    if upstream.status >= 400 or not upstream.content_type.startswith("text/event-stream"):
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            attempt_try.keep(await upstream.read())
        upstream.release()
        attempt_try.finish("upstream_error", f"HTTP {upstream.status}")
        return None
    return attempt_try, upstream


async def _splice(
    call: Call,
    delivery: Delivery,
    view: ClientView,
    prefill: bool,
    error: str,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
) -> None:
    """Stream the continuation into the client's open stream, its opening held until it
    is told apart from a restart (proxy.failover.continuation); never a passage twice."""
    settings = call.services.settings
    watch = watch_for(settings, attempt_try.attempt, upstream, every=False)  # the last resort
    stream = TranslatedStream(call, attempt_try) if attempt_try.attempt.translation else RELAYED
    splice = Splice(call.api, view, prefilled=prefill)
    continued = Delivery(
        delivery.request, delivery.response, lambda passed: splice.convert(stream.convert(passed))
    )

    def report() -> dict:
        return {"rescue": {**splice.report(), "prefill": prefill}}

    call.served, call.client_bytes = attempt_try, None  # spliced: no one answer to read back

    try:
        await _pipe(call, attempt_try, upstream, watch, [], continued, Sent())
        _complete(watch, continued)
        continued.held.insert(0, splice.finish())
        attempt_try.finish("ok", **report())
        await deliver_end(call, delivery.request, delivery.response, continued.held)
    except Restarted as exc:
        attempt_try.finish("restarted", str(exc), **report())
        await _end_with_error(call, delivery, f"{error}; not continued: {exc}")
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        failure = classify(exc, call.rule, started=True)
        attempt_try.finish(failure.outcome, failure.message, **report())
        await _end_with_error(
            call, delivery, f"{error}; its continuation broke too: {failure.message}"
        )
    except ClientGone:
        attempt_try.finish("client_disconnected", **report())
    except asyncio.CancelledError:
        lifecycle = call.services.lifecycle
        attempt_try.finish("shutdown" if lifecycle.stopping else "client_disconnected", **report())
        raise
    finally:
        upstream.close()
        attempt_try.finish("proxy_error", "taplog failed on this call")


async def _relay_translated_body(
    request: web.Request,
    call: Call,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
    gate: CallGate | None,
) -> web.StreamResponse:
    """A whole answer translated into the client's API (and held to the tool policy),
    sent once it is in the log."""
    attempt = attempt_try.attempt
    upstream.release()
    route = route_for(call.api, attempt.api)
    assert route is not None and attempt.translation is not None  # planned that way
    ctx = answer_context(call.parsed, attempt.target.model, attempt.translation)
    answer = route.answer(parse_json(attempt_try.body()), ctx)
    if gate is not None:
        call.gated = gate.answer(answer)
    call.remember(answer)
    translated = orjson.dumps(answer)
    call.served, call.client_bytes = attempt_try, translated
    attempt_try.finish("ok")
    if gate is not None:
        gate.record(attempt_try)
    return await _send_whole(request, call, {"content-type": "application/json"}, translated)


async def _relay_gated_body(
    request: web.Request,
    call: Call,
    attempt_try: Try,
    upstream: aiohttp.ClientResponse,
    watch: BodyWatch | StreamWatch,
    ready: Passed,
    gate: CallGate,
) -> web.StreamResponse:
    """A whole answer of the client's API held to the tool policy: read whole (a refused
    call may be anywhere in it), rewritten when a rule refused a call, then sent once it is
    in the log."""
    try:
        if not watch.ended:
            await read_whole(call, attempt_try, upstream, watch)
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        failure = classify(exc, call.rule, started=True)
        attempt_try.finish(failure.outcome, failure.message)
        cut_off(request)
        return web.StreamResponse()
    finally:
        upstream.release()
    body = attempt_try.body()
    answer = parse_json(body)
    if gate.answer(answer):
        body = call.client_bytes = orjson.dumps(answer)
        call.gated = True
    call.remember(answer)
    attempt_try.finish("ok")
    gate.record(attempt_try)
    headers = CIMultiDict(attempt_try.headers or {})
    headers.popall("content-length", None)
    return await _send_whole(request, call, headers, body, upstream.status)


async def _send_whole(
    request: web.Request, call: Call, headers: Any, body: bytes, status: int = 200
) -> web.StreamResponse:
    """A whole body, its end held until its record is written (`deliver_end`)."""
    response = web.StreamResponse(status=status, headers=headers)
    response.content_length = len(body)
    with contextlib.suppress(ClientGone):
        await response.prepare(request)
        await deliver_end(call, request, response, [body])
    return response


async def read_whole(
    call: Call, attempt_try: Try, upstream: aiohttp.ClientResponse, watch: StreamWatch | BodyWatch
) -> Passed:
    """A whole body, up to `--max-answer-mb` (a cut one raises ClientPayloadError)."""
    limit = call.services.settings.max_answer_mb
    passed: Passed = []
    async for chunk in upstream.content.iter_any():
        attempt_try.keep(chunk)
        if attempt_try.size > limit * MIB:
            raise BrokenStream(f"the answer is over {limit:g} MiB (--max-answer-mb)", "too_large")
        passed += watch.feed(chunk)
    passed += watch.close()
    if not watch.ended:
        raise BrokenStream("the body ended before it was whole")
    return passed
