"""The query views over a fleet's shipped data: the same four, each row with its instance.

    events      every instance's events, read as over one data dir (`recorder.query.connect`,
                each instance apart, so a request's transcript is rebuilt within the log
                it was written to) with `instance` first
    llm_calls   `recorder.query.views`' own, with the instance that served each call
    tool_calls  the same, with the instance of the call that asked (or else answered)
    sessions    the same, one row per session however many instances wrote it, with
                `instances`, the list of them

No row is counted twice: each instance's newest manifest names each of its sessions
once, with the one Parquet file that holds it (`recorder.fleet.layout`), and only those
(session, file) pairs are read.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from taplog.recorder.fleet.fetch import Fleet
from taplog.recorder.query.connect import Sources, events_sql, locked
from taplog.recorder.query.views import VIEWS, sql_list

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


def connect_fleet(fleet: Fleet, output: Path | None = None) -> duckdb.DuckDBPyConnection:
    """A locked-down connection with the fleet views over `fleet` (fetched into its cache)."""
    segments = [(s, path) for kept in fleet.sessions.values() for s, path in kept.items()]
    readable = sorted({path for _, path in segments}) + fleet.blobs
    con = locked(readable, output, fleet.blobs, segments)
    parts = [
        f"SELECT {sql_list([instance])[1:-1]} AS instance, * "
        f"FROM ({events_sql(Sources([], kept, fleet.blobs, []))})"
        for instance, kept in sorted(fleet.sessions.items())
    ]
    if not parts:  # nothing shipped yet still answers queries, with no rows
        parts.append(
            f"SELECT NULL::VARCHAR AS instance, * FROM ({events_sql(Sources([], {}, [], []))})"
        )
    con.execute("CREATE VIEW events AS " + " UNION ALL ".join(parts))
    for name, sql in FLEET_VIEWS.items():
        con.execute(f"CREATE VIEW {name} AS {sql}")
    return con
