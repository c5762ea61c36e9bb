"""SQL over the session logs: DuckDB views that hide the file layout.

    events     every event: envelope, typed columns for what queries filter and
               sum on, and `data`, the whole event as JSON
    llm_calls  one row per client call (exchange)
    tool_calls one row per tool call (session, call_id)
    sessions   one row per session

`events` reads each session from one place: its compacted Parquet file when
that file matches the log (same size), else the JSONL itself, which stays the
source of truth; a row is never counted twice. A torn last line of a file
being written is skipped.

The SQL surface is read-only and cannot leave the data dir: only SELECT,
DESCRIBE, SHOW, SUMMARIZE and EXPLAIN statements run; DuckDB's file access is
limited to the data dir, extensions cannot load, and the configuration is
locked before the user's SQL runs. Values go in as parameters, never pasted.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from recorder.compaction import COMPACTED_DIR, compacted_sessions, sql_list
from recorder.views import EVENT_COLUMNS, VIEWS, typed_events

ALLOWED_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


class QueryError(ValueError):
    """The SQL was refused or failed; the message says why."""


@dataclass(frozen=True, slots=True)
class Sources:
    """Where each session is read from: its log, or its compacted segment."""

    jsonl: list[str]
    compacted: dict[str, str]  # session -> segment path


def sources(data_dir: Path, only: str | None = None) -> Sources:
    """Where each session is read from; just session `only` when given."""
    pattern = "*.jsonl" if only is None else f"{glob.escape(only)}.jsonl"
    logs = {p.stem: p for p in (data_dir / "sessions").glob(pattern)}
    compacted = compacted_sessions(data_dir, logs)
    return Sources(
        jsonl=[str(p) for s, p in sorted(logs.items()) if s not in compacted],
        compacted={s: str(p) for s, p in compacted.items()},
    )


def _events_sql(found: Sources) -> str:
    parts = []
    if found.compacted:
        columns = EVENT_COLUMNS.replace("data", "data::JSON AS data")
        segments = sql_list(sorted(set(found.compacted.values())))
        parts.append(
            f"SELECT {columns} FROM read_parquet({segments}, filename = true) "
            "SEMI JOIN compacted_sessions USING (filename, session)"
        )
    if found.jsonl:
        parts.append(
            typed_events(f"read_ndjson_objects({sql_list(found.jsonl)}, ignore_errors = true)")
        )
    if not parts:  # an empty data dir still answers queries, with no rows
        parts.append(typed_events("(SELECT NULL::JSON AS json WHERE false)"))
    return " UNION ALL ".join(parts)


def connect(
    data_dir: Path, writable: tuple[Path, ...] = (), only: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A locked-down connection with the views; `writable` files may be written by taplog.

    With `only`, the views hold that one session alone: a query about it reads its
    own log, not the whole history.
    """
    data_dir = data_dir.resolve()
    con = duckdb.connect(
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False}
    )
    found = sources(data_dir, only)
    con.execute(
        "CREATE TEMP TABLE compacted_sessions AS "
        "SELECT unnest(?::VARCHAR[]) AS session, unnest(?::VARCHAR[]) AS filename",
        [list(found.compacted), list(found.compacted.values())],
    )
    con.execute("CREATE VIEW events AS " + _events_sql(found))
    for name, sql in VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    readable = [f"{data_dir / 'sessions'}/", f"{data_dir / COMPACTED_DIR}/"]
    con.execute("SET allowed_directories = ?", [readable])
    con.execute("SET allowed_paths = ?", [[str(p.resolve()) for p in writable]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


def check_read_only(sql: str) -> None:
    """Refuse anything but one query statement, before DuckDB runs any of it."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip()) from None
    if len(statements) != 1:
        raise QueryError(f"give exactly one SQL statement (got {len(statements)})")
    if statements[0].type not in ALLOWED_STATEMENTS:
        raise QueryError(
            "only queries run here (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN); "
            f"refused a {statements[0].type.name} statement"
        )


def query(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> duckdb.DuckDBPyRelation:
    """Run one read-only query; its result as a relation."""
    check_read_only(sql)
    try:
        return con.sql(sql, params=params)
    except duckdb.Error as exc:
        raise QueryError(str(exc).strip()) from None
