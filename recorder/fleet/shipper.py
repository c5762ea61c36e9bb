"""Shipping: an instance copies its sessions to the fleet's object store.

A round runs every `every` seconds on a thread of its own (never on the event loop, never
on the writer thread, so a slow or absent store costs no call anything):

1. Due: the session logs idle for `idle_seconds` whose size is not the one shipped.
2. Staged in `DATA_DIR/shipping/outbox/`: each due log's first `size` bytes (the whole
   of it that was idle), read as compaction reads a log (`recorder.query.log_rows`).
3. Uploaded in this order, each written once (`If-None-Match: *`) and verified (size,
   SHA-256 or MD5, `recorder.fleet.store`) before the next: the blobs the events point
   at, then the logs (`recorder.fleet.layout`).
4. Committed: the sessions' typed events replace their previous copy in the fleet's
   events table, in one commit (`recorder.fleet.table`). A round is shipped once its
   commit is; the state (`DATA_DIR/shipping/state.json`) then takes it, and the outbox
   is emptied. The table's upkeep follows: this instance's crowded partitions compacted,
   and once a day the files no snapshot needs vacuumed.

A round that fails leaves the state as it was; the next starts again, and what it had
uploaded is found in the store (412) and verified, never written twice; files of a
commit that never happened are in no snapshot, and vacuum removes them. While the store
is unreachable, rounds only probe it. The backlog counts every log not shipped as it
stands, due or not, and a commit (a staged round counts its blobs and logs).

The first round runs at once and takes every log written before the shipper started,
idle or not: an instance stopped, or killed with its disk kept, ships what it left as
soon as it starts again. On a stop (`finish`) a last round ships every log as it stands,
within a deadline; what is left is logged, and ships at the next start. The session
logs are never changed or deleted: shipping copies. A data dir whose state is lost, or
of another location or instance, ships every log again, each replacing its copy.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.fleet import layout, table
from taplog.recorder.fleet.store import Digest, Store, StoreError
from taplog.recorder.store.blobs import BLOBS_DIR
from taplog.recorder.store.logfile import write_aside
from taplog.recorder.store.lognames import (
    COMPRESSED,
    PLAIN,
    is_compressed,
    iter_lines,
    log_exists,
    log_path,
    session_logs,
    session_name,
)
from taplog.recorder.store.zstd_stream import DamagedStream

log = logging.getLogger("taplog.shipping")

SHIPPING_DIR = "shipping"
STATE_FORMAT = 2  # 1: the per-round Parquet files and manifests of before the table
MAX_ROUND_SECONDS = 30.0
ROWS_PER_BATCH = 8192  # rows handed to the table's writer at a time
MIN_ROUND_SECONDS = 1.0  # however short the idle time: a round costs a look at every log
COUNT_SECONDS = 5.0  # how often the backlog is counted between rounds
VACUUM_SECONDS = 24 * 3600.0  # how often an instance vacuums the table


@dataclass
class ShipStats:
    """What /metrics shows of shipping (written by the shipper's thread alone)."""

    backlog_objects: int = 0
    backlog_bytes: int = 0
    uploads: int = 0  # objects written and verified
    failures: int = 0  # rounds that failed
    reachable: bool = True
    last_shipped: float = 0.0  # when a round last left nothing waiting (Unix time)


@dataclass(frozen=True, slots=True)
class _Upload:
    key: str
    path: Path
    digest: Digest


@dataclass
class _State:
    """What the store holds of this data dir, as its last commit left it."""

    location: str
    instance: str
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # size, log, day, blobs
    vacuumed: float = 0.0  # when this instance last vacuumed the table (Unix time)


@dataclass
class _Staged:
    """A round's files in the outbox: what it uploads, in order, and commits."""

    uploads: list[_Upload] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)  # the logs' copies, read by the round
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)  # the state's, by session
    days: dict[str, list[str]] = field(default_factory=dict)  # day -> the sessions it started

    def rows(self, con: Any) -> Any:
        """The round's events with their instance, day and log, as an Arrow stream; each
        row's session is its log's name, the one its copy replaces."""
        from taplog.recorder.query.log_rows import LOGGED_EVENTS

        return con.sql(
            f"SELECT s.instance, s.day, e.* EXCLUDE (source_file) REPLACE (s.session AS session), "
            f"s.shipped_log FROM ({LOGGED_EVENTS}) e JOIN shipped s USING (source_file)"
        ).to_arrow_reader(ROWS_PER_BATCH)


