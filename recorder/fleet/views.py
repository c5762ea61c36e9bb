"""The query views over a fleet's shipped data: the same four, each row with its instance.

    events      the events table's rows (`recorder.fleet.table`), read as over one data
                dir, with `instance` and `day` (the day each session started) first
    llm_calls   `recorder.query.views`' own, with the instance that served each call
    tool_calls  the same, with the instance of the call that asked (or else answered)
    sessions    the same, one row per session however many instances wrote it, with
                `instances`, the list of them

No row is counted twice: the table's snapshot holds each session once per instance
that shipped it. DuckDB scans the snapshot as an Arrow dataset whose files carry their
partition and column ranges, so a filter on `day`, `instance` or `ts` reaches the scan
and skips whole files, and only the columns a query reads are fetched, in byte ranges.
Bodies in blobs are spliced into `data`, and resent history put back, only for the rows
whose `data` a query reads (`taplog_blob`, `recorder.query.rebuilt_requests`).

Each reference to `events` is a scan of the store, and some views reference it a dozen
times: a command that reads them all over the whole table (`taplog sessions`) asks for
`whole`, and the typed columns are read once into the connection (`shipped_rows`), each
row's `data` from the store only when a query reads it (`taplog_shipped_line`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import duckdb

from taplog.recorder.fleet import table
from taplog.recorder.fleet.fetch import Fleet
from taplog.recorder.query.connect import Sources, events_sql, locked
from taplog.recorder.query.rebuilt_requests import FUNCTION, Requests
from taplog.recorder.query.views import TYPED_COLUMNS, VIEWS

SCANNED = "shipped_events"  # the snapshot, as DuckDB is given it
ROWS = "shipped_rows"  # its typed columns, read once, for a connection that reads it all
BLOB = "taplog_blob"
LINE = "taplog_shipped_line"
LINES_AT_ONCE = 256  # a session's lines read from the store together, from the one asked for
_SOURCE = "fleet:"  # the rows' source, for the rebuild: fleet:<instance>/<day>

_BY_EXCHANGE = (
    "(SELECT session, exchange, arg_min(instance, seq) AS instance FROM events GROUP BY ALL)"
)

FLEET_VIEWS = {
    "llm_calls": f"SELECT w.instance, c.* FROM ({VIEWS['llm_calls']}) c "
    f"LEFT JOIN {_BY_EXCHANGE} w USING (session, exchange)",
    "tool_calls": f"SELECT w.instance, t.* FROM ({VIEWS['tool_calls']}) t "
    f"LEFT JOIN {_BY_EXCHANGE} w "
    "ON w.session = t.session AND w.exchange = coalesce(t.asked_in, t.answered_in)",
    "sessions": "SELECT s.session, i.instances, s.* EXCLUDE (session) "
    f"FROM ({VIEWS['sessions']}) s "
    "LEFT JOIN (SELECT session, list(DISTINCT instance ORDER BY instance) AS instances "
    "FROM events GROUP BY session) i USING (session)",
}

# Each row's `data` as recorded: a request stored as what it adds is rebuilt (its blob
# with it), a blob's fields are spliced in; the rest is the line as stored.
_EVENTS = (
    "SELECT * EXCLUDE (source_file) REPLACE (CASE "
    f"WHEN transcript_keep IS NOT NULL THEN {FUNCTION}(source_file, session, seq, data) "
    "WHEN blob_sha256 IS NOT NULL THEN "
    f"(left(rtrim(data), -1) || ',' || substr({BLOB}(blob_sha256), 2))::JSON "
    "ELSE data::JSON END AS data) "
    "FROM (SELECT instance, day, {columns}, {data} AS data, "
    f"'{_SOURCE}' || instance || '/' || day AS source_file FROM {{rows}})"
)
_SCANNED_EVENTS = _EVENTS.format(columns=TYPED_COLUMNS, data="data", rows=SCANNED)
_READ_EVENTS = _EVENTS.format(
    columns=TYPED_COLUMNS, data=f"{LINE}(instance, day, session, seq)", rows=ROWS
)


def connect_fleet(
    fleet: Fleet, output: Path | None = None, whole: bool = False
) -> duckdb.DuckDBPyConnection:
    """A locked-down connection with the fleet views over the table's snapshot; `whole`:
    its typed columns read once, for a command that reads them all, several times."""
    if fleet.table is None:  # nothing shipped yet still answers queries, with no rows
        con = locked([], output, [], [])
        empty = events_sql(Sources([], {}, [], []))
        con.execute(
            f"CREATE VIEW events AS SELECT NULL::VARCHAR AS instance, NULL::VARCHAR AS day, * "
            f"FROM ({empty})"
        )
    else:
        scanned = table.dataset(fleet.table)
        con = locked(
            [],
            output,
            [],
            [],
            requests=lambda lines: Requests(
                fleet.blobs.folder_of,
                lines,
                lambda source, session: _TableLines(scanned, source, session),
            ),
        )
        con.create_function(
            BLOB,
            fleet.blobs.fields,
            [duckdb.sqltype("VARCHAR")],
            duckdb.sqltype("VARCHAR"),
            side_effects=False,
        )
        con.register(SCANNED, scanned)
        if whole:
            con.execute(
                f"CREATE TEMP TABLE {ROWS} AS SELECT instance, day, {TYPED_COLUMNS} FROM {SCANNED}"
            )
            con.create_function(
                LINE,
                _ShippedLines(scanned).line,
                [duckdb.sqltype(kind) for kind in ("VARCHAR", "VARCHAR", "VARCHAR", "BIGINT")],
                duckdb.sqltype("VARCHAR"),
                side_effects=False,
            )
        con.execute(f"CREATE VIEW events AS {_READ_EVENTS if whole else _SCANNED_EVENTS}")
    for name, sql in FLEET_VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    return con


class _ShippedLines:
    """Each row's line as stored, read from its session's partition when first asked for,
    `LINES_AT_ONCE` at a time (a query reads `data` of a few rows of a session, in order)."""

    def __init__(self, scanned: Any) -> None:
        self._scanned = scanned
        self._lines: dict[tuple[str, str, str, int], str] = {}
        self._lock = threading.Lock()  # DuckDB may ask from several threads at once

    def line(self, instance: str, day: str, session: str, seq: int) -> str:
        key = (instance, day, session, seq)
        with self._lock:
            if key not in self._lines:
                self._load(instance, day, session, seq)
            return self._lines[key]

    def _load(self, instance: str, day: str, session: str, seq: int) -> None:
        import pyarrow.dataset as ds

        where = (
            (ds.field("day") == day)
            & (ds.field("instance") == instance)
            & (ds.field("session") == session)
            & (ds.field("seq") >= seq)
            & (ds.field("seq") < seq + LINES_AT_ONCE)
        )
        for row in self._scanned.to_table(filter=where, columns=["seq", "data"]).to_pylist():
            self._lines[(instance, day, session, row["seq"])] = row["data"]


class _TableLines:
    """A session's request lines in the table, read by the range of seqs asked for
    (`recorder.query.rebuilt_requests`): its partition alone, in byte ranges."""

    def __init__(self, scanned: Any, source: str, session: str) -> None:
        instance, _, day = source.removeprefix(_SOURCE).partition("/")
        import pyarrow.dataset as ds

        self._scanned = scanned
        self._where = (
            (ds.field("day") == day)
            & (ds.field("instance") == instance)
            & (ds.field("session") == session)
            & (ds.field("type") == "llm.request")
        )
        self._lines: dict[int, str] = {}

    def load(self, after: int, upto: int) -> tuple[list[int], bool]:
        import pyarrow.dataset as ds

        where = self._where & (ds.field("seq") > after) & (ds.field("seq") <= upto)
        found = self._scanned.to_table(filter=where, columns=["seq", "data"]).to_pylist()
        self._lines.update((row["seq"], row["data"]) for row in found)
        return [row["seq"] for row in found], False

    def text(self, seq: int) -> str:
        return self._lines[seq]
