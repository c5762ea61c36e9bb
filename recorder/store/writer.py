"""The recorder: a bounded hand-off from the event loop to one writer thread.

    event loop ── record(rec) ──▶ Inbox ──▶ writer thread ──▶ sessions/<id>.jsonl
                  (never blocks,             builds events,      group commit,
                   never drops)              seals, appends      fsync per policy

Group commit per session (`recorder.store.inbox`): a built line waits in memory
(at most `WRITE_DELAY`) for its session's next lines, so what a call records
around its answer reaches the file in one write; a caller waiting on a session
(`when_written(..., session)`, the answer's end held for the log) has that
session written at once. A request does not wait (`at_once`): it is recorded
once sent, and its line is built and written while the vendor works on it.

Record or refuse: `record` always accepts, so calls already in flight finish
and are logged; `accepting` turns False when the queue is over its high-water
mark or the disk fails, and the proxy then refuses *new* calls with a 503
before any vendor is called. A failed write leaves no partial line, keeps its
events and is retried until it succeeds, so recording resumes by itself when
space returns. Bodies over the inline limit go to blobs (`recorder.store.blobs`)
just before the lines that point at them, and a blob that cannot be written
fails the write the same way. A failed fsync is different: the kernel may
already have dropped the data it could not write, and a second fsync would
report success over the loss. So it is never retried: the file is sealed as
suspect and its whole lines go on in a new, synced file
(`recorder.store.logfile.reseal`). Should that fail too, `accepting` turns False
until taplog is restarted, with a reason that says so. The same holds should
the writer thread itself ever fail: a proxy that cannot record refuses rather
than forwards.

The writer's work goes in turns, one thread at a time (`_turn`): take what is
queued, build it, write what is due, sync per policy, release barriers. The
writer thread takes a turn when woken or when something falls due; a caller
with a thread to spare and nothing else for it to do (the recorder process's
reader of a worker's channel, `recorder.service`) takes one itself after each
batch it queued (`take_turn`), which saves a wake-up of the writer thread and
a hand-over of the GIL per batch. Such a turn writes every line it built
rather than keep them for their sessions' next ones (which would cost a
wake-up of the writer thread at WRITE_DELAY for one write fewer): a request's
line is then written while its call is still with the vendor, off its
answer's path (bench/RESULTS.md, "Processes"). The writer thread does the same
for a request and for any large record (`at_once`, `AT_ONCE_BYTES`). Whoever
takes it, one turn at a time builds and writes, so each session's lines keep
their order. Under `interval` the sync pass comes after the turn's barriers are
released (only `always` promises a waiting caller the fsync).

Observers see what was recorded: `Recorder(..., observers=[fn])` (or
`observe(fn)`) calls each `fn(event)` on the thread whose turn wrote it
(the writer thread's, unless a caller took the turn), with every event
once it is written, in log order, so metrics and call logs agree with the
log and cost the event loop nothing. An observer must be quick and must not
block; one that raises is logged and skipped, never allowed to stop the log.
A turn observer (`observe_turns(fn)`) is called once per turn, after its events
were observed and before the callers waiting on them are released. An observer that
nobody waiting on a write needs (metrics, the call log, traces: `observe(fn,
acknowledged_first=True)`) sees the turn's events a millisecond after the answers waiting
on them were released, off their path and out of their way; `flush` returns only once it
has seen them.
The writer's own counters (`stats`) are plain numbers, read at scrape time.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from taplog.recorder.events import TOOL_DENIED, Event, error_event
from taplog.recorder.redaction import Redaction
from taplog.recorder.scrub_parts import CleanParts
from taplog.recorder.store.blobs import BLOBS_DIR, BlobStore
from taplog.recorder.store.inbox import WRITE_DELAY, Inbox, PendingLines
from taplog.recorder.store.logfile import SessionFile, open_session_file, reseal
from taplog.recorder.store.lognames import log_path, session_name
from taplog.recorder.store.memory import give_back_memory
from taplog.recorder.store.reader import pairing_events
from taplog.recorder.store.syncing import SyncPlan
from taplog.recorder.toolevents import ToolLedger

log = logging.getLogger("taplog.recorder")

FSYNC_POLICIES = ("always", "interval", "never")
FSYNC_INTERVAL = 0.1
MAX_SESSION_STATES = 4096  # remembered sessions; a forgotten one is restored from its log
# Logs written with their compression history at hand (a few MB each); the longest unused
# lets go of it, and its next write begins a new zstd frame (recorder.store.zstd_stream).
MAX_COMPRESSING = 32
# A log not written for this long ends its frame and lets go of its history: an idle proxy
# gives the memory back, and an idle log is a whole zstd file. An agent's session writes
# every few seconds while it works, so its frame goes on.
COMPRESSING_IDLE = 300.0
SYNC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

Observer = Callable[[Event], None]
LARGE_RECORD = 8 * 1024 * 1024  # after building one this large, freed memory goes back
# A record this large wakes the writer and has its lines written at once: its build costs
# more than a wake-up and a write of its own (an agent's requests resend 100 KB-1 MB).
# So does a request of any size (`at_once`): it is recorded once sent, so its lines are
# built and written while its call is with the vendor, not at its answer's end.
AT_ONCE_BYTES = 64 * 1024
INF = float("inf")
# What no caller waits on (metrics, the call line, traces) is told this long after a turn
# that released callers, whoever took it (the writer thread wakes for it): those callers
# (an answer's end, on the event loop under `taplog serve`, in a worker under `--workers`)
# run first rather than wait for the GIL or for a core.
AFTER_RELEASE = 0.001


@dataclass
class WriterStats:
    """Counters of the writer thread: written there, read anywhere (single ints, no lock)."""

    events_written: int = 0
    bytes_written: int = 0
    write_errors: int = 0  # failed appends (each is retried) and syncs (never retried)
    observer_errors: int = 0
    sync_seconds: float = 0.0  # total time in fsync passes
    # fsync passes by duration: one count per SYNC_BUCKETS bound, then one for longer
    sync_counts: list[int] = field(default_factory=lambda: [0] * (len(SYNC_BUCKETS) + 1))

    def synced(self, seconds: float) -> None:
        slot = next((i for i, bound in enumerate(SYNC_BUCKETS) if seconds <= bound), -1)
        self.sync_counts[slot] += 1
        self.sync_seconds += seconds


@dataclass
class SessionState:
    """What the writer remembers about a session between records."""

    tools: ToolLedger = field(default_factory=ToolLedger)
    clean_parts: CleanParts = field(default_factory=CleanParts)  # searched, held no secret
    last_seen: float = field(default_factory=time.monotonic)
    started: bool = False  # its `session.started` is written

    @classmethod
    def restored(cls, path: Path) -> SessionState:
        """The state an earlier process left in the session's log, if any."""
        state = cls()
        if path.exists():
            state.tools.restore(pairing_events(path))
            state.started = True
        return state


