"""The tool gate of OpenAI Responses (`recorder.vendors.holding`): refused calls become
`message` items.

    calls    `function_call` items (arguments: JSON) and `custom_tool_call` items, Codex's
             freeform tools such as `apply_patch` (arguments: the raw input)
    stream   a call's events (`response.output_item.added`, its argument or input deltas
             and `.done`, `response.output_item.done`) are held until its item is done; a
             refused one is replaced at the same `output_index` by a message item's events
             (item added, part added, one text delta, text done, part done, item done);
             every later event's `sequence_number` shifts by what that added or removed,
             so they stay consecutive; the terminal event's `response.output`
             (`response.completed`, `.incomplete`, `.failed`, `.done`) has the same
             message in the call's place, as the SDK checks the two agree
    body     a refused call in `output` becomes the same message item

The message's id is the call item's with the `msg_` prefix. Other client-run items
(`shell_call`, `apply_patch_call`, `computer_call`, …) and hosted tools pass ungated.
"""

from __future__ import annotations

from typing import Any

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
from taplog.recorder.vendors.openai_responses.vocab import text_part
from taplog.recorder.vendors.sse import as_list, as_str, dig

CALL_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}  # -> its arguments
_DELTAS = frozenset(
    {"response.function_call_arguments.delta", "response.custom_tool_call_input.delta"}
)
_DONES = {
    "response.function_call_arguments.done": "arguments",
    "response.custom_tool_call_input.done": "input",
}
_ITEM_DONE = "response.output_item.done"
_CALL_EVENTS = _DELTAS | set(_DONES) | {_ITEM_DONE}
_TERMINAL = frozenset(
    {"response.completed", "response.incomplete", "response.failed", "response.done"}
)


class ResponsesGate(HoldingGate):
    """A Responses stream, its refused calls replaced by message items."""

    def __init__(self, refuse: Refuse, hold_limit: int) -> None:
        super().__init__(refuse, hold_limit)
        self._items: dict[int, HeldCall] = {}  # calls by output index, until item done
        self._messages: dict[str, dict] = {}  # refused calls' messages, by call item id
        self._shift = 0  # added minus removed events so far: the sequence numbers' shift

    def _take(self, block: bytes) -> None:
        name = event_type(block)
        if name == "response.output_item.added" and (
            b'"function_call"' in block or b'"custom_tool_call"' in block
        ):
            data = payload(block)
            call = self._added(data)
            if call is not None:
                self._hold(block, (call,), data)
                return
        elif name in _CALL_EVENTS and self._items:
            data = payload(block)
            index = dig(data, "output_index")
            call = self._items.get(index) if isinstance(index, int) else None
            if call is not None and data is not None:
                self._update(call, name, data)
                self._hold(block, (call,), data)
                return
        self._hold(block, (), name)

    def _added(self, data: dict | None) -> HeldCall | None:
        item = dig(data, "item")
        index = dig(data, "output_index")
        if dig(item, "type") not in CALL_ITEMS or not isinstance(index, int):
            return None
        name, call_id = as_str(item.get("name")) or "", as_str(item.get("call_id")) or ""
        call = self._items[index] = self._opened(index, name, call_id)
        call.facts.update(item_id=as_str(item.get("id")) or call_id, type=item["type"])
        return call

    def _update(self, call: HeldCall, name: str | None, data: dict) -> None:
        """A call's later event: a piece of its arguments, or them whole (its item done)."""
        if name in _DELTAS:
            piece = data.get("delta")
            if isinstance(piece, str) and not call.judged:
                call.pieces.append(piece)
            return
        field = _DONES.get(name) or CALL_ITEMS[call.facts["type"]]
        whole = data.get(field) if name in _DONES else dig(data, "item", field)
        if isinstance(whole, str):
            call.whole = whole
        if name == _ITEM_DONE:
            del self._items[call.key]
            self._close(call.key)

    def _emit(self, block: bytes, calls: tuple[HeldCall, ...], note: Any) -> None:
        if calls and calls[0].denied:
            self._replace(block, calls[0], note)
            return
        terminal = isinstance(note, str) and note in _TERMINAL and bool(self._messages)
        if not self._shift and not terminal:
            self._send(block)
            return
        data = note if isinstance(note, dict) else payload(block)
        if data is None:
            self._send(block)
            return
        number = data.get("sequence_number")
        if isinstance(number, int):
            data["sequence_number"] = number + self._shift
        if terminal:
            self._swap_output(dig(data, "response"))
        self._send(rebuilt(block, data), changed=True)

    def _replace(self, block: bytes, call: HeldCall, data: dict | None) -> None:
        """A refused call's event: its first gives way to the message, the rest are left out."""
        number = dig(data, "sequence_number")
        if call.replaced:
            self._drop()
            if isinstance(number, int):
                self._shift -= 1
            return
        call.replaced = True
        assert call.refusal is not None  # only a refused call is replaced
        item_id = call.facts["item_id"]
        text = call.refusal
        message = self._messages[item_id] = _message(item_id, text)
        events = _message_events(call.key, message, text)
        named, end = event_name(block) is not None, line_end(block)
        for offset, (name, fields) in enumerate(events):
            event: dict[str, Any] = {"type": name, **fields}
            if isinstance(number, int):
                event["sequence_number"] = number + self._shift + offset
            self._send(framed(name if named else None, event, end), changed=True)
        if isinstance(number, int):
            self._shift += len(events) - 1

    def _swap_output(self, response: Any) -> None:
        output = as_list(dig(response, "output"))
        for position, item in enumerate(output):
            if dig(item, "type") in CALL_ITEMS:
                key = as_str(item.get("id")) or as_str(item.get("call_id")) or ""
                message = self._messages.get(key)
                if message is not None:
                    output[position] = message


def _message(call_item_id: str, text: str) -> dict:
    """The completed message item that stands for a refused call."""
    kind, underscore, rest = call_item_id.partition("_")
    return {
        "id": "msg_" + (rest if underscore else kind),
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [text_part(text)],
    }


def _message_events(index: int, message: dict, text: str) -> list[tuple[str, dict]]:
    where = {"item_id": message["id"], "output_index": index, "content_index": 0}
    opened = {**message, "status": "in_progress", "content": []}
    return [
        ("response.output_item.added", {"output_index": index, "item": opened}),
        ("response.content_part.added", {**where, "part": text_part("")}),
        ("response.output_text.delta", {**where, "delta": text, "logprobs": []}),
        ("response.output_text.done", {**where, "text": text, "logprobs": []}),
        ("response.content_part.done", {**where, "part": text_part(text)}),
        ("response.output_item.done", {"output_index": index, "item": message}),
    ]


def gate_answer(answer: dict, refuse: Refuse) -> None:
    """A whole Responses answer: refused calls in `output` become message items."""
    output = as_list(answer.get("output"))
    for position, item in enumerate(output):
        kind = dig(item, "type")
        if kind not in CALL_ITEMS:
            continue
        call_id = as_str(item.get("call_id")) or ""
        arguments = as_str(item.get(CALL_ITEMS[kind])) or ""
        refusal = refuse(AskedCall(as_str(item.get("name")) or "", arguments, call_id))
        if refusal is not None:
            output[position] = _message(as_str(item.get("id")) or call_id, refusal)
