"""Compaction: idle sessions copied into Parquet segments for fast queries.

The JSONL logs stay the source of truth. Each compaction run writes the
sessions it takes into one new segment file, `compacted/segment-….parquet`,
and `compacted/manifest.json` records, per session, its segment and the size
of its log at that moment. A session is read from its segment only while its
log still has that size: one that grows again is read from its log until it
is compacted anew, and no event is ever counted twice. Segments are few and
large (queries open a handful of files, not one per session): once there are
more than `MAX_SEGMENTS`, the live rows of all of them are merged into one.

Retention (`recorder.retention`) takes pruned sessions' rows out (`drop_sessions`):
each segment that holds any is rewritten without them under a new name, the
manifest then points at it, and only then is the old one deleted. Compaction and
retention change the manifest one at a time, under `compacted/.lock` (`taplog
compact` may run beside `taplog serve`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import orjson

from taplog.recorder.query.log_rows import LOGGED_EVENTS, read_logs
from taplog.recorder.query.views import sql_list
from taplog.recorder.store.logfile import write_aside
from taplog.recorder.store.lognames import log_exists, session_logs, session_name

COMPACTED_DIR = "compacted"
MANIFEST = "manifest.json"
MAX_SEGMENTS = 16
# Rows in a row group: a query that reads `data` for a few rows (a session's first request,
# one call) decompresses the groups they are in, and a group of a long session's lines can
# hold hundreds of megabytes at DuckDB's default (122,880 rows).
ROW_GROUP = 2048
# The columns of a segment (recorder.query.views); segments of another layout are not read,
# and their sessions are compacted again. 2: `blob_sha256`, `transcript_keep`; 3: `epoch`;
# 4: `origin`, `forked_at`, `resumed_from` (so a session's summary reads no `data`).
SEGMENT_LAYOUT = 4

Manifest = dict[str, dict[str, object]]  # session -> {"size": bytes, "segment": name, "layout"}


def _read_manifest(folder: Path) -> Manifest:
    try:
        return orjson.loads((folder / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}


def _write_manifest(folder: Path, manifest: Manifest) -> None:
    partial = folder / (MANIFEST + ".partial")
    partial.unlink(missing_ok=True)  # whatever was there (a planted link): never written through
    write_aside(partial, orjson.dumps(manifest), exclusive=True)
    os.replace(partial, folder / MANIFEST)


def compacted_sessions(data_dir: Path, logs: dict[str, Path]) -> dict[str, Path]:
    """Sessions whose segment matches their log: session -> segment path."""
    folder = data_dir / COMPACTED_DIR
    found = {}
    for session, entry in _read_manifest(folder).items():
        log = logs.get(session)
        if log is None or entry.get("layout") != SEGMENT_LAYOUT:
            continue
        segment = folder / str(entry.get("segment"))
        if entry.get("size") == log.stat().st_size and segment.exists():
            found[session] = segment
    return found


def _new_segment(folder: Path) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return folder / f"segment-{stamp}-{os.urandom(3).hex()}.parquet"


# A connection that writes segments: one thread, so the rows go out in the logs' order, a
# row group at a time, each line read once (several would hold rows back to keep the order).
WRITING = {"threads": 1}


def logged_events() -> str:
    """The events of the logs `read_logs` gave the connection, as a segment holds them
    (each line as `data`), in the order the logs hold them."""
    return f"SELECT * EXCLUDE (source_file) FROM ({LOGGED_EVENTS})"


def write_parquet(con: duckdb.DuckDBPyConnection, source: str, target: Path) -> None:
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)  # DuckDB would write through a link planted there
    target_sql = sql_list([str(partial)])[1:-1]
    con.execute(f"COPY ({source}) TO {target_sql} (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP})")
    os.chmod(partial, 0o600)  # as private as the logs it copies
    os.replace(partial, target)


@contextlib.contextmanager
def _changing(folder: Path) -> Iterator[None]:
    """The manifest and segments to this process alone (waits for another's change)."""
    folder.mkdir(exist_ok=True, mode=0o700)
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def compact(data_dir: Path, idle_seconds: float = 0.0) -> list[str]:
    """Compact every session whose log changed since and is idle this long."""
    folder = data_dir / COMPACTED_DIR
    with _changing(folder):
        return _compact(data_dir, folder, idle_seconds)


def _compact(data_dir: Path, folder: Path, idle_seconds: float) -> list[str]:
    manifest = _read_manifest(folder)
    due: dict[str, tuple[Path, int]] = {}
    for log in session_logs(data_dir / "sessions"):
        stat, session = log.stat(), session_name(log)
        idle = time.time() - stat.st_mtime >= idle_seconds
        entry = manifest.get(session, {})
        if idle and (entry.get("size"), entry.get("layout")) != (stat.st_size, SEGMENT_LAYOUT):
            due[session] = (log, stat.st_size)
    if not due:
        return []
    con = duckdb.connect(config=WRITING)
    try:
        segment = _new_segment(folder)
        read_logs(con, [str(log) for log, _ in due.values()])
        write_parquet(con, logged_events(), segment)
        manifest.update(
            {
                s: {"size": size, "segment": segment.name, "layout": SEGMENT_LAYOUT}
                for s, (_, size) in due.items()
            }
        )
        if len({entry["segment"] for entry in manifest.values()}) > MAX_SEGMENTS:
            _merge(con, folder, manifest)
    finally:
        con.close()
    _write_manifest(folder, manifest)
    _drop_unused(folder, manifest)
    return sorted(due)


def _merge(con: duckdb.DuckDBPyConnection, folder: Path, manifest: Manifest) -> None:
    """Rewrite the live rows of every segment into one (older layouts' rows had no blobs)."""
    pairs = [(str(folder / str(e["segment"])), s) for s, e in manifest.items()]
    con.execute(
        "CREATE TEMP TABLE live AS SELECT unnest(?) AS filename, unnest(?) AS session",
        [[p[0] for p in pairs], [p[1] for p in pairs]],
    )
    segments = sql_list(sorted({p[0] for p in pairs}))
    merged = _new_segment(folder)
    write_parquet(
        con,
        f"SELECT * EXCLUDE (filename) FROM read_parquet({segments}, filename = true, "
        "union_by_name = true) "
        "SEMI JOIN live USING (filename, session)",
        merged,
    )
    for entry in manifest.values():
        entry.update(segment=merged.name, layout=SEGMENT_LAYOUT)


def _drop_unused(folder: Path, manifest: Manifest) -> None:
    used = {entry["segment"] for entry in manifest.values()}
    for segment in folder.glob("segment-*.parquet"):
        if segment.name not in used:
            segment.unlink(missing_ok=True)


def drop_sessions(data_dir: Path, sessions: Iterable[str]) -> int:
    """Take every row of `sessions` out of the segments (retention); how many segments
    in use were rewritten or dropped (those no entry uses go, as after compaction).
    Each is rewritten aside under a new name, the manifest is moved to it, then the
    old file goes: a view reads either, never a session twice, and never a pruned
    session's rows (its log is gone, and a session without a log is not read). The
    entries of any other session without a log go too (a pass cut short left them)."""
    folder, logs = data_dir / COMPACTED_DIR, data_dir / "sessions"
    if not folder.is_dir():
        return 0
    with _changing(folder):
        manifest = _read_manifest(folder)
        gone = sorted(set(sessions) | {s for s in manifest if not log_exists(logs, s)})
        if not gone:
            return 0
        manifest = {s: e for s, e in manifest.items() if s not in gone}
        used = sorted({str(entry["segment"]) for entry in manifest.values()})
        con = duckdb.connect()
        try:
            renamed = {name: _without(con, folder / name, gone) for name in used}
        finally:
            con.close()
        renamed = {old: new for old, new in renamed.items() if new != old}
        for session, entry in list(manifest.items()):
            if entry.get("segment") in renamed:
                if renamed[str(entry["segment"])] is None:
                    del manifest[session]  # no rows of it left: read from its log
                else:
                    entry["segment"] = renamed[str(entry["segment"])]
        _write_manifest(folder, manifest)
        _drop_unused(folder, manifest)
    return len(renamed)


def _without(con: duckdb.DuckDBPyConnection, segment: Path, gone: list[str]) -> str | None:
    """The name of `segment` without the rows of `gone`: its own when it holds none,
    a new segment's, or None when nothing is left."""
    if not segment.exists():
        return segment.name  # not read either (`compacted_sessions`)
    source = f"read_parquet({sql_list([str(segment)])})"
    found = con.execute(
        f"SELECT count(*) FILTER (WHERE list_contains(?, session)), count(*) FROM {source}",
        [gone],
    ).fetchone()
    pruned, rows = found if found else (0, 0)
    if not pruned:
        return segment.name
    if pruned == rows:
        return None
    rewritten = _new_segment(segment.parent)
    con.execute("SET VARIABLE taplog_gone = ?::VARCHAR[]", [gone])
    where = "NOT list_contains(getvariable('taplog_gone'), session)"
    write_parquet(con, f"SELECT * FROM {source} WHERE {where}", rewritten)
    return rewritten.name
