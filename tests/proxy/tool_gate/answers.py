"""Answers for the gate's tests, each described once as its parts (text said, tools called)
and built in every API's wire format, streamed or whole. A refused call is a part too
(`Refused`): the same builder then gives the answer the gate must make of the vendor's,
so an expected stream is built, never copied from the gate.

Streams are lists of whole SSE events, framed as each vendor frames them (`eol` picks the
line end); `feed` drives a gate with them in batches.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from taplog.proxy.tool_gate import StreamGate
from taplog.proxy.tool_policy import Decision, GatedCall, refusal_text
from tests.builders import (
    CREATED,
    MESSAGE_STOP,
    TEXT_BLOCK,
    a_message,
    a_response,
    a_text,
    block_delta,
    block_start,
    block_stop,
    claude_answer,
    item_events,
    json_delta,
    message_delta,
    message_start,
    numbered,
    text,
    text_delta,
    tool_block,
    tool_use,
)

# -- parts, and the judge that refuses some -------------------------------------------------


@dataclass(frozen=True)
class Said:
    text: str
    pieces: int = 3


@dataclass(frozen=True)
class Called:
    call_id: str
    name: str
    arguments: str  # JSON text (a function tool), or a freeform tool's input
    pieces: int = 4  # argument deltas
    custom: bool = False  # a Responses freeform tool (`custom_tool_call`)


@dataclass(frozen=True)
class Refused:
    call: Called
    text: str


Part = Said | Called | Refused


class Rules:
    """A judge by tool name (`deny` only calls whose arguments hold `only`, as a rule on
    the arguments would); every call it was asked about, in order (`seen`)."""

    def __init__(self, deny: Sequence[str] = (), flag: Sequence[str] = (), only: str = "") -> None:
        self.deny, self.flag, self.only = set(deny), set(flag), only
        self.seen: list[GatedCall] = []

    def __call__(self, call: GatedCall) -> Decision | None:
        self.seen.append(call)
        if self._refuses(call.name, call.arguments):
            return Decision("deny", f"no-{call.name}", f"{call.name} is not for agents", call)
        if call.name in self.flag:
            return Decision("flag", f"watch-{call.name}", "watched", call)
        return None

    def applied(self, parts: list[Part]) -> list[Part]:
        """`parts` as the client must receive them: refused calls replaced."""
        return [self._applied(part) for part in parts]

    def _refuses(self, name: str, arguments: str) -> bool:
        return name in self.deny and self.only in arguments

    def _applied(self, part: Part) -> Part:
        if not isinstance(part, Called) or not self._refuses(part.name, part.arguments):
            return part
        call = GatedCall(part.name, part.arguments, part.call_id)
        decision = Decision("deny", f"no-{part.name}", f"{part.name} is not for agents", call)
        return Refused(part, refusal_text(decision))


def feed(gate: StreamGate, blocks: list[bytes], batches: list[int] | None = None) -> list[bytes]:
    """Drive `gate` with `blocks`, `batches` of them per feed (all at once by default)."""
    out: list[bytes] = []
    at = 0
    for size in batches if batches is not None else [len(blocks)]:
        out += gate.feed(blocks[at : at + size])
        at += size
    out += gate.feed(blocks[at:])
    return out + gate.finish()


def cut(value: str, pieces: int) -> list[str]:
    """`value` in `pieces` pieces (fewer when it is shorter), none empty."""
    pieces = max(1, min(pieces, len(value)))
    size = -(-len(value) // pieces)
    return [value[at : at + size] for at in range(0, len(value), size)] or [""]


def sse(name: str | None, data: Any, eol: bytes = b"\n") -> bytes:
    head = b"event: " + name.encode() + eol if name is not None else b""
    return head + b"data: " + orjson.dumps(data) + eol + eol


# -- Anthropic Messages ---------------------------------------------------------------------

PING = {"type": "ping"}


def anthropic_stream(parts: list[Part], eol: bytes = b"\n") -> list[bytes]:
    """A Messages stream: a ping inside each tool call's deltas (it must keep its place)."""
    events: list[dict] = [message_start(), PING]
    for index, part in enumerate(parts):
        if isinstance(part, Said):
            events.append(block_start(index, TEXT_BLOCK))
            events += [block_delta(index, text_delta(p)) for p in cut(part.text, part.pieces)]
            events.append(block_stop(index))
        elif isinstance(part, Called):
            events.append(block_start(index, tool_block(part.call_id, part.name)))
            deltas = [block_delta(index, json_delta(p)) for p in cut(part.arguments, part.pieces)]
            events += [deltas[0], PING, *deltas[1:], block_stop(index)]
        else:
            events.append(block_start(index, TEXT_BLOCK))
            events += [block_delta(index, text_delta(part.text)), block_stop(index), PING]
    stop = "tool_use" if any(isinstance(p, Called) for p in parts) else "end_turn"
    events += [message_delta(stop), MESSAGE_STOP]
    return [sse(event["type"], event, eol) for event in events]


