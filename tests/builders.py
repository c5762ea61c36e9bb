"""Vendor messages, events and bodies built by hand, in each API's wire format (docs/protocols.md),
and the hypothesis strategies that build random ones: what several test files need alike.

Checks of what the official SDKs accept are beside the tests that make them
(tests/recorder/vendors/checks.py); fakes that serve or drive these are in tests/fakes/.
"""

from __future__ import annotations

import itertools
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

from taplog.recorder.events import llm_request, make_event, new_id
from taplog.recorder.store.lognames import log_path
from taplog.recorder.store.writer import EventRecord, Recorder

HELLO = [{"role": "user", "content": "hello"}]
CREATED = 1_790_000_000  # the `created` of every hand-built answer


# -- Anthropic Messages: content, requests, answers ----------------------------------------


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str = "weather", value: dict | None = None) -> dict:
    value = {"city": "Oslo"} if value is None else value
    return {"type": "tool_use", "id": call_id, "name": name, "input": value}


def claude(*messages: dict, **extra: Any) -> dict:
    return {"model": "claude-test", "max_tokens": 1000, "messages": list(messages), **extra}


CLAUDE_WEATHER = {
    "name": "weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def claude_answer(*content: dict, stop: str = "end_turn", **usage: int) -> dict:
    return {
        "id": "msg_01AbC",
        "type": "message",
        "role": "assistant",
        "model": "claude-served",
        "content": list(content),
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, **usage},
    }


# -- Anthropic Messages: stream events -----------------------------------------------------


def message_start(msg_id: str = "msg_01", model: str = "claude-served", **usage: int) -> dict:
    message = {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1, **usage},
    }
    return {"type": "message_start", "message": message}


def block_start(index: int, block: dict) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: dict) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop: str, output_tokens: int = 5, **usage: Any) -> dict:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens, **usage},
    }


MESSAGE_STOP = {"type": "message_stop"}
TEXT_BLOCK = {"type": "text", "text": ""}


def tool_block(call_id: str, name: str) -> dict:
    return {"type": "tool_use", "id": call_id, "name": name, "input": {}}


def text_delta(value: str) -> dict:
    return {"type": "text_delta", "text": value}


def json_delta(value: str) -> dict:
    return {"type": "input_json_delta", "partial_json": value}


# -- OpenAI Chat Completions ---------------------------------------------------------------


def chat(*messages: dict, **extra: Any) -> dict:
    return {"model": "gpt-test", "messages": list(messages), **extra}


CHAT_WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def tool_call(call_id: str, name: str = "weather", arguments: str = '{"city":"Oslo"}') -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- OpenAI Responses ----------------------------------------------------------------------


def request(*items: Any, **extra: Any) -> dict:
    return {"model": "gpt-test", "input": list(items), **extra}


def user(content: Any) -> dict:
    return {"type": "message", "role": "user", "content": content}


def said(value: str) -> dict:
    """A replayed assistant message item, as the Responses API returned it."""
    part = {"type": "output_text", "text": value, "annotations": []}
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }


RESPONSES_WEATHER = {
    "type": "function",
    "name": "weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": False,
}


RESPONSE_ID = "resp_T1"
REQUEST = {"model": "gpt-test", "input": "hi", "store": False, "tool_choice": "auto"}


def item_events(index: int, item: dict, *, pieces: list[list[str]] | None = None) -> list[dict]:
    """The events that deliver one output item; `pieces` splits each part or the arguments."""
    opened = {**item, "status": "in_progress"}
    if item["type"] == "message":
        opened["content"] = []
    if item["type"] == "function_call":
        opened["arguments"] = ""
    out = [{"type": "response.output_item.added", "output_index": index, "item": opened}]
    where = {"item_id": item["id"], "output_index": index}
    if item["type"] == "message" and pieces is not None:
        for k, part in enumerate(item["content"]):
            family, field = (
                ("output_text", "text") if part["type"] == "output_text" else ("refusal", "refusal")
            )
            at = {**where, "content_index": k}
            empty = {**part, field: ""}
            out.append({"type": "response.content_part.added", **at, "part": empty})
            extra = {"logprobs": []} if family == "output_text" else {}
            out += [
                {"type": f"response.{family}.delta", **at, "delta": p, **extra} for p in pieces[k]
            ]
            out.append({"type": f"response.{family}.done", **at, field: part[field], **extra})
            out.append({"type": "response.content_part.done", **at, "part": part})
    elif item["type"] == "web_search_call":
        opened["action"] = {"type": "search"}
        phases = ["in_progress", "searching"] + (
            ["completed"] if item["status"] != "failed" else []
        )
        out += [{"type": f"response.web_search_call.{phase}", **where} for phase in phases]
    elif item["type"] == "function_call" and pieces is not None:
        delta = "response.function_call_arguments.delta"
        out += [{"type": delta, **where, "delta": p} for p in pieces[0]]
        done = {"type": "response.function_call_arguments.done", **where}
        out.append({**done, "arguments": item["arguments"]})
    return [*out, {"type": "response.output_item.done", "output_index": index, "item": item}]


