"""taplog's own log on stderr: text or JSON lines, and one line per call.

The call line is written from a recorder observer (on the writer thread) when
a call's `llm.response` is in the log, so it says exactly what the log says.
It carries when, which session and exchange, api, provider, model, status,
outcome, latency, time to first byte, tokens and cost; never headers, bodies,
keys or URLs. Values a client chose (the model name) are clipped and, in the
text format, quoted when they hold anything but plain characters, so a
request cannot forge log lines.

    2026-01-01T12:00:00.123Z INFO taplog.calls: call session=run-1 api=openai.chat …
    {"time": "2026-01-01T12:00:00.123Z", "level": "info", "logger": "taplog.calls", …}
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any

import orjson

from recorder.events import Event

calls_log = logging.getLogger("taplog.calls")

MAX_VALUE = 200
_PLAIN = re.compile(r"[A-Za-z0-9._:/@+-]*")


def _timestamp(record: logging.LogRecord) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    return f"{stamp}.{int(record.msecs):03d}Z"


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float):  # numbers never need quoting: no pattern to match
        return str(value)
    text = str(value)
    return text if _PLAIN.fullmatch(text) else orjson.dumps(text).decode()


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        fields = getattr(record, "fields", None)
        if fields:
            line += " " + " ".join(f"{k}={_text_value(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **(getattr(record, "fields", None) or {}),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


def configure_logging(log_format: str, level: str, stream: Any = None) -> None:
    """Send taplog's log lines to stderr in `log_format` (text or json)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())


def _clip(value: Any) -> Any:
    if isinstance(value, str) and len(value) > MAX_VALUE:
        return value[:MAX_VALUE] + "…"
    return value


def call_fields(response: Event, requested_model: str | None) -> dict[str, Any]:
    """What the call line says about one `llm.response`: no headers, no bodies."""
    usage = response.get("usage") or {}
    fields = {
        "session": response["session"],
        "exchange": response.get("exchange"),
        "api": response.get("api"),
        "provider": response.get("provider"),
        "model": _clip(requested_model),
        "response_model": _clip(response.get("model")),
        "status": response.get("status"),
        "outcome": response.get("outcome"),
        "latency_ms": response.get("latency_ms"),
        "ttfb_ms": response.get("ttfb_ms"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "cost_usd": response.get("cost_usd"),
    }
    if response.get("error"):
        fields["error"] = _clip(response["error"])
    return fields


def log_call(response: Event, requested_model: str | None) -> None:
    """The one line per call (at INFO, or WARNING when the call did not end well)."""
    level = logging.INFO if response.get("outcome") == "ok" else logging.WARNING
    if calls_log.isEnabledFor(level):
        calls_log.log(level, "call", extra={"fields": call_fields(response, requested_model)})