def anthropic_whole(parts: list[Part]) -> dict:
    content = [
        text(part.text)
        if isinstance(part, Said)
        else tool_use(part.call_id, part.name, orjson.loads(part.arguments))
        if isinstance(part, Called)
        else text(part.text)
        for part in parts
    ]
    stop = "tool_use" if any(isinstance(p, Called) for p in parts) else "end_turn"
    return claude_answer(*content, stop=stop)


# -- OpenAI Chat Completions ----------------------------------------------------------------


def chunk(delta: dict, finish: str | None = None, choice: int = 0) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "gpt-served",
        "choices": [{"index": choice, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }


USAGE_CHUNK = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": CREATED,
    "model": "gpt-served",
    "choices": [],
    "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29},
}


def chat_chunks(parts: list[Part], choice: int = 0) -> list[dict]:
    """One choice's chunks, from its role to its finish."""
    chunks = [chunk({"role": "assistant", "content": ""}, choice=choice)]
    calls = refusals = texts = 0
    for part in parts:
        if isinstance(part, Said):
            chunks += [chunk({"content": p}, choice=choice) for p in cut(part.text, part.pieces)]
            texts += 1
        elif isinstance(part, Called):
            function = {"name": part.name, "arguments": ""}
            opened = {"index": calls, "id": part.call_id, "type": "function", "function": function}
            chunks.append(chunk({"tool_calls": [opened]}, choice=choice))
            chunks += [
                chunk(
                    {"tool_calls": [{"index": calls, "function": {"arguments": p}}]}, choice=choice
                )
                for p in cut(part.arguments, part.pieces)
            ]
            calls += 1
        else:
            said = ("\n\n" if refusals or texts else "") + part.text
            chunks.append(chunk({"content": said}, choice=choice))
            refusals += 1
    chunks.append(chunk({}, "tool_calls" if calls else "stop", choice=choice))
    return chunks


def chat_stream(parts: list[Part], eol: bytes = b"\n") -> list[bytes]:
    return [sse(None, c, eol) for c in [*chat_chunks(parts), USAGE_CHUNK]] + [
        b"data: [DONE]" + eol + eol
    ]


def chat_whole(parts: list[Part]) -> dict:
    calls = [
        {
            "id": part.call_id,
            "type": "function",
            "function": {"name": part.name, "arguments": part.arguments},
        }
        for part in parts
        if isinstance(part, Called)
    ]
    texts = [p.text for p in parts if isinstance(p, Said)]
    refusals = [p.text for p in parts if isinstance(p, Refused)]
    said = "".join(texts) or None
    message: dict[str, Any] = {"role": "assistant", "content": said, "refusal": None}
    if refusals:
        message["content"] = "\n\n".join([said, *refusals] if said else refusals)
    if calls:
        message["tool_calls"] = calls
    finish = "tool_calls" if calls else "stop"
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": CREATED,
        "model": "gpt-served",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": USAGE_CHUNK["usage"],
    }


# -- OpenAI Responses -----------------------------------------------------------------------


