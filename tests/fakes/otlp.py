"""A fake OTLP/HTTP collector: takes `POST /v1/traces` (protobuf) and keeps the spans, decoded.

The real receiver (Arize Phoenix) is tests/proxy/observe/test_phoenix.py's; this one lets the
quick tests see exactly what went over the wire, every attribute and each raw request body.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent: str
    kind: int
    start_ns: int
    end_ns: int
    status: int  # 0 unset, 1 ok, 2 error
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


@dataclass
class FakeCollector:
    """`spans` as they came; `bodies` the raw requests (to look for what must not be sent)."""

    spans: list[Span] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    url: str = ""

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        return app

    async def _traces(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.bodies.append(body)
        message = ExportTraceServiceRequest()
        message.ParseFromString(body)
        for resource_spans in message.resource_spans:
            resource = _attributes(resource_spans.resource.attributes)
            for scope in resource_spans.scope_spans:
                self.spans += [_span(span, resource) for span in scope.spans]
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(body=answer, content_type="application/x-protobuf")

    def named(self, prefix: str) -> list[Span]:
        return [span for span in self.spans if span.name.startswith(prefix)]


def _span(span: Any, resource: dict[str, Any]) -> Span:
    return Span(
        span.name,
        span.trace_id.hex(),
        span.span_id.hex(),
        span.parent_span_id.hex(),
        span.kind,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        span.status.code,
        _attributes(span.attributes),
        [(event.name, _attributes(event.attributes)) for event in span.events],
        resource,
    )


def silent_port() -> tuple[socket.socket, int]:
    """A port that accepts connections (the kernel's backlog) and never answers: a hung
    collector. Close the socket when done."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener, listener.getsockname()[1]


def dead_port() -> int:
    """A port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
