"""OpenAI Responses event stream -> Anthropic Messages event stream (docs/protocols.md 2, 3, 5.6).

`ResponsesToAnthropicStream` is an incremental state machine with no I/O: feed it each
parsed Responses event in order, send the client the bytes it returns:

=============================  ==============================================================
Responses                      Anthropic events out
=============================  ==============================================================
first event                    ``message_start`` (id ``msg_…`` from the response id, model,
                               no content, zero usage)
output_text / refusal delta    a ``text`` block opened if this item has none open, then
                               ``text_delta``
output_item.added              ``content_block_stop`` of the open block,
(function_call)                ``content_block_start tool_use{id: call_id, name, input: {}}``
function_call_arguments.delta  ``input_json_delta{partial_json}`` on that call's block
output_item.done               ``content_block_stop`` of that item's block; a message or call
                               whose text or arguments never streamed sends them first
output_item.done               a ``server_tool_use`` block (input ``{query}`` as one
(web_search_call)              ``input_json_delta``) and its ``web_search_tool_result`` block,
                               whole, as `responses_answer.web_search_blocks` builds them
reasoning, other hosted tools  nothing: a thinking block without a valid signature would be
                               replayed to Anthropic and refused (5.8.8)
response.completed /           ``content_block_stop`` if one is open, ``message_delta`` with
response.incomplete            the stop reason and usage (`vocab`), ``message_stop``
response.failed, error         ``event: error`` in Anthropic's shape; nothing after
=============================  ==============================================================

Block indexes start at 0 and grow by one per block opened. Arguments pass through as they
come, so arguments cut by the token limit (5.8.11) reach the client incomplete with
``stop_reason: max_tokens``, as a cut Anthropic stream would; the non-streaming translation
leaves such a call out instead. `finished` turns true once ``message_stop`` is out, `error`
holds the error sent for a failed stream. A stream with neither was cut.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.errors import openai_error_to_anthropic
from taplog.recorder.vendors.naming import ANTHROPIC_ID_LIMIT, ClientTools, client_name, fit
from taplog.recorder.vendors.openai_responses.answers import message_text, web_search_blocks
from taplog.recorder.vendors.openai_responses.vocab import (
    anthropic_usage,
    message_id,
    stop_from_status,
)
from taplog.recorder.vendors.sse import as_int, as_str, dig, typed_event
from taplog.recorder.vendors.translation import compact_json

__all__ = ["ResponsesToAnthropicStream"]

_TEXT = {"response.output_text.delta": False, "response.refusal.delta": True}
_RETRYABLE_CODES = frozenset({"server_error", "rate_limit_exceeded", "vector_store_timeout"})


class ResponsesToAnthropicStream:
    """One Responses event in, zero or more complete Anthropic SSE events out."""

    def __init__(self, *, model: str, tools: ClientTools | None = None) -> None:
        self.model = model  # used when the events name no model
        self.tools = tools
        self.finished = False
        self.error: dict | None = None
        self._started = False
        self._blocks = 0  # blocks opened so far
        self._open: tuple[int, int, bool] | None = None  # (block, output index, is text)
        self._texted: set[int] = set()  # output indexes whose text went out
        self._calls: dict[int, list] = {}  # output index -> [block index, got arguments]
        self._refused = False

    def feed(self, event: str | None, data: dict) -> list[bytes]:
        """Translate one event; `event` is the SSE event name, used when data has no type."""
        if self.finished or self.error is not None:
            return []
        kind = data.get("type") if isinstance(data.get("type"), str) else event
        if kind == "error":
            return self._fail(data.get("error") if isinstance(data.get("error"), dict) else data)
        out = self._start(data.get("response"))
        index = as_int(data.get("output_index"))
        if kind in _TEXT and index is not None:
            out += self._text(index, as_str(data.get("delta")) or "", _TEXT[kind])
        elif kind == "response.output_item.added" and index is not None:
            out += self._added(index, data.get("item"))
        elif kind == "response.function_call_arguments.delta" and index is not None:
            out += self._arguments(index, as_str(data.get("delta")) or "")
        elif kind == "response.function_call_arguments.done" and index is not None:
            out += self._arguments_once(index, data.get("arguments"))
        elif kind == "response.output_item.done" and index is not None:
            out += self._item_done(index, data.get("item"))
        elif kind in ("response.completed", "response.incomplete"):
            out += self._end(data.get("response"))
        elif kind == "response.failed":
            out += self._fail(dig(data, "response", "error"), failed=True)
        return out

    def _start(self, response: Any) -> list[bytes]:
        if self._started:
            return []
        self._started = True
        message = {
            "id": message_id(dig(response, "id")),
            "type": "message",
            "role": "assistant",
            "model": as_str(dig(response, "model")) or self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        }
        return [typed_event("message_start", {"message": message})]

    def _open_block(self, output_index: int, block: dict) -> list[bytes]:
        out = self._close()
        self._open = (self._blocks, output_index, block["type"] == "text")
        self._blocks += 1
        start = {"index": self._open[0], "content_block": block}
        return [*out, typed_event("content_block_start", start)]

    def _close(self) -> list[bytes]:
        if self._open is None:
            return []
        index, self._open = self._open[0], None
        return [typed_event("content_block_stop", {"index": index})]

    def _text(self, output_index: int, text: str, refusal: bool) -> list[bytes]:
        if not text:
            return []
        self._refused = self._refused or refusal
        self._texted.add(output_index)
        out = []
        if self._open is None or self._open[1:] != (output_index, True):
            out = self._open_block(output_index, {"type": "text", "text": ""})
        delta = {"index": self._blocks - 1, "delta": {"type": "text_delta", "text": text}}
        return [*out, typed_event("content_block_delta", delta)]

    def _added(self, output_index: int, item: Any) -> list[bytes]:
        if dig(item, "type") != "function_call" or output_index in self._calls:
            return []
        block = {
            "type": "tool_use",
            "id": fit(as_str(item.get("call_id")) or f"call_{output_index}", ANTHROPIC_ID_LIMIT),
            "name": client_name(as_str(item.get("name")) or "", self.tools),
            "input": {},
        }
        out = self._open_block(output_index, block)
        self._calls[output_index] = [self._blocks - 1, False]
        return out + self._arguments(output_index, as_str(item.get("arguments")) or "")

    def _arguments(self, output_index: int, fragment: str) -> list[bytes]:
        call = self._calls.get(output_index)
        if call is None or not fragment:
            return []
        call[1] = True
        delta = {"type": "input_json_delta", "partial_json": fragment}
        return [typed_event("content_block_delta", {"index": call[0], "delta": delta})]

    def _arguments_once(self, output_index: int, arguments: Any) -> list[bytes]:
        """Whole arguments from a done event, when no fragment of them came before."""
        call = self._calls.get(output_index)
        if call is None or call[1]:
            return []
        return self._arguments(output_index, as_str(arguments) or "")

    def _item_done(self, output_index: int, item: Any) -> list[bytes]:
        kind = dig(item, "type")
        out = []
        if kind == "function_call":
            out = self._added(output_index, item) or self._arguments_once(
                output_index, item.get("arguments")
            )
        elif kind == "message" and output_index not in self._texted:
            text, refused = message_text(item)
            out = self._text(output_index, text, refused)
        elif kind == "web_search_call":
            out = self._web_search(output_index, item)
        if self._open is not None and self._open[1] == output_index:
            out += self._close()
        return out

    def _web_search(self, output_index: int, item: Any) -> list[bytes]:
        """A finished search: Claude's two blocks, its call then its result."""
        blocks = web_search_blocks(item)
        if not blocks:
            return []
        use, result = blocks
        out = self._open_block(output_index, {**use, "input": {}})
        delta = {"type": "input_json_delta", "partial_json": compact_json(use["input"])}
        out.append(typed_event("content_block_delta", {"index": self._blocks - 1, "delta": delta}))
        return out + self._open_block(output_index, result)

    def _end(self, response: Any) -> list[bytes]:
        stop = stop_from_status(
            dig(response, "status"),
            dig(response, "incomplete_details", "reason"),
            refused=self._refused,
            called=bool(self._calls),
        )
        delta = {"stop_reason": stop, "stop_sequence": None}
        self.finished = True
        return [
            *self._close(),
            typed_event(
                "message_delta", {"delta": delta, "usage": anthropic_usage(dig(response, "usage"))}
            ),
            typed_event("message_stop", {}),
        ]

    def _fail(self, error: Any, *, failed: bool = False) -> list[bytes]:
        """An error event or a failed response's ``error`` as an Anthropic error event."""
        code = as_str(dig(error, "code"))
        kind = as_str(dig(error, "type"))
        kind = None if kind == "error" else kind  # an error event's own type says nothing
        if (
            failed and code is not None and code not in _RETRYABLE_CODES
        ):  # the other codes name a bad request
            kind = "invalid_request_error"
        message = as_str(dig(error, "message")) or "the upstream response failed"
        _, body = openai_error_to_anthropic(
            200, {"error": {"message": message, "type": kind, "code": code}}
        )
        self.error = body["error"]
        return [typed_event("error", {"error": self.error})]
