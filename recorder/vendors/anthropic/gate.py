"""The tool gate of Anthropic Messages (`recorder.vendors.holding`): refused `tool_use`
blocks become `text` blocks.

    stream   a `tool_use` block's events (`content_block_start`, its `input_json_delta`
             pieces, `content_block_stop`) are held until its stop; a refused one is
             replaced at the same index by a text block (start, one `text_delta`, stop)
    body     a refused `tool_use` in `content` becomes a `text` block in its place
    both     `stop_reason` "tool_use" becomes "end_turn" once no `tool_use` is left

The arguments judged are the `partial_json` pieces joined, or the compact JSON of the
start's `input` when none came (a call whose input arrived whole). `server_tool_use`
blocks are left alone: Anthropic runs those tools itself, the agent never sees them to run.
"""

from __future__ import annotations

from typing import Any

import orjson

from taplog.recorder.vendors.holding import (
    AskedCall,
    HeldCall,
    HoldingGate,
    Refuse,
    event_name,
    event_type,
    framed,
    line_end,
    payload,
    rebuilt,
)
from taplog.recorder.vendors.sse import as_list, as_str, dig


class MessagesGate(HoldingGate):
    """An Anthropic Messages stream, its refused `tool_use` blocks replaced."""

    def __init__(self, refuse: Refuse, hold_limit: int) -> None:
        super().__init__(refuse, hold_limit)
        self._blocks: dict[int, HeldCall] = {}  # tool_use blocks by index, until their stop
        self._passed = 0
        self._denied = 0

    def _take(self, block: bytes) -> None:
        name = event_type(block)
        if name == "content_block_start" and b'"tool_use"' in block:
            call = self._started(payload(block))
            if call is not None:
                self._hold(block, (call,))
                return
        elif name in ("content_block_delta", "content_block_stop") and self._blocks:
            data = payload(block)
            index = dig(data, "index")
            call = self._blocks.get(index) if isinstance(index, int) else None
            if call is not None:
                if name == "content_block_stop":
                    del self._blocks[call.key]
                    self._close(call.key)
                elif not call.judged:
                    self._add(call, dig(data, "delta", "partial_json"))
                self._hold(block, (call,))
                return
        self._hold(block, (), name)

    def _started(self, data: dict | None) -> HeldCall | None:
        content = dig(data, "content_block")
        index = dig(data, "index")
        if dig(content, "type") != "tool_use" or not isinstance(index, int):
            return None
        name, call_id = as_str(content.get("name")) or "", as_str(content.get("id")) or ""
        call = self._opened(index, name, call_id)
        given = content.get("input")
        call.whole = orjson.dumps(given).decode() if isinstance(given, dict) else None
        self._blocks[index] = call
        return call

    @staticmethod
    def _add(call: HeldCall, piece: Any) -> None:
        if isinstance(piece, str):
            call.whole = None  # its input streams: the start's was the empty placeholder
            call.pieces.append(piece)

    def _judged(self, call: HeldCall) -> None:
        if call.denied:
            self._denied += 1
        else:
            self._passed += 1

    def _emit(self, block: bytes, calls: tuple[HeldCall, ...], note: Any) -> None:
        if calls and calls[0].denied:
            call = calls[0]
            if call.replaced:
                self._drop()
                return
            call.replaced = True
            for event in _text_block(block, call):
                self._send(event, changed=True)
            return
        if note == "message_delta" and self._denied and not self._passed:
            data = payload(block)
            delta = dig(data, "delta")
            if isinstance(delta, dict) and delta.get("stop_reason") == "tool_use":
                delta["stop_reason"] = "end_turn"
                self._send(rebuilt(block, data), changed=True)
                return
        self._send(block)


def _text_block(block: bytes, call: HeldCall) -> list[bytes]:
    """The text block that stands for a refused call, at its index, framed like `block`."""
    assert call.refusal is not None  # only a refused call is replaced
    index, text, end = call.key, call.refusal, line_end(block)
    named = event_name(block) is not None
    events = [
        ("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"index": index}),
    ]
    return [framed(name if named else None, {"type": name, **data}, end) for name, data in events]


def gate_answer(answer: dict, refuse: Refuse) -> None:
    """A whole Messages answer: refused `tool_use` blocks become text, in place."""
    content = as_list(answer.get("content"))
    passed = denied = 0
    for position, block in enumerate(content):
        if dig(block, "type") != "tool_use":
            continue
        refusal = refuse(
            AskedCall(
                as_str(block.get("name")) or "",
                orjson.dumps(block.get("input", {})).decode(),
                as_str(block.get("id")) or "",
            )
        )
        if refusal is not None:
            content[position] = {"type": "text", "text": refusal}
            denied += 1
        else:
            passed += 1
    if denied and not passed and answer.get("stop_reason") == "tool_use":
        answer["stop_reason"] = "end_turn"
