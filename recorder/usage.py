"""What each session and each API key has used so far, kept from the recorded events.

    recorded events ──(observer, where the recorder runs)──▶ UsageLedger
        llm.request   the first of an exchange: one call (and when it started)
        llm.response  its tokens (input + output) and cost; no price: `unpriced`
        tool.pre      the tool asked for, and how many times in a row the same
        call.answered the exchange is over (its key is forgotten)

The request path reads the totals (`proxy.limits`) without asking anything: in one
process it reads this ledger's own tables; with `--workers` each worker holds a copy,
which the recorder process updates after each turn of the writer, before the answers
of that turn are acknowledged (`recorder.service`).

A session the ledger does not hold (forgotten, or taplog was restarted) is restored
from its log the first time one of its events is seen: the events before that one are
read back, off the request path. An API key's totals are not: they start over with
each start of taplog. Only what is on: tool repeats with the loop guard, call start
times with a per-minute limit, keys with a key limit.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.events import (
    CALL_ANSWERED,
    LLM_REQUEST,
    LLM_RESPONSE,
    TOOL_PRE,
    Event,
    verify_line,
)
from taplog.recorder.store.lognames import iter_lines, log_path
from taplog.recorder.store.zstd_stream import DamagedStream

MAX_TRACKED = 100_000  # sessions (and keys) held; a forgotten session reads back from its log
MAX_EXCHANGES = 10_000  # calls in flight whose API key is remembered
ARGUMENTS_SHOWN = 200  # characters of a repeated tool's arguments a refusal quotes
SESSION, KEY = "s", "k"
_WATCHED = frozenset({LLM_REQUEST, LLM_RESPONSE, TOOL_PRE, CALL_ANSWERED})
_RESTORED_TYPES = (b'"type":"llm.request"', b'"type":"llm.response"', b'"type":"tool.pre"')


@dataclass(slots=True)
class Totals:
    """One session's (or API key's) use so far."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    unpriced: int = 0  # answers with usage but no price: their cost is unknown
    started: list[float] = field(default_factory=list)  # wall times of the latest calls
    tool: str | None = None  # the last tool asked for, with its arguments (canonical JSON)
    tool_name: str | None = None
    tool_arguments: str = ""  # as a refusal quotes them (clipped)
    repeats: int = 0  # how many times in a row `tool` was asked for

    def call_started(self, at: float, kept: int) -> None:
        self.calls += 1
        if kept:
            self.started.append(at)
            del self.started[:-kept]

    def answered(self, event: Event) -> None:
        usage = event.get("usage")
        if not isinstance(usage, dict):
            return
        for kind in ("input_tokens", "output_tokens"):
            if isinstance(count := usage.get(kind), int) and count > 0:
                self.tokens += count
        cost = event.get("cost_usd")
        if isinstance(cost, int | float):
            self.cost_usd += max(0.0, cost)
        else:
            self.unpriced += 1

    def tool_asked(self, event: Event) -> None:
        arguments = event.get("arguments", event.get("arguments_raw"))
        shown = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
        asked = f"{event.get('name')}\x00{shown}"
        if asked == self.tool:
            self.repeats += 1
            return
        self.tool, self.repeats = asked, 1
        self.tool_name = str(event.get("name"))
        clipped = len(shown) > ARGUMENTS_SHOWN
        self.tool_arguments = shown[:ARGUMENTS_SHOWN] + ("…" if clipped else "")


@dataclass(frozen=True, slots=True)
class Tracked:
    """What the ledger keeps, from which limits are on."""

    keys: bool = False  # a key limit is set
    per_minute: int = 0  # the larger per-minute limit: that many start times kept
    tools: bool = False  # the loop guard is on


class UsageTables:
    """Totals by session and by API key fingerprint, bounded (oldest update forgotten)."""

    def __init__(self, max_tracked: int = MAX_TRACKED) -> None:
        self.sessions: dict[str, Totals] = {}
        self.keys: dict[str, Totals] = {}
        self._max = max_tracked

    def put(self, scope: str, name: str, totals: Totals) -> None:
        """A copy from the recorder process (`proxy.processes.link`)."""
        table = self.sessions if scope == SESSION else self.keys
        table.pop(name, None)
        table[name] = totals
        if len(table) > self._max:
            del table[next(iter(table))]