def numbered(events: list[dict]) -> list[dict]:
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


def a_response(*output: dict, status: str = "completed", reason: str | None = None) -> dict:
    return {
        "id": "resp_9",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "incomplete_details": {"reason": reason} if reason else None,
        "model": "gpt-served",
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 30,
            "input_tokens_details": {"cached_tokens": 10, "cache_write_tokens": 0},
            "output_tokens": 4,
            "output_tokens_details": {"reasoning_tokens": 1},
            "total_tokens": 34,
        },
    }


def a_message(item_id: str, *parts: dict) -> dict:
    return {
        "id": item_id,
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": list(parts),
    }


def a_text(value: str) -> dict:
    return {"type": "output_text", "text": value, "annotations": []}


# -- random answers (hypothesis) -----------------------------------------------------------

NAMES = st.sampled_from(["weather", "now", "search_files", "run"])
KEYS = st.text(alphabet="abcxyz_", min_size=1, max_size=5)
SCALARS = st.one_of(st.integers(-1000, 1000), st.text(max_size=12), st.booleans(), st.none())
INPUTS = st.dictionaries(KEYS, st.one_of(SCALARS, st.lists(SCALARS, max_size=3)), max_size=3)
ANTHROPIC_STOPS = st.sampled_from(
    ["end_turn", "stop_sequence", "max_tokens", "tool_use", "pause_turn", "refusal"]
)
COUNTS = st.integers(0, 5000)


def split(draw: Any, value: str) -> list[str]:
    """`value` cut at random places into non-empty pieces."""
    if len(value) < 2:
        return [value] if value else []
    cuts = sorted(draw(st.sets(st.integers(1, len(value) - 1), max_size=6)))
    edges = [0, *cuts, len(value)]
    return [value[a:z] for a, z in itertools.pairwise(edges)]


@st.composite
def anthropic_answers(draw: Any) -> tuple[dict, list[dict]]:
    """(a non-streaming Anthropic message, the stream events that deliver it)."""
    blocks: list[dict] = [
        {"type": "text", "text": draw(st.text(max_size=40))} for _ in range(draw(st.integers(0, 2)))
    ]
    for k in range(draw(st.integers(0, 3))):
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{k}", "name": draw(NAMES), "input": draw(INPUTS)}
        )
    blocks = draw(st.permutations(blocks))
    for _ in range(draw(st.integers(0, 2))):  # thinking first; with display: omitted, no text
        thinking = {"type": "thinking", "thinking": draw(st.text(max_size=20)), "signature": "EqQB"}
        blocks.insert(draw(st.integers(0, len(blocks))), thinking)
    usage = {
        "input_tokens": draw(COUNTS),
        "cache_read_input_tokens": draw(COUNTS),
        "cache_creation_input_tokens": draw(COUNTS),
    }
    output = {"output_tokens": draw(COUNTS)}
    if draw(st.booleans()):
        output["output_tokens_details"] = {"thinking_tokens": draw(COUNTS)}
    stop = draw(ANTHROPIC_STOPS)
    message = message_start(
        "msg_" + draw(st.text(alphabet="abcXYZ0189", min_size=1, max_size=8)), **usage
    )
    events = [message]
    for index, block in enumerate(blocks):
        events += _block_events(draw, index, block)
        if draw(st.booleans()):
            events.append({"type": "ping"})
    events += [message_delta(stop, **output), MESSAGE_STOP]
    answer = {**message["message"], "content": blocks, "stop_reason": stop}
    answer["usage"] = {**answer["usage"], **output}
    return answer, events


