"""Anthropic Messages: fold a `message_start … message_stop` stream back into the message.

Built as anthropic-python's `accumulate_event` builds it, with three differences a recorder
needs: blocks are keyed by their ``index`` (sparse or out-of-order indexes cannot crash),
tool input JSON is parsed once at ``content_block_stop`` (or at the end of a cut stream)
instead of partially on every fragment, and input that does not parse is kept as ``{}`` plus
the raw text in ``input_raw`` rather than raising. Unknown delta types append their string
fields to the block; unknown events are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.vendors.sse import (
    MalformedEvent,
    Pieces,
    Reassembled,
    SseEvent,
    Summary,
    as_int,
    as_list,
    as_str,
    dig,
    extend,
    load_object,
    summary,
    typed_payloads,
)
from taplog.recorder.vendors.tools import ToolCall, ToolResult

__all__ = [
    "END_EVENT",
    "NORMAL_STOPS",
    "Progress",
    "reassemble",
    "summarize",
    "text_deltas",
    "tool_calls",
    "tool_results",
]

NORMAL_STOPS = frozenset({"end_turn", "stop_sequence"})
_SERVER_TOOL_USES = frozenset({"server_tool_use", "mcp_tool_use"})

# delta type -> (block field, block type if the block never started)
_TEXT_DELTAS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
}


@dataclass(slots=True)
class _State:
    message: dict | None = None
    blocks: dict[int, dict] = field(default_factory=dict)
    json_parts: dict[int, list[str]] = field(default_factory=dict)
    pieces: Pieces = field(default_factory=Pieces)


def reassemble(events: Iterable[SseEvent], longer_than: int | None = None) -> Reassembled:
    """Rebuild the non-streaming message; ``complete`` means `message_stop` arrived.

    Strings over `longer_than` characters stay in their pieces (`Text`).
    """
    state = _State()
    result = Reassembled(body=None, complete=False, error=None)
    for kind, data in typed_payloads(events, result):
        if kind == "message_stop":
            result.complete = True
        elif kind == "error":
            err = data.get("error")
            result.error = err if isinstance(err, dict) else data
        else:
            _apply(state, kind, data)
    for index in list(state.json_parts):  # a cut stream: finish what arrived
        _finish_input(state, index)
    result.body = _build(state, longer_than)
    return result


def _apply(state: _State, kind: str | None, data: dict) -> None:
    index = as_int(data.get("index"))
    if kind == "message_start" and isinstance(data.get("message"), dict):
        state.message = data["message"]
        content = state.message.get("content")
        for i, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, dict):
                state.blocks[i] = block
    elif kind == "message_delta":
        _message_delta(state, data)
    elif index is None:
        return
    elif kind == "content_block_start" and isinstance(data.get("content_block"), dict):
        state.blocks[index] = data["content_block"]
    elif kind == "content_block_delta" and isinstance(data.get("delta"), dict):
        _block_delta(state, index, data["delta"])
    elif kind == "content_block_stop":
        _finish_input(state, index)


def _block_delta(state: _State, index: int, delta: dict) -> None:
    kind = as_str(delta.get("type"))
    if kind == "input_json_delta":
        if isinstance(delta.get("partial_json"), str):
            state.json_parts.setdefault(index, []).append(delta["partial_json"])
        return
    if kind in _TEXT_DELTAS:
        name, block_type = _TEXT_DELTAS[kind]
        _append(state, _block(state, index, block_type), name, delta.get(name))
    elif kind == "signature_delta":
        _block(state, index, "thinking")["signature"] = delta.get("signature")
    elif kind == "citations_delta":
        extend(_block(state, index, "text"), "citations", [delta.get("citation")])
    else:
        block = _block(state, index, None)
        for name, value in delta.items():
            if name != "type":
                _append(state, block, name, value)


def text_deltas(data: dict) -> Iterator[tuple[Any, dict, str]]:
    """Where an event carries a piece of a text the stream builds: (which text, the dict
    holding the piece, its key); the pieces of one text, joined, are that text. A
    thinking block's signature is set whole, never built: it is no piece."""
    delta = data.get("delta")
    if data.get("type") != "content_block_delta" or not isinstance(delta, dict):
        return
    for key, value in delta.items():
        if key not in ("type", "signature") and isinstance(value, str):
            yield (data.get("index"), key), delta, key


def _block(state: _State, index: int, block_type: str | None) -> dict:
    """The block a delta addresses, created with the delta's natural type if it never started."""
    if index not in state.blocks:
        state.blocks[index] = {"type": block_type} if block_type else {}
    return state.blocks[index]


def _append(state: _State, block: dict, name: str, value: object) -> None:
    if isinstance(value, str):
        state.pieces.append(block, name, value)


def _finish_input(state: _State, index: int) -> None:
    """Parse a tool block's streamed JSON: empty means ``{}``, invalid keeps the raw text."""
    parts = state.json_parts.pop(index, None)
    if parts is None:
        return
    raw = "".join(parts)
    block = _block(state, index, "tool_use")
    if not raw:
        block["input"] = {}
        return
    try:
        block["input"] = orjson.loads(raw)
    except orjson.JSONDecodeError:
        block["input"] = {}
        block["input_raw"] = raw


