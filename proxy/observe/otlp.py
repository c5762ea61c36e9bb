"""Spans sent over OTLP/HTTP (protobuf) with the official OpenTelemetry SDK: `--otlp-endpoint`.

The only module that imports OpenTelemetry, and only `proxy.app.start_tracing` imports it,
when an endpoint is set: never at start-up otherwise, never on the request path.

    writer thread: Tracing.observe ─▶ a bounded queue of the events spans are made of
    taplog's traces thread: TraceObserver ─▶ Tracing.send: an SDK span ─▶ BatchSpanProcessor
    the processor's own thread: batches ─▶ OTLPSpanExporter ─▶ the collector

The writer thread only queues events (an answer's end waits for the writer's turn, so
building spans there cost every call about 0.1 ms: bench/added_latency.py with a
collector that never took a batch). A collector that is down or slow never slows a call:
every queue is bounded; an event that finds the first one full is dropped, and counted
when it would have ended a span. Spans handed to the processor and not yet through the exporter are
`pending`; past `max_queue_size` of them a new span is dropped, and a batch the exporter
fails on (after its own retries, within its timeout) is dropped too, and so is every span
for `AWAY_SECONDS` after it (the collector is then `away`, and tried again with the next
batch): all counted in `taplog_otlp_spans_dropped_total`, beside
`taplog_otlp_spans_exported_total`; `taplog_otlp_collector_reachable` says which.

The endpoint follows OTLP's rules for OTEL_EXPORTER_OTLP_ENDPOINT: a base URL, to which
`/v1/traces` is added (a URL that already ends so is taken as it is). The exporter reads
the standard variables for what taplog does not set: OTEL_EXPORTER_OTLP[_TRACES]_HEADERS
(a collector's key, kept out of config files), _TIMEOUT, _COMPRESSION, _CERTIFICATE; the
processor OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_EXPORT_BATCH_SIZE;
the resource OTEL_RESOURCE_ATTRIBUTES (OTEL_SERVICE_NAME does not replace `taplog`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    DEFAULT_TRACES_EXPORT_PATH,
    OTLPSpanExporter,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import NonRecordingSpan, SpanKind, Status, StatusCode

from taplog.proxy.observe.traces import MAX_REMEMBERED, SPAN_EVENTS, SpanSpec, TraceObserver
from taplog.recorder import __version__
from taplog.recorder.events import CALL_ANSWERED, TOOL_POST, Event

log = logging.getLogger("taplog")

TRACES_PATH = "/" + DEFAULT_TRACES_EXPORT_PATH  # OTLP's, as the SDK names it: `/v1/traces`
DEFAULT_QUEUE = 2048  # the SDK's default, unless OTEL_BSP_MAX_QUEUE_SIZE says otherwise
MAX_WAITING_EVENTS = 16_384  # recorded events not yet made into spans
DRAIN_SECONDS = 0.25  # how often the queued events are made spans (not a wake-up per event)
AWAY_SECONDS = 10.0  # after a failed export, spans are dropped this long before the next try
ENDS_A_SPAN = frozenset({CALL_ANSWERED, TOOL_POST})
STOP_SECONDS = 5.0  # what a stop waits for the last batch; a dead collector gets no more
KINDS = {"client": SpanKind.CLIENT, "internal": SpanKind.INTERNAL}


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of an endpoint: its base plus `/v1/traces`."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


class TraceStats:
    """Spans exported and dropped, for /metrics (read at scrape time, written by threads)."""

    def __init__(self) -> None:
        self.exported = 0
        self.dropped = 0
        self.pending = 0
        self.away_until = 0.0  # monotonic: the collector failed; nothing is sent before then
        self.lock = threading.Lock()

    @property
    def collector_away(self) -> bool:
        return time.monotonic() < self.away_until


class _Counting(SpanExporter):
    """The OTLP exporter, counting what it sent and what it could not; after a failure
    the collector is left alone for AWAY_SECONDS (spans are dropped, and not even made:
    a dead collector cost each call the span it could not take, ~0.1 ms at p50 and 3 ms
    at p99 in bench/added_latency.py)."""

    def __init__(self, inner: SpanExporter, stats: TraceStats) -> None:
        self._inner, self._stats = inner, stats

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.FAILURE
        try:
            if not self._stats.collector_away:
                result = self._inner.export(spans)
        finally:
            with self._stats.lock:
                self._stats.pending -= len(spans)
                if result is SpanExportResult.SUCCESS:
                    self._stats.exported += len(spans)
                else:
                    self._stats.dropped += len(spans)
                    self._stats.away_until = time.monotonic() + AWAY_SECONDS
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class Tracing:
    """A tracer provider of its own (never the global one), its exporter and the observer."""

    def __init__(self, endpoint: str, instance: str, content: bool) -> None:
        self.stats = TraceStats()
        self._max = int(os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") or DEFAULT_QUEUE)
        resource = Resource.create(
            {
                "service.name": "taplog",
                "service.version": __version__,
                "service.instance.id": instance,
            }
        )
        exporter = _Counting(OTLPSpanExporter(endpoint=traces_url(endpoint)), self.stats)
        self._provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=self._max))
        self._tracer = self._provider.get_tracer("taplog", __version__)
        self._contexts: dict[str, trace.SpanContext] = {}  # span key -> context, for children
        self._spans = TraceObserver(self.send, content)
        self._waiting: deque[Event | None] = deque()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="taplog-traces", daemon=True)
        self._thread.start()

    def observe(self, event: Event) -> None:
        """The recorder's observer, on the writer thread: queue the event, nothing more."""
        if event["type"] not in SPAN_EVENTS:
            return
        if len(self._waiting) >= MAX_WAITING_EVENTS:
            if event["type"] in ENDS_A_SPAN:
                with self.stats.lock:
                    self.stats.dropped += 1
            return
        self._waiting.append(event)

    def _run(self) -> None:
        while True:
            self._wake.wait(DRAIN_SECONDS)
            while self._waiting:
                event = self._waiting.popleft()
                if event is None:
                    return
                try:
                    self._spans(event)
                except Exception:  # one odd event must not stop the traces
                    log.exception("traces: could not make a span of a %s event", event["type"])

    def send(self, spec: SpanSpec) -> None:
        """Queue one span for the exporter's thread, or count it dropped when full or when
        the collector is away."""
        with self.stats.lock:
            if self.stats.pending >= self._max or self.stats.collector_away:
                self.stats.dropped += 1
                return
            self.stats.pending += 1
        parent = self._contexts.get(spec.parent) if spec.parent else None
        context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        span = self._tracer.start_span(
            spec.name,
            context=context,
            kind=KINDS[spec.kind],
            attributes=spec.attributes,
            start_time=spec.start_ns,
        )
        for name, when, attributes in spec.events:
            span.add_event(name, attributes, timestamp=when)
        if spec.error:
            span.set_status(Status(StatusCode.ERROR, spec.error))
        span.end(end_time=spec.end_ns)
        if spec.key is not None:
            self._remember(spec.key, span.get_span_context())

    def _remember(self, key: str, context: trace.SpanContext) -> None:
        self._contexts[key] = context
        if len(self._contexts) > MAX_REMEMBERED:
            del self._contexts[next(iter(self._contexts))]

    def stop(self) -> None:
        """Make the queued events spans and send them, waiting at most STOP_SECONDS (the
        threads are daemons: a collector that does not answer cannot hold taplog's exit)."""
        self._waiting.append(None)
        self._wake.set()
        self._thread.join(STOP_SECONDS)
        stopping = threading.Thread(target=self._provider.shutdown, daemon=True)
        stopping.start()
        stopping.join(STOP_SECONDS)
        if stopping.is_alive():
            log.warning("traces: the collector did not take the last spans in time")
