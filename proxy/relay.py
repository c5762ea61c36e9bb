"""Send a good answer to the client: as it came, or translated into its API.

Bytes go out as they arrive. A stream is watched for its end marker: one that
breaks first (cut, stalled past the idle timeout, malformed, or over without
its end marker) is never passed off as complete. With `midstream = "continue"`
the next target continues it (proxy.continuation); otherwise, or when that
fails, the client's stream ends with an error event in its own format and no
end marker.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import aiohttp
import orjson
from aiohttp import web
from multidict import CIMultiDict

from proxy import errors
from proxy.attempts import Attempt, first_event_is_error
from proxy.call_log import Call, Try, record_response
from proxy.forward import _ClientGone, _cut_off, _send
from proxy.state import LIFECYCLE
from proxy.upstream import BrokenStream, classify
from recorder.bodies import parse_json
from recorder.translate.answers import chat_answer_to_messages, messages_answer_to_chat
from recorder.translate.streams import AnthropicToChatStream, ChatToAnthropicStream
from recorder.wire import api_module
from recorder.wire.sse import SseSplitter, parse_block


class Relayed:
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


class Translated:
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
        return _relay_translated_body(request, call, attempt_try, upstream, headers)
    if attempt.translation is not None:
        stream: Relayed | Translated = Translated(call, attempt)
        sent_headers = CIMultiDict(
            {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
        )
    else:
        stream = Relayed(attempt.api, attempt.stream)
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
        record_response(request, call, attempt_try, upstream.status, headers, outcome, error)
    return response


async def _chunks(upstream: aiohttp.ClientResponse, attempt_try: Try, pending: list[bytes]):
    for chunk in pending:
        yield chunk
    async for chunk in upstream.content.iter_any():
        attempt_try.keep(chunk)
        yield chunk


def _relay_translated_body(
    request: web.Request,
    call: Call,
    attempt_try: Try,
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
    record_response(request, call, attempt_try, upstream.status, headers, "ok", None)
    return web.Response(body=orjson.dumps(translated), content_type="application/json")


async def _send_quietly(response: web.StreamResponse, data: bytes) -> None:
    with contextlib.suppress(_ClientGone):
        await _send(response, data)