class UsageLedger:
    """A recorder observer (`Recorder.observe`) keeping `tables`; `flush` (a turn
    observer) hands what changed to `on_change`, when the workers need it."""

    def __init__(
        self,
        sessions_dir: Path,
        tracked: Tracked,
        on_change: Callable[[list[tuple[str, str, Totals]]], None] | None = None,
    ) -> None:
        self.tables = UsageTables()
        self._sessions_dir = sessions_dir
        self._tracked = tracked
        self.on_change = on_change  # set once the workers can be told
        self._keys: OrderedDict[str, str | None] = OrderedDict()  # exchange -> its API key
        self._changed: dict[tuple[str, str], Totals] = {}
        self.lock = threading.Lock()  # the tables, against a worker connecting (`snapshot`)

    def __call__(self, event: Event) -> None:
        kind = event["type"]
        if kind not in _WATCHED:
            return
        exchange = event.get("exchange")
        if kind == CALL_ANSWERED:
            self._keys.pop(exchange, None)
            return
        with self.lock:
            session = self._session(event["session"], event.get("seq", 0))
            if kind == LLM_REQUEST:
                if exchange in self._keys:
                    return  # another try of a call already counted
                key = event.get("key_fingerprint") if self._tracked.keys else None
                self._remember(exchange, key)
                now, kept = time.time(), self._tracked.per_minute
                for totals in self._touched(event["session"], session, key):
                    totals.call_started(now, kept)
            elif kind == LLM_RESPONSE:
                key = self._keys.get(exchange) if isinstance(exchange, str) else None
                for totals in self._touched(event["session"], session, key):
                    totals.answered(event)
            elif self._tracked.tools:
                session.tool_asked(event)
                self._changed[(SESSION, event["session"])] = session

    def flush(self) -> None:
        """After a turn of the writer: what changed goes to `on_change` (the workers)."""
        if not self._changed:
            return
        changed, self._changed = self._changed, {}  # read on the thread that changes them
        if self.on_change is not None:
            self.on_change([(scope, name, totals) for (scope, name), totals in changed.items()])

    def snapshot(self) -> list[tuple[str, str, Totals]]:
        """Everything, for a worker that connects; under `lock`."""
        sessions = ((SESSION, name, totals) for name, totals in self.tables.sessions.items())
        keys = ((KEY, name, totals) for name, totals in self.tables.keys.items())
        return [*sessions, *keys]

    def _session(self, session: str, seq: int) -> Totals:
        totals = self.tables.sessions.get(session)
        if totals is None:
            totals = Totals()
            if seq > 2:  # met in the middle (line 1 is its start): the rest is in its log
                path = log_path(self._sessions_dir, session)
                restore(totals, _earlier(path, seq), self._tracked)
            self.tables.put(SESSION, session, totals)
        return totals

    def _touched(self, name: str, session: Totals, key: str | None) -> Iterator[Totals]:
        self._changed[(SESSION, name)] = session
        yield session
        if key is not None:
            totals = self.tables.keys.get(key)
            if totals is None:
                totals = Totals()
                self.tables.put(KEY, key, totals)
            self._changed[(KEY, key)] = totals
            yield totals

    def _remember(self, exchange: Any, key: str | None) -> None:
        if isinstance(exchange, str):
            self._keys[exchange] = key
            if len(self._keys) > MAX_EXCHANGES:
                self._keys.popitem(last=False)


def restore(totals: Totals, events: Iterable[Event], tracked: Tracked) -> None:
    """`totals` from a session's recorded events (its calls' start times are not known
    as wall times: a restored session's per-minute count starts empty)."""
    counted: set[Any] = set()
    for event in events:
        kind = event.get("type")
        if kind == LLM_REQUEST and event.get("exchange") not in counted:
            counted.add(event.get("exchange"))
            totals.calls += 1
        elif kind == LLM_RESPONSE:
            totals.answered(event)
        elif kind == TOOL_PRE and tracked.tools:
            totals.tool_asked(event)


def _earlier(path: Path, before_seq: int) -> Iterator[Event]:
    """The events that count of a session's log, up to line `before_seq` (skipping any line
    that does not verify: the writer repairs, the readers report)."""
    with contextlib.suppress(OSError, DamagedStream):
        for line in iter_lines(path):
            if any(kind in line for kind in _RESTORED_TYPES) and verify_line(line):
                event = orjson.loads(line)
                if event.get("seq", 0) >= before_seq:
                    return
                yield event
