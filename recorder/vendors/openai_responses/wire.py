"""OpenAI Responses: turn a `response.*` event stream back into the `response` object.

A finished stream ends with `response.completed`, `response.incomplete` or `response.failed`,
whose ``response`` already is the non-streaming body; it is used as-is, except that an
absent ``output`` is filled from the `response.output_item.done` items, as openai-python's
`ResponseStreamState` does. Deltas are stitched only for streams cut before that: the
`response.created` snapshot plus every output item, keyed by ``output_index``, with text,
refusal, reasoning, summary and argument deltas applied; its status is "in_progress".
Unknown event types are skipped.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

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
from taplog.recorder.vendors.tools import ToolCall, ToolResult, call_from_string

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

# Responses has no stop reason that could contradict a tool call.
NORMAL_STOPS: frozenset[str] = frozenset()
# Items the client executes: type -> the field holding what the model asked for.
_CLIENT_CALLS = {
    "function_call": "arguments",
    "custom_tool_call": "input",
    "computer_call": "action",
    "local_shell_call": "action",
    "shell_call": "action",
    "apply_patch_call": "operation",
}
_CLIENT_OUTPUTS = frozenset(f"{kind}_output" for kind in _CLIENT_CALLS)
# Hosted tools run by OpenAI; the item carries the call and its outcome together.
_HOSTED_RESULT_FIELDS = ("output", "outputs", "results", "result")
_HOSTED_NOT_ARGUMENTS = frozenset({"id", "type", "status", "error", *_HOSTED_RESULT_FIELDS})

_LIFECYCLE = {"response.created", "response.queued", "response.in_progress"}
_TERMINAL = {"response.completed", "response.incomplete", "response.failed"}
_ENDS = frozenset({"response.completed", "response.incomplete"})  # the answer, whole
_FAILURES = frozenset({"error", "response.failed"})

# event family -> (item list key, index field, text field, fresh part, item if none arrived)
_PART_TEXT: dict[str, tuple[str, str, str, dict, dict]] = {
    "output_text": (
        "content",
        "content_index",
        "text",
        {"type": "output_text", "text": "", "annotations": []},
        {"type": "message", "role": "assistant"},
    ),
    "refusal": (
        "content",
        "content_index",
        "refusal",
        {"type": "refusal", "refusal": ""},
        {"type": "message", "role": "assistant"},
    ),
    "reasoning_text": (
        "content",
        "content_index",
        "text",
        {"type": "reasoning_text", "text": ""},
        {"type": "reasoning", "summary": []},
    ),
    "reasoning_summary_text": (
        "summary",
        "summary_index",
        "text",
        {"type": "summary_text", "text": ""},
        {"type": "reasoning", "summary": []},
    ),
}
# event -> (item field, item type if the item itself never arrived) for per-item text
_ITEM_TEXT: dict[str, tuple[str, str]] = {
    "function_call_arguments": ("arguments", "function_call"),
    "mcp_call_arguments": ("arguments", "mcp_call"),
    "custom_tool_call_input": ("input", "custom_tool_call"),
}
# event -> (item list key, index field) for whole parts
_PARTS = {
    "content_part": ("content", "content_index"),
    "reasoning_summary_part": ("summary", "summary_index"),
}


@dataclass(slots=True)
class _State:
    snapshot: dict | None = None
    final: dict | None = None
    items: dict[int, dict] = field(default_factory=dict)  # from output_item.added / deltas
    done: dict[int, dict] = field(default_factory=dict)  # from output_item.done
    parts: dict[tuple[int, str, int], dict] = field(default_factory=dict)
    pieces: Pieces = field(default_factory=Pieces)


def reassemble(events: Iterable[SseEvent], longer_than: int | None = None) -> Reassembled:
    """Rebuild the response; ``complete`` means a completed/incomplete/failed event arrived.

    Strings over `longer_than` characters stay in their pieces (`Text`).
    """
    state = _State()
    result = Reassembled(body=None, complete=False, error=None)
    for kind, data in typed_payloads(events, result):
        if kind == "error":
            result.error = data
        elif kind in _TERMINAL and isinstance(data.get("response"), dict):
            state.final = data["response"]
            result.complete = True
            if kind == "response.failed" and isinstance(state.final.get("error"), dict):
                result.error = state.final["error"]
        elif kind in _LIFECYCLE and isinstance(data.get("response"), dict):
            state.snapshot = data["response"]
        elif isinstance(kind, str) and kind.startswith("response."):
            _apply(state, kind.removeprefix("response."), data)
    result.body = _build(state, longer_than)
    return result


def _apply(state: _State, kind: str, data: dict) -> None:
    """Route one output event by family (the part before the last dot) and phase."""
    index = as_int(data.get("output_index"))
    if index is None:
        return
    family, _, phase = kind.rpartition(".")
    item = data.get("item")
    if family == "output_item" and isinstance(item, dict):
        if phase == "added":
            state.items[index] = item
        else:
            state.done[index] = item
            _forget_deltas(state, index)  # the whole item is here: its pieces are moot
    elif family in _PARTS and isinstance(data.get("part"), dict):
        key, index_field = _PARTS[family]
        sub = as_int(data.get(index_field)) or 0
        state.parts[(index, key, sub)] = data["part"]
    elif family in _PART_TEXT:
        part = _part(state, index, family, data)
        _put_text(state.pieces, part, _PART_TEXT[family][2], phase, data)
    elif family in _ITEM_TEXT:
        name, item_type = _ITEM_TEXT[family]
        item = state.items.setdefault(index, {"type": item_type, name: ""})
        _put_text(state.pieces, item, name, phase, data)
    elif kind == "output_text.annotation.added":
        part = _part(state, index, "output_text", data)
        extend(part, "annotations", [data.get("annotation")])


def text_deltas(data: dict) -> Iterator[tuple[Any, dict, str]]:
    """Where an event carries a piece of a text the stream builds: (which text, the dict
    holding the piece, its key); the pieces of one text, joined, are that text."""
    family, _, phase = str(data.get("type")).removeprefix("response.").rpartition(".")
    if phase == "delta" and (family in _PART_TEXT or family in _ITEM_TEXT):
        where = data.get("content_index", data.get("summary_index"))
        yield (family, data.get("output_index"), where), data, "delta"


def _forget_deltas(state: _State, index: int) -> None:
    """Let go of what deltas built for an item (a long answer holds its text there too)."""
    for key in [key for key in state.parts if key[0] == index]:
        part = state.parts.pop(key)
        for _, _, name, _, _ in _PART_TEXT.values():
            state.pieces.drop(part, name)
    item = state.items.pop(index, None)
    if item is not None:
        for name, _ in _ITEM_TEXT.values():
            state.pieces.drop(item, name)


def _part(state: _State, index: int, family: str, data: dict) -> dict:
    """The content/summary part an event addresses, created (with its item) if never sent."""
    key, index_field, _, fresh, item = _PART_TEXT[family]
    state.items.setdefault(index, copy.deepcopy(item))
    sub = as_int(data.get(index_field)) or 0
    return state.parts.setdefault((index, key, sub), copy.deepcopy(fresh))


def _put_text(pieces: Pieces, target: dict, name: str, phase: str, data: dict) -> None:
    """A delta appends; a done event carries the whole text under the same field name."""
    if phase == "delta" and isinstance(data.get("delta"), str):
        pieces.append(target, name, data["delta"])
    elif phase == "done" and isinstance(data.get(name), str):
        pieces.drop(target, name)
        target[name] = data[name]


def _build(state: _State, longer_than: int | None) -> dict | None:
    state.pieces.join(longer_than)
    if state.final is not None:
        if state.final.get("output") is not None:
            return state.final
        return {**state.final, "output": [state.done[i] for i in sorted(state.done)]}
    if state.snapshot is None and not state.items and not state.done:
        return None
    body = dict(state.snapshot or {"object": "response"})
    body["status"] = "in_progress"
    body["output"] = [_stitched_item(state, i) for i in sorted(state.items.keys() | state.done)]
    return body


def _stitched_item(state: _State, index: int) -> dict:
    """A finished item as sent; an unfinished one with its parts laid over."""
    if index in state.done:
        return state.done[index]
    item = dict(state.items[index])
    for key in ("content", "summary"):
        mine = {sub: part for (i, k, sub), part in state.parts.items() if i == index and k == key}
        if not mine:
            continue
        given = item.get(key)
        merged = dict(enumerate(given)) if isinstance(given, list) else {}
        merged.update(mine)
        item[key] = [merged[sub] for sub in sorted(merged)]
    return item


_USAGE = {  # Summary field -> where the usage holds it
    "input_tokens": ("input_tokens",),
    "output_tokens": ("output_tokens",),
    "cached_tokens": ("input_tokens_details", "cached_tokens"),
    "cache_write_tokens": ("input_tokens_details", "cache_write_tokens"),
    "reasoning_tokens": ("output_tokens_details", "reasoning_tokens"),
}


def summarize(body: dict) -> Summary:
    """Facts from a `response` body; an incomplete one reports its reason as finish_reason."""
    status = as_str(dig(body, "status"))
    reason = as_str(dig(body, "incomplete_details", "reason"))
    return summary(body, reason if status == "incomplete" and reason else status, _USAGE)


def tool_calls(body: dict) -> list[ToolCall]:
    """Tool-call output items: client-executed ones, and hosted ones with their outcome."""
    calls = []
    for item in as_list(body.get("output")):
        kind = item.get("type") if isinstance(item, dict) else None
        if not isinstance(kind, str) or not kind.endswith("_call"):
            continue
        if kind in _CLIENT_CALLS and isinstance(item.get("call_id"), str):
            name = as_str(item.get("name")) or kind.removesuffix("_call")
            asked = item.get(_CLIENT_CALLS[kind])
            if kind == "function_call":
                calls.append(call_from_string(item["call_id"], name, asked))
            else:
                raw = asked if isinstance(asked, str) else None
                calls.append(ToolCall(item["call_id"], name, asked, raw))
        elif kind not in _CLIENT_CALLS and isinstance(item.get("id"), str):
            calls.append(_hosted_call(kind, item))
    return calls


def _hosted_call(kind: str, item: dict) -> ToolCall:
    arguments = {k: v for k, v in item.items() if k not in _HOSTED_NOT_ARGUMENTS}
    result = next((item[f] for f in _HOSTED_RESULT_FIELDS if item.get(f) is not None), None)
    return ToolCall(
        item["id"],
        as_str(item.get("name")) or kind.removesuffix("_call"),
        arguments,
        server=True,
        result=result if result is not None else item.get("status"),
        is_error=item.get("status") == "failed" or item.get("error") is not None,
    )


def tool_results(body: dict) -> list[ToolResult]:
    """Tool outputs among the request's input items, in order."""
    return [
        ToolResult(item["call_id"], item.get("output"))
        for item in as_list(body.get("input"))
        if isinstance(item, dict)
        and isinstance(item.get("type"), str)
        and item["type"] in _CLIENT_OUTPUTS
        and isinstance(item.get("call_id"), str)
    ]


