"""SQL over the session logs: DuckDB views that hide the file layout.

    events     every event: envelope, typed columns for what queries filter and
               sum on, and `data`, the whole event as JSON
    llm_calls  one row per client call (exchange)
    tool_calls one row per tool call (session, call_id)
    sessions   one row per session

`events` reads each session from one place: its compacted Parquet file when
that file matches the log (same size), else the JSONL itself, which stays the
source of truth; a row is never counted twice. A log's typed columns are read
once a connection (`recorder.query.log_rows`), its lines only for the rows a query
reads `data` from. A torn last line of a file being written is skipped, and so is
what follows damage in a compressed log. Bodies stored beside the log
(`recorder.store.blobs`) are spliced back into `data` from `blobs/`, and a request stored as what it
adds to earlier ones is put back whole (`recorder.query.rebuilt_requests`), so
`data -> 'body'` and the views' `request_body` / `response_body` read as if
they were inline; a missing blob makes the query fail with a message that names it.

The SQL surface only reads (`recorder.query.read_only`): only queries run, and DuckDB
may open the files the views read and the one file a result is written to,
nothing else. Values go in as parameters, never pasted.
"""

from __future__ import annotations

import glob
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from taplog.recorder.query.compaction import compacted_sessions
from taplog.recorder.query.log_rows import LOGGED_EVENTS, LogLines, read_logs
from taplog.recorder.query.read_only import QueryError, check_read_only, lock_down
from taplog.recorder.query.rebuilt_requests import FUNCTION, Requests, known_blobs
from taplog.recorder.query.views import EVENT_COLUMNS, VIEWS, sql_list, typed_log_rows
from taplog.recorder.store.blobs import BLOBS_DIR
from taplog.recorder.store.lognames import session_logs, session_name

log = logging.getLogger("taplog.query")


@dataclass(frozen=True, slots=True)
class Sources:
    """Where each session is read from: its log, or its compacted segment."""

    jsonl: list[str]
    compacted: dict[str, str]  # session -> segment path
    blobs: list[str]  # every blob file
    links: list[str]  # session logs that are symbolic links: never read


def sources(data_dir: Path, only: str | None = None) -> Sources:
    """Where each session is read from; just session `only` when given."""
    found = session_logs(data_dir / "sessions", "*" if only is None else glob.escape(only))
    logs = {session_name(p): p for p in found if not p.is_symlink()}
    compacted = compacted_sessions(data_dir, logs)
    blobs = data_dir / BLOBS_DIR
    return Sources(
        jsonl=[str(p) for s, p in sorted(logs.items()) if s not in compacted],
        compacted={s: str(p) for s, p in compacted.items()},
        blobs=sorted(str(p) for p in blobs.glob("*/*.json")),
        links=sorted(str(p) for p in found if p.is_symlink()),
    )


_MISSING_BLOB = (
    "error('blob ' || e.blob_sha256 || ' of session ' || e.session || ' seq ' || e.seq || "
    "' is missing from blobs/; run taplog verify')"
)


# A request stored as what it adds to earlier ones (recorder.store.deltas) is put back
# whole by Python (recorder.query.rebuilt_requests), only for rows whose `data` a query reads.
_REBUILT = (
    "SELECT * EXCLUDE (source_file) REPLACE (CASE WHEN transcript_keep IS NULL THEN data "
    f"ELSE {FUNCTION}(source_file, session, seq, data::VARCHAR) END AS data) "
    "FROM ({rows})"
)


def events_sql(found: Sources) -> str:
    """Every event once, as recorded: blobs and resent history put back into `data`.

    Compacted rows that need neither stay a plain scan, so filters (a session, a
    type) still reach the Parquet reader; only the others go through the blob join
    and the rebuild. The logs' rows are the table `log_rows` (`connect` makes it), their
    `data` each line as stored, read only for the rows a query reads it from.
    """
    blobs = _blob_files(found)
    parts = []
    if found.compacted:
        columns = EVENT_COLUMNS.replace("data", "data::JSON AS data") + ", filename AS source_file"
        segments = sql_list(sorted(set(found.compacted.values())))
        rows = (
            # by name: a fleet's older files lack the newer typed columns (read as NULL)
            f"SELECT {columns} FROM read_parquet({segments}, filename = true, "
            "union_by_name = true) "
            "SEMI JOIN compacted_sessions USING (filename, session)"
        )
        # each part filtered by a plain conjunction, which the Parquet reader takes
        parts.append(
            "SELECT * EXCLUDE (source_file) "
            f"FROM ({rows}) WHERE blob_sha256 IS NULL AND transcript_keep IS NULL"
        )
        others = (
            f"SELECT * FROM ({rows}) WHERE blob_sha256 IS NOT NULL UNION ALL "
            f"SELECT * FROM ({rows}) WHERE blob_sha256 IS NULL AND transcript_keep IS NOT NULL"
        )
        parts.append(_as_recorded(others, blobs))
    if found.jsonl:
        parts.append(_as_recorded(LOGGED_EVENTS, blobs))
    if not parts:  # an empty data dir still answers queries, with no rows
        empty = typed_log_rows("(SELECT NULL::JSON AS json WHERE false)")
        parts.append(f"SELECT * EXCLUDE (source_file), NULL::JSON AS data FROM ({empty})")
    return " UNION ALL ".join(parts)


