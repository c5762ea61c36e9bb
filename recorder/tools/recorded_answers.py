"""Recorded answers by request signature: what `taplog replay` serves from.

The signature of a request is its API plus its JSON body as a rerun of the same work
would send it again (`recorder.vendors.reruns`: without the per-run fields, cache
markers, the ids, places and times the known clients make anew each run, and the fields
the user sets aside), in canonical form: keys sorted at every level, no whitespace, so
key order and formatting never matter. Two requests with the same signature get the same
answer; when the recording holds several answers for one signature (an agent that asked
the same thing twice), they are served in recorded order, the last one again once they
run out.

Indexed: each client call (exchange) of a known API whose first request body is JSON and
whose answer came back whole. A call that failed over is answered as its client got it:
the answer of the target that served it, translated into the client's API again by the
failover routes (`recorder.vendors.routes`: the same translation, so the same text, tool
calls and finish; the ids an answer is given anew may differ). Left out: a stream taplog
continued on another target (spliced from two answers), and a call whose failover
served no whole answer.

Pure: reads the files through `recorder.store.reader`, no I/O beyond that.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.bodies import decode_body, parse_json
from taplog.recorder.events import FAILOVER, LLM_REQUEST, LLM_RESPONSE, Event
from taplog.recorder.redaction import matches_redacted, rules_found
from taplog.recorder.store.lognames import session_name
from taplog.recorder.store.reader import read_all, read_events
from taplog.recorder.vendors.apis import (
    API_MODULES,
    api_ending,
    endpoint,
    requested,
    streams_sse,
)
from taplog.recorder.vendors.reruns import IgnoredField, rerun_view
from taplog.recorder.vendors.routes import Options, answer_context, route_for
from taplog.recorder.vendors.sse import parse_block
from taplog.recorder.vendors.translation import Untranslatable

REPLAYED_APIS = tuple(API_MODULES)
# Answer headers that describe the original connection, not the answer.
_HOP_HEADERS = frozenset(
    {"content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive", "date"}
)


def api_of_path(path: str) -> str | None:
    """The API a request path calls (with or without /v1 or a /s/<id>/ prefix)."""
    return api_ending(path.partition("?")[0].rstrip("/"))


def asked(api: str, path: str, body: Any) -> Any:
    """A request as replay matches it: with the model and the stream its path names, for
    an API whose body names neither (Gemini's: a stream's recording never answers a call
    for a whole answer, nor one model's another's)."""
    if not isinstance(body, dict) or api not in API_MODULES or not endpoint(api).API_METHODS:
        return body
    model, stream = requested(api, path, body)
    return {**body, "model": model, "stream": stream}


def canonical(view: Any) -> bytes:
    """A rerun view as the signature sees it: keys sorted, compact."""
    return orjson.dumps(view, option=orjson.OPT_SORT_KEYS)


def signature(api: str, view: Any) -> str:
    return hashlib.sha256(api.encode() + b"\n" + canonical(view)).hexdigest()


@dataclass(slots=True)
class Recorded:
    """One recorded call: where it is in the log, what was asked, what came back."""

    session: str
    seq: int
    exchange: str
    api: str
    request: Any
    status: int
    headers: dict[str, str]
    body: bytes  # the whole answer; for a stream, its events joined
    sse: list[tuple[float, bytes]] | None  # (t_ms, raw event) for a stream
    redacted: list[str] = field(default_factory=list)  # rules whose markers the answer holds

    def where(self) -> str:
        return f"session {self.session} seq {self.seq} (exchange {self.exchange})"


@dataclass
class ReplayIndex:
    ignored: tuple[IgnoredField, ...] = ()  # the fields the user sets aside
    calls: dict[str, list[Recorded]] = field(default_factory=dict)  # by signature
    views: dict[str, Any] = field(default_factory=dict)  # signature -> the rerun view
    served: dict[str, int] = field(default_factory=dict)
    passed_over: Counter[str] = field(default_factory=Counter)  # why, how many

    def add(self, call: Recorded) -> None:
        view = rerun_view(call.api, call.request, self.ignored)
        key = signature(call.api, view)
        self.views[key] = view
        self.calls.setdefault(key, []).append(call)

    def __len__(self) -> int:
        return sum(len(calls) for calls in self.calls.values())

    def passed_over_text(self) -> str | None:
        """The recorded calls that are not replayed, and why: what a user who expected
        more needs to know (None when every one is)."""
        if not self.passed_over:
            return None
        why = ", ".join(f"{n} {reason}" for reason, n in self.passed_over.most_common())
        return f"{self.passed_over.total()} recorded calls passed over: {why}"

    def take(self, api: str, body: Any) -> Recorded | None:
        """The next recorded answer to this request, or None on a miss."""
        key = signature(api, rerun_view(api, body, self.ignored))
        calls = self.calls.get(key)
        if not calls:
            return None
        turn = self.served.get(key, 0)
        self.served[key] = turn + 1
        return calls[min(turn, len(calls) - 1)]

    def closest(self, api: str, body: Any) -> tuple[Recorded, str] | None:
        """The recorded request of this API most like `body`, and where they first differ."""
        candidates = [key for key, calls in self.calls.items() if calls[0].api == api]
        if not candidates:
            return None
        view = rerun_view(api, body, self.ignored)
        best = max(candidates, key=lambda key: _likeness(self.views[key], view))
        difference = first_difference(self.views[best], view) or "(identical)"
        return self.calls[best][0], difference

    def redacted_match(self, api: str, body: Any) -> tuple[Recorded, list[str]] | None:
        """A recorded request that differs from `body` only where the log holds markers
        (it held the text redaction took out), with the rules of those markers."""
        view = rerun_view(api, body, self.ignored)
        for key, calls in self.calls.items():
            recorded = self.views[key]
            if calls[0].api != api:
                continue
            rules = rules_found(canonical(recorded).decode())
            if rules and matches_redacted(recorded, view):
                return calls[0], rules
        return None


def load_index(source: Path, ignored: tuple[IgnoredField, ...] = ()) -> ReplayIndex:
    """Every replayable call in a data dir, or in one session file."""
    one_file = source.is_file()
    sessions = {session_name(source): list(read_events(source))} if one_file else read_all(source)
    index = ReplayIndex(ignored)
    for session, events in sessions.items():
        for call in recorded_calls(session, events, index.passed_over):
            index.add(call)
    return index


def recorded_calls(
    session: str, events: list[Event], passed_over: Counter[str] | None = None
) -> list[Recorded]:
    """The session's calls that replay: a whole answer to a request of a replayed API, as
    the client got it. The others are counted in `passed_over`, by why."""
    passed_over = Counter() if passed_over is None else passed_over
    requests: dict[str, Event] = {}
    answers: dict[str, Event] = {}
    failed_over: set[str] = set()
    for event in events:
        exchange = event.get("exchange")
        if event["type"] == LLM_REQUEST and event.get("api") in REPLAYED_APIS:
            requests.setdefault(exchange, event)
        elif event["type"] == LLM_RESPONSE:
            answers[exchange] = event
        elif event["type"] == FAILOVER:
            failed_over.add(exchange)
    calls = []
    for exchange, request in requests.items():
        answer = answers.get(exchange)
        if answer is None or not _whole(answer) or request.get("body") is None:
            passed_over["with no whole answer"] += 1
            continue
        if exchange in failed_over and answer.get("status") != 200:
            passed_over["failed over to an error"] += 1
            continue
        if answer.get("rescue"):
            passed_over["continued from a broken stream (a splice of two answers)"] += 1
            continue
        recorded = _recorded(session, request, answer)
        if answer.get("api") != request["api"]:
            recorded = _as_the_client_got_it(recorded, request, answer)
        if recorded is None:
            passed_over["served in another API that cannot be translated back"] += 1
            continue
        calls.append(recorded)
    return calls


def _whole(answer: Event) -> bool:
    if answer.get("status") is None:
        return False
    if answer.get("stream"):
        return answer.get("stream_complete") is not False and bool(answer.get("sse"))
    return answer.get("outcome") in ("ok", "upstream_error")


def _recorded(session: str, request: Event, answer: Event) -> Recorded:
    headers = {k: v for k, v in (answer.get("headers") or {}).items() if k not in _HOP_HEADERS}
    sse = None
    if answer.get("stream"):
        sse = [(entry["t_ms"], _raw(entry)) for entry in answer["sse"]]
        body = b"".join(raw for _, raw in sse)
    else:
        body = decode_body(answer)
    return Recorded(
        session=session,
        seq=request["seq"],
        exchange=request["exchange"],
        api=request["api"],
        request=asked(request["api"], request.get("path") or "", request["body"]),
        status=answer["status"],
        headers=headers,
        body=body,
        sse=sse,
        redacted=rules_found(body.decode("utf-8", "replace")),
    )


def _as_the_client_got_it(recorded: Recorded, request: Event, answer: Event) -> Recorded | None:
    """A failed-over call's answer translated into the client's API, as the client got
    it; None when the routes cannot say (no route, a request they now refuse)."""
    client_api, served_api = request["api"], answer.get("api") or ""
    route = route_for(client_api, served_api)
    body = request["body"]
    if route is None or not isinstance(body, dict):
        return None
    path = request.get("path") or ""
    model = str(answer.get("model") or "")
    try:
        options = Options(model, leave_out=True, stream=recorded.sse is not None)
        translation = route.request(body, options)
    except Untranslatable:
        return None
    context = answer_context(body, model, translation, sse=streams_sse(client_api, path))
    if recorded.sse is None:
        translated = orjson.dumps(route.answer(parse_json(recorded.body), context))
        headers = {"content-type": "application/json"}
        return replace(recorded, headers=headers, body=translated)
    stream = route.stream(context)
    events = []
    for t_ms, raw in recorded.sse:
        event = parse_block(raw)
        try:
            out = b"".join(stream.feed(event)) if event is not None else b""
        except ValueError:  # an event the translation cannot read: the call is not replayed
            return None
        if out:
            events.append((t_ms, out))
    content_type = "text/event-stream" if context.sse else "application/json"
    sent = b"".join(raw for _, raw in events)
    return replace(recorded, headers={"content-type": content_type}, body=sent, sse=events)


def _raw(entry: dict[str, Any]) -> bytes:
    if entry.get("raw_b64") is not None:
        return decode_body({"body_b64": entry["raw_b64"]})
    return entry["raw"].encode("utf-8")


def _likeness(recorded: Any, body: Any) -> float:
    """How alike two requests are: shared top-level fields, then shared prefix length."""
    a, b = canonical(recorded), canonical(body)
    prefix = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return prefix / max(len(a), len(b), 1)


def first_difference(recorded: Any, body: Any, path: str = "") -> str | None:
    """The first field (as a path such as `messages[3].content`) where two views differ."""
    if isinstance(recorded, dict) and isinstance(body, dict):
        for key in sorted(set(recorded) | set(body)):
            where = f"{path}.{key}" if path else key
            if key not in recorded or key not in body:
                return f"{where} ({'only in this request' if key in body else 'missing'})"
            found = first_difference(recorded[key], body[key], where)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(body, list):
        for i, (x, y) in enumerate(zip(recorded, body, strict=False)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(recorded) != len(body):
            return f"{path} ({len(body)} items, recorded {len(recorded)})"
        return None
    return None if recorded == body else (path or "(body)")
