"""Anthropic Messages stream -> OpenAI Responses event stream (PROTOCOLS 2, 3, 5.5).

`AnthropicToResponsesStream` is an incremental state machine with no I/O: feed it each
parsed Anthropic event in order, send the client the bytes it returns. Every event carries
``sequence_number``, counting from 0. Per Anthropic event:

=====================  ========================================================================
Anthropic              Responses events out
=====================  ========================================================================
first event            ``response.created``, ``response.in_progress`` (status in_progress,
                       no output); message_start gives the model and input usage
first text of a text   ``response.output_item.added`` (message, in_progress),
block                  ``response.content_part.added`` (empty output_text)
text_delta             ``response.output_text.delta`` (an empty fragment sends nothing)
text block stop        ``response.output_text.done``, ``response.content_part.done``,
                       ``response.output_item.done`` (completed); nothing for a block that
                       never had text
tool_use block start   ``response.output_item.added`` (function_call, ``arguments: ""``)
input_json_delta       ``response.function_call_arguments.delta``
tool block stop        ``arguments: "{}"`` delta if none came (5.8.10), then
                       ``response.function_call_arguments.done``, ``response.output_item.done``
thinking, server       nothing (the upstream stream is in the log)
tools, ping
message_delta          nothing yet: keep stop reason and usage
message_stop           ``response.completed`` or ``response.incomplete`` with the whole
                       ``response`` (status, usage and echo as `responses_vocab` builds them)
error                  ``error`` then ``response.failed`` (its ``error`` code: rate_limit_exceeded,
                       invalid_prompt or server_error); nothing after
=====================  ========================================================================

Output indexes count items, not Anthropic blocks; item ids derive from the response id and
the output index, so the non-streaming translation (`responses_answer`) gives the same ids.
Arguments stream through as they come, so ``done`` is exactly the deltas joined (the
non-streaming translation re-serialises ``input`` compactly: same JSON value).
`finished` turns true once the completed/incomplete event is out, `error` holds the error
of a failed stream; `response` is the final object sent either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from recorder.wire.sse import as_int, as_str, dig

from .base import compact_json
from .errors import ErrorKind, anthropic_error_kind, anthropic_error_to_openai
from .naming import OPENAI_ID_LIMIT, ClientTools, client_name, fit
from .responses_vocab import (
    function_item,
    message_item,
    response_object,
    response_status,
    responses_usage,
    text_part,
)

__all__ = ["AnthropicToResponsesStream"]

_FAILED_CODES = {
    ErrorKind.RATE_LIMIT: "rate_limit_exceeded",
    ErrorKind.BILLING: "rate_limit_exceeded",
    ErrorKind.INVALID: "invalid_prompt",
    ErrorKind.TOO_LARGE: "invalid_prompt",
}


@dataclass(slots=True)
class _Open:
    """An output item being streamed: its output index, the item as added, what came so far."""

    index: int
    item: dict
    pieces: list[str] = field(default_factory=list)


class AnthropicToResponsesStream:
    """One Anthropic event in, zero or more complete Responses SSE events out."""

    def __init__(
        self,
        *,
        response_id: str,
        created_at: int,
        request: dict,
        tools: ClientTools | None = None,
    ) -> None:
        self.response_id = response_id
        self.created_at = created_at
        self.request = request
        self.tools = tools
        self.finished = False
        self.error: dict | None = None
        self.response: dict | None = None
        self._sequence = 0
        self._model = as_str(request.get("model")) or ""
        self._started = False
        self._open: dict[int, _Open] = {}  # Anthropic block index -> item being streamed
        self._done: dict[int, dict] = {}  # output index -> finished item
        self._items = 0  # output items opened so far
        self._usage: dict[str, Any] = {}
        self._stop: Any = None

    def feed(self, event: str | None, data: dict) -> list[bytes]:
        """Translate one event; `event` is the SSE event name, used when data has no type."""
        if self.finished or self.error is not None:
            return []
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        if kind == "message_start" and not self._started:
            message = data.get("message")
            self._model = as_str(dig(message, "model")) or self._model
            self._merge_usage(dig(message, "usage"))
        out = self._start()
        if kind == "error":
            out += self._fail(data)
        elif kind == "content_block_start":
            out += self._block_start(data)
        elif kind == "content_block_delta":
            out += self._block_delta(data)
        elif kind == "content_block_stop":
            out += self._block_stop(as_int(data.get("index")))
        elif kind == "message_delta":
            self._merge_usage(data.get("usage"))
            self._stop = dig(data, "delta", "stop_reason") or self._stop
        elif kind == "message_stop":
            out += self._end()
        return out

    def _emit(self, kind: str, fields: dict) -> bytes:
        data = {"type": kind, **fields, "sequence_number": self._sequence}
        self._sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"

    def _response(
        self,
        status: str,
        *,
        usage: dict | None = None,
        incomplete: dict | None = None,
        error: dict | None = None,
    ) -> dict:
        """The response object so far: finished items only (none while in progress)."""
        output = [self._done[i] for i in sorted(self._done)] if status != "in_progress" else []
        return response_object(
            self.request,
            response_id=self.response_id,
            created_at=self.created_at,
            model=self._model,
            status=status,
            output=output,
            usage=usage,
            incomplete=incomplete,
            error=error,
        )

    def _start(self) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        snapshot = self._response("in_progress")
        return [
            self._emit("response.created", {"response": snapshot}),
            self._emit("response.in_progress", {"response": snapshot}),
        ]

    def _merge_usage(self, usage: Any) -> None:
        """Counts are cumulative: later non-null values replace earlier ones."""
        for key, value in usage.items() if isinstance(usage, dict) else ():
            if value is not None:
                self._usage[key] = value

    def _add(self, block_index: int, item: dict) -> list[bytes]:
        slot = _Open(self._items, item)
        self._items += 1
        self._open[block_index] = slot
        return [
            self._emit("response.output_item.added", {"output_index": slot.index, "item": item})
        ]

    def _block_start(self, data: dict) -> list[bytes]:
        index, block = as_int(data.get("index")), data.get("content_block")
        kind = dig(block, "type")
        if index is None or index in self._open:
            return []
        if kind == "text":
            return self._text(index, as_str(block.get("text")) or "")
        if kind != "tool_use":
            return []
        call_id = fit(as_str(block.get("id")) or "toolu", OPENAI_ID_LIMIT)
        name = client_name(as_str(block.get("name")) or "", self.tools)
        out = self._add(index, function_item(self.response_id, self._items, call_id, name, None))
        if isinstance(block.get("input"), dict) and block["input"]:  # not sent by Anthropic
            out += self._arguments(self._open[index], compact_json(block["input"]))
        return out

    def _block_delta(self, data: dict) -> list[bytes]:
        index, delta = as_int(data.get("index")), data.get("delta")
        kind = dig(delta, "type")
        if index is None:
            return []
        if kind == "text_delta":
            return self._text(index, as_str(delta.get("text")) or "")
        slot = self._open.get(index)
        fragment = as_str(dig(delta, "partial_json"))
        if kind != "input_json_delta" or not slot or slot.item["type"] == "message":
            return []
        return self._arguments(slot, fragment) if fragment else []

    def _text(self, index: int, fragment: str) -> list[bytes]:
        """A text fragment; the message item opens with the first non-empty one."""
        if not fragment:
            return []
        out = []
        if index not in self._open:
            out = self._add(index, message_item(self.response_id, self._items, None))
        slot = self._open[index]
        if slot.item["type"] != "message":
            return []
        where = {"item_id": slot.item["id"], "output_index": slot.index, "content_index": 0}
        if not slot.pieces:
            out.append(self._emit("response.content_part.added", {**where, "part": text_part("")}))
        slot.pieces.append(fragment)
        delta = {**where, "delta": fragment, "logprobs": []}
        return [*out, self._emit("response.output_text.delta", delta)]

    def _arguments(self, slot: _Open, fragment: str) -> list[bytes]:
        slot.pieces.append(fragment)
        delta = {"item_id": slot.item["id"], "output_index": slot.index, "delta": fragment}
        return [self._emit("response.function_call_arguments.delta", delta)]

    def _block_stop(self, index: int | None) -> list[bytes]:
        slot = self._open.pop(index, None) if index is not None else None
        if slot is None:
            return []
        out = self._finish_text(slot) if slot.item["type"] == "message" else self._finish_call(slot)
        item = {"output_index": slot.index, "item": self._done[slot.index]}
        return [*out, self._emit("response.output_item.done", item)]

    def _finish_text(self, slot: _Open) -> list[bytes]:
        text = "".join(slot.pieces)
        self._done[slot.index] = message_item(self.response_id, slot.index, text)
        where = {"item_id": slot.item["id"], "output_index": slot.index, "content_index": 0}
        done = {**where, "text": text, "logprobs": []}
        return [
            self._emit("response.output_text.done", done),
            self._emit("response.content_part.done", {**where, "part": text_part(text)}),
        ]

    def _finish_call(self, slot: _Open) -> list[bytes]:
        out = [] if slot.pieces else self._arguments(slot, "{}")  # 5.8.10
        arguments = "".join(slot.pieces)
        item = slot.item
        self._done[slot.index] = function_item(
            self.response_id, slot.index, item["call_id"], item["name"], arguments
        )
        done = {"item_id": item["id"], "output_index": slot.index, "arguments": arguments}
        return [*out, self._emit("response.function_call_arguments.done", done)]

    def _end(self) -> list[bytes]:
        out = [event for index in sorted(self._open) for event in self._block_stop(index)]
        status, incomplete = response_status(self._stop)
        usage = responses_usage(self._usage)
        self.response = self._response(status, usage=usage, incomplete=incomplete)
        self.finished = True
        kind = "response.completed" if status == "completed" else "response.incomplete"
        return [*out, self._emit(kind, {"response": self.response})]

    def _fail(self, data: dict) -> list[bytes]:
        _, body = anthropic_error_to_openai(200, data)
        self.error = body["error"]
        message = self.error["message"]
        failed = _FAILED_CODES.get(anthropic_error_kind(200, data), "server_error")
        self.response = self._response("failed", error={"code": failed, "message": message})
        code = self.error["code"] or self.error["type"]
        return [
            self._emit("error", {"code": code, "message": message, "param": None}),
            self._emit("response.failed", {"response": self.response}),
        ]
