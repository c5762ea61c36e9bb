"""taplog's own log on stderr: text or JSON lines, and one line per call.

The call line is written from a recorder observer (on the writer thread) when
a call's `llm.response` is in the log, so it says exactly what the log says.
It carries when, which session and exchange, api, provider, model, status,
outcome, latency, time to first byte, tokens and cost; never headers, bodies,
keys or URLs. A failover and a circuit that opens or closes get a line each too
(`taplog.failover`), with the rule and the targets. Values a client chose (the
model name) are clipped and, in the text format, quoted when they hold anything
but plain characters, so a request cannot forge log lines.

    2026-01-01T12:00:00.123Z INFO taplog.calls: call session=run-1 api=openai.chat …
    {"time": "2026-01-01T12:00:00.123Z", "level": "info", "logger": "taplog.calls", …}
"""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

import orjson

from taplog.recorder.events import Event, utc_second
from taplog.recorder.secrets import redact_text

calls_log = logging.getLogger("taplog.calls")

MAX_VALUE = 200
_PLAIN = re.compile(r"[A-Za-z0-9._:/@+-]*")
_BARE_TYPES = frozenset({str, int, float, type(None)})  # what the usual call line holds


def _timestamp(record: logging.LogRecord) -> str:
    return f"{utc_second(int(record.created))}.{int(record.msecs):03d}Z"


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int | float):  # numbers never need quoting: no pattern to match
        return str(value)
    text = str(value)
    return text if _PLAIN.fullmatch(text) else orjson.dumps(text).decode()


def _text_fields(fields: dict[str, Any]) -> str:
    """`key=value …` as `_text_value` writes each value, with one match for all the text of
    the usual line (text, numbers and Nones, none needing quotes): per-value calls were most
    of its cost."""
    values = fields.values()
    texts = [value for value in values if type(value) is str]
    if _BARE_TYPES.issuperset(map(type, values)) and _PLAIN.fullmatch("".join(texts)):
        return " ".join([f"{key}={'-' if v is None else v}" for key, v in fields.items()])
    return " ".join([f"{key}={_text_value(value)}" for key, value in fields.items()])


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        fields = getattr(record, "fields", None)
        if fields:
            line += " " + _text_fields(fields)
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


def clip(value: Any) -> Any:
    """A value a client or vendor chose, short and with no credential in it."""
    if not isinstance(value, str):
        return value
    value = redact_text(value)
    return value[:MAX_VALUE] + "…" if len(value) > MAX_VALUE else value


def call_fields(response: Event, requested_model: str | None) -> dict[str, Any]:
    """What the call line says about one `llm.response`: no headers, no bodies."""
    usage = response.get("usage") or {}
    fields = {
        "session": response["session"],
        "exchange": response.get("exchange"),
        "api": response.get("api"),
        "provider": response.get("provider"),
        "model": clip(requested_model),
        "response_model": clip(response.get("model")),
        "status": response.get("status"),
        "outcome": response.get("outcome"),
        "latency_ms": response.get("latency_ms"),
        "ttfb_ms": response.get("ttfb_ms"),
        "input_tokens": usage.get("input_tokens"),
        "output_tokens": usage.get("output_tokens"),
        "cost_usd": response.get("cost_usd"),
    }
    if response.get("error"):
        fields["error"] = clip(response["error"])
    return fields


def log_call(response: Event, requested_model: str | None) -> None:
    """The one line per call (at INFO, or WARNING when the call did not end well)."""
    level = logging.INFO if response.get("outcome") == "ok" else logging.WARNING
    if not calls_log.isEnabledFor(level):
        return  # nothing is built for a line nobody shows
    # `makeRecord` and `handle` are what `calls_log.log` does, less its walk up the stack
    # for the caller's file and line: always this function, and no formatter shows them.
    fields = call_fields(response, requested_model)
    record = calls_log.makeRecord(
        calls_log.name, level, "(unknown file)", 0, "call", (), None, extra={"fields": fields}
    )
    calls_log.handle(record)


failover_log = logging.getLogger("taplog.failover")


def log_failover(session: str, exchange: str, rule: str, source: str, target: str, reason: str):
    """A call moving to another target: which, under which rule, and why."""
    fields = {
        "session": session,
        "exchange": exchange,
        "rule": clip(rule),
        "from": clip(source),
        "to": clip(target),
        "reason": clip(reason),
    }
    failover_log.warning("failover", extra={"fields": fields})


def log_circuit(target: str, rule: str, state: str) -> None:
    """A target's circuit changing: `open` (calls skip it) or `closed` (it answers again)."""
    level = logging.WARNING if state == "open" else logging.INFO
    fields = {"target": clip(target), "rule": clip(rule)}
    failover_log.log(level, f"circuit {state}", extra={"fields": fields})
