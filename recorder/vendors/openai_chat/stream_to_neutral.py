"""OpenAI Chat chunk stream -> Anthropic Messages event stream (docs/protocols.md 5.6).

`ChatToAnthropicStream` is an incremental state machine with no I/O: feed it each parsed
chunk (``None`` for the ``[DONE]`` marker), send the client the bytes it returns:

===========================  ==============================================================
OpenAI                       Anthropic events out
===========================  ==============================================================
first chunk                  ``message_start`` (id ``msg_…``, model, no content, zero usage)
``delta.content``/refusal    a ``text`` block opened if none is, then ``text_delta``
tool call with a new index   ``content_block_stop`` of the open block, ``content_block_start``
                             ``tool_use{id, name, input: {}}``
``arguments`` fragment       ``input_json_delta{partial_json}`` on that call's block
``finish_reason``            ``content_block_stop``; the end waits for usage
usage chunk or ``[DONE]``    ``message_delta{stop_reason, usage}``, ``message_stop``
``{"error": …}`` chunk       ``event: error`` in Anthropic's shape; nothing after
===========================  ==============================================================

Block indexes start at 0 and grow by one per block opened. Non-standard
``reasoning_content`` is not sent: a thinking block without a valid signature would be
replayed to Anthropic by the client and refused (5.8.8); the upstream stream is in the log.
Tool arguments pass through as they come, so arguments cut by the length limit (5.8.11)
reach the client incomplete with ``stop_reason: max_tokens``, as a cut Anthropic stream
would; the non-streaming translation leaves such a call out instead.

`finished` turns true once ``message_stop`` is out. ``[DONE]`` without any finish_reason is
a broken stream: an ``api_error`` event goes out instead and `error` holds it.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.errors import openai_error_to_anthropic
from taplog.recorder.vendors.naming import ANTHROPIC_ID_LIMIT, ClientTools, client_name, fit
from taplog.recorder.vendors.openai_chat.vocab import (
    message_response_id,
    messages_usage,
    translated_stop_reason,
)
from taplog.recorder.vendors.sse import as_int, as_list, as_str, dig, typed_event

__all__ = ["ChatToAnthropicStream"]


class ChatToAnthropicStream:
    """One OpenAI chunk in, zero or more complete Anthropic SSE events out."""

    def __init__(self, *, model: str, tools: ClientTools | None = None) -> None:
        self.model = model  # used when the chunks name no model
        self.tools = tools
        self.finished = False
        self.error: dict | None = None
        self._id = message_response_id(None)
        self._started = False
        self._blocks = 0  # blocks opened so far
        self._open: int | None = None  # index of the open block
        self._text_open = False
        self._tools: dict[int, int] = {}  # OpenAI tool-call index -> block index
        self._last_id: str | None = None  # for servers that send no tool-call index
        self._finish: Any = None
        self._usage: dict | None = None
        self._refused = False

    def feed(self, data: dict | None) -> list[bytes]:
        """Translate one chunk; ``None`` stands for ``data: [DONE]``."""
        if self.finished or self.error is not None:
            return []
        if data is None:
            return self._done()
        if data.get("error") is not None:
            return self._fail(data)
        out = self._start(data)
        choices = [c for c in as_list(data.get("choices")) if dig(c, "index") in (0, None)]
        for choice in choices[:1]:
            out += self._choice(choice)
        if isinstance(data.get("usage"), dict):
            self._usage = data["usage"]
        if self._finish is not None and self._usage is not None:
            out += self._end()
        return out

    def _start(self, chunk: dict) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        self._id = message_response_id(chunk.get("id"))
        message = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": as_str(chunk.get("model")) or self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [typed_event("message_start", {"message": message})]

    def _choice(self, choice: dict) -> list[bytes]:
        delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
        out = []
        if text := as_str(delta.get("content")):
            out += self._text(text)
        if refusal := as_str(delta.get("refusal")):
            self._refused = True
            out += self._text(refusal)
        for part in as_list(delta.get("tool_calls")):
            if isinstance(part, dict):
                out += self._tool_part(part)
        if choice.get("finish_reason") is not None and self._finish is None:
            self._finish = choice["finish_reason"]
            out += self._close()
        return out

    def _open_block(self, block: dict) -> list[bytes]:
        out = self._close()
        self._open = self._blocks
        self._blocks += 1
        return [
            *out,
            typed_event("content_block_start", {"index": self._open, "content_block": block}),
        ]

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        index, self._open, self._text_open = self._open, None, False
        return [typed_event("content_block_stop", {"index": index})]

    def _text(self, text: str) -> list[bytes]:
        out = [] if self._text_open else self._open_block({"type": "text", "text": ""})
        self._text_open = True
        delta = {"type": "text_delta", "text": text}
        return [*out, typed_event("content_block_delta", {"index": self._open, "delta": delta})]

    def _tool_part(self, part: dict) -> list[bytes]:
        index = self._tool_index(part)
        out = []
        if index not in self._tools:
            call_id = as_str(part.get("id")) or f"{self._id}_{index}"
            block = {
                "type": "tool_use",
                "id": fit(call_id, ANTHROPIC_ID_LIMIT),
                "name": client_name(as_str(dig(part, "function", "name")) or "", self.tools),
                "input": {},
            }
            out = self._open_block(block)
            self._tools[index] = self._blocks - 1
        if fragment := as_str(dig(part, "function", "arguments")):
            delta = {"type": "input_json_delta", "partial_json": fragment}
            out.append(
                typed_event("content_block_delta", {"index": self._tools[index], "delta": delta})
            )
        return out

    def _tool_index(self, part: dict) -> int:
        """The part's ``index``; without one, a new id starts a new call (as `wire` does)."""
        index = as_int(part.get("index"))
        if index is not None:
            return index
        last = max(self._tools, default=-1)
        new_id = as_str(part.get("id"))
        if last < 0 or (new_id and new_id != self._last_id):
            self._last_id = new_id
            return last + 1
        return last

    def _end(self) -> list[bytes]:
        stop = translated_stop_reason(self._finish, refused=self._refused, called=bool(self._tools))
        delta = {"stop_reason": stop, "stop_sequence": None}
        self.finished = True
        return [
            *self._close(),
            typed_event("message_delta", {"delta": delta, "usage": messages_usage(self._usage)}),
            typed_event("message_stop", {}),
        ]

    def _done(self) -> list[bytes]:
        if self._finish is not None:
            return self._end()
        message = "the upstream stream ended without a finish_reason"
        return self._fail({"error": {"message": message, "type": "server_error"}})

    def _fail(self, chunk: dict) -> list[bytes]:
        _, body = openai_error_to_anthropic(200, chunk)
        self.error = body["error"]
        return [typed_event("error", {"error": body["error"]})]
