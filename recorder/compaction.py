"""Compaction: idle sessions copied into Parquet for fast queries.

The JSONL log stays the source of truth. `compacted/manifest.json` records,
per session, the size of the log when it was compacted; a session is read
from its Parquet file only while the log still has that size, so a session
that grows again is read from its log until it is compacted anew, and no
event is ever counted twice.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb
import orjson

from recorder.views import typed_events

COMPACTED_DIR = "compacted"
MANIFEST = "manifest.json"


def sql_list(paths: list[str]) -> str:
    """A SQL list literal of taplog's own file paths (never user input)."""
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def _manifest(data_dir: Path) -> dict[str, dict[str, int]]:
    try:
        return orjson.loads((data_dir / COMPACTED_DIR / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}


def compacted_sessions(data_dir: Path, logs: dict[str, Path]) -> dict[str, Path]:
    """Sessions whose Parquet file matches their log: session -> Parquet path."""
    manifest = _manifest(data_dir)
    found = {}
    for session, log in logs.items():
        parquet = data_dir / COMPACTED_DIR / f"{session}.parquet"
        entry = manifest.get(session)
        if entry and entry.get("size") == log.stat().st_size and parquet.exists():
            found[session] = parquet
    return found


def compact(data_dir: Path, idle_seconds: float = 0.0) -> list[str]:
    """Compact every session whose log changed since and is idle this long."""
    folder = data_dir / COMPACTED_DIR
    folder.mkdir(exist_ok=True, mode=0o700)
    manifest = _manifest(data_dir)
    done = []
    con = duckdb.connect()
    try:
        for log in sorted((data_dir / "sessions").glob("*.jsonl")):
            stat = log.stat()
            if time.time() - stat.st_mtime < idle_seconds:
                continue
            if manifest.get(log.stem, {}).get("size") == stat.st_size:
                continue
            target = folder / f"{log.stem}.parquet"
            partial = target.with_suffix(".parquet.partial")
            source = typed_events(
                f"read_ndjson_objects({sql_list([str(log)])}, ignore_errors = true)"
            )
            con.execute(f"COPY ({source}) TO {sql_list([str(partial)])[1:-1]} (FORMAT parquet)")
            os.replace(partial, target)
            manifest[log.stem] = {"size": stat.st_size}
            done.append(log.stem)
    finally:
        con.close()
    if done:
        partial_manifest = folder / (MANIFEST + ".partial")
        partial_manifest.write_bytes(orjson.dumps(manifest))
        os.replace(partial_manifest, folder / MANIFEST)
    return done