def _message_delta(state: _State, data: dict) -> None:
    """stop_reason/stop_sequence always replace; other fields and usage only when not null."""
    message = state.message if state.message is not None else _skeleton(state)
    delta = data.get("delta")
    for key, value in delta.items() if isinstance(delta, dict) else ():
        if value is not None or key in ("stop_reason", "stop_sequence"):
            message[key] = value
    usage = data.get("usage")
    if isinstance(usage, dict):
        merged = message.get("usage")
        merged = dict(merged) if isinstance(merged, dict) else {}
        merged.update((k, v) for k, v in usage.items() if v is not None)
        message["usage"] = merged


def _skeleton(state: _State) -> dict:
    state.message = {"type": "message", "role": "assistant", "content": []}
    return state.message


def _build(state: _State, longer_than: int | None) -> dict | None:
    state.pieces.join(longer_than)
    if state.message is None and not state.blocks:
        return None
    body = dict(state.message if state.message is not None else _skeleton(state))
    body["content"] = [state.blocks[i] for i in sorted(state.blocks)]
    return body


_USAGE = {  # Summary field -> where the usage holds it
    "input_tokens": ("input_tokens",),  # the fresh ones only: `summarize` adds the cached
    "output_tokens": ("output_tokens",),
    "cached_tokens": ("cache_read_input_tokens",),
    "cache_write_tokens": ("cache_creation_input_tokens",),
    "reasoning_tokens": ("output_tokens_details", "thinking_tokens"),
}


def summarize(body: dict) -> Summary:
    """Facts from a message body; input tokens add cache reads and writes (OTel meaning)."""
    facts = summary(body, as_str(dig(body, "stop_reason")), _USAGE)
    inputs = (facts.input_tokens, facts.cached_tokens, facts.cache_write_tokens)
    counts = [n for n in inputs if n is not None]
    facts.input_tokens = sum(counts) if counts else None
    return facts


def tool_calls(body: dict) -> list[ToolCall]:
    """`tool_use` blocks, and server tools paired with their results from the same answer."""
    content = [b for b in as_list(body.get("content")) if isinstance(b, dict)]
    server_results = {
        b["tool_use_id"]: b
        for b in content
        if isinstance(b.get("tool_use_id"), str) and b.get("type") != "tool_result"
    }
    calls = []
    for block in content:
        call_id, kind = block.get("id"), as_str(block.get("type"))
        if not isinstance(call_id, str):
            continue
        if kind == "tool_use":
            raw = block.get("input_raw")
            error = "arguments are not valid JSON" if isinstance(raw, str) else None
            arguments = None if error else block.get("input", {})
            calls.append(ToolCall(call_id, as_str(block.get("name")), arguments, raw, error))
        elif kind in _SERVER_TOOL_USES:
            result = server_results.get(call_id, {})
            calls.append(
                ToolCall(
                    call_id,
                    as_str(block.get("name")),
                    block.get("input"),
                    server=True,
                    result=result.get("content"),
                    is_error=_server_tool_failed(result),
                )
            )
    return calls


def _server_tool_failed(result: dict) -> bool:
    content = result.get("content")
    failed = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
    return failed or result.get("is_error") is True


def tool_results(body: dict) -> list[ToolResult]:
    """`tool_result` blocks of the request's user messages, in transcript order."""
    return [
        ToolResult(block["tool_use_id"], block.get("content"), block.get("is_error") is True)
        for message in as_list(body.get("messages"))
        if isinstance(message, dict) and message.get("role") == "user"
        for block in as_list(message.get("content"))
        if isinstance(block, dict)
        and block.get("type") == "tool_result"
        and isinstance(block.get("tool_use_id"), str)
    ]


END_EVENT = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'  # completes a stopped message


class Progress:
    """What a Messages stream has said so far, told event by event (`recorder.vendors.watch`).

    Ended at `message_stop`; finished once `message_delta` gave the stop reason
    (the message is whole, only `message_stop` may still be missing); failed at
    an `error` event. With `every`, each event's data is parsed and one that is
    not a JSON object is malformed; without, only the events named for the
    message's end or an error are. Events the SDKs skip (no data, no name,
    `ping`) are not judged.
    """

    __slots__ = ("ended", "error", "every", "finished")

    def __init__(self, every: bool = True, request: object = None) -> None:
        self.every = every
        self.ended = self.finished = False
        self.error: dict | None = None

    @staticmethod
    def telling(block: bytes) -> bool:
        """Whether a raw event may end or fail the message (by its `event:` name)."""
        return block.startswith(_TELLING_LINES) or not block.startswith(b"event: ")

    def see(self, name: str | None, raw: bytes) -> None:
        """One event: its `event:` name and its data."""
        if not raw or name in _SKIPPED or (not self.every and name not in _TELLING):
            return
        data = load_object(raw)
        if data is None:
            raise MalformedEvent(raw)
        kind = data.get("type") if isinstance(data.get("type"), str) else name
        if kind == "message_stop":
            self.ended = True
        elif kind == "error":
            self.error = data
        elif kind == "message_delta" and dig(data, "delta", "stop_reason"):
            self.finished = True


_SKIPPED = frozenset({None, "ping"})  # the SDKs skip unnamed events and pings
_TELLING = frozenset({"message_delta", "message_stop", "error"})  # the events that can end it
_TELLING_LINES = tuple(f"event: {name}\n".encode() for name in _TELLING)
