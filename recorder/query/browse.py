"""What the web UI shows, as plain data: queries over the views of `recorder.query.connect`.

Every function takes a connection from `recorder.query.connect.connect` (read-only,
locked to the data dir) and returns dicts and lists ready for JSON. Values
from the user arrive as parameters, never pasted into SQL; a sort column is
picked from a fixed list.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from taplog.recorder.bodies import decode_body
from taplog.recorder.query.openings import openings
from taplog.recorder.query.requests import Request, request_bodies
from taplog.recorder.query.timeline import UnknownSession, session_conditions
from taplog.recorder.stitching import new_messages
from taplog.recorder.store.reader import read_events
from taplog.recorder.vendors.clients import tool_run

if TYPE_CHECKING:
    import duckdb

# Columns the sessions list can sort on, by the names the page uses.
SESSION_SORTS = {
    "session": "session",
    "started_at": "started_at",
    "duration_ms": "duration_ms",
    "calls": "calls",
    "models": "models",
    "tokens": "coalesce(input_tokens, 0) + coalesce(output_tokens, 0)",
    "cost_usd": "cost_usd",
    "tool_calls": "tool_calls",
    "tool_errors": "tool_errors",
    "failovers": "failovers",
    "failed_calls": "failed_calls",
    "last_at": "last_at",
}
MAX_SESSIONS = 1000
PAGE = 200  # calls on a page of the session's timeline
MAX_PAGE = 1000
PREVIEW = 300  # characters of a tool run's arguments and output in the session's table


@dataclass(frozen=True, slots=True)
class SessionQuery:
    since: datetime | None = None
    until: datetime | None = None
    model: str | None = None
    text: str | None = None  # found in a call's request body (case-insensitive)
    sort: str = "last_at"
    descending: bool = True
    limit: int = 200


def _records(cursor: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _json(value: str | None) -> Any:
    return None if value is None else orjson.loads(value)


def list_sessions(con: duckdb.DuckDBPyConnection, wanted: SessionQuery) -> list[dict[str, Any]]:
    """Sessions matching the filters, sorted; at most `wanted.limit` (capped)."""
    if wanted.sort not in SESSION_SORTS:
        raise ValueError(f"cannot sort on {wanted.sort!r}; use one of {', '.join(SESSION_SORTS)}")
    where, params = session_conditions(wanted.since, wanted.until, wanted.model, wanted.text)
    order = "DESC" if wanted.descending else "ASC"
    cursor = con.execute(
        "SELECT session, started_at, last_at, "
        "epoch_ms(last_at) - epoch_ms(started_at) AS duration_ms, calls, models, "
        "input_tokens, output_tokens, cost_usd, tool_calls, tool_errors, failovers, "
        f"failed_calls FROM sessions WHERE {where} "
        f"ORDER BY {SESSION_SORTS[wanted.sort]} {order} NULLS LAST, session LIMIT ?",
        [*params, min(wanted.limit, MAX_SESSIONS)],
    )
    found = _records(cursor)
    opened = openings(con, [s["session"] for s in found])
    for session in found:
        session["client"], session["prompt"] = opened.get(session["session"], (None, None))
    return found


def models(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Every model any session used, for the filter's choices."""
    rows = con.execute(
        "SELECT DISTINCT unnest(models) AS model FROM sessions ORDER BY model"
    ).fetchall()
    return [model for (model,) in rows if model is not None]