def _as_recorded(rows: str, blobs: str | None) -> str:
    """`rows` (with their `source_file`) with their blobs' fields and their requests'
    whole bodies put back."""
    return _REBUILT.format(rows=rows if blobs is None else _with_blobs(rows, blobs))


def _blob_files(found: Sources) -> str | None:
    """The blobs as (sha256, fields as JSON text), or None when there are none.

    Their paths are in the variable `taplog_blobs`, not pasted into each view
    that reads them: there may be thousands.
    """
    if not found.blobs:
        return None
    return (
        "(SELECT parse_filename(filename, true) AS sha256, content AS fields "
        "FROM read_text(getvariable('taplog_blobs')))"
    )


def _with_blobs(rows: str, blobs: str) -> str:
    """`rows` with each blob's fields spliced into `data` as text: `{…}` + `{"body":…}`
    (a request to rebuild has its blob read by the rebuild)."""
    return (
        "SELECT e.* REPLACE (CASE WHEN e.blob_sha256 IS NULL OR e.transcript_keep IS NOT NULL "
        "THEN e.data "
        f"WHEN b.fields IS NULL THEN {_MISSING_BLOB} "
        "ELSE (left(rtrim(e.data::VARCHAR), -1) || ',' || substr(b.fields, 2))::JSON END AS data) "
        f"FROM ({rows}) e LEFT JOIN {blobs} b ON b.sha256 = e.blob_sha256"
    )


def connect(
    data_dir: Path,
    output: Path | None = None,
    only: str | None = None,
    warn: Callable[[str], None] = log.warning,
) -> duckdb.DuckDBPyConnection:
    """A locked-down connection with the views; `output` is a file taplog may write to.

    The logs' typed columns are read once, into `log_rows`, for all the queries the
    connection runs (`show` and the UI's pages run several; `sessions` reads `events` a
    dozen times); their `data` is read from the files only where a query needs it. With
    `only`, the views hold that one session alone: a query about it reads its own log,
    not the whole history. A session log that is a symbolic link is left unread (it
    could point anywhere) and named through `warn`.
    """
    data_dir = data_dir.resolve()
    found = sources(data_dir, only)
    for link in found.links:
        warn(f"taplog: {link} is a symbolic link; it is not read")
    readable = [*set(found.compacted.values()), *found.blobs]  # taplog reads the logs itself
    # One session's rows are few: one thread answers as fast, with one set of DuckDB's
    # buffers instead of one a core.
    threads = 1 if only is not None else None
    con = locked(readable, output, found.blobs, list(found.compacted.items()), threads, found.jsonl)
    con.execute("CREATE VIEW events AS " + events_sql(found))
    for name, sql in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    return con


def locked(
    readable: list[str],
    output: Path | None,
    blobs: list[str],
    segments: list[tuple[str, str]],
    threads: int | None = None,
    logs: list[str] | None = None,
    requests: Callable[[LogLines], Requests] | None = None,
) -> duckdb.DuckDBPyConnection:
    """A connection that may open only `readable` and `output`, told where the blobs are
    and which (session, segment file) pairs `events_sql` reads, with the typed rows of
    the session `logs` in `log_rows`; its views are the caller's. `threads` bounds
    DuckDB's (default: one per core). `requests` makes the rebuild function from the
    logs' lines (by default over the `blobs` files)."""
    config: dict[str, Any] = {
        "autoinstall_known_extensions": False,
        "autoload_known_extensions": False,
    }
    if threads is not None:
        config["threads"] = threads
    con = duckdb.connect(config=config)
    # A segment's footer parsed once, not again for each of the dozen places the views read
    # `events` (each costs megabytes and a tenth of a second); the bytes read are not kept
    # (`data` is read for a few rows at a time).
    con.execute("SET enable_progress_bar = false")  # it would print into a JSON or CSV result
    con.execute("SET parquet_metadata_cache = true")
    con.execute("SET enable_external_file_cache = false")
    lines = read_logs(con, logs or [])
    (requests(lines) if requests else Requests(known_blobs(blobs), lines)).register(con)
    lock_down(con, readable, output.resolve() if output else None)
    con.execute("SET VARIABLE taplog_blobs = ?::VARCHAR[]", [blobs])  # for _blob_files
    con.execute(
        "CREATE TEMP TABLE compacted_sessions AS "
        "SELECT unnest(?::VARCHAR[]) AS session, unnest(?::VARCHAR[]) AS filename",
        [[session for session, _ in segments], [path for _, path in segments]],
    )
    return con


def query(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> duckdb.DuckDBPyRelation:
    """Run one read-only query; its result as a relation."""
    check_read_only(sql)
    try:
        return con.sql(sql, params=params)
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip()) from None