def _block_events(draw: Any, index: int, block: dict) -> list[dict]:
    kind = block["type"]
    if kind == "text":
        pieces = [block_delta(index, text_delta(p)) for p in split(draw, block["text"])]
        return [block_start(index, TEXT_BLOCK), *pieces, block_stop(index)]
    if kind == "thinking":
        pieces = [
            block_delta(index, {"type": "thinking_delta", "thinking": p})
            for p in split(draw, block["thinking"])
        ]
        signature = block_delta(index, {"type": "signature_delta", "signature": block["signature"]})
        start = block_start(index, {"type": "thinking", "thinking": "", "signature": ""})
        return [start, *pieces, signature, block_stop(index)]
    raw = orjson.dumps(block["input"]).decode() if block["input"] else ""
    pieces = [block_delta(index, json_delta(p)) for p in split(draw, raw)]
    if not pieces and draw(st.booleans()):
        pieces = [block_delta(index, json_delta(""))]  # "may be empty or absent"
    return [block_start(index, tool_block(block["id"], block["name"])), *pieces, block_stop(index)]


# -- session logs: the events of recorded calls, as the log's readers give them ------------


class SessionLog:
    """A session's events, built call by call (only the fields the tools read)."""

    def __init__(self, api: str, path: str | None = None) -> None:
        self.api = api
        self.path = path  # the requests' path, where it names the model (Gemini's)
        self.events: list[dict] = [{"seq": 1, "type": "session.started", "api": api}]
        self.calls = 0

    def add(self, event_type: str, **fields: Any) -> int:
        self.events.append({"seq": len(self.events) + 1, "type": event_type, **fields})
        return len(self.events)

    def call(
        self,
        request: dict,
        answer: dict | None = None,
        status: int = 200,
        retry: bool = False,
        outcome: str | None = None,
    ) -> int:
        """One try of a call (`retry`: another try of the last call), answered unless `answer`
        is None (`outcome`: by the status unless given); the seq of its last event."""
        self.calls += 0 if retry else 1
        exchange = {"exchange": f"ex_{self.calls}", "api": self.api}
        path = {"path": self.path} if self.path else {}
        seq = self.add("llm.request", body=request, **path, **exchange)
        if answer is None:
            return seq
        outcome = outcome or ("ok" if status < 400 else "upstream_error")
        return self.add("llm.response", status=status, outcome=outcome, body=answer, **exchange)


# -- session logs dated in the past (retention) --------------------------------------------

INLINE_MAX = 1024  # bytes: a body longer goes to a blob
NOW = datetime.now(UTC)


def dated_ts(days_ago: float) -> str:
    """A `ts` this many days ago."""
    return (NOW - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _dated_events(session: str, days_ago: list[float], body: str | None) -> list[dict]:
    """A session.started, then one request per age (the first with `body`, if any)."""
    started = make_event("session.started", session, None, source="header", api="openai.chat")
    events = [started]
    for n in range(len(days_ago)):
        content = body if n == 0 and body is not None else f"turn {n} of {session}"
        events.append(
            llm_request(
                session,
                new_id("ex"),
                api="openai.chat",
                model="gpt-4.1",
                body={"model": "gpt-4.1", "messages": [{"role": "user", "content": content}]},
            )
        )
    started["ts"] = dated_ts(days_ago[0])
    for event, ago in zip(events[1:], days_ago, strict=True):
        event["ts"] = dated_ts(ago)
    return events


def write_dated_sessions(
    data_dir: Path, sessions: dict[str, tuple[list[float], str | None]]
) -> None:
    """Each session's events, dated `days_ago`, written by the writer (blobs and all); the
    first request's content is `body` when given."""
    recorder = Recorder(data_dir, fsync="never", body_inline_max=INLINE_MAX)
    recorder.start()
    for session, (days_ago, body) in sessions.items():
        for event in _dated_events(session, days_ago, body):
            recorder.record(EventRecord(event))
    recorder.close()
    for session, (days_ago, _) in sessions.items():  # a log was last written with its last event
        last = (NOW - timedelta(days=days_ago[-1])).timestamp()
        os.utime(log_path(data_dir / "sessions", session), (last, last))
    written = (NOW - timedelta(days=1)).timestamp()  # long before any pass: none is fresh
    for blob in (data_dir / "blobs").glob("*/*.json"):
        os.utime(blob, (written, written))
