"""Request bodies, asked for by seq: the one way the reading tools get them from SQL.

A session's requests resend its history, so their bodies hold many times the
session's information (a 2,000-call session sends ~540 MB): asking SQL for every
request's body of a session costs as much as the session is long. The reading tools
(`taplog sessions`, `show --messages`, the UI) choose which requests they need from
the columns that need no body (seq, exchange, api, model, tokens, the answers, the
tool runs), then ask here for those few by seq, with `session = ? AND seq IN (?, …)`:
a filter on plain columns, which DuckDB applies before it builds any `data` (a join
or an `IN (SELECT …)` would be applied after).

Each call logs, on the `taplog.query` logger at DEBUG, how many bodies it read and
their size, so a test or the bench can see what a page cost.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import duckdb

log = logging.getLogger("taplog.query")


@dataclass(frozen=True, slots=True)
class Request:
    """A request as the client sent it: its API, body (None when not JSON) and headers."""

    session: str
    seq: int
    api: str | None
    body: Any
    headers: dict[str, str]


def request_bodies(
    con: duckdb.DuckDBPyConnection, wanted: Mapping[str, Sequence[int]]
) -> dict[tuple[str, int], Request]:
    """The `llm.request` events at these seqs of these sessions, by (session, seq)."""
    conditions, params = [], []
    for session, seqs in wanted.items():
        if seqs:
            listed = sorted(set(seqs))
            conditions.append(f"(session = ? AND seq IN ({', '.join('?' * len(listed))}))")
            params += [session, *listed]
    if not conditions:
        return {}
    result = con.execute(  # the whole event, parsed here: a body is parsed once
        "SELECT session, seq, api, data::VARCHAR "
        f"FROM events WHERE type = 'llm.request' AND ({' OR '.join(conditions)})",
        params,
    )
    found, size = {}, 0
    while rows := result.fetchmany(8):  # bodies may be large: a few at a time
        for session, seq, api, text in rows:
            event = orjson.loads(text) if text is not None else {}
            headers = event.get("headers")
            found[session, seq] = Request(
                session, seq, api, event.get("body"), headers if isinstance(headers, dict) else {}
            )
            size += len(text or "")
    log.debug("request bodies read: %d (%d bytes)", len(found), size)
    return found
