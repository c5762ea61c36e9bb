"""Answer ids that later calls can chain to (Responses `previous_response_id`).

Runs on the event loop as soon as an answer ends, so that the very next call
of an agent finds its session; it reads only the first SSE event of a stream.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from recorder.wire.sse import SseSplitter, parse_block

CHAINING_APIS = frozenset({"openai.responses"})


def _first_event_data(chunks: Sequence[tuple[float, bytes]]) -> bytes | None:
    splitter = SseSplitter()
    for _, chunk in chunks:
        for block in splitter.feed(chunk):
            event = parse_block(block)
            if event is not None:
                return event.data.encode()
    return None


def response_id(api: str, chunks: Sequence[tuple[float, bytes]]) -> str | None:
    if api not in CHAINING_APIS or not chunks:
        return None
    streamed = chunks[0][1].lstrip().startswith((b"event:", b"data:"))
    raw = _first_event_data(chunks) if streamed else b"".join(c for _, c in chunks)
    try:
        answer = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None
    if isinstance(answer, dict) and isinstance(answer.get("response"), dict):
        answer = answer["response"]
    value = answer.get("id") if isinstance(answer, dict) else None
    return value if isinstance(value, str) else None


def _last_event_data(chunks: Sequence[tuple[float, bytes]]) -> bytes | None:
    splitter, last = SseSplitter(max_event_bytes=None), None
    for _, chunk in chunks:
        for block in splitter.feed(chunk):
            event = parse_block(block)
            if event is not None:
                last = event
    return last.data.encode() if last is not None else None


def final_answer(api: str, chunks: Sequence[tuple[float, bytes]]) -> dict | None:
    """The whole answer object of a finished call: the body, or a stream's terminal event's."""
    if api not in CHAINING_APIS or not chunks:
        return None
    streamed = chunks[0][1].lstrip().startswith((b"event:", b"data:"))
    raw = _last_event_data(chunks) if streamed else b"".join(c for _, c in chunks)
    try:
        answer = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None
    if streamed:
        answer = answer.get("response") if isinstance(answer, dict) else None
    return answer if isinstance(answer, dict) and isinstance(answer.get("id"), str) else None
