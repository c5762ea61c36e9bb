"""Anthropic Messages event stream -> Gemini chunk stream.

`AnthropicToGeminiStream` is an incremental state machine with no I/O: feed it each parsed
Anthropic event in order, send the client the bytes it returns. Each chunk is a
`GenerateContentResponse` with one part in candidate 0, ``modelVersion`` and
``responseId``:

=========================  ====================================================================
Anthropic                  Gemini chunks out
=========================  ====================================================================
message_start              nothing: keep the id (``responseId`` = it without ``msg_``), model
                           and usage
text_delta                 a chunk with ``{text}`` (an empty fragment sends nothing)
Claude's thinking_delta    a chunk with ``{text, thought: true}`` when the request asked for
                           thoughts (``includeThoughts``), else nothing; its signature never
tool_use block             held until its stop, then one chunk with the whole
                           ``functionCall {id, name (the client's), args}``
Gemini-tagged thinking     held until its stop, then a thought part or its signature kept for
                           the next part (`answers.Signing`)
message_delta              nothing: keep stop reason and usage
message_stop               the last chunk: ``{text: ""}`` (or the signature no part took),
                           ``finishReason``, ``usageMetadata`` (`vocab`)
error                      ``{"error": {code, message, status}}`` (`vocab.gemini_error`);
                           nothing after
ping, redacted thinking,   nothing
server tools
=========================  ====================================================================

A block that follows a pending signature is held too, and goes out whole carrying it, so
Gemini's reassembly (`wire.reassemble`, which never joins a signed part) folds the stream
into the answer `answers.messages_answer_to_gemini` gives. Tagged blocks come only from
Gemini's own answers (`stream_to_neutral`'s events fed on), never from Claude, so Claude's
text and thinking always stream as they come. A thinking block
is Gemini's when its start or its ``signature_delta`` carries the tag; one found out only
at its end has already streamed (or dropped) its text, and its signature goes on the next
part. A tool call whose input JSON does not parse (cut by ``max_tokens``) is left out:
Gemini sends a call whole or not at all, and the finish reason says the answer was cut.

Framing: with ``sse`` each chunk is one ``data:`` event, as ``alt=sse`` answers; without,
the stream is one JSON array sent in pieces, ``[`` + chunk, ``,`` + chunk, …, ``]`` after the
last chunk or the error chunk. `finished` turns true once the last chunk is out, `error`
holds the error chunk's ``error`` if one was sent. A stream the upstream cut is ended by
the relay, in the same framing (`gemini.endpoint.array_stream_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.vendors.gemini.answers import Signing, function_call
from taplog.recorder.vendors.gemini.thoughts import gemini_signature
from taplog.recorder.vendors.gemini.vocab import (
    asks_for_thoughts,
    finish_reason,
    gemini_error,
    gemini_usage,
    response_id,
)
from taplog.recorder.vendors.naming import ClientTools
from taplog.recorder.vendors.sse import as_int, as_str, dig, event_bytes
from taplog.recorder.vendors.translation import parse_object

__all__ = ["AnthropicToGeminiStream"]

# delta type -> (the block it belongs to, its piece's key)
_DELTAS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "input_json_delta": ("tool_use", "partial_json"),
}


@dataclass(slots=True)
class _Block:
    """An Anthropic block being read."""

    kind: str  # text, thinking or tool_use
    held: bool  # sent whole at its stop rather than piece by piece
    shown: bool = True  # thinking: Claude's goes to the client only when asked
    pieces: list[str] = field(default_factory=list)
    signature: str | None = None  # thinking: the Gemini signature it carries ("" unsigned)
    start: dict = field(default_factory=dict)  # as content_block_start gave it


class AnthropicToGeminiStream:
    """One Anthropic event in, zero or more Gemini chunks out (SSE events or array pieces)."""

    def __init__(
        self,
        *,
        request: Mapping[str, Any],
        model: str,
        tools: ClientTools | None = None,
        sse: bool = True,
    ) -> None:
        self.model = model  # used when the message names no model
        self.tools = tools
        self.sse = sse
        self.thoughts = asks_for_thoughts(request)
        self.finished = False
        self.error: dict | None = None
        self._id = response_id(None)
        self._model = model
        self._started = False
        self._opened = False  # the JSON array's "[" is out
        self._blocks: dict[int, _Block] = {}
        self._signing = Signing()
        self._usage: dict[str, Any] = {}
        self._stop: Any = None

    def feed(self, event: str | None, data: dict) -> list[bytes]:
        """Translate one event; `event` is the SSE event name, used when data has no type."""
        if self.finished or self.error is not None:
            return []
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        index = as_int(data.get("index"))
        if kind == "error":
            return self._fail(gemini_error(data))
        if kind == "message_start":
            self._begin(data.get("message"))
        elif kind == "content_block_start" and index is not None:
            self._block_start(index, data.get("content_block"))
        elif kind == "content_block_delta" and index in self._blocks:
            return self._block_delta(self._blocks[index], data.get("delta"))
        elif kind == "content_block_stop" and index in self._blocks:
            return self._block_stop(self._blocks.pop(index))
        elif kind == "message_delta":
            self._merge_usage(data.get("usage"))
            self._stop = dig(data, "delta", "stop_reason") or self._stop
        elif kind == "message_stop":
            return self._end()
        return []

    def _begin(self, message: Any) -> None:
        if self._started:
            return
        self._started = True
        self._id = response_id(dig(message, "id"))
        self._model = as_str(dig(message, "model")) or self.model
        self._merge_usage(dig(message, "usage"))

    def _merge_usage(self, usage: Any) -> None:
        """Counts are cumulative: later non-null values replace earlier ones."""
        for key, value in usage.items() if isinstance(usage, dict) else ():
            if value is not None:
                self._usage[key] = value

    def _block_start(self, index: int, block: Any) -> None:
        kind = dig(block, "type")
        pending = self._signing.pending is not None
        if kind == "text":
            self._blocks[index] = _Block("text", held=pending)
            if text := as_str(block.get("text")):  # not sent by Anthropic
                self._blocks[index].pieces.append(text)
        elif kind == "thinking":
            signature = gemini_signature(block.get("signature"))
            shown = self.thoughts or signature is not None
            held = signature is not None or (pending and shown)
            self._blocks[index] = _Block("thinking", held, shown, signature=signature)
        elif kind == "tool_use":
            self._blocks[index] = _Block("tool_use", held=True, start=block)

    def _block_delta(self, block: _Block, delta: Any) -> list[bytes]:
        kind = dig(delta, "type")
        if kind == "signature_delta" and block.kind == "thinking":
            signature = gemini_signature(delta.get("signature"))
            block.signature = signature if signature is not None else block.signature
            return []
        of, name = _DELTAS.get(kind, ("", ""))
        text = as_str(delta.get(name)) if of == block.kind else None
        if not text:
            return []
        if block.held:
            block.pieces.append(text)
        elif block.kind == "text":
            return self._send_part({"text": text})
        elif block.shown and block.signature is None:
            return self._send_part({"text": text, "thought": True})
        return []

    def _block_stop(self, block: _Block) -> list[bytes]:
        text = "".join(block.pieces)
        if block.kind == "tool_use":
            args = parse_object(text) if text else block.start.get("input", {})
            if not isinstance(args, dict):
                return []
            start = block.start
            call = function_call(start.get("id"), start.get("name"), args, self.tools)
            return self._send_part(call)
        if block.kind == "thinking" and block.signature is not None:
            return self._send(*self._signing.thinking(text if block.held else "", block.signature))
        if block.held and text and block.shown:
            part = {"text": text, "thought": True} if block.kind == "thinking" else {"text": text}
            return self._send_part(part)
        return []

    def _send_part(self, part: dict) -> list[bytes]:
        return self._send(*self._signing.parts(part))

    def _send(self, *parts: dict) -> list[bytes]:
        return [self._frame(self._chunk([part])) for part in parts]

    def _chunk(self, parts: list[dict], **extra: Any) -> dict:
        candidate = {"content": {"role": "model", "parts": parts}, **extra, "index": 0}
        return {"candidates": [candidate], "modelVersion": self._model, "responseId": self._id}

    def _frame(self, chunk: dict, last: bool = False) -> bytes:
        if self.sse:
            return event_bytes(None, chunk)
        head = b"," if self._opened else b"["
        self._opened = True
        return head + orjson.dumps(chunk) + (b"]" if last else b"")

    def _end(self) -> list[bytes]:
        parts = self._signing.end() or [{"text": ""}]
        chunk = self._chunk(parts, finishReason=finish_reason(self._stop))
        chunk["usageMetadata"] = gemini_usage(self._usage)
        self.finished = True
        return [self._frame(chunk, last=True)]

    def _fail(self, body: dict) -> list[bytes]:
        self.error = body["error"]
        return [self._frame(body, last=True)]
