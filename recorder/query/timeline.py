"""`taplog sessions` and `taplog show`: the views, read for people.

Both are plain queries over the same views as `taplog sql`, with every value
passed as a parameter.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
import orjson

from taplog.recorder.query.openings import openings
from taplog.recorder.query.tables import cell, safe_text
from taplog.recorder.vendors.clients import tool_run

SESSION_COLUMNS = (
    "session, started_at, last_at, calls, models, input_tokens, output_tokens, cost_usd, "
    "tool_calls, tool_errors, failovers, failed_calls, "
    "coalesce(forked_from, resumed_from) AS origin"  # the session a fork or resume came from
)
BATCH = 256  # tool runs read at a time by `show`


@dataclass(frozen=True, slots=True)
class SessionFilter:
    limit: int = 20
    since: datetime | None = None
    model: str | None = None
    failing: bool = False


def session_conditions(
    since: datetime | None = None,
    until: datetime | None = None,
    model: str | None = None,
    text: str | None = None,
    failing: bool = False,
) -> tuple[str, list[Any]]:
    """A WHERE clause over the `sessions` view for these filters, and its parameters.

    `text` is looked for, case-insensitively, in the sessions' request bodies as it
    reads inside JSON (a `"` in it matches the `\\"` in the body's text).
    """
    where, params = ["true"], []
    if since is not None:
        where.append("last_at >= ?")
        params.append(since)
    if until is not None:
        where.append("started_at <= ?")
        params.append(until)
    if model:
        where.append("list_contains(models, ?)")
        params.append(model)
    if text:
        where.append(
            "session IN (SELECT session FROM llm_calls "
            "WHERE contains(lower(request_body::VARCHAR), lower(?)))"
        )
        params.append(orjson.dumps(text).decode()[1:-1])
    if failing:
        where.append("(tool_errors > 0 OR failed_calls > 0)")
    return " AND ".join(where), params


def list_sessions(
    con: duckdb.DuckDBPyConnection, wanted: SessionFilter, columns: str = SESSION_COLUMNS
) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    """Recent sessions, newest first: (columns, types, rows); the session first of them."""
    where, params = session_conditions(
        since=wanted.since, model=wanted.model, failing=wanted.failing
    )
    sql = f"SELECT {columns} FROM sessions WHERE {where} ORDER BY last_at DESC LIMIT ?"
    relation = con.sql(sql, params=[*params, wanted.limit])
    rows = relation.fetchall()
    opened = openings(con, [row[0] for row in rows])
    rows = [(*row, *opened.get(row[0], (None, None))) for row in rows]
    columns, types = [*relation.columns, "client", "prompt"], [str(t) for t in relation.types]
    return columns, [*types, "VARCHAR", "VARCHAR"], rows


class UnknownSession(LookupError):
    pass


def _result(result: Any, width: int | None) -> str:
    """A tool's result as a line shows it: what the tool printed first (a client's header,
    such as Codex's, would fill the clipped line), with the exit code the client states."""
    run = tool_run(result)
    code = "" if run.exit_code is None else f"[exit {run.exit_code}] "
    return code + _clip(run.printed, width)


def _clip(value: Any, width: int | None) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return cell(text, width)


def _when(value: datetime) -> str:
    return value.strftime("%H:%M:%S.%f")[:-3]


def _money(value: float | None) -> str:
    return "$?" if value is None else f"${value:.6f}"


def show_lines(
    con: duckdb.DuckDBPyConnection, session: str, width: int | None = 100
) -> Iterator[str]:
    """A readable timeline of one session, line by line as it is read: calls, tool runs,
    failovers, refusals, then a summary. Calls, failovers and refusals (a few columns
    each) are read first; tool runs, with their arguments and results, stream in batches
    of `BATCH` beside them."""
    cursor = con.execute("SELECT * FROM sessions WHERE session = ?", [session])
    summary = cursor.fetchone()
    if summary is None:
        raise UnknownSession(f"no session {session!r} in this data dir")
    info = dict(zip([d[0] for d in cursor.description], summary, strict=True))
    yield (
        f"session {safe_text(session)}  started {info['started_at']:%Y-%m-%d %H:%M:%S} UTC"
        f"  ({safe_text(info['source'] or '?')}, {safe_text(info['user_agent'] or '?')})"
        + _origin(info)
    )
    # the tool runs' query runs as the merge starts, after the others have been read: the
    # one result left open on the connection. Ties keep the parts' order.
    parts = [_calls(con, session), _tools(con, session, width), _failovers(con, session)]
    parts.append(_refusals(con, session, width))
    for at, line in heapq.merge(*parts, key=lambda entry: entry[0]):
        yield f"{_when(at)}  {line}"
    seconds = (info["last_at"] - info["started_at"]).total_seconds()
    yield (
        f"{info['calls']} calls · {info['tool_calls']} tool calls ({info['tool_errors']} failed) · "
        f"{_count(info['input_tokens'])} in / {_count(info['output_tokens'])} out tokens · "
        f"{_money(info['cost_usd'])}{_unpriced(con, session)} · {info['failovers']} failovers"
        f" · {seconds:.2f} s"
    )


def _unpriced(con: duckdb.DuckDBPyConnection, session: str) -> str:
    """How many answers had usage but no price (their cost unknown), when any did."""
    (count,) = con.execute(
        "SELECT count(*) FROM llm_calls WHERE session = ? AND input_tokens IS NOT NULL "
        "AND cost_usd IS NULL",
        [session],
    ).fetchone()
    return f" ({count} call{'' if count == 1 else 's'} with no price)" if count else ""


def _refusals(
    con: duckdb.DuckDBPyConnection, session: str, width: int | None
) -> list[tuple[datetime, str]]:
    """Calls taplog refused before any vendor (a budget, the loop guard)."""
    rows = con.execute(
        "SELECT ts, reason, status, error FROM events WHERE session = ? AND type = 'call.refused' "
        "ORDER BY ts, seq",
        [session],
    ).fetchall()
    return [
        (at, f"  refused {cell(reason)}  {status}  {cell(error, width)}")
        for at, reason, status, error in rows
    ]


def _origin(info: dict[str, Any]) -> str:
    """Where a forked or resumed session comes from, as its first line names it."""
    if info["forked_from"]:
        return f"  forked from {safe_text(info['forked_from'])} at seq {info['forked_at']}"
    if info["resumed_from"]:
        return f"  resumed from {safe_text(info['resumed_from'])}"
    return ""


def _calls(con: duckdb.DuckDBPyConnection, session: str) -> list[tuple[datetime, str]]:
    rows = con.execute(  # a fork's copied calls are the origin's: `show` the origin for them
        "SELECT started_at, api, coalesce(response_model, request_model), status, outcome, "
        "input_tokens, output_tokens, latency_ms, cost_usd, finish_reason "
        "FROM llm_calls WHERE session = ? AND NOT copied ORDER BY started_at",
        [session],
    ).fetchall()
    return [
        (
            at,
            f"call  {api} {cell(model)}  {status or '-'} {outcome}  "
            f"{_count(tokens_in)}→{_count(tokens_out)} tok  {latency or 0:.1f} ms  {_money(cost)}"
            + (f"  {cell(finish)}" if finish else ""),
        )
        for at, api, model, status, outcome, tokens_in, tokens_out, latency, cost, finish in rows
    ]


def _tools(
    con: duckdb.DuckDBPyConnection, session: str, width: int | None
) -> Iterator[tuple[datetime, str]]:
    """Tool runs in time order, read `BATCH` at a time (their arguments and results may
    be large): the query stays open while they are printed."""
    result = con.execute(
        "SELECT coalesce(asked_at, answered_at) AS shown_at, tool_name, arguments, result, "
        "is_error, duration_ms, server, flags FROM tool_calls WHERE session = ? AND NOT copied "
        "ORDER BY shown_at, seq",
        [session],
    )
    while rows := result.fetchmany(BATCH):
        for at, name, arguments, answer, is_error, duration, server, flags in rows:
            outcome = "ERROR " if is_error else ""
            took = "" if duration is None else f"  {duration:.1f} ms"
            marks = "".join(f"  [{cell(f)}]" for f in flags) + ("  [server]" if server else "")
            args = _clip(orjson.loads(arguments) if arguments else None, width)
            shown = "no result" if answer is None else _result(orjson.loads(answer), width)
            yield at, f"  tool {cell(name)} {args} → {outcome}{shown}{took}{marks}"


def _failovers(con: duckdb.DuckDBPyConnection, session: str) -> list[tuple[datetime, str]]:
    rows = con.execute(
        "SELECT ts, from_provider, from_model, to_provider, to_model, reason FROM events "
        "WHERE session = ? AND type = 'failover' ORDER BY ts, seq",
        [session],
    ).fetchall()
    return [
        (at, f"  failover {cell(fp)}:{cell(fm)} → {cell(tp)}:{cell(tm)} ({cell(reason)})")
        for at, fp, fm, tp, tm, reason in rows
    ]


def _tokens(usage: Any) -> str:
    usage = usage if isinstance(usage, dict) else {}
    return f"{_count(usage.get('input_tokens'))}→{_count(usage.get('output_tokens'))} tok"


def _count(tokens: int | None) -> str:
    """A token count, or `?` where none was reported: unknown is not 0."""
    return "?" if tokens is None else str(tokens)


def _event_summary(event: dict[str, Any], width: int | None) -> str:
    """What one event says, in the words of `show`."""
    kind, get = event.get("type"), event.get
    if kind == "llm.request":
        via = (
            f"  (translated from {cell(get('translated_from'))})" if get("translated_from") else ""
        )
        return f"{cell(get('api'))} {cell(get('model'))} → {cell(get('provider'))}{via}"
    if kind == "llm.response":
        return (
            f"{get('status') or '-'} {cell(get('outcome'))} {cell(get('model'))}  "
            f"{_tokens(get('usage'))}  {get('latency_ms') or 0:.1f} ms  {_money(get('cost_usd'))}"
            + (f"  {cell(get('finish_reason'))}" if get("finish_reason") else "")
        )
    if kind == "call.answered":
        served = f" from {cell(get('provider'))} #{get('attempt')}" if get("provider") else ""
        return (
            f"{get('status') or '-'} {cell(get('outcome'))}{served}  "
            f"{get('latency_ms') or 0:.1f} ms as the client waited"
            + (f"  {cell(get('finish_reason'))}" if get("finish_reason") else "")
            + (f"  ({cell(get('error'), width)})" if get("error") else "")
        )
    if kind == "tool.pre":
        return f"{cell(get('name'))} {_clip(get('arguments'), width)}"
    if kind == "tool.post":
        took = "" if get("duration_ms") is None else f"  {get('duration_ms'):.1f} ms"
        outcome = "ERROR " if get("is_error") else ""
        return f"{cell(get('name'))} → {outcome}{_result(get('result'), width)}{took}"
    if kind == "failover":
        return (
            f"{cell(get('from_provider'))}:{cell(get('from_model'))} → "
            f"{cell(get('to_provider'))}:{cell(get('to_model'))} ({cell(get('reason'))})"
        )
    if kind == "session.started":
        resumed = f"  resumed from {cell(get('resumed_from'))}" if get("resumed_from") else ""
        return f"({cell(get('source') or '?')}, {cell(get('user_agent') or '?')}){resumed}"
    if kind == "session.forked":
        return f"from {cell(get('origin'))} at seq {get('at')}"
    if kind == "call.refused":
        return f"{cell(get('reason'))} {cell(get('limit'))}  {cell(get('error'), width)}"
    return cell(get("reason") or get("error"), width)


def event_line(event: dict[str, Any], width: int | None = 100) -> str:
    """One line per event for `taplog tail`: time, seq, type and what it says."""
    try:
        at = _when(datetime.strptime(event["ts"], "%Y-%m-%dT%H:%M:%S.%fZ"))
    except (KeyError, TypeError, ValueError):
        at = "??:??:??.???"
    seq, kind = f"#{event.get('seq')}", cell(event.get("type"))
    return f"{at}  {seq:>5}  {kind:<15} {_event_summary(event, width)}".rstrip()