def session_detail(
    con: duckdb.DuckDBPyConnection, session: str, before: int | None = None, limit: int = PAGE
) -> dict[str, Any]:
    """A session's summary and what its timeline draws for a page of its calls: the
    `limit` calls before the `before`-th (in time order; None: the last ones), the tool
    runs and marks of the same span, each tool run's arguments and what it printed
    clipped to `PREVIEW` characters (`tool_detail` has them whole)."""
    summary = _records(con.execute("SELECT * FROM sessions WHERE session = ?", [session]))
    if not summary:
        raise UnknownSession(f"no session {session!r} in this data dir")
    # a fork's copied calls and tool runs are its origin's (linked from the summary)
    mine = "session = ? AND NOT copied"
    (total,) = con.execute(f"SELECT count(*) FROM llm_calls WHERE {mine}", [session]).fetchone()
    end = total if before is None else max(0, min(before, total))
    start = max(0, end - limit)
    calls = _records(
        con.execute(
            "SELECT exchange, started_at, ended_at, api, provider_name, request_model, "
            "response_model, stream, status, outcome, error, latency_ms, ttfb_ms, "
            "input_tokens, output_tokens, cost_usd, finish_reason, attempts, failovers "
            f"FROM llm_calls WHERE {mine} ORDER BY started_at, exchange LIMIT ? OFFSET ?",
            [session, end - start, start],
        )
    )
    since = calls[0]["started_at"] if start > 0 and calls else None
    until = _started(con, session, end) if end < total else None
    (last_seq,) = con.execute("SELECT max(seq) FROM events WHERE session = ?", [session]).fetchone()
    return {
        "summary": summary[0],
        "calls": calls,
        "tools": _tool_previews(con, session, since, until),
        "marks": _marks(con, session, since, until),
        "last_seq": last_seq,
        "page": {"start": start, "end": end, "total": total, "limit": limit, "until": until},
    }


def _started(con: duckdb.DuckDBPyConnection, session: str, index: int) -> datetime:
    """When the session's `index`-th call (from 0, in time order) started."""
    (at,) = con.execute(
        "SELECT started_at FROM llm_calls WHERE session = ? AND NOT copied "
        "ORDER BY started_at, exchange LIMIT 1 OFFSET ?",
        [session, index],
    ).fetchone()
    return at


def _span(column: str, since: datetime | None, until: datetime | None) -> tuple[str, list]:
    where, params = [], []
    if since is not None:
        where.append(f"{column} >= ?")
        params.append(since)
    if until is not None:
        where.append(f"{column} < ?")
        params.append(until)
    return "".join(f" AND {w}" for w in where), params


def _tool_previews(
    con: duckdb.DuckDBPyConnection,
    session: str,
    since: datetime | None,
    until: datetime | None,
) -> list[dict[str, Any]]:
    """The tool runs that began in a span, their arguments and what they printed clipped."""
    span, params = _span("coalesce(asked_at, answered_at)", since, until)
    result = con.execute(
        "SELECT call_id, seq, tool_name, server, arguments, result, is_error, asked_at, "
        "answered_at, duration_ms, asked_in, answered_in, flags "
        f"FROM tool_calls WHERE session = ? AND NOT copied{span} ORDER BY seq",
        [session, *params],
    )
    names = [column[0] for column in result.description]
    tools = []
    while rows := result.fetchmany(256):  # results may be large: read a batch at a time
        for row in rows:
            tool = dict(zip(names, row, strict=True))
            arguments, run = tool.pop("arguments"), tool_run(_json(tool.pop("result")))
            tool["arguments_preview"] = _preview(_json(arguments))
            tool["printed_preview"], tool["exit_code"] = _preview(run.printed), run.exit_code
            tools.append(tool)
    return tools


def _preview(value: Any) -> str | None:
    """A value's start as text: a string as it is, anything else as compact JSON."""
    if value is None:
        return None
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return text if len(text) <= PREVIEW else text[: PREVIEW - 1] + "…"


def _marks(
    con: duckdb.DuckDBPyConnection, session: str, since: datetime | None, until: datetime | None
) -> list[dict[str, Any]]:
    span, params = _span("ts", since, until)
    return _records(
        con.execute(
            "SELECT seq, ts, type, exchange, reason, from_provider, from_model, to_provider, "
            "to_model, attempt FROM events WHERE session = ? AND type IN ('failover', 'error')"
            f"{span} ORDER BY seq",
            [session, *params],
        )
    )


def tool_detail(con: duckdb.DuckDBPyConnection, session: str, call_id: str) -> dict[str, Any]:
    """One tool run whole: its arguments and result as recorded, what it printed."""
    found = _records(
        con.execute(
            "SELECT call_id, seq, tool_name, server, arguments, result, is_error, asked_at, "
            "answered_at, duration_ms, asked_in, answered_in, flags "
            "FROM tool_calls WHERE session = ? AND call_id = ? ORDER BY copied LIMIT 1",
            [session, call_id],
        )
    )
    if not found:
        raise UnknownSession(f"no tool run {call_id!r} in session {session!r}")
    tool = found[0]
    tool["arguments"], tool["result"] = _json(tool["arguments"]), _json(tool["result"])
    run = tool_run(tool["result"])
    tool["printed"], tool["exit_code"] = run.printed, run.exit_code
    return tool


