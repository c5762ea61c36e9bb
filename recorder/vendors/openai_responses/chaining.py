"""Answers that later calls can chain to (Responses `previous_response_id`).

Runs on the event loop as soon as an answer ends, so that the very next call
of an agent finds its session and its history: the answer's id comes from a
stream's first event (present even when the stream broke later), the whole
answer from its terminal event (or the body, without streaming).
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from taplog.recorder.vendors.sse import SseSplitter, parse_block

CHAINING_APIS = frozenset({"openai.responses"})

Chunks = Sequence[tuple[float, bytes]]


def _event_data(chunks: Chunks, last: bool) -> bytes | None:
    """The data of a stream's first (or last) event."""
    splitter, found = SseSplitter(max_event_bytes=None), None
    for _, chunk in chunks:
        for block in splitter.feed(chunk):
            event = parse_block(block)
            if event is not None:
                found = event
                if not last:
                    return event.data.encode()
    return found.data.encode() if found is not None else None


def _answer(api: str, chunks: Chunks, last: bool) -> dict | None:
    """The response object a call's first (or last) stream event, or its body, carries."""
    if api not in CHAINING_APIS or not chunks:
        return None
    streamed = chunks[0][1].lstrip().startswith((b"event:", b"data:"))
    raw = _event_data(chunks, last) if streamed else b"".join(c for _, c in chunks)
    try:
        answer = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None
    if streamed:
        answer = answer.get("response") if isinstance(answer, dict) else None
    return answer if isinstance(answer, dict) and isinstance(answer.get("id"), str) else None


def response_id(api: str, chunks: Chunks) -> str | None:
    answer = _answer(api, chunks, last=False)
    return answer["id"] if answer is not None else None


def final_answer(api: str, chunks: Chunks) -> dict | None:
    """The whole answer object of a finished call: the body, or a stream's terminal event's."""
    return _answer(api, chunks, last=True)
