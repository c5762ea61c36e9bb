"""What runs where the recorder runs, built from the settings: the recorder itself and the
work that follows its events or its files (the budgets' ledger, the fleet's line reports,
traces, compaction, shipping).

Where that is: the one process of `taplog serve` (`proxy.app`), or the recorder process
of `taplog serve --workers N` (`proxy.processes.supervisor`); both build it here, so the
two set-ups cannot drift apart. What needs an optional extra (Redis, OpenTelemetry,
boto3) is imported only when its setting asks for it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from taplog.proxy.config import ConfigError, Settings
from taplog.proxy.limits import tracked
from taplog.proxy.observe.metrics import Metrics
from taplog.proxy.observe.observer import Observer
from taplog.recorder.store.writer import Recorder
from taplog.recorder.usage import UsageLedger

if TYPE_CHECKING:
    from taplog.proxy.coordination.reports import LineReports
    from taplog.proxy.observe.otlp import Tracing
    from taplog.recorder.fleet.shipper import Shipper

log = logging.getLogger("taplog")


def recorder_for(settings: Settings, metrics: Metrics) -> Recorder:
    """The data dir's recorder as the settings say, its events counted into `metrics`."""
    recorder = Recorder(
        settings.data_dir,
        fsync=settings.fsync,
        high_water_bytes=int(settings.queue_high_water_mb * 1024 * 1024),
        session_idle_seconds=settings.session_idle_minutes * 60,
        body_inline_max=settings.body_inline_max_bytes,
        redaction=settings.redaction,
    )
    recorder.observe(Observer(metrics), acknowledged_first=True)  # counted off the answers' path
    metrics.recorder = recorder
    return recorder


def start_ledger(settings: Settings, recorder: Recorder) -> UsageLedger | None:
    """With a budget or the loop guard: the usage ledger observing `recorder`
    (`recorder.usage`); None when no limit is on."""
    keeps = tracked(settings)
    if keeps is None:
        return None
    ledger = UsageLedger(recorder.sessions_dir, keeps)
    recorder.observe(ledger)
    recorder.observe_turns(ledger.flush)
    return ledger


def start_reports(settings: Settings, recorder: Recorder) -> LineReports | None:
    """With `--coordination`: each session's last written line told to the fleet's Redis
    (`proxy.coordination.reports`); stopped once the recorder is closed."""
    if not settings.coordination:
        return None
    from taplog.proxy.coordination.clients import connect_blocking
    from taplog.proxy.coordination.reports import LineReports

    client = connect_blocking(settings.coordination)
    reports = LineReports(client)
    recorder.observe(reports.observe, acknowledged_first=True)
    reports.start()
    return reports


def start_tracing(settings: Settings, recorder: Recorder, metrics: Metrics) -> Tracing | None:
    """With `--otlp-endpoint`: spans built from the recorded events (`proxy.observe.otlp`,
    which alone loads OpenTelemetry), counted in `metrics`; stopped once the recorder is."""
    if not settings.otlp_endpoint:
        return None
    try:
        from taplog.proxy.observe.otlp import Tracing
    except ImportError as exc:
        raise ConfigError(
            f"otlp_endpoint needs OpenTelemetry ({exc.name} is missing): pip install 'taplog[otel]'"
        ) from None

    tracing = Tracing(settings.otlp_endpoint, settings.instance_name, settings.otlp_content)
    recorder.observe(tracing.observe, acknowledged_first=True)
    metrics.tracing = tracing.stats
    return tracing


def compact_idle(data_dir: Path, idle_seconds: float) -> None:
    """One pass: compact the sessions idle this long (a failure leaves the logs as they are)."""
    from taplog.recorder.query.compaction import compact  # DuckDB loads only when needed

    try:
        done = compact(data_dir, idle_seconds)
    except Exception:
        log.exception("compaction failed; the JSONL logs are untouched")
        return
    if done:
        log.info("compacted %d idle sessions", len(done))


def start_shipping(settings: Settings, metrics: Metrics) -> Shipper | None:
    """The data dir's shipper, running, its backlog shown in `metrics`; None without ship_to."""
    if not settings.ship_to:
        return None
    from taplog.recorder.fleet.layout import parse_location
    from taplog.recorder.fleet.shipper import Shipper  # boto3 loads in its thread, not here

    shipper = Shipper(
        settings.data_dir,
        parse_location(settings.ship_to),
        settings.instance_name,
        settings.ship_after_minutes * 60,
    )
    metrics.shipping = shipper.stats
    shipper.start()
    return shipper
