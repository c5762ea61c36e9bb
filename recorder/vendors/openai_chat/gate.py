"""The tool gate of OpenAI Chat Completions (`recorder.vendors.holding`): refused tool
calls become message content.

    stream   each choice's tool calls, by `(choice index, tool call index)`: a call's chunks
             are held from its first (`id`, `function.name`) until it is whole, which is
             when the choice's next call starts, its `finish_reason` comes, or `[DONE]`;
             so a call is released before the next one has streamed. A refused call's
             pieces leave its chunks (a chunk left with nothing is dropped) and its first
             chunk carries the refusal as `delta.content`; the calls after it in the choice
             are renumbered, for `index` to stay 0..n-1 (the SDKs index a list by it)
    body     a refused call leaves `message.tool_calls` (the key goes when none is left)
             and its refusal joins `message.content`
    both     `finish_reason` "tool_calls" becomes "stop" once a choice has no call left

Chunks are parsed only when they carry `"tool_calls"`, or a `"finish_reason"` once the
stream has had a tool call: text streams as it came, unread (but for a look for its first
text, after which a refusal starts a paragraph of its own, as in a whole answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from taplog.recorder.vendors.holding import (
    AskedCall,
    HeldCall,
    HoldingGate,
    Refuse,
    payload,
    rebuilt,
)
from taplog.recorder.vendors.sse import as_list, as_str, dig

# The start of a non-empty `content` string: a chunk of text, looked for without parsing.
_TEXT = re.compile(rb'"content": ?"[^"]')


@dataclass(slots=True)
class _Choice:
    calls: dict[int, HeldCall] = field(default_factory=dict)  # by tool call index
    passed: int = 0
    denied: int = 0
    refusals: int = 0  # refusal texts sent

    def shift(self, index: int) -> int:
        """How many refused calls come before call `index`: its index's shift down."""
        return sum(1 for i, call in self.calls.items() if i < index and call.denied)


