"""OpenAI Chat Completions: fold a `chat.completion.chunk` stream back into a `chat.completion`.

The result is what the API would have returned with ``stream: false``, built the way the
openai-python accumulator (`ChatCompletionStreamState`) builds it: strings in deltas are
concatenated, tool calls are merged per ``tool_calls[].index``, logprob lists are extended.
Two deliberate differences: a tool call's ``id``/``type``/``name`` keep the first value sent
(some OpenAI-compatible servers repeat them on every fragment), and the ``index`` helper key
is dropped from tool calls, as in the non-streaming body.
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

NORMAL_STOPS = frozenset({"stop"})

_TOP_KEYS = ("id", "created", "model", "system_fingerprint", "service_tier")


@dataclass(slots=True)
class _Choice:
    message: dict = field(default_factory=lambda: {"role": None, "content": None, "refusal": None})
    tools: dict[int, dict] = field(default_factory=dict)
    finish_reason: Any = None
    logprobs: dict | None = None


@dataclass(slots=True)
class _State:
    top: dict = field(default_factory=dict)
    choices: dict[int, _Choice] = field(default_factory=dict)
    usage: Any = None
    seen: bool = False
    pieces: Pieces = field(default_factory=Pieces)


def reassemble(events: Iterable[SseEvent], longer_than: int | None = None) -> Reassembled:
    """Rebuild the non-streaming body; ``complete`` means ``data: [DONE]`` arrived.

    Strings over `longer_than` characters stay in their pieces (`Text`).
    """
    state = _State()
    result = Reassembled(body=None, complete=False, error=None)
    for event in events:
        if event.data.startswith("[DONE]"):
            result.complete = True
            continue
        chunk = load_object(event.data)
        if chunk is None:
            result.unparsed += 1
        elif chunk.get("error"):
            err = chunk["error"]
            result.error = err if isinstance(err, dict) else {"message": str(err)}
        else:
            _add_chunk(state, chunk)
    if state.seen:
        result.body = _build(state, longer_than)
    return result


def _add_chunk(state: _State, chunk: dict) -> None:
    state.seen = True
    for key in _TOP_KEYS:
        if chunk.get(key) is not None:
            state.top[key] = chunk[key]
    if chunk.get("usage") is not None:
        state.usage = chunk["usage"]
    choices = chunk.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, dict):
            continue
        index = as_int(choice.get("index")) or 0
        slot = state.choices.setdefault(index, _Choice())
        if isinstance(choice.get("delta"), dict):
            _merge_delta(state.pieces, slot, choice["delta"])
        if choice.get("finish_reason") is not None:
            slot.finish_reason = choice["finish_reason"]
        if isinstance(choice.get("logprobs"), dict):
            slot.logprobs = _merge_logprobs(slot.logprobs, choice["logprobs"])


def _merge_delta(pieces: Pieces, slot: _Choice, delta: dict) -> None:
    """Concatenate strings, extend lists, replace other non-null values."""
    msg = slot.message
    for key, value in delta.items():
        if key == "tool_calls":
            _merge_tool_calls(pieces, slot.tools, value)
        elif key == "function_call":
            msg[key] = _merge_function(pieces, msg.get(key), value)
        elif key == "role":
            msg[key] = msg[key] if msg.get(key) is not None else value
        elif isinstance(value, str):
            pieces.append(msg, key, value)
        elif isinstance(value, list):
            extend(msg, key, value)
        elif value is not None:
            pieces.drop(msg, key)
            msg[key] = value


def _merge_tool_calls(pieces: Pieces, tools: dict[int, dict], parts: Any) -> None:
    for part in parts if isinstance(parts, list) else ():
        if not isinstance(part, dict):
            continue
        index = _tool_index(tools, part)
        call = tools.setdefault(index, {"id": None, "type": None, "function": None})
        for key, value in part.items():
            if key == "function":
                call[key] = _merge_function(pieces, call[key], value)
            elif key != "index" and value is not None and call.get(key) in (None, ""):
                call[key] = value


def _tool_index(tools: dict[int, dict], part: dict) -> int:
    """The fragment's ``index``; servers that omit it start a new call whenever the id changes."""
    index = as_int(part.get("index"))
    if index is not None:
        return index
    last = max(tools, default=-1)
    new_id = part.get("id")
    if last < 0 or (new_id and tools[last].get("id") not in (None, new_id)):
        return last + 1
    return last


def _merge_function(pieces: Pieces, prev: Any, value: Any) -> Any:
    """name keeps its first value, arguments are concatenated."""
    if not isinstance(value, dict):
        return prev
    fn = prev if isinstance(prev, dict) else {"name": None, "arguments": ""}
    for key, part in value.items():
        if key == "arguments" and isinstance(part, str):
            pieces.append(fn, key, part)
        elif part is not None and fn.get(key) in (None, ""):
            fn[key] = part
    return fn


def text_deltas(chunk: dict) -> Iterator[tuple[Any, dict, str]]:
    """Where a chunk carries a piece of a text the stream builds: (which text, the dict
    holding the piece, its key); the pieces of one text, joined, are that text."""
    for choice in as_list(chunk.get("choices")):
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        index = choice.get("index")
        for key, value in delta.items():
            if key != "role" and isinstance(value, str):
                yield (index, key), delta, key
        if isinstance(delta.get("function_call"), dict):
            yield (index, "function_call"), delta["function_call"], "arguments"
        for part in as_list(delta.get("tool_calls")):
            function = part.get("function") if isinstance(part, dict) else None
            if isinstance(function, dict):
                yield (index, "tool", part.get("index"), part.get("id")), function, "arguments"