END_EVENT = None  # a stream without its terminal event lacks the whole answer: never completed


class Progress:
    """What a Responses stream has said so far, told event by event (`recorder.vendors.watch`).

    Ended at `response.completed` or `response.incomplete`, whose response
    object is the whole answer (`answer`); failed at `error` or
    `response.failed`. The first event's response names the answer (`answer_id`)
    even when the stream breaks later. There is no "finished" short of the
    terminal event. With `every`, each event's data is parsed and one that is
    not a JSON object is malformed; without, only the first event, the
    terminal ones and unnamed ones are.
    """

    __slots__ = ("answer", "answer_id", "ended", "error", "every", "finished")

    def __init__(self, every: bool = True, request: object = None) -> None:
        self.every = every
        self.ended = self.finished = False
        self.error: dict | None = None
        self.answer: dict | None = None
        self.answer_id: str | None = None

    def telling(self, block: bytes) -> bool:
        """Whether a raw event may name, end or fail the answer (by its `event:` name)."""
        return (
            self.answer_id is None
            or block.startswith(_TELLING_LINES)
            or not block.startswith(b"event: ")
        )

    def see(self, name: str | None, raw: bytes) -> None:
        """One event: its `event:` name and its data."""
        if not self.every and self.answer_id is not None and name not in _TELLING:
            return
        data = load_object(raw)
        if data is None:
            raise MalformedEvent(raw)
        kind = data.get("type") if isinstance(data.get("type"), str) else name
        response = data.get("response")
        if self.answer_id is None and isinstance(response, dict):
            answer_id = response.get("id")
            self.answer_id = answer_id if isinstance(answer_id, str) else None
        if kind in _ENDS:
            self.ended = True
            self.answer = response if isinstance(response, dict) else None
        elif kind in _FAILURES:
            self.error = data


_TELLING = frozenset({None, *_ENDS, *_FAILURES})  # events that can end or fail it
_TELLING_LINES = tuple(f"event: {name}\n".encode() for name in (*_ENDS, *_FAILURES))