class ChatGate(HoldingGate):
    """A Chat Completions stream, its refused tool calls replaced by content."""

    def __init__(self, refuse: Refuse, hold_limit: int) -> None:
        super().__init__(refuse, hold_limit)
        self._choices: dict[int, _Choice] = {}
        self._said = False  # text came before: a refusal then starts a paragraph of its own

    def _take(self, block: bytes) -> None:
        if b'"tool_calls"' in block or (self._choices and b'"finish_reason"' in block):
            chunk = payload(block)
            if chunk is not None:
                self._hold(block, self._read(chunk), chunk)
                return
        elif self._open and b"[DONE]" in block:
            for key in list(self._open):
                self._close(key)
        elif not self._said:
            self._said = _TEXT.search(block) is not None
        self._hold(block)

    def _read(self, chunk: dict) -> tuple[HeldCall, ...]:
        """The calls `chunk` carries pieces of (their pieces added); closes the calls it
        shows whole."""
        carried: list[HeldCall] = []
        for choice in as_list(chunk.get("choices")):
            number = dig(choice, "index")
            if not isinstance(number, int):
                continue
            self._said = self._said or bool(dig(choice, "delta", "content"))
            for piece in as_list(dig(choice, "delta", "tool_calls")):
                call = self._call(number, piece)
                if call is not None and call not in carried:
                    carried.append(call)
            if choice.get("finish_reason") is not None:
                self._close_choice(number)
        return tuple(carried)

    def _call(self, number: int, piece: Any) -> HeldCall | None:
        index = dig(piece, "index")
        if not isinstance(index, int):
            return None
        choice = self._choices.setdefault(number, _Choice())
        call = choice.calls.get(index)
        function = dig(piece, "function")
        if call is None:
            self._close_choice(number)  # the next call started: the one before is whole
            name, call_id = as_str(dig(function, "name")) or "", as_str(piece.get("id")) or ""
            call = choice.calls[index] = self._opened((number, index), name, call_id)
        arguments = dig(function, "arguments")
        if isinstance(arguments, str) and not call.judged:
            call.pieces.append(arguments)
        return call

    def _close_choice(self, number: int) -> None:
        for key in [key for key in self._open if key[0] == number]:
            self._close(key)

    def _judged(self, call: HeldCall) -> None:
        choice = self._choices[call.key[0]]
        if call.denied:
            choice.denied += 1
        else:
            choice.passed += 1

    def _emit(self, block: bytes, calls: tuple[HeldCall, ...], note: Any) -> None:
        chunk = note
        if chunk is None or not self._rewrite(chunk):
            self._send(block)
        elif _says_nothing(chunk):
            self._drop()
        else:
            self._send(rebuilt(block, chunk), changed=True)

    def _rewrite(self, chunk: dict) -> bool:
        """Take refused calls out of `chunk`, renumber the others, fix finish reasons:
        whether anything changed."""
        changed = False
        for choice in as_list(chunk.get("choices")):
            number = dig(choice, "index")
            state = self._choices.get(number) if isinstance(number, int) else None
            if state is None:
                continue
            delta = choice.get("delta")
            pieces = as_list(dig(delta, "tool_calls"))
            kept = []
            for piece in pieces:
                index = dig(piece, "index")
                call = state.calls.get(index) if isinstance(index, int) else None
                if call is not None and call.denied:
                    self._put_refusal(state, delta, call)
                    changed = True
                    continue
                shift = state.shift(index) if call is not None else 0
                if shift:
                    piece["index"] = index - shift
                    changed = True
                kept.append(piece)
            if len(kept) < len(pieces):
                if kept:
                    delta["tool_calls"] = kept
                else:
                    del delta["tool_calls"]
            if choice.get("finish_reason") == "tool_calls" and state.denied and not state.passed:
                choice["finish_reason"] = "stop"
                changed = True
        return changed

    def _put_refusal(self, state: _Choice, delta: dict, call: HeldCall) -> None:
        """A refused call's first piece leaves its refusal in `delta`'s content."""
        if call.replaced:
            return
        call.replaced = True
        assert call.refusal is not None  # a refused call has its text
        text = ("\n\n" if state.refusals or self._said else "") + call.refusal
        state.refusals += 1
        content = delta.get("content")
        delta["content"] = (content if isinstance(content, str) else "") + text


def _says_nothing(chunk: dict) -> bool:
    """A chunk left with nothing once refused pieces are out of it: no usage, and no
    choice with a delta, finish reason or logprobs."""
    choices = as_list(chunk.get("choices"))
    return bool(choices) and not chunk.get("usage") and all(map(_choice_says_nothing, choices))


def _choice_says_nothing(choice: Any) -> bool:
    delta = dig(choice, "delta")
    return (
        isinstance(choice, dict)
        and (not isinstance(delta, dict) or all(value is None for value in delta.values()))
        and choice.get("finish_reason") is None
        and not choice.get("logprobs")
    )


def gate_answer(answer: dict, refuse: Refuse) -> None:
    """A whole Chat Completions answer: refused calls leave each choice's message, their
    refusals join its content."""
    for choice in as_list(answer.get("choices")):
        message = dig(choice, "message")
        kept: list[Any] = []
        refusals: list[str] = []
        for call in as_list(dig(message, "tool_calls")):
            refusal = refuse(_asked(call))
            if refusal is not None:
                refusals.append(refusal)
            else:
                kept.append(call)
        if not refusals:
            continue
        content = message.get("content")
        message["content"] = "\n\n".join([content, *refusals] if content else refusals)
        if kept:
            message["tool_calls"] = kept
        else:
            del message["tool_calls"]
            if choice.get("finish_reason") == "tool_calls":
                choice["finish_reason"] = "stop"


def _asked(call: Any) -> AskedCall:
    """A message's tool call: a function's (JSON arguments) or a custom tool's (its input)."""
    custom = dig(call, "custom")
    if isinstance(custom, dict):
        name, arguments = custom.get("name"), custom.get("input")
    else:
        name, arguments = dig(call, "function", "name"), dig(call, "function", "arguments")
    return AskedCall(as_str(name) or "", as_str(arguments) or "", as_str(dig(call, "id")) or "")