def _merge_logprobs(prev: dict | None, value: dict) -> dict:
    acc = prev if prev is not None else {"content": None, "refusal": None}
    for key, part in value.items():
        if isinstance(part, list):
            extend(acc, key, part)
        elif part is not None or key not in acc:
            acc[key] = part
    return acc


def _build(state: _State, longer_than: int | None) -> dict:
    state.pieces.join(longer_than)
    choices = []
    for index in sorted(state.choices):
        slot = state.choices[index]
        message = dict(slot.message)
        if message["role"] is None:
            message["role"] = "assistant"
        if slot.tools:
            message["tool_calls"] = [_finish_call(slot.tools[i]) for i in sorted(slot.tools)]
        choices.append(
            {
                "index": index,
                "message": message,
                "finish_reason": slot.finish_reason,
                "logprobs": slot.logprobs,
            }
        )
    top = state.top
    body = {
        "id": top.get("id"),
        "object": "chat.completion",
        "created": top.get("created"),
        "model": top.get("model"),
        "choices": choices,
        "usage": state.usage,
        "system_fingerprint": top.get("system_fingerprint"),
    }
    if "service_tier" in top:
        body["service_tier"] = top["service_tier"]
    return body


def _finish_call(call: dict) -> dict:
    """A tool call with no fragments for a field still gets the non-streaming shape."""
    call = dict(call)
    call["type"] = call["type"] or "function"
    call["function"] = call["function"] or {"name": None, "arguments": ""}
    return call


_USAGE = {  # Summary field -> where the usage holds it
    "input_tokens": ("prompt_tokens",),
    "output_tokens": ("completion_tokens",),
    "cached_tokens": ("prompt_tokens_details", "cached_tokens"),
    "cache_write_tokens": ("prompt_tokens_details", "cache_write_tokens"),
    "reasoning_tokens": ("completion_tokens_details", "reasoning_tokens"),
}


def summarize(body: dict) -> Summary:
    """Facts from a `chat.completion` body; odd or missing fields become None."""
    return summary(body, as_str(dig(body, "choices", 0, "finish_reason")), _USAGE)


def tool_calls(body: dict) -> list[ToolCall]:
    """The function calls an answer asks for, over all choices."""
    calls = []
    for choice in as_list(body.get("choices")):
        for call in as_list(dig(choice, "message", "tool_calls")):
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                calls.append(
                    call_from_string(
                        call["id"], as_str(function.get("name")), function.get("arguments")
                    )
                )
    return calls


def tool_results(body: dict) -> list[ToolResult]:
    """The `role: tool` messages of a request, in transcript order."""
    return [
        ToolResult(message["tool_call_id"], message.get("content"))
        for message in as_list(body.get("messages"))
        if isinstance(message, dict)
        and message.get("role") == "tool"
        and isinstance(message.get("tool_call_id"), str)
    ]


END_EVENT = b"data: [DONE]\n\n"  # what completes a stream whose every choice has finished


def _choices(request: object) -> int:
    """How many answers (choices) a request asked for: one stream carries them all."""
    n = request.get("n") if isinstance(request, dict) else None
    return n if isinstance(n, int) else 1


class Progress:
    """What a Chat stream has said so far, told event by event (`recorder.vendors.watch`).

    Ended at `data: [DONE]`; finished once each of the request's choices (`n`) has
    its finish reason (the answer is whole, only the end marker may still be
    missing); failed at a data object with an `error`. With `every`, each
    event's data is parsed and one that is not a JSON object is malformed;
    without, only events that could end or fail the answer are (a byte test
    finds them), which is all the relay needs when nothing could be done
    about a malformed event anyway.
    """

    __slots__ = ("_done", "choices", "ended", "error", "every", "finished")

    def __init__(self, every: bool = True, request: object = None) -> None:
        self.every, self.choices = every, max(1, _choices(request))
        self.ended = self.finished = False
        self.error: dict | None = None
        self._done: set[Any] = set()  # indexes of the choices that finished

    @staticmethod
    def telling(block: bytes) -> bool:
        """Whether a raw event may end or fail the answer: the end marker, an error, or a
        finish reason (OpenAI writes `"finish_reason":null` until there is one)."""
        return (
            b"[DONE]" in block
            or b'"error"' in block
            or (b'"finish_reason"' in block and b'"finish_reason":null' not in block)
        )

    def see(self, name: str | None, data: bytes) -> None:
        """One event: its `event:` name (if any) and its data."""
        if data.startswith(b"[DONE]"):
            self.ended = True
            return
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise MalformedEvent(data) from None
        if type(chunk) is not dict:
            raise MalformedEvent(data)
        if chunk.get("error"):
            self.error = chunk
            return
        choices = chunk.get("choices")
        for choice in choices if type(choices) is list else ():
            if type(choice) is dict and choice.get("finish_reason"):
                self._done.add(choice.get("index", 0))
                self.finished = len(self._done) >= self.choices