class Record(Protocol):
    """Something that becomes events, built on the writer thread (off the loop)."""

    session: str
    size: int
    at_once: ClassVar[bool]  # built and written as it comes, whatever its size (`AT_ONCE_BYTES`)

    def events(
        self, state: SessionState, blobs: BlobStore, redaction: Redaction | None
    ) -> Iterable[Event]:
        """Built on the writer thread; `blobs` for a record too large to build in memory;
        `redaction`: what to redact from what is recorded (None: nothing)."""
        ...


@dataclass
class EventRecord:
    """A ready-made event."""

    event: Event
    size: int = 512
    at_once: ClassVar[bool] = False

    @property
    def session(self) -> str:
        return self.event["session"]

    def events(
        self,
        state: SessionState,
        blobs: BlobStore | None = None,
        redaction: Redaction | None = None,
    ) -> Iterable[Event]:
        if self.event["type"] == TOOL_DENIED:  # no result is awaited; one that comes is flagged
            state.tools.refuse(self.event["call_id"])
        return (self.event,)


class SessionStart(EventRecord):
    """A session's `session.started`: written once, however many workers each took a call
    of it for the session's first (`taplog serve --workers N`); the first to arrive is it."""

    def events(
        self,
        state: SessionState,
        blobs: BlobStore | None = None,
        redaction: Redaction | None = None,
    ) -> Iterable[Event]:
        if state.started:
            return ()
        state.started = True
        return (self.event,)