def call_item(part: Called) -> dict:
    if part.custom:
        return {
            "id": f"ctc_{part.call_id}",
            "type": "custom_tool_call",
            "status": "completed",
            "call_id": part.call_id,
            "input": part.arguments,
            "name": part.name,
        }
    return {
        "id": f"fc_{part.call_id}",
        "type": "function_call",
        "status": "completed",
        "arguments": part.arguments,
        "call_id": part.call_id,
        "name": part.name,
    }


def refusal_message(part: Refused) -> dict:
    """The message that stands for a refused call: its item id with `msg_` for its prefix."""
    return a_message("msg_" + part.call.call_id, {**a_text(part.text), "logprobs": []})


def output_items(parts: list[Part]) -> list[dict]:
    return [
        a_message(f"msg_said{index}", a_text(part.text))
        if isinstance(part, Said)
        else call_item(part)
        if isinstance(part, Called)
        else refusal_message(part)
        for index, part in enumerate(parts)
    ]


def _custom_events(index: int, item: dict, pieces: list[str]) -> list[dict]:
    where = {"item_id": item["id"], "output_index": index}
    delta = "response.custom_tool_call_input.delta"
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "input": ""},
        },
        *({"type": delta, **where, "delta": p} for p in pieces),
        {"type": "response.custom_tool_call_input.done", **where, "input": item["input"]},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def responses_stream(parts: list[Part], eol: bytes = b"\n") -> list[bytes]:
    opened = {**a_response(status="in_progress"), "usage": None}
    events = [
        {"type": "response.created", "response": opened},
        {"type": "response.in_progress", "response": opened},
    ]
    for index, (part, item) in enumerate(zip(parts, output_items(parts), strict=True)):
        if isinstance(part, Said):
            events += item_events(index, item, pieces=[cut(part.text, part.pieces)])
        elif isinstance(part, Called) and part.custom:
            events += _custom_events(index, item, cut(part.arguments, part.pieces))
        elif isinstance(part, Called):
            events += item_events(index, item, pieces=[cut(part.arguments, part.pieces)])
        else:
            events += item_events(index, item, pieces=[[part.text]])
    events.append({"type": "response.completed", "response": a_response(*output_items(parts))})
    return [sse(event["type"], event, eol) for event in numbered(events)]


def responses_whole(parts: list[Part]) -> dict:
    return a_response(*output_items(parts))


# -- Gemini ---------------------------------------------------------------------------------

USAGE_METADATA = {"promptTokenCount": 12, "candidatesTokenCount": 7, "totalTokenCount": 19}


def signature(name: str) -> str:
    """A thought signature, base64 as Gemini sends them."""
    return base64.b64encode(f"sig-{name}".encode()).decode()


def gemini_parts(parts: list[Part]) -> list[list[dict]]:
    """Each chunk's parts: text pieces one a chunk, a run of calls in one chunk (parallel
    calls), its first carrying the thought signature."""
    chunks: list[list[dict]] = []
    in_run = False
    for part in parts:
        if isinstance(part, Said):
            chunks += [[{"text": p}] for p in cut(part.text, part.pieces)]
            in_run = False
            continue
        call = part if isinstance(part, Called) else part.call
        if not in_run:
            chunks.append([])
        signed = {"thoughtSignature": signature(call.name)} if not chunks[-1] else {}
        if isinstance(part, Called):
            function: dict[str, Any] = {"id": part.call_id} if part.call_id else {}
            function.update(name=part.name, args=orjson.loads(part.arguments))
            chunks[-1].append({"functionCall": function, **signed})
        else:
            chunks[-1].append({"text": part.text, **signed})
        in_run = True
    return chunks


def gemini_chunk(parts: list[dict], finish: str | None = None) -> dict:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-2.5-flash"}
    if finish is not None:
        chunk["usageMetadata"] = USAGE_METADATA
    return chunk


def gemini_stream(parts: list[Part], eol: bytes = b"\r\n") -> list[bytes]:
    chunks = [gemini_chunk(p) for p in gemini_parts(parts)]
    chunks.append(gemini_chunk([{"text": ""}], "STOP"))
    return [sse(None, c, eol) for c in chunks]


def gemini_whole(parts: list[Part]) -> dict:
    return gemini_chunk([p for chunk in gemini_parts(parts) for p in chunk], "STOP")
