"""Label values for metrics, each from a bounded set: anything else is `other`.

A label value becomes a time series, so none may come from a client as it
is: never session ids, paths, keys or free text. Models are those named in
the fallback rules plus the model names of litellm's price catalogue (the
names without a `/`); providers are the configured ones; apis and outcomes
come from the log format; tool names are the first `MAX_TOOLS` seen. A
thousand random model names therefore add one series (`other`), not a
thousand.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable

from taplog.recorder import prices
from taplog.recorder.secrets import redact_text
from taplog.recorder.toolevents import (
    FINISH_MISMATCH,
    ORPHAN_RESULT,
    RAN_THOUGH_REFUSED,
    UNANSWERED,
)
from taplog.recorder.vendors.apis import API_MODULES

OTHER = "other"
NONE = "none"
APIS = frozenset({*API_MODULES, "passthrough"})
OUTCOMES = frozenset(
    {
        "ok",
        "upstream_error",
        "unreachable",
        "timeout",
        "upstream_cut",
        "too_large",
        "restarted",
        "client_disconnected",
        "shutdown",
        "proxy_error",
    }
)
TOOL_FLAGS = frozenset({ORPHAN_RESULT, UNANSWERED, FINISH_MISMATCH, RAN_THOUGH_REFUSED})
# taplog's own refusals, before any vendor is called (the x-taplog-error codes)
REFUSALS = frozenset(
    {
        "unauthorized",
        "recorder_unavailable",
        "request_too_large",
        "request_timeout",
        "bad_content_encoding",
        "unsupported_content_encoding",
        "invalid_path",
        "invalid_session_id",
        "key_for_another_vendor",
        "budget",
        "loop_guard",
    }
)
MAX_TOOLS = 100
MAX_TOOL_NAME = 64
_GLOB = frozenset("*?[")


@functools.cache
def catalogue_models() -> frozenset[str]:
    """Model names of litellm's catalogue (read once, off the event loop)."""
    return frozenset(name for name in prices.catalogue() if "/" not in name)


def one_of(value: object, known: frozenset[str]) -> str:
    return value if isinstance(value, str) and value in known else OTHER


def status_class(status: object) -> str:
    """`2xx`, `4xx`, …; `none` when no answer came (unreachable, timeout)."""
    if isinstance(status, int) and 100 <= status <= 599:
        return f"{status // 100}xx"
    return NONE


def api(value: object) -> str:
    return one_of(value, APIS)


def outcome(value: object) -> str:
    return one_of(value, OUTCOMES)


class Bounded:
    """The bounded label sets of one app: its providers, its models, the tools seen."""

    def __init__(self, providers: Iterable[str], models: Iterable[str]) -> None:
        self.providers = frozenset(providers)
        self.configured_models = frozenset(m for m in models if not _GLOB & set(m))
        self._tools: set[str] = set()
        self._rules: set[str] = set()
        self._lock = threading.Lock()

    def provider(self, value: object) -> str:
        return one_of(value, self.providers)

    def model(self, value: object) -> str:
        if not isinstance(value, str) or not value:
            return NONE if value is None else OTHER
        if value in self.configured_models or value in catalogue_models():
            return value
        return OTHER

    def tool(self, value: object) -> str:
        """A tool name: the first MAX_TOOLS distinct (short) names, then `other` (so is a
        name shaped like a credential: a label is no place for one)."""
        return self._first_seen(value, self._tools)

    def rule(self, value: object) -> str:
        """A tool policy rule's id, bounded as tool names are (the config names them)."""
        return self._first_seen(value, self._rules)

    def _first_seen(self, value: object, seen: set[str]) -> str:
        if not isinstance(value, str) or not value or len(value) > MAX_TOOL_NAME:
            return OTHER
        if redact_text(value) != value:
            return OTHER
        with self._lock:
            if value in seen:
                return value
            if len(seen) < MAX_TOOLS:
                seen.add(value)
                return value
        return OTHER