def _at_once(record: Record) -> bool:
    """Whether `record` wakes the writer and has its lines written as soon as it is built."""
    return record.at_once or record.size >= AT_ONCE_BYTES


class _Barrier:
    """Released once every record queued before it is written (and synced, per policy)."""

    size = 0

    def __init__(
        self, callback: Callable[[bool], None] | None = None, session: str | None = None
    ) -> None:
        self.callback = callback
        self.session = session  # None: every session
        self.done = threading.Event() if callback is None else None  # for `flush` only

    def tell(self, ok: bool) -> None:
        """Tell the callback, once: written (True), or a write failed first (False)."""
        callback, self.callback = self.callback, None
        if callback is not None:
            try:
                callback(ok)
            except Exception:  # e.g. its event loop is gone: nobody waits any more
                log.debug("recorder: a barrier's callback failed", exc_info=True)

    def release(self, ok: bool) -> None:
        if self.done is not None:
            self.done.set()
        self.tell(ok)


_CLOSE = object()


class Recorder:
    def __init__(
        self,
        data_dir: Path,
        fsync: str = "interval",
        high_water_bytes: int = 256 * 1024 * 1024,
        max_open_files: int = 256,
        retry_seconds: float = 1.0,
        session_idle_seconds: float = 3600.0,
        observers: Iterable[Observer] = (),
        body_inline_max: int = 1024 * 1024,
        redaction: Redaction | None = None,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {', '.join(FSYNC_POLICIES)}")
        self.sessions_dir = data_dir / "sessions"
        self.quarantine_dir = data_dir / "quarantine"
        self.blobs = BlobStore(data_dir / BLOBS_DIR, body_inline_max, sync=fsync != "never")
        self.redaction = redaction
        self.fsync = fsync
        self.high_water_bytes = high_water_bytes
        self._max_open = max_open_files
        self._retry_seconds = retry_seconds
        self._idle_seconds = session_idle_seconds
        self._inbox = Inbox()
        # Queue size as counts in and out: the loop side adds under a lock of its own
        # (callers may be several threads), the writer side alone counts out, without
        # it, so the loop never waits for a lock the writer holds.
        self._lock = threading.Lock()
        self._records_in = self._bytes_in = 0  # ever queued
        self._records_out = self._bytes_out = 0  # ever built (writer thread only)
        self._error: str | None = None  # cleared by the next good write
        self._fatal: str | None = None  # cleared only by a restart
        self._lost_unsynced = False  # a failed fsync lost lines: waiting callers hear so
        self._closed = False
        self._files: OrderedDict[str, SessionFile] = OrderedDict()
        # the logs written with their history, and when each was written last (newest last)
        self._compressing: OrderedDict[str, tuple[SessionFile, float]] = OrderedDict()
        self._unsynced = SyncPlan(self.sessions_dir)
        self._states: dict[str, SessionState] = {}
        self._waiting: set[str] = set()  # sessions with tool calls pending: expire when idle
        self._last_sync = time.monotonic()
        self._observers: list[Observer] = list(observers)
        self._observers_after: list[Observer] = []  # told once the turn's callers were
        self._turn_observers: list[Callable[[], None]] = []
        self._written: list[Event] = []  # events not yet told `_observers_after`
        self._flushes: list[tuple[_Barrier, bool]] = []  # released once they were told
        self._after_due: float | None = None  # when they are told, callers having gone first
        self.stats = WriterStats()
        # The writer's turn: whoever holds it builds, writes and releases (`_step`), the
        # writer thread or a caller that takes its turn; all the state below is theirs.
        self._turn = threading.Lock()
        self._pending = PendingLines()
        self._barriers: list[_Barrier] = []
        self._closing = False  # close() was taken out of the inbox
        self._finished = False  # every file is closed: nothing more is written
        self._broken = False  # a turn failed: nothing more is written until a restart
        self._wakes_at = INF  # when the writer thread looks again on its own
        self._thread = threading.Thread(target=self._run, name="taplog-writer", daemon=True)

    # -- event-loop side ---------------------------------------------------

    def start(self) -> None:
        for folder in (self.sessions_dir, self.quarantine_dir, self.blobs.folder):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._thread.start()

    def observe(self, observer: Observer, acknowledged_first: bool = False) -> None:
        """Call `observer(event)` for every event written from now on, on the thread whose
        turn wrote it; `acknowledged_first`: after the turn's callers heard their lines are
        written (for what no caller waits on: its time is then off every answer's path)."""
        (self._observers_after if acknowledged_first else self._observers).append(observer)

    def observe_turns(self, observer: Callable[[], None]) -> None:
        """Call `observer()` after each turn's events were observed, before the callers
        waiting on them hear they are written (what a turn taught goes out first)."""
        self._turn_observers.append(observer)

    def record(self, record: Record, wake: bool = True) -> None:
        """Queue a record for writing. Never blocks, never drops. `wake=False`: the
        caller takes the writer's turn itself afterwards (`take_turn`)."""
        if self._closed:
            raise RuntimeError("recorder is closed")
        with self._lock:
            self._records_in += 1
            self._bytes_in += record.size
        self._inbox.put(record, urgent=_at_once(record), wake=wake)

    @property
    def _queued_records(self) -> int:
        done = self._records_out  # read first: out never passes in
        return self._records_in - done

    @property
    def _queued_bytes(self) -> int:
        done = self._bytes_out
        return self._bytes_in - done

    @property
    def accepting(self) -> bool:
        """Whether new calls may start: the disk works and the queue has room."""
        return self._refusal() is None

    def health(self) -> dict[str, Any]:
        reason = self._refusal()
        return {
            "accepting": reason is None,
            "reason": reason,
            "queued_records": self._queued_records,
            "queued_bytes": self._queued_bytes,
        }

    def _refusal(self) -> str | None:
        """Why new calls are refused now, or None (asked on every call: builds nothing)."""
        reason = self._fatal or self._error
        if reason is None and self._closed is False and not self._writer_alive():
            reason = "the log writer is not running"
        if reason is None and self._queued_bytes >= self.high_water_bytes:
            reason = "recorder queue is over its high-water mark"
        return reason

    def _writer_alive(self) -> bool:
        if self._broken:
            return False
        return self._thread.is_alive() or self._thread.ident is None  # not started yet

    def flush(self, timeout: float | None = None) -> bool:
        """Block until everything recorded so far is written; for tests and shutdown."""
        barrier = _Barrier()
        self._inbox.put(barrier, urgent=True)
        return barrier.done.wait(timeout)

    def when_written(
        self, callback: Callable[[bool], None], session: str | None = None, wake: bool = True
    ) -> None:
        """Call `callback(ok)` on the writer's thread once everything recorded so far (for
        `session`, when given) is written, and synced when the policy is `always` (ok
        True); or as soon as a write or sync fails before that (ok False). Never blocks.
        `wake=False`: the caller takes the writer's turn itself afterwards (`take_turn`)."""
        self._inbox.put(_Barrier(callback, session), urgent=True, wake=wake)

    def take_turn(self) -> None:
        """Do the writer's work on this thread now: build what is queued, write it all,
        sync per policy, release the barriers that can be (after the turn of any other
        thread at it).

        For a thread with nothing else to do meanwhile (the recorder process's reader
        of a worker's records): a record and its barrier then cost no wake-up of the
        writer thread and no hand-over of the GIL, and a request is built and written as
        soon as it arrives rather than when its answer's barrier comes. Never from an
        event loop.
        """
        with self._turn:
            self._step(write_all=True)
            wakes_at = self._next_look()
        if wakes_at < self._wakes_at:  # e.g. lines now wait that must be written in time
            self._inbox.wake()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the writer's turn: everything queued so far is built and written first, then
        nothing is written until the block ends (retention deletes logs under it, so no
        line goes to a file it deletes). Records that come meanwhile wait in the inbox."""
        with self._turn:
            self._step(write_all=True)
            yield
        self._inbox.wake()  # what came meanwhile, at once

    def busy(self, session: str) -> bool:
        """Whether `session` has records queued or lines unwritten; asked under `held`."""
        return self._pending.holds(session) or self._inbox.holds(session)

    def forget(self, session: str) -> None:
        """Close `session`'s file and forget its state, its log being deleted; under `held`.
        A later record of it starts a new log."""
        for session_file in (self._files.pop(session, None), self._unsynced.reclaim(session)):
            if session_file is not None:
                session_file.dirty = False  # about to be deleted: nothing to sync
                with contextlib.suppress(OSError):
                    session_file.close(sync=False)
        self._states.pop(session, None)
        self._waiting.discard(session)

    def close(self, timeout: float = 30.0) -> None:
        """Write everything queued, sync and close every file, stop the thread."""
        if self._closed:
            return
        self._closed = True
        self._inbox.put(_CLOSE, urgent=True)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("recorder: %d records could not be written before exit", self._queued_records)

    # -- writer thread -----------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._turn:
                self._step()
                if self._finished or self._broken:
                    return
                self._wakes_at = wakes_at = self._next_look()
            self._inbox.wait(None if wakes_at == INF else max(0.0, wakes_at - time.monotonic()))

    def _next_look(self) -> float:
        """When the writer must look again with nothing new queued (INF: never). Times
        of deadlines, not waits: a caller's turn that moved none sooner wakes no writer."""
        pending = self._pending
        if self._closing:
            return time.monotonic()
        if pending and (self._error is not None or self._fatal is not None):
            return time.monotonic() + self._retry_seconds
        deadlines = [] if self._after_due is None else [self._after_due]
        if pending:
            deadlines.append(pending.oldest + WRITE_DELAY)
        if self.fsync == "interval" and (pending or self._unsynced.due()):
            deadlines.append(self._last_sync + FSYNC_INTERVAL)
        if not deadlines:  # else a turn comes sooner, and each looks for idle sessions and logs
            deadlines = [self._states[s].last_seen + self._idle_seconds for s in self._waiting]
            if self._compressing:
                deadlines.append(next(iter(self._compressing.values()))[1] + COMPRESSING_IDLE)
        return min(deadlines, default=INF)

    def _step(self, write_all: bool = False) -> None:
        """One turn of the writer's work; the turn is held. `write_all`: every line built
        is written now, none left for its session's next ones."""
        if self._finished or self._broken:
            return
        try:
            self._work(write_all)
        except BaseException as exc:
            self._broken = True
            self._fatal = f"the log writer stopped: {exc!r}"
            log.critical("recorder: %s; new calls are refused", self._fatal, exc_info=True)

    def _work(self, write_all: bool) -> None:
        if self._after_due is not None and time.monotonic() >= self._after_due:
            self._observe_after()
        pending, touched, at_once = self._pending, set(), set()
        for item in self._inbox.take():
            if item is _CLOSE:
                self._closing = True
            elif isinstance(item, _Barrier):
                self._barriers.append(item)
            else:
                pending.add(self._build(item))
                touched.add(item.session)
                if _at_once(item):
                    at_once.add(item.session)
        self._track_waiting(touched)
        pending.add(self._expire_idle())
        barriers = self._barriers
        everything = (
            write_all
            or self._closing
            or self._sync_due()
            or any(b.session is None for b in barriers)
        )
        due = pending.due({b.session for b in barriers} | at_once, everything)
        if due:
            pending.put_back(self._write(due))
        if len(self._states) > MAX_SESSION_STATES:
            self._forget_states(pending.sessions)  # a forgotten state reads back whole
        self._let_go_of_idle_logs()
        waited_on_sync = self._closing or self.fsync == "always"
        if waited_on_sync:
            self._sync(force=True)
        for observer in self._turn_observers:
            self._observed(observer)
        self._barriers, flushes, told = self._release(barriers, pending)
        self._flushes += flushes
        # The threads and processes told go first: the observers no caller waits on are
        # told `AFTER_RELEASE` later, by whichever turn comes then, and never put off more.
        if told and not self._closing:
            if self._after_due is None:
                self._after_due = time.monotonic() + AFTER_RELEASE
        elif self._after_due is None or self._closing or time.monotonic() >= self._after_due:
            self._observe_after()
        if not waited_on_sync:  # `interval`: its pass is due to the disk, not to a caller
            self._sync(force=False)
        if self._closing and not pending:
            for session_file in list(self._files.values()):
                self._close(session_file)
            self._files.clear()
            self._finished = True

    def _release(
        self, barriers: list[_Barrier], pending: PendingLines
    ) -> tuple[list[_Barrier], list[tuple[_Barrier, bool]], bool]:
        """Release the callers' barriers whose lines are all written; returns those still
        waiting, the flushes due (released once the last observers ran), and whether a
        caller was told.

        Those still waiting hear of a write failure at once (they are released later)."""
        failing = self._error is not None or self._fatal is not None
        written = not failing and not self._lost_unsynced
        waiting, flushes, told = [], [], False
        for barrier in barriers:
            if pending.holds(barrier.session):
                waiting.append(barrier)
                if failing:
                    barrier.tell(False)
            elif barrier.done is not None:
                flushes.append((barrier, written))
            else:
                barrier.release(written)
                told = True
        if not waiting:
            self._lost_unsynced = False
        return waiting, flushes, told

    def _observe_after(self) -> None:
        """What no caller waits on: the observers told once the events' callers were
        released (`observe(..., acknowledged_first=True)`), then the flushes, which return
        once every observer saw their events."""
        self._after_due = None
        written, self._written = self._written, []
        for observer in self._observers_after:
            for event in written:
                self._observed(observer, event)
        flushes, self._flushes = self._flushes, []
        for flush, ok in flushes:
            flush.release(ok)

    def _track_waiting(self, sessions: set[str]) -> None:
        """Keep `_waiting` current, so the idle checks never scan every session seen."""
        for session in sessions:
            if self._states[session].tools.pending:
                self._waiting.add(session)
            else:
                self._waiting.discard(session)

    def _expire_idle(self) -> list[Event]:
        """Close the tool calls of sessions idle for longer than the idle timeout."""
        now = time.monotonic()
        idle = [s for s in self._waiting if now - self._states[s].last_seen >= self._idle_seconds]
        self._waiting.difference_update(idle)
        return [event for session in idle for event in self._states[session].tools.expire(session)]

    def _forget_states(self, unwritten: Iterable[str]) -> None:
        """Forget the longest-idle half of the sessions without tool calls pending or
        lines still to write.

        Without this a long-running proxy kept one state per session ever seen; a
        forgotten session that comes back is restored from its log, as after a restart.
        """
        keep = self._waiting | set(unwritten)
        by_age = sorted(self._states, key=lambda session: self._states[session].last_seen)
        for session in by_age[: len(by_age) - MAX_SESSION_STATES // 2]:
            if session not in keep:
                del self._states[session]

    def _build(self, record: Record) -> list[Event]:
        state = self._states.get(record.session)
        if state is None:
            state = SessionState.restored(log_path(self.sessions_dir, record.session))
            self._states[record.session] = state
        state.last_seen = time.monotonic()
        try:
            events = list(record.events(state, self.blobs, self.redaction))
        except Exception as exc:  # a bug in one record must not stop the log
            log.exception("recorder: could not build events for session %s", record.session)
            events = [error_event(record.session, None, f"record failed: {exc!r}")]
        self._records_out += 1
        self._bytes_out += record.size
        if record.size > LARGE_RECORD:
            give_back_memory()
        return events

    def _write(self, by_session: dict[str, list[Event]]) -> dict[str, list[Event]]:
        """Append each session's events; returns those not written (a write failed)."""
        for session, events in list(by_session.items()):
            try:
                session_file = self._file(session)
                before = session_file.size
                session_file.append(events)
            except OSError as exc:
                self.stats.write_errors += 1
                self._error = f"cannot write session logs: {exc.strerror or exc}"
                log.error("recorder: %s (will retry)", self._error)
                broken = self._files.get(session)
                if broken is not None and broken.broken:
                    del self._files[session]
                    broken.close(sync=False)
                return by_session
            del by_session[session]
            self._unsynced.wrote()
            self.stats.events_written += len(events)
            self.stats.bytes_written += session_file.size - before
            self._notify(events)
        if self._error is not None:
            log.warning("recorder: writing again after: %s", self._error)
            self._error = None
        return by_session

    def _notify(self, events: list[Event]) -> None:
        for observer in self._observers:
            for event in events:
                self._observed(observer, event)
        if self._observers_after:
            self._written += events

    def _observed(self, observer: Callable[..., None], *event: Event) -> None:
        """An observer told; one that fails is counted and logged once, never fatal."""
        try:
            observer(*event)
        except Exception:
            self.stats.observer_errors += 1
            if self.stats.observer_errors == 1:  # once: an observer bug must not flood
                what = f"a {event[0]['type']} event" if event else "a turn"
                log.exception("recorder: an observer failed on %s", what)

    def _file(self, session: str) -> SessionFile:
        session_file = self._files.get(session)
        if session_file is None:
            if len(self._files) >= self._max_open:
                self._evict(*self._files.popitem(last=False))
            session_file = self._unsynced.reclaim(session) or self._open(session)
        self._files[session] = session_file
        self._files.move_to_end(session)
        self._compressing[session] = (session_file, time.monotonic())
        self._compressing.move_to_end(session)
        if len(self._compressing) > MAX_COMPRESSING:
            self._compressing.popitem(last=False)[1][0].rest()
        return session_file

    def _let_go_of_idle_logs(self) -> None:
        """End the frame of the logs not written for `COMPRESSING_IDLE` seconds, and let go
        of their compression history."""
        now = time.monotonic()
        while self._compressing:
            session, (session_file, written) = next(iter(self._compressing.items()))
            if now - written < COMPRESSING_IDLE:
                return
            del self._compressing[session]
            session_file.let_go()

    def _open(self, session: str) -> SessionFile:
        path = log_path(self.sessions_dir, session)
        session_file, damage = open_session_file(
            path, self.quarantine_dir, sync_dir=False, blobs=self.blobs
        )
        if damage is not None:
            log.error("recorder: %s; moved to %s, starting a new file", damage, self.quarantine_dir)
        if session_file.created and self.fsync != "never":
            self._unsynced.created(session_file)  # its name is synced with the next pass
        return session_file

    def _evict(self, session: str, session_file: SessionFile) -> None:
        """Out of the open-file cache; an unsynced file stays open until the next sync."""
        if not session_file.dirty or self.fsync == "never":
            self._close(session_file)
            return
        self._unsynced.retire(session, session_file)
        if self._unsynced.retired >= self._max_open:  # bound the open files
            self._sync(force=True)

    def _sync_failed(self, session_file: SessionFile, exc: OSError) -> None:
        """Never fsync the same data twice: seal the file as suspect and go on in a new one.

        Should that fail too, the disk is failing: new calls are refused until restart.
        """
        self.stats.write_errors += 1
        session_file.failed_sync = True  # a syncfs of many files may have failed for it
        session = session_name(session_file.path)
        if self._files.get(session) is session_file:
            del self._files[session]
        with contextlib.suppress(OSError):
            session_file.close(sync=False)
        log.error("recorder: an fsync of %s failed: %s", session_file.path.name, exc)
        try:
            fresh, event, lost = reseal(session_file, self.quarantine_dir, exc)
        except OSError as again:
            self._fatal = (
                f"an fsync of {session_file.path.name} failed ({exc.strerror or exc}) and so "
                f"did sealing it ({again.strerror or again}): what was written since its last "
                "sync may be lost; check the disk, run `taplog verify`, restart taplog"
            )
            log.critical("recorder: %s", self._fatal)
            return
        self._files[session] = fresh
        self._lost_unsynced = self._lost_unsynced or lost > 0
        self.stats.events_written += 1
        self._notify([event])

    def _close(self, session_file: SessionFile) -> None:
        try:
            session_file.close(sync=self.fsync != "never")
        except OSError as exc:
            self._sync_failed(session_file, exc)

    def _sync_due(self) -> bool:
        """An `interval` sync pass is due: lines waiting in memory are written first, so
        none takes longer than FSYNC_INTERVAL to reach the disk."""
        return self.fsync == "interval" and time.monotonic() - self._last_sync >= FSYNC_INTERVAL

    def _sync(self, force: bool) -> None:
        if self.fsync == "never":
            return
        now = time.monotonic()
        if not force and self.fsync == "interval" and now - self._last_sync < FSYNC_INTERVAL:
            return
        synced, failures = self._unsynced.run(list(self._files.values()))
        for session_file, exc in failures:
            self._sync_failed(session_file, exc)
        if synced:
            self.stats.synced(time.monotonic() - now)
        self._last_sync = now
