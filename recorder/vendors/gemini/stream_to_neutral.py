"""Gemini chunk stream -> Anthropic Messages event stream.

`GeminiToAnthropicStream` is an incremental state machine with no I/O: feed it each parsed
chunk (a `GenerateContentResponse` holding only new parts), send the client the bytes it
returns. Per part of candidate 0, as the non-streaming translation reads it
(`answers.part_blocks`):

=============================  ================================================================
Gemini                         Anthropic events out
=============================  ================================================================
first chunk                    ``message_start`` (id ``msg_`` + responseId, model = modelVersion,
                               no content, zero usage)
unsigned text piece            a ``text`` block opened unless this text's is open, then
                               ``text_delta`` (an empty piece opens nothing)
unsigned thought piece         the same as a ``thinking`` block (``signature: "gemini."``), then
                               ``thinking_delta``
signed thought                 a ``thinking`` block of its own: ``thinking_delta``,
                               ``signature_delta`` (the tagged signature), ``content_block_stop``
other signed part              a ``thinking`` block with only the ``signature_delta``, then the
                               part's own block
``functionCall``               ``content_block_start tool_use{id, name, input: {}}``, one
                               ``input_json_delta`` (the args' compact JSON), ``content_block_stop``
``usageMetadata``              kept: the last one seen counts (running totals)
``finishReason`` /             ``content_block_stop`` of the open block, ``message_delta``
a blocked prompt               (stop reason and usage, `vocab`), ``message_stop``
``{"error": …}``               ``event: error`` in Anthropic's shape; nothing after
=============================  ================================================================

Pieces join a block exactly when `wire.reassemble` joins them into one part (unsigned text
of one kind, nothing between), and each part makes the blocks the non-streaming translation
makes of it, so the stream folds into the message `answers.gemini_answer_to_messages` gives
for the folded answer. A thinking block starts with the bare tag as its signature, so an
unsigned thought ends tagged too, and a reader knows a Gemini block from its start.

Block indexes start at 0 and grow by one per block opened. `finished` turns true once
``message_stop`` is out (later chunks are ignored), `error` holds the error sent for a
failed stream. A stream with neither was cut: the caller decides what the client sees.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.gemini.answers import part_blocks
from taplog.recorder.vendors.gemini.thoughts import tagged
from taplog.recorder.vendors.gemini.vocab import (
    answer_key,
    anthropic_error,
    anthropic_usage,
    first_candidate,
    message_id,
    stop_reason,
)
from taplog.recorder.vendors.naming import ClientTools
from taplog.recorder.vendors.sse import as_list, as_str, dig, typed_event
from taplog.recorder.vendors.translation import compact_json

__all__ = ["GeminiToAnthropicStream"]

_TAG = tagged(None)
_EMPTY = {
    "text": {"type": "text", "text": ""},
    "thinking": {"type": "thinking", "thinking": "", "signature": _TAG},
}
_DELTA = {"text": "text_delta", "thinking": "thinking_delta"}


class GeminiToAnthropicStream:
    """One Gemini chunk in, zero or more complete Anthropic SSE events out."""

    def __init__(self, *, model: str, tools: ClientTools | None = None) -> None:
        self.model = model  # used when the chunks name no model
        self.tools = tools
        self.finished = False
        self.error: dict | None = None
        self._key = ""  # the answer's key: names its message and its id-less calls
        self._started = False
        self._blocks = 0  # blocks opened so far
        self._open: int | None = None  # index of the open block
        # "text" or "thinking" when the last part was unsigned text of that kind: its
        # pieces join it (and the open block, if any, is its block)
        self._tail: str | None = None
        self._calls = 0
        self._usage: Any = None

    def feed(self, data: dict) -> list[bytes]:
        """Translate one chunk."""
        if self.finished or self.error is not None:
            return []
        if data.get("error") is not None:
            return self._fail(data["error"])
        out = self._start(data)
        if isinstance(data.get("usageMetadata"), dict):
            self._usage = data["usageMetadata"]
        candidate = first_candidate(data)
        for part in as_list(dig(candidate, "content", "parts")):
            if isinstance(part, dict):
                out += self._part(part)
        if isinstance(candidate.get("finishReason"), str):
            out += self._end(stop_reason(candidate["finishReason"], called=self._calls > 0))
        elif not candidate and dig(data, "promptFeedback", "blockReason"):
            out += self._end("refusal")
        return out

    def _start(self, chunk: dict) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        self._key = answer_key(chunk.get("responseId"))
        message = {
            "id": message_id(self._key),
            "type": "message",
            "role": "assistant",
            "model": as_str(chunk.get("modelVersion")) or self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [typed_event("message_start", {"message": message})]

    def _part(self, part: dict) -> list[bytes]:
        text = part.get("text")
        if isinstance(text, str) and set(part) <= {"text", "thought"}:
            return self._piece("thinking" if part.get("thought") is True else "text", text)
        self._tail = None
        blocks = part_blocks(part, key=self._key, calls=self._calls, tools=self.tools)
        self._calls += isinstance(part.get("functionCall"), dict)
        out = self._close()
        for block in blocks:
            out += self._whole(block)
        return out

    def _piece(self, kind: str, text: str) -> list[bytes]:
        """An unsigned text or thought piece: it joins the part before it if that is of its
        kind, as `wire.reassemble` joins them; an empty one opens no block."""
        if self._tail == kind and self._open is not None:
            return self._delta(kind, text) if text else []
        out = self._close()
        self._tail = kind
        if not text:
            return out
        return [*out, *self._open_block(_EMPTY[kind]), *self._delta(kind, text)]

    def _open_block(self, block: dict) -> list[bytes]:
        out = self._close()
        self._open = self._blocks
        self._blocks += 1
        start = {"index": self._open, "content_block": block}
        return [*out, typed_event("content_block_start", start)]

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        index, self._open = self._open, None
        return [typed_event("content_block_stop", {"index": index})]

    def _delta(self, kind: str, text: str) -> list[bytes]:
        delta = {"type": _DELTA[kind], kind: text}
        return [typed_event("content_block_delta", {"index": self._open, "delta": delta})]

    def _whole(self, block: dict) -> list[bytes]:
        """A block known whole (from a signed part or a call): start, deltas, stop."""
        kind = block["type"]
        if kind == "tool_use":
            out = self._open_block({**block, "input": {}})
            delta = {"type": "input_json_delta", "partial_json": compact_json(block["input"])}
            out.append(typed_event("content_block_delta", {"index": self._open, "delta": delta}))
        else:
            out = self._open_block(_EMPTY[kind])
            if block[kind]:
                out += self._delta(kind, block[kind])
            if kind == "thinking" and block["signature"] != _TAG:
                delta = {"type": "signature_delta", "signature": block["signature"]}
                out.append(
                    typed_event("content_block_delta", {"index": self._open, "delta": delta})
                )
        return out + self._close()

    def _end(self, stop: str) -> list[bytes]:
        delta = {"stop_reason": stop, "stop_sequence": None}
        self.finished = True
        return [
            *self._close(),
            typed_event("message_delta", {"delta": delta, "usage": anthropic_usage(self._usage)}),
            typed_event("message_stop", {}),
        ]

    def _fail(self, error: Any) -> list[bytes]:
        self.error = anthropic_error(error)
        return [typed_event("error", {"error": self.error})]
