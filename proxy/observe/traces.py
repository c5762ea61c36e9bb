"""Recorded events into trace spans: the observer behind `--otlp-endpoint`.

Runs where the recorder runs, on a thread of its own fed with each event once it is
written (`proxy.observe.otlp`), so the request path and the writer do nothing more. It builds plain
`SpanSpec`s and hands them to a sink (`proxy.observe.otlp` turns them into OpenTelemetry
spans, queued for the exporter's own thread); nothing here imports OpenTelemetry.

One trace per call: a call (an exchange) is one `chat {model}` span, built when its
`call.answered` is written, timed by it (its `ts` is the end, `latency_ms` back from there
the start); its failovers are span events. A tool run is an `execute_tool {name}` span in
the trace of the call whose answer asked for it, from that `tool.pre` to the `tool.post`
the next request carried (`duration_ms`). Calls of a session are tied by
`gen_ai.conversation.id` and `session.id`, which is how Phoenix and Langfuse show a
session; a session-long trace would need a root span that never ends.

What a call waits on (its requests, last answer, tools asked) is bounded per kind: least
recently used goes first, as in `proxy.observe.observer`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from taplog.proxy.observe import genai
from taplog.recorder.events import (
    CALL_ANSWERED,
    FAILOVER,
    LLM_REQUEST,
    LLM_RESPONSE,
    TOOL_POST,
    TOOL_PRE,
    Event,
)
from taplog.recorder.vendors.apis import API_MODULES

MAX_REMEMBERED = 100_000
LLM_APIS = frozenset(API_MODULES)
SPAN_EVENTS = frozenset({LLM_REQUEST, LLM_RESPONSE, FAILOVER, CALL_ANSWERED, TOOL_PRE, TOOL_POST})


@dataclass(slots=True)
class SpanSpec:
    """One span to send: `key` names it for its children; `parent` is a key or None."""

    name: str
    kind: str  # "client" or "internal"
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    key: str | None = None
    parent: str | None = None
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None


@dataclass(slots=True)
class _Call:
    request: Event | None = None  # the llm.request of the latest try sent
    first_request: Event | None = None  # what the client asked (its content)
    response: Event | None = None
    response_api: str | None = None
    failovers: list[Event] = field(default_factory=list)


class _Bounded(OrderedDict):
    """A dict that forgets its least recently added entries past `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        if len(self) > self.limit:
            self.popitem(last=False)


class TraceObserver:
    """Call with every recorded event; `sink(span)` gets each span once it is complete."""

    def __init__(
        self, sink: Callable[[SpanSpec], None], content: bool, limit: int = MAX_REMEMBERED
    ) -> None:
        self._sink, self._content = sink, content
        self._calls: _Bounded = _Bounded(limit)  # exchange -> _Call
        self._tools: _Bounded = _Bounded(limit)  # call id -> its tool.pre
        self._spans: _Bounded = _Bounded(limit)  # exchange -> the key of its span, once sent

    def __call__(self, event: Event) -> None:
        kind, exchange = event["type"], event.get("exchange")
        if kind == LLM_REQUEST and event.get("api") in LLM_APIS:
            call = self._calls.get(exchange) or _Call()
            if event.get("sent") is not False or call.first_request is None:
                call.request = event
            call.first_request = call.first_request or event
            self._calls.put(exchange, call)
        elif kind == LLM_RESPONSE and (call := self._calls.get(exchange)) is not None:
            call.response = event
            call.response_api = (call.request or {}).get("api")
        elif kind == FAILOVER and (call := self._calls.get(exchange)) is not None:
            call.failovers.append(event)
        elif kind == CALL_ANSWERED and (call := self._calls.pop(exchange, None)) is not None:
            self._answered(call, event)
        elif kind == TOOL_PRE and isinstance(event.get("call_id"), str):
            self._tools.put(event["call_id"], event)
        elif kind == TOOL_POST:
            self._tool(event)

    def _answered(self, call: _Call, answered: Event) -> None:
        request = call.request or call.first_request
        if request is None:
            return
        end = genai.ts_ns(answered["ts"])
        start = end - round(float(answered.get("latency_ms") or 0) * 1_000_000)
        attributes = genai.call_attributes(request, call.response, answered)
        if self._content and call.first_request is not None:
            attributes.update(genai.input_messages(call.first_request))
            if call.response is not None:
                attributes.update(genai.output_messages(call.response_api, call.response))
        model = attributes.get("gen_ai.request.model") or ""
        span = SpanSpec(
            f"chat {model}".strip(),
            "client",
            start,
            max(start, end),
            attributes,
            key=answered["id"],
        )
        span.error = attributes.get("error.type")
        span.events = [(FAILOVER, genai.ts_ns(f["ts"]), _failover(f)) for f in call.failovers]
        self._spans.put(answered.get("exchange"), span.key)
        self._sink(span)

    def _tool(self, post: Event) -> None:
        pre = self._tools.pop(post.get("call_id"), None)
        duration = post.get("duration_ms")
        end = genai.ts_ns(post["ts"])
        if pre is not None:
            start = genai.ts_ns(pre["ts"])
            end = start + round(float(duration) * 1_000_000) if duration is not None else end
        elif isinstance(duration, int | float):
            start = end - round(float(duration) * 1_000_000)
        else:
            start = end
        attributes = genai.tool_attributes(pre, post, self._content)
        parent = self._spans.get(pre.get("exchange")) if pre is not None else None
        name = f"execute_tool {attributes.get('gen_ai.tool.name', '')}".strip()
        span = SpanSpec(name, "internal", start, max(start, end), attributes, parent=parent)
        span.error = attributes.get("error.type")
        self._sink(span)


def _failover(event: Event) -> dict[str, Any]:
    fields = ("from_provider", "from_model", "to_provider", "to_model", "reason", "attempt")
    return {f"taplog.failover.{name}": event[name] for name in fields if event.get(name)}
