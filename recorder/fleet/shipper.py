"""Shipping: an instance copies its closed sessions to the fleet's object store.

A round runs every `every` seconds on a thread of its own (never on the event loop, never
on the writer thread, so a slow or absent store costs no call anything):

1. Due: the session logs idle for `idle_seconds` whose size is not the one shipped.
2. Staged in `DATA_DIR/shipping/outbox/`: each due log's first `size` bytes (the whole
   of it that was idle), and from those copies one Parquet file per day the sessions
   started, with the columns of `events` (as compaction writes them).
3. Uploaded in this order, each written once (`If-None-Match: *`) and verified (size,
   SHA-256 or MD5, `recorder.fleet.store`) before the next: the blobs those events
   point at, the logs, the Parquet files, and last the manifest that names them all
   (`recorder.fleet.layout`). A round is shipped once its manifest is.
4. The state (`DATA_DIR/shipping/state.json`) takes the manifest; the outbox is emptied.

A round that fails leaves the state as it was; the next starts again, and what it had
uploaded is found in the store (412) and verified, never written twice. While the store
is unreachable, rounds only probe it. The backlog counts every log not shipped as it
stands, due or not, and a manifest (a staged round counts its Parquet files and blobs).

The first round runs at once and takes every log written before the shipper started,
idle or not: an instance stopped, or killed with its disk kept, ships what it left as
soon as it starts again. On a stop (`finish`) a last round ships every log as it stands,
within a deadline; what is left is logged, and ships at the next start. The session
logs are never changed or deleted: shipping copies. A manifest of this instance's
sequence that another data dir wrote stops shipping (two data dirs under one instance
name would hide each other's sessions), loudly.
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

from taplog.recorder.fleet import layout
from taplog.recorder.fleet.store import Conflict, Digest, Store, StoreError
from taplog.recorder.store.blobs import BLOBS_DIR
from taplog.recorder.store.logfile import write_aside
from taplog.recorder.store.lognames import (
    COMPRESSED,
    PLAIN,
    is_compressed,
    iter_lines,
    log_path,
    session_logs,
    session_name,
)
from taplog.recorder.store.zstd_stream import DamagedStream

log = logging.getLogger("taplog.shipping")

SHIPPING_DIR = "shipping"
STATE_FORMAT = 1
MAX_ROUND_SECONDS = 30.0
MIN_ROUND_SECONDS = 1.0  # however short the idle time: a round costs a look at every log
COUNT_SECONDS = 5.0  # how often the backlog is counted between rounds


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
    """What the store holds of this data dir, as its last verified manifest says."""

    location: str
    instance: str
    owner: str  # this data dir's own id, in each of its manifests
    seq: int = 0
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)
    blobs: set[str] = field(default_factory=set)


class StopShipping(Exception):
    """Shipping cannot go on without someone fixing the configuration."""


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
        self._stopped = False  # no round after `StopShipping`
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
            self._ship(time.time())
        finally:
            done.set()

    def _run(self, started: float) -> None:
        until: float | None = started  # the first round: all that was there at the start
        next_round = time.monotonic()
        while not self._stopped:
            if time.monotonic() >= next_round:
                self._ship(until)
                until, next_round = None, time.monotonic() + self.every
            else:
                self._count_backlog()  # between rounds too: what a stop now would ship
            if self._stop.wait(min(self.every, COUNT_SECONDS)):
                return

    def _ship(self, until: float | None) -> None:
        """A round, its failure told once and counted."""
        if self._stopped:
            return
        try:
            self.ship_once(until)
        except StopShipping as exc:
            self._stopped = True
            log.error("shipping to %s stopped: %s", self.location, exc)
        except StoreError as exc:
            self.stats.failures += 1
            if self.stats.reachable:
                log.warning("shipping to %s: %s; trying again", self.location, exc)
            self.stats.reachable = False
        except Exception:
            self.stats.failures += 1
            log.exception("a shipping round failed; the session logs are untouched")

    def ship_once(self, until: float | None = None) -> list[str]:
        """One round: the sessions it shipped (StoreError when the store failed it). It
        takes the logs last written before `until`, by default those idle for
        `idle_seconds`."""
        with self._round:
            return self._round_of(time.time() - self.idle_seconds if until is None else until)

    def _round_of(self, until: float) -> list[str]:
        due = self._unshipped(until)
        if not due:
            self._count_backlog()
            return []
        # until the round is staged (the store may not even answer), the logs and a manifest
        self._count_backlog()
        store = self._open()
        if not self.stats.reachable:
            store.check()  # only a probe while the store is away
        if self._state is None:
            self._state = self._load_state(store)
        state = self._state
        due = {s: size for s, size in due.items() if state.sessions.get(s, {}).get("size") != size}
        if not due:
            self._count_backlog()
            return []
        uploads, entries = self._stage(due, state)
        self._backlog(uploads)
        if not self.stats.reachable:
            log.info("shipping to %s again", self.location)
            self.stats.reachable = True
        for upload in uploads:
            store.put_once(upload.key, upload.path, upload.digest)
            self._shipped(upload)
        self._commit(store, state, entries)
        shutil.rmtree(self._folder / "outbox", ignore_errors=True)
        self._count_backlog()
        if not self.stats.backlog_objects:
            self.stats.last_shipped = time.time()
        return sorted(due)

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
        """Every log not shipped as it stands, due or not, and a manifest to name them."""
        waiting = self._unshipped()
        self.stats.backlog_objects = len(waiting) + 1 if waiting else 0
        self.stats.backlog_bytes = sum(waiting.values())

    def _backlog(self, uploads: list[_Upload]) -> None:
        self.stats.backlog_objects = len(uploads) + 1  # and the manifest
        self.stats.backlog_bytes = sum(u.digest.size for u in uploads)

    def _shipped(self, upload: _Upload) -> None:
        self.stats.uploads += 1
        self.stats.backlog_objects -= 1
        self.stats.backlog_bytes -= upload.digest.size

    # -- a round's files --------------------------------------------------------------

    def _stage(
        self, due: dict[str, int], state: _State
    ) -> tuple[list[_Upload], dict[str, dict[str, Any]]]:
        """The round's files in the outbox, in upload order, and its manifest entries."""
        outbox = self._folder / "outbox"
        shutil.rmtree(outbox, ignore_errors=True)
        (outbox / "logs").mkdir(parents=True, mode=0o700)
        logs, days, entries = [], {}, {}
        for session, size in sorted(due.items()):
            log = log_path(self.data_dir / "sessions", session)
            copy = outbox / "logs" / log.name
            _copy_prefix(log, copy, size)
            digest = Digest.of_file(copy)
            suffix = COMPRESSED if is_compressed(log) else PLAIN
            key = layout.log_key(self.instance, session, digest.sha256, suffix)
            logs.append(_Upload(key, copy, digest))
            days.setdefault(_first_day(copy), []).append(copy)
            entries[session] = {"size": size, "log": key}
        events, blobs = _parquet(outbox, days, self.instance, entries)
        uploads = []
        for sha in sorted(blobs - state.blobs):
            path = self.data_dir / BLOBS_DIR / sha[:2] / f"{sha}.json"
            if path.exists():  # a missing one is `taplog verify`'s to report
                uploads.append(_Upload(layout.blob_key(sha), path, Digest.of_file(path)))
        return uploads + logs + events, entries

    def _commit(self, store: Store, state: _State, entries: dict[str, dict[str, Any]]) -> None:
        """Upload the manifest naming the round's objects; then the state takes it."""
        sessions = {**state.sessions, **entries}
        seq = state.seq + 1
        while True:
            manifest = {
                "format": layout.MANIFEST_FORMAT,
                "instance": self.instance,
                "owner": state.owner,
                "seq": seq,
                "written": datetime.now(UTC).isoformat(),
                "sessions": sessions,
            }
            path = self._folder / "outbox" / "manifest.json"
            path.write_bytes(orjson.dumps(manifest))
            key = layout.manifest_key(self.instance, seq)
            try:
                store.put_once(key, path, Digest.of_file(path))
                break
            except Conflict:
                seq = self._taken(store, key, state, seq)
        self.stats.uploads += 1
        blobs = {sha for entry in entries.values() for sha in entry.get("blobs", [])}
        state.seq, state.sessions, state.blobs = seq, sessions, state.blobs | blobs
        self._save_state(state)
        if seq > 2:  # the one before stays for readers that listed it a moment ago
            try:
                store.delete(layout.manifest_key(self.instance, seq - 2))
            except StoreError as exc:
                log.info("an old manifest was left in the store: %s", exc)

    def _taken(self, store: Store, key: str, state: _State, seq: int) -> int:
        """The sequence number after `seq`, whose manifest exists: this data dir's own
        (written by a round that stopped before its state was saved), or StopShipping."""
        existing = orjson.loads(store.read(key))
        if existing.get("owner") != state.owner:
            raise StopShipping(
                f"another data dir ships as instance {self.instance!r} ({key} is not this "
                "one's); give each data dir its own --instance"
            )
        return seq + 1

    # -- the state --------------------------------------------------------------------

    def _load_state(self, store: Store) -> _State:
        """The saved state for this location and instance, else the store's newest
        manifest of the instance (a data dir new to it continues what was shipped)."""
        try:
            saved = orjson.loads((self._folder / "state.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            saved = {}
        owner = saved.get("owner") or os.urandom(8).hex()
        if (saved.get("format"), saved.get("location"), saved.get("instance")) == (
            STATE_FORMAT,
            str(self.location),
            self.instance,
        ):
            return _State(
                saved["location"],
                self.instance,
                owner,
                saved["seq"],
                saved["sessions"],
                set(saved["blobs"]),
            )
        state = _State(str(self.location), self.instance, owner)
        under = layout.manifest_key(self.instance, 0).rpartition("/")[0] + "/"
        keys = [k for k in store.keys(under) if layout.MANIFEST_KEY.fullmatch(k)]
        if keys:
            newest = orjson.loads(store.read(max(keys)))
            state.seq, state.sessions = newest["seq"], newest["sessions"]
        return state

    def _save_state(self, state: _State) -> None:
        saved = {
            "format": STATE_FORMAT,
            "location": state.location,
            "instance": state.instance,
            "owner": state.owner,
            "seq": state.seq,
            "sessions": state.sessions,
            "blobs": sorted(state.blobs),
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


def _parquet(
    outbox: Path, days: dict[str, list[Path]], instance: str, entries: dict[str, dict[str, Any]]
) -> tuple[list[_Upload], set[str]]:
    """One Parquet file of the typed events per day; each session's entry names its file
    and its blobs. The blobs of all of them."""
    import duckdb  # loaded only when a round has sessions to ship

    from taplog.recorder.query.compaction import WRITING, logged_events, write_parquet
    from taplog.recorder.query.log_rows import read_logs

    uploads, blobs = [], set()
    for day, copies in sorted(days.items()):
        target = outbox / f"events-{day}.parquet"
        with duckdb.connect(config=WRITING) as con:  # by session, then seq: the logs' order
            read_logs(con, [str(c) for c in copies])
            write_parquet(con, logged_events(), target)
            refs = con.execute(
                "SELECT session, list(DISTINCT blob_sha256 ORDER BY blob_sha256) "
                "FROM read_parquet(?) WHERE blob_sha256 IS NOT NULL GROUP BY session",
                [str(target)],
            ).fetchall()
        digest = Digest.of_file(target)
        key = layout.events_key(day, instance, digest.sha256)
        uploads.append(_Upload(key, target, digest))
        for copy in copies:
            entries[session_name(copy)]["events"] = key
        for session, shas in refs:
            if session in entries:  # an event's session is its log's name
                entries[session]["blobs"] = shas
            blobs.update(shas)
    return uploads, blobs