class Shipper:
    """The shipping rounds of one data dir to one location, as one instance."""

    def __init__(
        self, data_dir: Path, location: layout.Location, instance: str, idle_seconds: float
    ) -> None:
        self.data_dir, self.location, self.instance = data_dir, location, instance
        self.idle_seconds = idle_seconds
        self.every = max(MIN_ROUND_SECONDS, min(MAX_ROUND_SECONDS, idle_seconds))
        self.stats = ShipStats()
        self._folder = data_dir / SHIPPING_DIR
        self._store: Store | None = None
        self._state: _State | None = None
        self._stop = threading.Event()
        self._round = threading.Lock()  # one round at a time: they share the outbox
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(time.time(),), name="taplog-shipper", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """No new round; a round under way may finish within `timeout` (a later one redoes it)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def finish(self, within: float) -> list[str]:
        """The last round, on a stop: every log as it stands, idle or not, within `within`
        seconds (a round under way first finishes). What it could not ship is logged and
        returned; it ships when taplog next starts on this data dir."""
        self.stop(timeout=0)
        done = threading.Event()
        threading.Thread(
            target=self._last_round, args=(done,), name="taplog-shipper-last", daemon=True
        ).start()
        if done.wait(within) and not self.stats.backlog_objects:
            return []
        left = sorted(self._unshipped(time.time()))
        if left:
            log.error(
                "shipping to %s: %d sessions not shipped within %g s of the stop (%s); they "
                "ship when taplog next starts on %s",
                self.location,
                len(left),
                within,
                ", ".join(left[:10]) + (", …" if len(left) > 10 else ""),
                self.data_dir,
            )
        return left

    def _last_round(self, done: threading.Event) -> None:
        try:
            self._ship(time.time(), upkeep=False)  # the table's upkeep waits for a start
        finally:
            done.set()

    def _run(self, started: float) -> None:
        until: float | None = started  # the first round: all that was there at the start
        next_round = time.monotonic()
        while True:
            if time.monotonic() >= next_round:
                self._ship(until)
                until, next_round = None, time.monotonic() + self.every
            else:
                self._count_backlog()  # between rounds too: what a stop now would ship
            if self._stop.wait(min(self.every, COUNT_SECONDS)):
                return

    def _ship(self, until: float | None, upkeep: bool = True) -> None:
        """A round, its failure told once and counted."""
        try:
            self.ship_once(until, upkeep)
        except StoreError as exc:
            self.stats.failures += 1
            if self.stats.reachable:
                log.warning("shipping to %s: %s; trying again", self.location, exc)
            self.stats.reachable = False
        except Exception:
            self.stats.failures += 1
            log.exception("a shipping round failed; the session logs are untouched")

    def ship_once(self, until: float | None = None, upkeep: bool = True) -> list[str]:
        """One round: the sessions it shipped (StoreError when the store failed it). It
        takes the logs last written before `until`, by default those idle for
        `idle_seconds`; with `upkeep`, the table's upkeep follows a commit."""
        with self._round:
            when = time.time() - self.idle_seconds if until is None else until
            return self._round_of(when, upkeep)

    def _round_of(self, until: float, upkeep: bool) -> list[str]:
        due = self._unshipped(until)
        if not due:
            self._count_backlog()
            return []
        # until the round is staged (the store may not even answer), the logs and a commit
        self._count_backlog()
        store = self._open()
        if not self.stats.reachable:
            store.check()  # only a probe while the store is away
        if self._state is None:
            self._state = self._load_state()
        state = self._state
        due = {s: size for s, size in due.items() if state.sessions.get(s, {}).get("size") != size}
        if not due:
            self._count_backlog()
            return []
        import duckdb  # loaded only when a round has sessions to ship

        from taplog.recorder.query.compaction import WRITING

        with duckdb.connect(config=WRITING) as con:
            staged = self._stage(due, state, con)
            self._backlog(staged.uploads)
            if not self.stats.reachable:
                log.info("shipping to %s again", self.location)
                self.stats.reachable = True
            for upload in staged.uploads:
                store.put_once(upload.key, upload.path, upload.digest)
                self._shipped(upload)
            table.commit_round(self.location, staged.rows(con), self.instance, staged.days)
        self.stats.uploads += 1
        state.sessions.update(staged.entries)
        logs = self.data_dir / "sessions"  # a session pruned here is not shipped again
        state.sessions = {s: e for s, e in state.sessions.items() if log_exists(logs, s)}
        self._save_state(state)
        shutil.rmtree(self._folder / "outbox", ignore_errors=True)
        self._count_backlog()
        if not self.stats.backlog_objects:
            self.stats.last_shipped = time.time()
        if upkeep:
            self._maintain(state, staged.days)
        return sorted(due)

    def _maintain(self, state: _State, days: dict[str, list[str]]) -> None:
        """The table's upkeep after a commit: this instance's crowded partitions of the
        round's days compacted; once a day, the files no snapshot needs vacuumed."""
        try:
            table.compact(self.location, self.instance, days)
            if time.time() - state.vacuumed >= VACUUM_SECONDS:
                table.vacuum(self.location)
                state.vacuumed = time.time()
                self._save_state(state)
        except StoreError as exc:  # the round is shipped; the upkeep waits for the next
            log.warning("shipping to %s: %s", self.location, exc)

    def _open(self) -> Store:
        if self._store is None:
            self._store = Store(self.location)
        return self._store

    def _unshipped(self, until: float = float("inf")) -> dict[str, int]:
        """Sessions last written before `until` that are not shipped as they stand, and
        their size; before the state is known, every one."""
        found = {}
        for path in session_logs(self.data_dir / "sessions"):
            if path.is_symlink():
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:  # pruned meanwhile
                continue
            session = session_name(path)
            known = self._state.sessions.get(session, {}) if self._state else {}
            if stat.st_size and stat.st_mtime <= until and known.get("size") != stat.st_size:
                found[session] = stat.st_size
        return found

    def _count_backlog(self) -> None:
        """Every log not shipped as it stands, due or not, and a commit to name them."""
        waiting = self._unshipped()
        self.stats.backlog_objects = len(waiting) + 1 if waiting else 0
        self.stats.backlog_bytes = sum(waiting.values())

    def _backlog(self, uploads: list[_Upload]) -> None:
        self.stats.backlog_objects = len(uploads) + 1  # and the commit
        self.stats.backlog_bytes = sum(u.digest.size for u in uploads)

    def _shipped(self, upload: _Upload) -> None:
        self.stats.uploads += 1
        self.stats.backlog_objects -= 1
        self.stats.backlog_bytes -= upload.digest.size

    # -- a round's files --------------------------------------------------------------

    def _stage(self, due: dict[str, int], state: _State, con: Any) -> _Staged:
        """The round's logs copied into the outbox and read by `con`; what it uploads, in
        order (the blobs they point at, then the logs themselves), and commits."""
        from taplog.recorder.query.log_rows import LOGGED_EVENTS, read_logs

        outbox = self._folder / "outbox"
        shutil.rmtree(outbox, ignore_errors=True)
        (outbox / "logs").mkdir(parents=True, mode=0o700)
        staged = _Staged()
        logs = []
        for session, size in sorted(due.items()):
            log = log_path(self.data_dir / "sessions", session)
            copy = outbox / "logs" / log.name
            _copy_prefix(log, copy, size)
            digest = Digest.of_file(copy)
            suffix = COMPRESSED if is_compressed(log) else PLAIN
            key = layout.log_key(self.instance, session, digest.sha256, suffix)
            logs.append(_Upload(key, copy, digest))
            day = _first_day(copy)
            staged.days.setdefault(day, []).append(session)
            staged.entries[session] = {"size": size, "log": key, "day": day}
            staged.copies.append(str(copy))
        read_logs(con, staged.copies)
        con.execute(
            "CREATE TEMP TABLE shipped AS SELECT unnest(?::VARCHAR[]) AS source_file, "
            "unnest(?::VARCHAR[]) AS session, ?::VARCHAR AS instance, "
            "unnest(?::VARCHAR[]) AS day, unnest(?::VARCHAR[]) AS shipped_log",
            [
                staged.copies,
                list(staged.entries),
                self.instance,
                [e["day"] for e in staged.entries.values()],
                [e["log"] for e in staged.entries.values()],
            ],
        )
        named = con.execute(
            f"SELECT s.session, list(DISTINCT e.blob_sha256 ORDER BY e.blob_sha256) "
            f"FROM ({LOGGED_EVENTS}) e JOIN shipped s USING (source_file) "
            "WHERE e.blob_sha256 IS NOT NULL GROUP BY ALL"
        ).fetchall()
        for session, shas in named:
            staged.entries[session]["blobs"] = shas
        shipped = {sha for entry in state.sessions.values() for sha in entry.get("blobs", ())}
        for sha in sorted({sha for _, shas in named for sha in shas} - shipped):
            path = self.data_dir / BLOBS_DIR / sha[:2] / f"{sha}.json"
            if path.exists():  # a missing one is `taplog verify`'s to report
                staged.uploads.append(_Upload(layout.blob_key(sha), path, Digest.of_file(path)))
        staged.uploads += logs
        return staged

    # -- the state --------------------------------------------------------------------

    def _load_state(self) -> _State:
        """The saved state for this location and instance; else an empty one (every log
        ships again, and replaces its copy in the table)."""
        try:
            saved = orjson.loads((self._folder / "state.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            saved = {}
        if (saved.get("format"), saved.get("location"), saved.get("instance")) == (
            STATE_FORMAT,
            str(self.location),
            self.instance,
        ):
            return _State(saved["location"], self.instance, saved["sessions"], saved["vacuumed"])
        return _State(str(self.location), self.instance)

    def _save_state(self, state: _State) -> None:
        saved = {
            "format": STATE_FORMAT,
            "location": state.location,
            "instance": state.instance,
            "sessions": state.sessions,
            "vacuumed": state.vacuumed,
        }
        partial = self._folder / "state.json.partial"
        partial.unlink(missing_ok=True)
        write_aside(partial, orjson.dumps(saved), exclusive=True)
        os.replace(partial, self._folder / "state.json")


def _copy_prefix(source: Path, target: Path, size: int) -> None:
    """The first `size` bytes of a log (it may be growing again) into a private copy."""
    with open(source, "rb") as log_file, open(target, "xb") as out:
        os.fchmod(out.fileno(), 0o600)
        remaining = size
        while remaining and (chunk := log_file.read(min(remaining, 1 << 20))):
            out.write(chunk)
            remaining -= len(chunk)


def _first_day(log_copy: Path) -> str:
    """The day a session started (its first line's `ts`), or today when that is unreadable."""
    try:
        first = next(iter_lines(log_copy), b"")
        return str(orjson.loads(first)["ts"])[:10]
    except (DamagedStream, orjson.JSONDecodeError, KeyError, TypeError):
        return datetime.now(UTC).strftime("%Y-%m-%d")
