"""Retention: whole sessions whose last event is older than an age are removed.

A session's age is that of its last event: the `ts` of its log's last whole line
(a torn tail is ignored; a log with no whole line has no age and is kept). A
session that goes takes with it, in this order:

1. its log and the rows kept beside it (`recorder.store.rows`), deleted under the
   writer's turn (`Recorder.held`): everything queued is written first, and a
   session with records queued or lines unwritten, or whose log changed since it
   was looked at, is kept. A call that comes after the pass starts the session's
   log anew.
2. the blobs that no remaining log points at (nor any file kept in `quarantine/`;
   compacted rows are copies of log lines), decided under the same turn, so no
   line written meanwhile can point at one; a blob written (or found again by
   its hash) since the pass started is kept whatever.
3. its `quarantine/` files (torn tails, damaged or suspect copies: pieces of the
   same content, which retention exists to remove).
4. its rows in `compacted/` (`recorder.query.compaction.drop_sessions`).

Each pass appends a line per session that went to `DATA_DIR/pruned.jsonl`
(append-only, synced). In a data dir that ships to a fleet (`shipping/state.json`),
a session whose log is not shipped as it is now is kept until it is; nothing in
the bucket is deleted (buckets have lifecycle rules of their own).

`taplog prune` runs a pass alone (it takes the data dir's lock, so it refuses
beside `taplog serve`); `taplog serve --retention-days N` runs one at start and
then hourly, on a thread of its own where the recorder runs (`RetentionTimer`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import orjson

from taplog.recorder.store.blobs import BLOBS_DIR, blob_path
from taplog.recorder.store.lock import DataDirLock
from taplog.recorder.store.lognames import (
    is_compressed,
    iter_lines,
    log_path,
    session_logs,
    session_name,
)
from taplog.recorder.store.rows import rows_path
from taplog.recorder.store.zstd_stream import DamagedStream, Decoder

log = logging.getLogger("taplog.retention")

RECORD = "pruned.jsonl"
UNITS = {"d": "days", "h": "hours", "m": "minutes"}
AGE = re.compile(r"(0|[1-9][0-9]{0,5})([dhm])")  # 0d: every session, to its last event
EVERY_SECONDS = 3600.0  # between two passes of `taplog serve`
BLOB_REF = re.compile(rb'"blob":\{"sha256":"([0-9a-f]{64})"')
OVERLAP = 128  # bytes read again between chunks: a reference never straddles unseen
CHUNK = 1 << 20
FRESH_NS = 2_000_000_000  # file times lag the clock: a blob this near the start is kept
QUARANTINED = re.compile(r"(.+)\.\d{8}T\d{12}Z\..+")  # `logfile.quarantine_name`


class BadAge(ValueError):
    """An age not written as a number and a unit."""


def parse_age(text: str) -> timedelta:
    """`30d`, `12h` or `90m` as a duration; anything else is refused, saying why."""
    found = AGE.fullmatch(text.strip())
    if found is None:
        raise BadAge(
            f"{text!r} is not an age: write a whole number and a unit, "
            "d (days), h (hours) or m (minutes), as in 30d, 12h or 90m"
        )
    return timedelta(**{UNITS[found[2]]: int(found[1])})


@dataclass
class Pruned:
    """A session that goes (or would, in a dry run)."""

    session: str
    last_event: str  # its last whole line's ts
    lines: int
    bytes: int
    blobs: set[str] = field(default_factory=set)  # what its lines point at
    blobs_removed: int = 0
    quarantine_removed: int = 0

    def record(self, at: str, by: str) -> dict[str, Any]:
        """Its line in pruned.jsonl."""
        return {
            "session": self.session,
            "last_event": self.last_event,
            "lines": self.lines,
            "bytes": self.bytes,
            "blobs_removed": self.blobs_removed,
            "quarantine_removed": self.quarantine_removed,
            "pruned_at": at,
            "by": by,
        }


class Writer(Protocol):
    """What a pass needs of whoever writes the logs (`Recorder`, or nobody)."""

    def held(self) -> contextlib.AbstractContextManager[None]: ...

    def busy(self, session: str) -> bool: ...

    def forget(self, session: str) -> None: ...


class _Alone:
    """No writer: `taplog prune` holds the data dir's lock."""

    def held(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def busy(self, session: str) -> bool:
        return False

    def forget(self, session: str) -> None:
        pass


def prune(
    data_dir: Path,
    older_than: timedelta,
    by: str = "prune",
    dry_run: bool = False,
    writer: Writer | None = None,
) -> list[Pruned]:
    """Remove the sessions whose last event is older than `older_than`; what went.

    Without `writer` it takes the data dir's lock (DataDirBusy beside `taplog serve`),
    unless `dry_run`, which only reads and removes nothing.
    """
    if writer is not None or dry_run:
        return _pass(data_dir, older_than, by, dry_run, writer or _Alone())
    lock = DataDirLock(data_dir)
    lock.acquire()
    try:
        return _pass(data_dir, older_than, by, dry_run, _Alone())
    finally:
        lock.release()


def _pass(
    data_dir: Path, older_than: timedelta, by: str, dry_run: bool, writer: Writer
) -> list[Pruned]:
    started = time.time_ns()
    logs = data_dir / "sessions"
    old = _old_sessions(logs, datetime.now(UTC) - older_than, _shipped(data_dir))
    if not old:
        return []
    kept, seen = _references(data_dir, skip={p.session for p in old})
    if dry_run:
        _count_blobs(old, kept)
        return old
    gone = []
    with writer.held():
        for pruned in old:
            path = log_path(logs, pruned.session)
            if writer.busy(pruned.session) or _size(path) != pruned.bytes:
                continue  # in use: it got a call since it was looked at
            writer.forget(pruned.session)
            path.unlink(missing_ok=True)
            rows_path(path).unlink(missing_ok=True)
            gone.append(pruned)
        more, _ = _references(data_dir, skip={p.session for p in gone}, since=seen)
        _remove_blobs(data_dir / BLOBS_DIR, gone, kept | more, started)
    _remove_quarantined(data_dir / "quarantine", gone)
    _write_record(data_dir / RECORD, gone, by)
    if gone:
        from taplog.recorder.query.compaction import drop_sessions  # DuckDB: only now

        drop_sessions(data_dir, [p.session for p in gone])
    return gone


def last_event(path: Path) -> str | None:
    """The `ts` of the log's last whole line (a torn tail ignored), or None."""
    if is_compressed(path):
        return _ts(_last_compressed_line(path))
    with open(path, "rb") as log_file:
        end = log_file.seek(0, os.SEEK_END)
        tail = b""
        while end > 0 and tail.count(b"\n") < 2:  # two: the last whole line is between
            start = max(0, end - CHUNK)
            log_file.seek(start)
            tail = log_file.read(end - start) + tail
            end = start
    whole = tail[: tail.rfind(b"\n") + 1]  # what follows the last newline is torn
    return _ts(whole[whole.rfind(b"\n", 0, len(whole) - 1) + 1 :])


def _last_compressed_line(path: Path) -> bytes:
    """A compressed log's last whole line: its stream is read from the start (there is no
    reading it from the end), up to any block that does not decode."""
    last = b""
    with contextlib.suppress(DamagedStream):
        for line in iter_lines(path):
            if line.endswith(b"\n"):
                last = line
    return last


def _ts(line: bytes) -> str | None:
    try:
        ts = orjson.loads(line).get("ts")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return ts if isinstance(ts, str) else None


def _old_sessions(logs: Path, cutoff: datetime, shipped: dict[str, int] | None) -> list[Pruned]:
    """The sessions whose last event is before `cutoff`, each read once (lines, blobs)."""
    old = []
    for path in session_logs(logs):
        if path.is_symlink() or path.stat().st_mtime >= cutoff.timestamp():
            continue  # written since the cutoff: so was its last event (not read, nor decoded)
        ts = last_event(path)
        when = None if ts is None else _parsed(ts)
        if ts is None or when is None or when >= cutoff:
            continue
        size = _size(path)
        session = session_name(path)
        if shipped is not None and shipped.get(session) != size:
            continue  # a fleet's: kept until shipped as it is
        refs, lines = set(), 0
        for chunk in _chunks(path, 0):
            refs.update(_refs(chunk))
            lines += chunk.count(b"\n")
        old.append(Pruned(session, ts, lines, size, refs))
    return old


def _parsed(ts: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(ts)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _shipped(data_dir: Path) -> dict[str, int] | None:
    """Session -> size shipped, for a data dir that ships (else None)."""
    try:
        state = orjson.loads((data_dir / "shipping" / "state.json").read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError):
        return {}  # unreadable: nothing counts as shipped
    return {s: e.get("size") for s, e in state.get("sessions", {}).items()}


def _references(
    data_dir: Path, skip: set[str], since: dict[Path, int] | None = None
) -> tuple[set[str], dict[Path, int]]:
    """The blobs the logs (but `skip`'s) and the quarantined files point at, and how far
    each file was read; with `since`, only what each file gained after it."""
    found: set[str] = set()
    seen = {}
    files = [p for p in session_logs(data_dir / "sessions") if session_name(p) not in skip]
    files += [p for p in (data_dir / "quarantine").glob("*") if _owner(p.name) not in skip]
    for path in files:
        if path.is_symlink():
            continue  # read nowhere else either
        start = 0 if since is None else max(0, since.get(path, 0) - OVERLAP)
        with contextlib.suppress(FileNotFoundError):  # a file moved meanwhile: read anew
            for chunk in _chunks(path, start):
                found.update(_refs(chunk))
            seen[path] = _size(path)
    return found, seen


def _chunks(path: Path, start: int) -> Iterator[bytes]:
    """The file's lines from byte `start` (a compressed file's from its start, decoded up
    to any block that does not decode), in chunks that overlap by OVERLAP bytes."""
    decoder = Decoder() if is_compressed(path) else None
    with open(path, "rb") as source:
        if decoder is None:
            source.seek(start)
        carry = b""
        while block := source.read(CHUNK):
            if decoder is not None:
                try:
                    block = decoder.feed(block)
                except DamagedStream:
                    return  # what follows cannot be read, by anyone
            yield carry + block
            carry = block[-OVERLAP:]


def _refs(chunk: bytes) -> set[str]:
    return {found.decode() for found in BLOB_REF.findall(chunk)}


def _owner(quarantined: str) -> str | None:
    """The session a file in quarantine/ was set aside from."""
    found = QUARANTINED.fullmatch(quarantined)
    return None if found is None else found[1]


def _count_blobs(gone: list[Pruned], kept: set[str]) -> list[tuple[Pruned, str]]:
    """Each blob only `gone` points at, counted for the first session that does."""
    claimed, going = set(kept), []
    for pruned in gone:
        for sha in sorted(pruned.blobs - claimed):
            claimed.add(sha)
            going.append((pruned, sha))
            pruned.blobs_removed += 1
    return going


def _remove_blobs(folder: Path, gone: list[Pruned], kept: set[str], started: int) -> None:
    for pruned, sha in _count_blobs(gone, kept):
        path = blob_path(folder, sha)
        try:
            if path.stat().st_mtime_ns >= started - FRESH_NS:
                pruned.blobs_removed -= 1  # written or found again during the pass
                continue
            path.unlink()
        except FileNotFoundError:
            pruned.blobs_removed -= 1


def _remove_quarantined(folder: Path, gone: list[Pruned]) -> None:
    if not gone or not folder.is_dir():
        return
    by_session = {pruned.session: pruned for pruned in gone}
    for path in folder.iterdir():
        pruned = by_session.get(_owner(path.name) or "")
        if pruned is not None:
            path.unlink(missing_ok=True)
            pruned.quarantine_removed += 1


def _write_record(path: Path, gone: list[Pruned], by: str) -> None:
    if not gone:
        return
    at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lines = b"".join(orjson.dumps(p.record(at, by)) + b"\n" for p in gone)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, lines)
        os.fsync(fd)
    finally:
        os.close(fd)


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def start_retention(data_dir: Path, days: int, writer: Writer) -> RetentionTimer | None:
    """`--retention-days`: a pass now, then hourly; None when sessions are kept for ever."""
    return RetentionTimer(data_dir, days, writer).start() if days else None


class RetentionTimer:
    """`taplog serve --retention-days N`: a pass at start, then every EVERY_SECONDS, on a
    thread of its own (off the request path; the writer is held only to delete)."""

    def __init__(self, data_dir: Path, days: int, writer: Writer) -> None:
        self.data_dir, self.age, self.writer = data_dir, timedelta(days=days), writer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="taplog-retention", daemon=True)

    def start(self) -> RetentionTimer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.run_once()
            self._stop.wait(EVERY_SECONDS)

    def run_once(self) -> list[Pruned]:
        """One pass; a failure is logged and leaves what it had not removed."""
        try:
            gone = prune(self.data_dir, self.age, by="serve", writer=self.writer)
        except Exception:
            log.exception("retention: a pass failed; it runs again in an hour")
            return []
        for pruned in gone:
            log.info(
                "retention: pruned session %s (last event %s)", pruned.session, pruned.last_event
            )
        return gone
