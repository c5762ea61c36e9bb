"""The UI's JSON endpoints: `recorder.query.browse` over a fresh read-only connection each.

DuckDB runs in a worker thread, never on the event loop (the proxy may be
serving calls on it). Bad query parameters get a 400 that says which and why.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from taplog.proxy.ui.common import UI, guarded, json_error, json_response, session_file
from taplog.recorder.query import browse
from taplog.recorder.store.lognames import log_path

if TYPE_CHECKING:
    import duckdb

T = TypeVar("T")


class BadParameter(ValueError):
    pass


async def _query(
    request: web.Request,
    work: Callable[[duckdb.DuckDBPyConnection], T],
    session: str | None = None,
) -> T:
    """`work` on a fresh connection, in a thread; over one session's log alone if named."""
    from taplog.recorder.query.connect import (
        connect,  # DuckDB loads on the first query, not at start-up
    )

    data_dir = request.app[UI].data_dir

    def run() -> T:
        con = connect(data_dir, only=session)
        try:
            return work(con)
        finally:
            con.close()

    return await asyncio.to_thread(run)


def _time(request: web.Request, name: str) -> datetime | None:
    """An ISO time from the query string, as the naive UTC the views use."""
    value = request.query.get(name)
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise BadParameter(f"{name}: give an ISO time such as 2026-11-30T08:00:00Z") from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _session_query(request: web.Request) -> browse.SessionQuery:
    query = request.query
    sort = query.get("sort", "last_at")
    if sort not in browse.SESSION_SORTS:
        raise BadParameter(f"sort: use one of {', '.join(browse.SESSION_SORTS)}")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise BadParameter("order: use asc or desc")
    try:
        limit = int(query.get("limit", "200"))
    except ValueError:
        raise BadParameter("limit: give a whole number") from None
    if not 1 <= limit <= browse.MAX_SESSIONS:
        raise BadParameter(f"limit: from 1 to {browse.MAX_SESSIONS}")
    return browse.SessionQuery(
        since=_time(request, "since"),
        until=_time(request, "until"),
        model=query.get("model") or None,
        text=query.get("text") or None,
        sort=sort,
        descending=order == "desc",
        limit=limit,
    )


def _answer(work: Callable[[web.Request], Any]) -> Callable[[web.Request], Any]:
    """A guarded endpoint whose bad parameters and unknown ids become 400 and 404."""

    @guarded
    async def endpoint(request: web.Request) -> web.Response:
        try:
            return json_response(await work(request))
        except BadParameter as exc:
            return json_error(400, str(exc))
        except browse.UnknownSession as exc:
            return json_error(404, str(exc))

    return endpoint


def _session(request: web.Request) -> str:
    if session_file(request) is None:
        raise browse.UnknownSession(f"no session {request.match_info['session']!r} here")
    return request.match_info["session"]


@_answer
async def sessions(request: web.Request) -> dict[str, Any]:
    wanted = _session_query(request)

    def work(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        return {"sessions": browse.list_sessions(con, wanted), "models": browse.models(con)}

    return await _query(request, work)


def _whole(request: web.Request, name: str, default: int | None, most: int) -> int | None:
    """A whole number from 1 to `most` from the query string, or `default`."""
    value = request.query.get(name)
    if value is None or value == "":
        return default
    if not value.isdigit() or not 1 <= int(value) <= most:
        raise BadParameter(f"{name}: give a whole number from 1 to {most}")
    return int(value)


@_answer
async def session(request: web.Request) -> dict[str, Any]:
    """A page of the session's timeline: `limit` calls before the `before`-th (default:
    the last ones), their tool runs clipped."""
    name = _session(request)
    limit = _whole(request, "limit", browse.PAGE, browse.MAX_PAGE) or browse.PAGE
    before = _whole(request, "before", None, 1 << 40)

    def work(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        return browse.session_detail(con, name, before, limit)

    return await _query(request, work, name)


@_answer
async def tool(request: web.Request) -> dict[str, Any]:
    """One tool run whole: arguments, result, what it printed."""
    name, call_id = _session(request), request.match_info["call_id"]
    return await _query(request, lambda con: browse.tool_detail(con, name, call_id), name)


@_answer
async def call(request: web.Request) -> dict[str, Any]:
    name, exchange = _session(request), request.match_info["exchange"]
    log = log_path(request.app[UI].data_dir / "sessions", name)
    return await _query(request, lambda con: browse.call_detail(con, log, name, exchange), name)


@_answer
async def chat(request: web.Request) -> dict[str, Any]:
    """A page of the session's conversation (`recorder.query.chat_page`): its `last`
    entries before seq `before`, tool runs clipped; `earlier` is the next page's `before`."""
    from taplog.recorder.query.chat_page import LAST, MAX_LAST, chat_page, clipped

    name = _session(request)
    last = _whole(request, "last", LAST, MAX_LAST)
    before = _whole(request, "before", None, 1 << 62)

    def work(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
        page = chat_page(con, name, last, before)
        threads = clipped(page.threads, browse.PREVIEW)
        return {"threads": threads, "entries": page.entries, "earlier": page.earlier}

    return await _query(request, work, name)


@_answer
async def overview(request: web.Request) -> dict[str, Any]:
    since = _time(request, "since")
    return await _query(request, lambda con: browse.overview(con, since))
