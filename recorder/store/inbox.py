"""How records reach the writer thread, and how its built lines wait for their write.

    callers ── put ──▶ Inbox ── take (a batch) ──▶ writer: build ──▶ PendingLines ──▶ write
                 (a record waits for the writer;          (a session's lines wait for
                  what someone waits on wakes it)          its next ones, or a caller)

Both trade a few milliseconds of a line's life in memory for fewer thread
wake-ups and write syscalls per call; nothing a caller waits on is delayed.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Any

from taplog.recorder.events import Event

PATIENCE = 0.005  # how long a record may wait for a writer that is between batches
# How long a built line may wait in memory for the next lines of its session, so
# that what a call records around its answer reaches the file in one write. Nobody
# waits on such a line: whoever does (a barrier) has its session written at once,
# and under `interval` every sync pass writes all of them first.
WRITE_DELAY = 0.05


class Inbox:
    """The hand-off from callers to the writer thread: a deque drained in batches.

    Waking a thread costs a context switch each way, and on a small machine a
    round trip costs more CPU than building a short call's events. So a record
    does not wake a writer that is between batches: that writer looks again
    within `PATIENCE` on its own. Only what someone waits on (`urgent`: a
    barrier, close) or what is worth building at once (a request, once sent: its
    vendor is at work; a large record) wakes it at once, as does any record once
    the writer has gone to sleep for good. A caller that does the writer's work
    itself (`Recorder.take_turn`) adds without waking anyone, and without keeping
    the writer from its sleep (`wake=False`).
    """

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._wake = threading.Event()
        self._asleep = False
        self._for_writer = False  # items the writer is to take on its own are queued

    def put(self, item: Any, urgent: bool = False, wake: bool = True) -> None:
        self._items.append(item)
        if wake:
            self._for_writer = True
            if urgent or self._asleep:
                self._wake.set()

    def wake(self) -> None:
        """Wake the writer now, whatever it waits for."""
        self._wake.set()

    def wait(self, timeout: float | None) -> None:
        """Wait up to `timeout` (None: for ever) for anything the writer is to take."""
        if not self._for_writer and timeout != 0:
            patience = PATIENCE if timeout is None else min(timeout, PATIENCE)
            self._wake.wait(patience)
            if not self._for_writer and (timeout is None or timeout > patience):
                self._asleep = True  # from here on every record wakes the writer
                if not self._for_writer:
                    self._wake.wait(None if timeout is None else timeout - patience)
                self._asleep = False

    def holds(self, session: str) -> bool:
        """Whether anything of `session` is queued (a copy is looked at: callers append)."""
        return any(getattr(item, "session", None) == session for item in tuple(self._items))

    def take(self, limit: int = 10_000) -> list[Any]:
        """Up to `limit` items, without waiting."""
        self._for_writer = False
        if self._wake.is_set():
            self._wake.clear()  # before draining: a later wake-up is never lost
        items, popleft = [], self._items.popleft
        with contextlib.suppress(IndexError):
            while len(items) < limit:
                items.append(popleft())
        if self._items:
            self._for_writer = True  # the rest, next
        return items


class PendingLines:
    """Built events not yet written, by session, in log order, with when each session's
    oldest was built: a session is written when someone waits on it, or WRITE_DELAY on."""

    def __init__(self) -> None:
        self._events: dict[str, list[Event]] = {}
        self._since: dict[str, float] = {}

    def __bool__(self) -> bool:
        return bool(self._events)

    @property
    def sessions(self) -> Iterable[str]:
        return self._events.keys()

    @property
    def oldest(self) -> float:
        return min(self._since.values())

    def holds(self, session: str | None) -> bool:
        """Whether lines of `session` (None: of any session) are still to be written."""
        return bool(self._events) if session is None else session in self._events

    def add(self, events: Iterable[Event]) -> None:
        built = time.monotonic()
        for event in events:
            session = event["session"]
            if session not in self._events:
                self._events[session], self._since[session] = [], built
            self._events[session].append(event)

    def due(self, waited_on: set[str | None], everything: bool) -> dict[str, list[Event]]:
        """Take out the sessions to write now: those waited on, and those kept long enough."""
        if everything:
            taken, self._events, self._since = self._events, {}, {}
            return taken
        late = time.monotonic() - WRITE_DELAY
        due = [s for s in self._events if s in waited_on or self._since[s] <= late]
        return {session: self._take(session) for session in due}

    def put_back(self, unwritten: dict[str, list[Event]]) -> None:
        """Sessions whose write failed: first in line again, before anything newer."""
        for session, events in unwritten.items():
            newer = self._events.pop(session, [])
            self._events[session] = events + newer
            self._since[session] = time.monotonic() - WRITE_DELAY  # due again at once

    def _take(self, session: str) -> list[Event]:
        del self._since[session]
        return self._events.pop(session)
