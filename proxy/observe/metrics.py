"""Prometheus metrics of one taplog app, served at `GET /metrics`.

Where the numbers come from:

    recorded events ──(recorder observer, writer thread)──▶ counters, histograms
    the request path ──(middleware)──────────────────────▶ calls in flight, open streams,
                                                            calls refused before recording
    scrape time ──(collector)─────────────────────────────▶ recorder queue and writes,
                                                            breaker states, active sessions

Counting from the recorded events keeps the metrics consistent with the log
and off the event loop. The first and the recorder's part of the last live in
`recorded`, where the recorder runs (in the recorder process under `serve`, which
renders them for the worker that is scraped); the rest in `serving`. Every app has
its own registries, so several apps in one process (the tests) never share a series.
Label values come only from bounded sets (`proxy.observe.labels`). Names follow
Prometheus rules (`taplog_` prefix, base units, `_total` counters); the OpenTelemetry
GenAI client metrics are there too, under their names with `_` for `.` (docs/protocols.md
§8).

A call is counted once per upstream try: a retried or failed-over call adds
one `taplog_calls_total` per try, and `taplog_retries_total` /
`taplog_failovers_total` say why. `model` is the model asked of the vendor
on that try; `input` tokens include cached ones (the OpenTelemetry meaning).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import prometheus_client
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from taplog.proxy.failover.breaker import CLOSED, HALF_OPEN, OPEN
from taplog.proxy.observe import labels
from taplog.proxy.observe.counters import CounterSeries, Families, HistogramSeries
from taplog.recorder import __version__
from taplog.recorder.events import Event
from taplog.recorder.store.writer import SYNC_BUCKETS, Recorder
from taplog.recorder.vendors.apis import API_MODULES

if TYPE_CHECKING:
    from taplog.proxy.observe.otlp import TraceStats
    from taplog.recorder.fleet.shipper import ShipStats

# `_created` samples would double every counter's series and nobody alerts on them.
prometheus_client.disable_created_metrics()

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST
SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
OVERHEAD_SECONDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1)
# The bucket boundaries the OpenTelemetry GenAI conventions advise.
OTEL_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96)
OTEL_TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)
TOKEN_TYPES = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cached_tokens": "cache_read",
    "cache_write_tokens": "cache_creation",
    "reasoning_tokens": "reasoning",
}
LLM_APIS = frozenset(API_MODULES)
CALL = ("api", "provider", "model")
GEN_AI = ("gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_request_model")
GEN_AI_MODELS = (*GEN_AI, "gen_ai_response_model")


class Metrics:
    """The registries of one app and what feeds them: `recorded` (from the events, where
    the recorder runs) and `serving` (the request path and the process that serves)."""

    def __init__(self, bounded: labels.Bounded, session_idle_seconds: float) -> None:
        self.labels = bounded
        self.recorded = CollectorRegistry(auto_describe=False)
        self.serving = CollectorRegistry(auto_describe=False)
        self.recorder: Recorder | None = None  # set once the recorder runs here
        self.shipping: ShipStats | None = None  # set once shipping runs here
        self.tracing: TraceStats | None = None  # set once spans are sent from here
        self.breaker_states: dict[str, str] = {}  # copied from the loop before each scrape
        self._idle_seconds = session_idle_seconds
        self._sessions: dict[str, float] = {}  # session -> monotonic time of its last event
        # Guards the sessions and the series the writer thread updates (`proxy.observe.counters`).
        self._lock = threading.Lock()
        self._families()
        ProcessCollector(registry=self.serving)
        self.recorded.register(_RecordedAtScrape(self))
        self.serving.register(_Breakers(self))

    def _families(self) -> None:
        r, serving = self.recorded, self.serving
        info = Gauge("taplog_info", "taplog's version.", ["version"], registry=serving)
        info.labels(__version__).set(1)
        self.calls = CounterSeries(
            "taplog_calls_total",
            "Vendor calls recorded, one per upstream try, by status class and outcome.",
            [*CALL, "status", "outcome"],
        )
        self.duration = HistogramSeries(
            "taplog_call_duration_seconds",
            "Time from taplog receiving a call to the end of its answer.",
            CALL,
            SECONDS,
        )
        self.ttfb = HistogramSeries(
            "taplog_call_time_to_first_byte_seconds",
            "Time from taplog receiving a call to the first byte of the vendor's answer.",
            CALL,
            SECONDS,
        )
        self.overhead = HistogramSeries(
            "taplog_call_overhead_seconds",
            "taplog's own time per call before the vendor was called (not spent waiting on it).",
            ["api", "provider"],
            OVERHEAD_SECONDS,
        )
        self.tokens = CounterSeries(
            "taplog_tokens_total",
            "Tokens by type: input (cached included), output, cache_read, cache_creation, "
            "reasoning.",
            ["provider", "model", "type"],
        )
        self.cost = CounterSeries(
            "taplog_cost_usd_total",
            "Cost of the calls in USD, from litellm's price list (unknown models add nothing).",
            ["provider", "model"],
        )
        self.unpriced = CounterSeries(
            "taplog_unpriced_calls_total",
            "Answered calls whose cost is unknown (model not in the price list).",
            ["provider", "model"],
        )
        self.tool_calls = CounterSeries(
            "taplog_tool_calls_total", "Tool calls asked for by a model.", ["tool"]
        )
        self.tool_errors = CounterSeries(
            "taplog_tool_errors_total", "Tool results marked as errors.", ["tool"]
        )
        self.tool_anomalies = CounterSeries(
            "taplog_tool_anomalies_total",
            "Tool events flagged: orphan_result, unanswered, finish_mismatch, "
            "ran_though_refused (a result for a call the tool policy refused).",
            ["flag"],
        )
        self.tool_policy = CounterSeries(
            "taplog_tool_policy_decisions_total",
            "Tool calls the tool policy refused (action deny: taken out of the answer) or "
            "flagged (action flag: passed), by rule.",
            ["action", "rule"],
        )
        self.retries = CounterSeries(
            "taplog_retries_total",
            "Upstream tries repeated on the same target.",
            ["provider", "model"],
        )
        self.failovers = CounterSeries(
            "taplog_failovers_total",
            "Calls moved to another target, by reason.",
            ["from_provider", "to_provider", "reason"],
        )
        self.sessions_started = CounterSeries("taplog_sessions_started_total", "Sessions begun.")
        self.error_events = CounterSeries(
            "taplog_error_events_total",
            "`error` events: what taplog itself could not do (see the log for why).",
        )
        r.register(
            Families(
                self._lock,
                self.calls,
                self.duration,
                self.ttfb,
                self.overhead,
                self.tokens,
                self.cost,
                self.unpriced,
                self.tool_calls,
                self.tool_errors,
                self.tool_anomalies,
                self.tool_policy,
                self.retries,
                self.failovers,
                self.sessions_started,
                self.error_events,
            )
        )
        # Touched on the event loop, a few times per call: prometheus_client's own are fine.
        self.in_flight = Gauge(
            "taplog_calls_in_flight", "Client calls being served now.", registry=serving
        )
        self.open_streams = Gauge(
            "taplog_open_streams", "Streamed answers being sent to clients now.", registry=serving
        )
        self.refused = Counter(
            "taplog_calls_refused_total",
            "Calls taplog refused before any vendor was called, by reason "
            "(recorder_unavailable: the recorder could not keep up or the disk failed; budget: "
            "a session or API key over a limit; loop_guard: a session's model repeating a "
            "tool call).",
            ["reason"],
            registry=serving,
        )
        self.ownership = Counter(
            "taplog_session_leases_total",
            "With --coordination, calls whose session this instance did not already hold: "
            "claimed (a lease taken), taken_over (from another owner: session.resumed), "
            "forwarded (sent on to the instance that owns it), unleased (Redis did not "
            "answer: recorded with the epoch unknown).",
            ["outcome"],
            registry=serving,
        )
        self.gen_ai_duration = HistogramSeries(
            "gen_ai_client_operation_duration_seconds",
            "OpenTelemetry gen_ai.client.operation.duration.",
            [*GEN_AI_MODELS, "error_type"],
            OTEL_SECONDS,
        )
        self.gen_ai_first_chunk = HistogramSeries(
            "gen_ai_client_operation_time_to_first_chunk_seconds",
            "OpenTelemetry gen_ai.client.operation.time_to_first_chunk (streams).",
            GEN_AI_MODELS,
            OTEL_SECONDS,
        )
        self.gen_ai_tokens = HistogramSeries(
            "gen_ai_client_token_usage",
            "OpenTelemetry gen_ai.client.token.usage, tokens per call.",
            [*GEN_AI_MODELS, "gen_ai_token_type"],
            OTEL_TOKENS,
        )
        self.gen_ai_tool = HistogramSeries(
            "gen_ai_execute_tool_duration_seconds",
            "OpenTelemetry gen_ai.execute_tool.duration: from the answer asking for a tool "
            "to the request carrying its result.",
            ["gen_ai_operation_name", "gen_ai_tool_name", "error_type"],
            SECONDS,
        )
        r.register(
            Families(
                self._lock,
                self.gen_ai_duration,
                self.gen_ai_first_chunk,
                self.gen_ai_tokens,
                self.gen_ai_tool,
            )
        )

    # -- from recorded events (writer thread, each under `_lock`) ----------

    def response(self, event: Event, requested_model: str | None) -> None:
        """One `llm.response`; `requested_model` is the model its request asked for."""
        get = event.get
        api, provider = labels.api(get("api")), self.labels.provider(get("provider"))
        model = self.labels.model(requested_model)
        outcome, status = labels.outcome(get("outcome")), get("status")
        call, usage = (api, provider, model), get("usage") or {}
        with self._lock:
            self.calls.inc((*call, labels.status_class(status), outcome))
            latency = _seconds(get("latency_ms"))
            self.duration.observe(call, latency)
            if (ttfb := get("ttfb_ms")) is not None:
                self.ttfb.observe(call, _seconds(ttfb))
            if (overhead := get("overhead_ms")) is not None:
                self.overhead.observe((api, provider), _seconds(overhead))
            for field, kind in TOKEN_TYPES.items():
                if isinstance(count := usage.get(field), int) and count > 0:
                    self.tokens.inc((provider, model, kind), count)
            if isinstance(cost := get("cost_usd"), int | float):
                self.cost.inc((provider, model), max(0.0, cost))
            elif usage:
                self.unpriced.inc((provider, model))
            if get("api") in LLM_APIS:
                served = self.labels.model(get("model")) if get("model") else model
                self._gen_ai(("chat", provider, model, served), event, latency, outcome, usage)

    def _gen_ai(
        self, names: tuple[str, ...], event: Event, latency: float, outcome: str, usage: dict
    ) -> None:
        error = "" if outcome == "ok" else outcome  # error.type: the HTTP status when there is one
        status = event.get("status")
        if outcome == "upstream_error" and isinstance(status, int) and status >= 400:
            error = str(status)
        self.gen_ai_duration.observe((*names, error), latency)
        if event.get("stream") and event.get("ttfb_ms") is not None:
            self.gen_ai_first_chunk.observe(names, _seconds(event["ttfb_ms"]))
        for field, kind in (("input_tokens", "input"), ("output_tokens", "output")):
            if isinstance(count := usage.get(field), int):
                self.gen_ai_tokens.observe((*names, kind), count)

    def tool(self, event: Event) -> None:
        name = self.labels.tool(event.get("name"))
        flags = [labels.one_of(flag, labels.TOOL_FLAGS) for flag in event.get("flags") or ()]
        duration = event.get("duration_ms")
        with self._lock:
            for flag in flags:
                self.tool_anomalies.inc((flag,))
            if event["type"] == "tool.pre":
                self.tool_calls.inc((name,))
                return
            error = "error" if event.get("is_error") else ""
            if error:
                self.tool_errors.inc((name,))
            if isinstance(duration, int | float):
                self.gen_ai_tool.observe(("execute_tool", name, error), _seconds(duration))

    def tool_policy_decision(self, action: str, rule: object) -> None:
        key = ("deny" if action == "deny" else "flag", self.labels.rule(rule))
        with self._lock:
            self.tool_policy.inc(key)

    def retry(self, provider: object, model: object) -> None:
        key = (self.labels.provider(provider), self.labels.model(model))
        with self._lock:
            self.retries.inc(key)

    def failover(self, from_provider: object, to_provider: object, reason: str) -> None:
        bounded = self.labels.provider
        key = (bounded(from_provider), bounded(to_provider), reason)
        with self._lock:
            self.failovers.inc(key)

    def session_started(self) -> None:
        with self._lock:
            self.sessions_started.inc(())

    def error_event(self) -> None:
        with self._lock:
            self.error_events.inc(())

    def session_seen(self, session: str) -> None:
        with self._lock:
            self._sessions[session] = time.monotonic()

    def active_sessions(self) -> int:
        """Sessions with an event in the last `session_idle_minutes`; forgets the others."""
        horizon = time.monotonic() - self._idle_seconds
        with self._lock:
            idle = [s for s, seen in self._sessions.items() if seen < horizon]
            for session in idle:
                del self._sessions[session]
            return len(self._sessions)

    def render(self) -> bytes:
        """Everything, where the recorder runs in this process."""
        return self.render_serving() + self.render_recorded()

    def render_serving(self) -> bytes:
        return prometheus_client.generate_latest(self.serving)

    def render_recorded(self) -> bytes:
        return prometheus_client.generate_latest(self.recorded)


def _seconds(milliseconds: Any) -> float:
    return max(0.0, float(milliseconds or 0)) / 1000


class _RecordedAtScrape:
    """What is read of the recording when Prometheus scrapes: the recorder, active sessions."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        yield GaugeMetricFamily(
            "taplog_sessions_active",
            "Sessions with an event within session_idle_minutes.",
            value=metrics.active_sessions(),
        )
        if metrics.recorder is not None:
            yield from _recorder_families(metrics.recorder)
        if metrics.shipping is not None:
            yield from _shipping_families(metrics.shipping)
        if metrics.tracing is not None:
            yield from _tracing_families(metrics.tracing)