def call_detail(
    con: duckdb.DuckDBPyConnection, log: Path, session: str, exchange: str
) -> dict[str, Any]:
    """One client call: its events in order (requests as sent, answers, failovers) and
    what it sent that the session's previous call had not.

    The events come from the session's `log` through the reader, which gives bodies
    back byte for byte (the views rebuild resent history with its keys reordered).
    """
    events = [e for e in read_events(log) if e.get("exchange") == exchange]
    if not events:
        raise UnknownSession(f"no call {exchange!r} in session {session!r}")
    for event in events:
        if event.get("type") == "llm.request" and event.get("translated_from"):
            event["upstream_body"] = decode_body(event).decode("utf-8", "replace")
    first = next((e for e in events if e.get("type") == "llm.request"), {})
    previous = _previous_request(con, session, exchange)
    changes = new_messages(
        first.get("api", ""),
        first.get("body"),
        previous.api if previous else None,
        previous.body if previous else None,
    )
    return {"events": events, "changes": {**changes, "first_call": previous is None}}


def _previous_request(
    con: duckdb.DuckDBPyConnection, session: str, exchange: str
) -> Request | None:
    """The request of the call before this one (by when they started), its body read alone."""
    found = con.execute(
        "WITH firsts AS (SELECT exchange, min(seq) AS seq FROM events "
        "WHERE session = ? AND type = 'llm.request' GROUP BY exchange) "
        "SELECT seq FROM firsts WHERE seq < (SELECT seq FROM firsts WHERE exchange = ?) "
        "ORDER BY seq DESC LIMIT 1",
        [session, exchange],
    ).fetchone()
    if found is None:
        return None
    return request_bodies(con, {session: [found[0]]}).get((session, found[0]))


def overview(con: duckdb.DuckDBPyConnection, since: datetime | None = None) -> dict[str, Any]:
    """Cost per day and per model, latency percentiles per model, tool error rates."""
    params = [since] if since else []
    model = "coalesce(response_model, request_model)"

    def after(column: str) -> str:
        return f"{column} >= ?" if since else "true"

    def rows(sql: str) -> list[dict[str, Any]]:
        return _records(con.execute(sql, params))

    when = after("started_at") + " AND NOT copied"  # a fork's copies were spent by its origin

    return {
        "totals": rows(
            "SELECT count(DISTINCT session) AS sessions, count(*) AS calls, "
            "sum(cost_usd) AS cost_usd, sum(input_tokens) AS input_tokens, "
            "sum(output_tokens) AS output_tokens, "
            "count(*) FILTER (WHERE outcome <> 'ok') AS failed_calls, "
            f"coalesce(sum(failovers), 0) AS failovers FROM llm_calls WHERE {when}"
        )[0],
        "cost_per_day": rows(
            "SELECT strftime(started_at, '%Y-%m-%d') AS day, sum(cost_usd) AS cost_usd, "
            f"count(*) AS calls FROM llm_calls WHERE {when} GROUP BY 1 ORDER BY 1"
        ),
        "cost_per_model": rows(
            f"SELECT {model} AS model, sum(cost_usd) AS cost_usd, count(*) AS calls, "
            "sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens "
            f"FROM llm_calls WHERE {when} GROUP BY 1 ORDER BY cost_usd DESC NULLS LAST, 1"
        ),
        "latency_per_model": rows(
            f"SELECT {model} AS model, count(*) AS calls, "
            "quantile_cont(latency_ms, 0.5) AS p50_ms, quantile_cont(latency_ms, 0.9) AS p90_ms, "
            "quantile_cont(latency_ms, 0.99) AS p99_ms FROM llm_calls "
            f"WHERE {when} AND outcome = 'ok' AND latency_ms IS NOT NULL GROUP BY 1 ORDER BY 1"
        ),
        "tool_errors": rows(
            "SELECT tool_name, count(*) AS runs, count(*) FILTER (WHERE is_error) AS errors, "
            "avg(duration_ms) AS avg_ms FROM tool_calls "
            f"WHERE answered_at IS NOT NULL AND NOT copied AND {after('answered_at')} "
            "GROUP BY 1 ORDER BY errors DESC, runs DESC, 1"
        ),
    }
