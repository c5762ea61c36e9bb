"""Gemini's answers on the wire: a stream folded back into one `GenerateContentResponse`,
its summary, its function calls, a request's function results, how a stream ends.

    stream      `data: {chunk}` events (CRLF line ends), each chunk a
                `GenerateContentResponse` holding only what is new: parts to append per
                candidate, and on the last one `finishReason` and `usageMetadata` (usage
                may come on earlier chunks as running totals: the last counts); no
                terminal event, the body's end is the stream's; an error after the 200
                comes as a chunk `{"error": {…}}`
    parts       `text` (a `thought` part is reasoning), `functionCall {id?, name, args}`
                whole in one chunk, `thoughtSignature` on the part it signs (often the
                first call, or an empty text part at the end)
    usage       `promptTokenCount` counts the cached tokens too; `candidatesTokenCount`
                does not count the thoughts (`thoughtsTokenCount`)
    finish      `STOP` ends an answer with or without function calls (so no stop reason
                says "no tools"): `NORMAL_STOPS` is empty

Sources: ai.google.dev/api/generate-content, googleapis/python-genai `types.py`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from taplog.recorder.vendors.gemini.vocab import tool_use_id
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
    load_object,
)
from taplog.recorder.vendors.tools import ToolCall, ToolResult

NORMAL_STOPS: frozenset[str] = frozenset()  # STOP ends an answer that calls functions too
END_EVENT = None  # no terminal event: the chunk with the finish reason completes the answer
_TOP_KEYS = ("modelVersion", "responseId", "createTime", "modelStatus")


class _Candidate:
    __slots__ = ("extra", "finish", "parts", "role")

    def __init__(self) -> None:
        self.parts: list[dict] = []
        self.role: str | None = None
        self.finish: str | None = None
        self.extra: dict[str, Any] = {}  # safetyRatings, citationMetadata, …: the last seen


def reassemble(events: Iterable[SseEvent], longer_than: int | None = None) -> Reassembled:
    """The chunks folded into the response `generateContent` would have given: each
    candidate's parts appended in order, runs of text pieces joined (never across a
    `thoughtSignature`, which stays on the part it came on), the last finish reason,
    usage and model version. `longer_than`: texts at least this long stay in pieces
    (`recorder.vendors.sse.Text`) for the caller to write in slices."""
    result = Reassembled(None, complete=False, error=None)
    return _folded(_chunks(events, result), result, longer_than)


def folded(chunks: list[Any]) -> dict | None:
    """A stream sent as one JSON array (no `alt=sse`) folded as its SSE twin would be."""
    result = Reassembled(None, complete=False, error=None)
    return _folded((c for c in chunks if isinstance(c, dict)), result, None).body


def _folded(chunks: Iterable[dict], result: Reassembled, longer_than: int | None) -> Reassembled:
    pieces = Pieces()
    candidates: dict[int, _Candidate] = {}
    top: dict[str, Any] = {}
    for data in chunks:
        if isinstance(data.get("error"), dict):
            result.error = data
            continue
        for key in (*_TOP_KEYS, "usageMetadata"):
            if key in data:
                top[key] = data[key]
        if isinstance(data.get("promptFeedback"), dict):
            top["promptFeedback"] = data["promptFeedback"]
            result.complete = result.complete or "blockReason" in data["promptFeedback"]
        for found in as_list(data.get("candidates")):
            if isinstance(found, dict):
                _add(pieces, candidates, found)
        if candidates and all(c.finish is not None for c in candidates.values()):
            result.complete = True
    if not candidates and not top:
        return result
    pieces.join(longer_than)
    body: dict[str, Any] = {"candidates": [_built(i, c) for i, c in sorted(candidates.items())]}
    body.update({key: top[key] for key in ("promptFeedback", "usageMetadata") if key in top})
    body.update({key: top[key] for key in _TOP_KEYS if key in top})
    result.body = body
    return result


def _chunks(events: Iterable[SseEvent], result: Reassembled) -> Iterator[dict]:
    for event in events:
        data = load_object(event.data)
        if data is None:
            result.unparsed += 1
        else:
            yield data


def _add(pieces: Pieces, candidates: dict[int, _Candidate], found: dict) -> None:
    index = found.get("index") if isinstance(found.get("index"), int) else 0
    candidate = candidates.setdefault(index, _Candidate())
    content = found.get("content") if isinstance(found.get("content"), dict) else {}
    candidate.role = as_str(content.get("role")) or candidate.role
    for part in as_list(content.get("parts")):
        if isinstance(part, dict):
            _append(pieces, candidate.parts, part)
    if isinstance(found.get("finishReason"), str):
        candidate.finish = found["finishReason"]
    for key, value in found.items():
        if key not in ("index", "content", "finishReason"):
            candidate.extra[key] = value


def _append(pieces: Pieces, parts: list[dict], part: dict) -> None:
    """A text piece joins the text part before it when both are text of the same kind
    (thought or not) and neither is signed; anything else is a part of its own."""
    last = parts[-1] if parts else None
    if (
        last is not None
        and _plain_text(last)
        and _plain_text(part)
        and bool(last.get("thought")) == bool(part.get("thought"))
    ):
        pieces.append(last, "text", part["text"])
        return
    parts.append(dict(part))  # a later piece starts its pieces with its text


def _plain_text(part: dict) -> bool:
    """A text part that may be joined: text and at most `thought`, no signature."""
    return isinstance(part.get("text"), str) and set(part) <= {"text", "thought"}


def _built(index: int, candidate: _Candidate) -> dict[str, Any]:
    content: dict[str, Any] = {"parts": candidate.parts}
    if candidate.role is not None:
        content["role"] = candidate.role
    built: dict[str, Any] = {"content": content}
    if candidate.finish is not None:
        built["finishReason"] = candidate.finish
    return {**built, **candidate.extra, "index": index}


def summarize(body: dict) -> Summary:
    """The answer's facts; output tokens count the thoughts, as the other APIs' do."""
    usage = dig(body, "usageMetadata")
    thoughts = as_int(dig(usage, "thoughtsTokenCount"))
    counted = [n for n in (as_int(dig(usage, "candidatesTokenCount")), thoughts) if n is not None]
    return Summary(
        response_id=as_str(dig(body, "responseId")),
        model=as_str(dig(body, "modelVersion")),
        finish_reason=as_str(dig(body, "candidates", 0, "finishReason")),
        input_tokens=as_int(dig(usage, "promptTokenCount")),
        output_tokens=sum(counted) if counted else None,
        cached_tokens=as_int(dig(usage, "cachedContentTokenCount")),
        cache_write_tokens=None,  # Gemini's caches are made by a call of their own
        reasoning_tokens=thoughts,
    )


def tool_calls(body: dict) -> list[ToolCall]:
    """The first candidate's function calls, in order; a call without an id is named by
    its answer's id and its place in it, as a client served through a translation is
    told it (`vocab.tool_use_id`: `call_r-1_0`)."""
    calls = [
        part["functionCall"]
        for part in as_list(dig(body, "candidates", 0, "content", "parts"))
        if isinstance(part, dict) and isinstance(part.get("functionCall"), dict)
    ]
    answer = as_str(body.get("responseId")) or "answer"
    return [
        ToolCall(
            _given(call) or tool_use_id(None, answer, n), as_str(call.get("name")), call.get("args")
        )
        for n, call in enumerate(calls)
    ]


def tool_results(body: dict) -> list[ToolResult]:
    """The function results of the request's user turns, in transcript order. A result's
    id is the one it carries (the call's, or one the client made up, as the Gemini CLI
    does for a call without one), else its name and what it says and answers; it answers
    the open call of that id, else the oldest open call of its name (`by_name`)."""
    results, answering = [], ""
    for content in as_list(body.get("contents")):
        if not isinstance(content, dict):
            continue
        parts = [p for p in as_list(content.get("parts")) if isinstance(p, dict)]
        if content.get("role") == "model":
            answering = orjson.dumps(parts).decode()  # what the results below answer
            continue
        for part in parts:
            response = part.get("functionResponse")
            if not isinstance(response, dict):
                continue
            name, output = as_str(response.get("name")), response.get("response")
            call_id = _given(response) or _unnamed(name, answering, output)
            failed = isinstance(output, dict) and "error" in output
            results.append(ToolResult(call_id, output, failed, name, by_name=True))
    return results


def _given(part: dict) -> str | None:
    given = part.get("id")
    return given if isinstance(given, str) and given else None


def _unnamed(name: str | None, answering: str, output: Any) -> str:
    """An id for a result that came without one, the same whenever it is resent."""
    seen = hashlib.blake2b(f"{answering}\0{orjson.dumps(output).decode()}".encode(), digest_size=8)
    return f"{name or 'function'}#{seen.hexdigest()}"


class Progress:
    """What a Gemini stream has said so far, told event by event (`recorder.vendors.watch`).

    Ended (and finished) by the chunk that gives every candidate so far its finish reason,
    or that says the prompt was blocked; failed by an `error` chunk. Gemini's events
    have no names: each is judged (`every` or not), by its data."""

    __slots__ = ("_open", "ended", "error", "every", "finished")

    def __init__(self, every: bool = True, request: object = None) -> None:
        self.every = every
        self.ended = self.finished = False
        self.error: dict | None = None
        self._open: set[int] = set()

    @staticmethod
    def telling(block: bytes) -> bool:
        """Every event may end or fail the answer: Gemini names none."""
        return True

    def see(self, name: str | None, raw: bytes) -> None:
        if not raw:
            return
        data = load_object(raw)
        if data is None:
            raise MalformedEvent(raw)
        if isinstance(data.get("error"), dict):
            self.error = data
            return
        if dig(data, "promptFeedback", "blockReason"):
            self.ended = self.finished = True
            return
        for found in as_list(data.get("candidates")):
            if not isinstance(found, dict):
                continue
            index = found.get("index") if isinstance(found.get("index"), int) else 0
            if isinstance(found.get("finishReason"), str):
                self._open.discard(index)
                self.ended = self.finished = not self._open
            else:
                self._open.add(index)