class _Breakers:
    """The circuit breakers' states, read when Prometheus scrapes."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        family = GaugeMetricFamily(
            "taplog_circuit_breaker_state",
            "Circuit breakers per provider and model: 1 for the state each is in "
            "(breakers of models outside the bounded set add up under model=other).",
            labels=["provider", "model", "state"],
        )
        counts: dict[tuple[str, str], dict[str, int]] = {}
        for target, state in metrics.breaker_states.items():
            provider, _, model = target.partition(":")
            key = (metrics.labels.provider(provider), metrics.labels.model(model))
            states = counts.setdefault(key, dict.fromkeys((CLOSED, OPEN, HALF_OPEN), 0))
            states[state] = states.get(state, 0) + 1
        for (provider, model), states in sorted(counts.items()):
            for state, count in states.items():
                family.add_metric([provider, model, state], count)
        yield family


def _recorder_families(recorder: Recorder) -> Iterator[Metric]:
    health, stats = recorder.health(), recorder.stats
    yield GaugeMetricFamily(
        "taplog_recorder_accepting",
        "1 when the recorder takes new calls; 0 when they are refused (see /readyz).",
        value=1 if health["accepting"] else 0,
    )
    yield GaugeMetricFamily(
        "taplog_recorder_queue_records",
        "Records waiting for the writer thread.",
        value=health["queued_records"],
    )
    yield GaugeMetricFamily(
        "taplog_recorder_queue_bytes",
        "Bytes waiting for the writer thread.",
        value=health["queued_bytes"],
    )
    yield GaugeMetricFamily(
        "taplog_recorder_queue_high_water_bytes",
        "Queued bytes above which new calls are refused.",
        value=recorder.high_water_bytes,
    )
    yield CounterMetricFamily(
        "taplog_recorder_events_written", "Events appended to session logs.", stats.events_written
    )
    yield CounterMetricFamily(
        "taplog_recorder_written_bytes", "Bytes appended to session logs.", stats.bytes_written
    )
    yield CounterMetricFamily(
        "taplog_recorder_write_errors",
        "Failed writes (retried) and fsyncs (never retried) of session logs.",
        stats.write_errors,
    )
    yield CounterMetricFamily(
        "taplog_recorder_observer_errors",
        "Recorded events that metrics or the call log failed on (a taplog bug).",
        stats.observer_errors,
    )
    counts, cumulative, buckets = list(stats.sync_counts), 0, []
    for bound, count in zip((*SYNC_BUCKETS, float("inf")), counts, strict=True):
        cumulative += count
        buckets.append((prometheus_client.utils.floatToGoString(bound), cumulative))
    yield HistogramMetricFamily(
        "taplog_recorder_fsync_duration_seconds",
        "Time to fsync the session logs written since the last sync.",
        buckets=buckets,
        sum_value=stats.sync_seconds,
    )


def _shipping_families(stats: ShipStats) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "taplog_ship_backlog_objects",
        "Objects not yet in the store: every session log not shipped as it stands, due or "
        "not, and a manifest (during a round, its files). 0: nothing waiting.",
        value=stats.backlog_objects,
    )
    yield GaugeMetricFamily(
        "taplog_ship_backlog_bytes",
        "Bytes not yet in the store (as taplog_ship_backlog_objects counts them).",
        value=stats.backlog_bytes,
    )
    yield CounterMetricFamily(
        "taplog_ship_uploads", "Objects written to the store and verified.", stats.uploads
    )
    yield CounterMetricFamily(
        "taplog_ship_failures", "Shipping rounds that failed (tried again).", stats.failures
    )
    yield GaugeMetricFamily(
        "taplog_ship_store_reachable",
        "1 while the last shipping round reached the store, 0 while it is away.",
        value=1 if stats.reachable else 0,
    )
    yield GaugeMetricFamily(
        "taplog_ship_last_success_timestamp_seconds",
        "When a shipping round last left nothing waiting (Unix time; 0: not yet).",
        value=stats.last_shipped,
    )


def _tracing_families(stats: TraceStats) -> Iterator[Metric]:
    yield CounterMetricFamily(
        "taplog_otlp_spans_exported", "Spans the OTLP collector took.", stats.exported
    )
    yield CounterMetricFamily(
        "taplog_otlp_spans_dropped",
        "Spans never sent: the queue was full, or the collector failed or did not answer.",
        stats.dropped,
    )
    yield GaugeMetricFamily(
        "taplog_otlp_spans_pending",
        "Spans queued for the OTLP exporter or being sent.",
        value=stats.pending,
    )
    yield GaugeMetricFamily(
        "taplog_otlp_collector_reachable",
        "0 for a while after the OTLP collector failed an export (spans are dropped), else 1.",
        value=0 if stats.collector_away else 1,
    )


# -- the request path (event loop) -----------------------------------------

_TRACKED = web.RequestKey("taplog_tracked", bool)
_STREAMING = web.RequestKey("taplog_streaming", bool)
OWN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
OWN_ROUTES = "own-"  # routes named with this prefix are taplog's own pages (the UI), not calls


def call_tracker(metrics: Metrics) -> Any:
    """Middleware: calls in flight, open streams, and taplog's own refusals."""

    @web.middleware
    async def track(request: web.Request, handler: Any) -> web.StreamResponse:
        route = request.match_info.route.name or ""
        if request.path in OWN_PATHS or route.startswith(OWN_ROUTES):
            return await handler(request)
        metrics.in_flight.inc()
        request[_TRACKED] = True
        try:
            response = await handler(request)
        finally:
            request[_TRACKED] = False
            metrics.in_flight.dec()
            if request.get(_STREAMING):
                metrics.open_streams.dec()
        refusal = response.headers.get("x-taplog-error")
        if refusal in labels.REFUSALS:
            metrics.refused.labels(refusal).inc()
        return response

    return track


def stream_tracker(metrics: Metrics) -> Any:
    """on_response_prepare: a streamed answer starts while its handler runs."""

    async def opened(request: web.Request, response: web.StreamResponse) -> None:
        tracked, streaming = request.get(_TRACKED), request.get(_STREAMING)
        if tracked and not streaming and response.content_type == "text/event-stream":
            request[_STREAMING] = True
            metrics.open_streams.inc()

    return opened
