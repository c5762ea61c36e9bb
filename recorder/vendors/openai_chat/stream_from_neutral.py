"""Anthropic Messages stream -> OpenAI Chat chunk stream (docs/protocols.md 5.5).

`AnthropicToChatStream` is an incremental state machine with no I/O: feed it each parsed
Anthropic event in order, send the client the bytes it returns. Per event:

=========================  ======================================================
Anthropic                  OpenAI chunks out
=========================  ======================================================
message_start              ``delta: {role: assistant, content: ""}``; keep usage, model
text block start / delta   ``delta.content`` (an empty fragment sends nothing)
tool_use block start       ``tool_calls[{index: k, id, type, function{name, ""}}]``
input_json_delta           ``tool_calls[{index: k, function{arguments: fragment}}]``
tool block stop            ``arguments: "{}"`` if no fragment came (5.8.10)
thinking, signature, ping  nothing (the upstream stream is in the log)
message_delta              ``delta: {}`` with the mapped ``finish_reason``
message_stop               usage chunk (``choices: []``) if asked for, ``[DONE]``
error                      ``data: {"error": {...}}`` in OpenAI's shape; nothing after
=========================  ======================================================

``k`` counts tool calls, not content blocks (5.8.9): thinking and text blocks before a tool
do not shift its index. Every chunk carries the same id (``chatcmpl-`` + the message id),
``created`` and model; with ``include_usage`` the others carry ``usage: null`` as OpenAI's do.
`finished` turns true once ``[DONE]`` is out; `error` holds the in-band error if one came.
Either way the stream is over and later events are ignored.
"""

from __future__ import annotations

from typing import Any

import orjson

from taplog.recorder.vendors.errors import anthropic_error_to_openai
from taplog.recorder.vendors.naming import OPENAI_ID_LIMIT, ClientTools, client_name, fit
from taplog.recorder.vendors.openai_chat.vocab import chat_response_id, chat_usage, finish_reason
from taplog.recorder.vendors.sse import as_int, as_str, dig, event_bytes

__all__ = ["AnthropicToChatStream"]

_DONE = b"data: [DONE]\n\n"


class AnthropicToChatStream:
    """One Anthropic event in, zero or more complete OpenAI SSE events out."""

    def __init__(
        self, *, include_usage: bool, created: int, tools: ClientTools | None = None
    ) -> None:
        self.include_usage = include_usage
        self.created = created
        self.tools = tools
        self.finished = False
        self.error: dict | None = None
        self._id = chat_response_id(None)
        self._model = ""
        self._started = False
        self._usage: dict[str, Any] = {}
        self._tools: dict[int, list] = {}  # block index -> [tool-call index, got a fragment]
        self._finish: str | None = None

    def feed(self, event: str | None, data: dict) -> list[bytes]:
        """Translate one event; `event` is the SSE event name, used when data has no type."""
        if self.finished or self.error is not None:
            return []
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        if kind == "error":
            return self._error(data)
        if kind == "message_start":
            return self._start(data.get("message"))
        out = [] if self._started else self._start(None)
        if kind == "content_block_start":
            out += self._block_start(data)
        elif kind == "content_block_delta":
            out += self._block_delta(data)
        elif kind == "content_block_stop":
            out += self._block_stop(data)
        elif kind == "message_delta":
            out += self._message_delta(data)
        elif kind == "message_stop":
            out += self._stop()
        return out

    def _chunk(self, delta: dict, finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return self._send({"choices": [choice]})

    def _send(self, fields: dict) -> bytes:
        chunk = {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self._model,
            "system_fingerprint": None,
            **fields,
        }
        if self.include_usage and "usage" not in chunk:
            chunk["usage"] = None
        return event_bytes(None, chunk)

    def _start(self, message: Any) -> list[bytes]:
        if self._started:  # a repeated message_start adds nothing the client can use
            return []
        self._started = True
        self._id = chat_response_id(dig(message, "id"))
        self._model = as_str(dig(message, "model")) or ""
        self._merge_usage(dig(message, "usage"))
        return [self._chunk({"role": "assistant", "content": ""})]

    def _merge_usage(self, usage: Any) -> None:
        """Counts are cumulative: later non-null values replace earlier ones."""
        for key, value in usage.items() if isinstance(usage, dict) else ():
            if value is not None:
                self._usage[key] = value

    def _block_start(self, data: dict) -> list[bytes]:
        block = data.get("content_block")
        kind = dig(block, "type")
        if kind == "text" and as_str(dig(block, "text")):
            return [self._chunk({"content": block["text"]})]
        index = as_int(data.get("index"))
        if kind != "tool_use" or index is None:
            return []
        k = len(self._tools)
        self._tools[index] = [k, False]
        call = {
            "index": k,
            "id": fit(as_str(block.get("id")) or "toolu", OPENAI_ID_LIMIT),
            "type": "function",
            "function": {"name": self._name(block.get("name")), "arguments": ""},
        }
        out = [self._chunk({"tool_calls": [call]})]
        if isinstance(block.get("input"), dict) and block["input"]:  # not sent by Anthropic
            out += self._arguments(index, orjson.dumps(block["input"]).decode())
        return out

    def _name(self, name: Any) -> str:
        return client_name(as_str(name) or "", self.tools)

    def _arguments(self, index: int, fragment: str) -> list[bytes]:
        slot = self._tools[index]
        slot[1] = True
        return [
            self._chunk({"tool_calls": [{"index": slot[0], "function": {"arguments": fragment}}]})
        ]

    def _block_delta(self, data: dict) -> list[bytes]:
        delta = data.get("delta")
        kind = dig(delta, "type")
        if kind == "text_delta" and as_str(dig(delta, "text")):
            return [self._chunk({"content": delta["text"]})]
        index = as_int(data.get("index"))
        fragment = as_str(dig(delta, "partial_json"))
        if kind == "input_json_delta" and index in self._tools and fragment:
            return self._arguments(index, fragment)
        return []

    def _block_stop(self, data: dict) -> list[bytes]:
        index = as_int(data.get("index"))
        if index in self._tools and not self._tools[index][1]:
            return self._arguments(index, "{}")
        return []

    def _message_delta(self, data: dict) -> list[bytes]:
        self._merge_usage(data.get("usage"))
        stop = dig(data, "delta", "stop_reason")
        if stop is None or self._finish is not None:
            return []
        self._finish = finish_reason(stop)
        return [self._chunk({}, self._finish)]

    def _stop(self) -> list[bytes]:
        out = [] if self._finish is not None else [self._chunk({}, "stop")]
        if self.include_usage:
            out.append(self._send({"choices": [], "usage": chat_usage(self._usage)}))
        self.finished = True
        return [*out, _DONE]

    def _error(self, data: dict) -> list[bytes]:
        _, body = anthropic_error_to_openai(200, data)
        self.error = body["error"]
        return [event_bytes(None, body)]
