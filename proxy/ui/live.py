"""A session's events as Server-Sent Events, from a given seq on, following the log.

    GET …/api/sessions/<session>/events[?from=SEQ][&watch=1]

Each event goes out as `id: <seq>` and `data: <the event as JSON>`. With `watch`, only
that the log grew: `data: {"size": <its bytes>}`, the log never read (a page that
refreshes itself needs no more, and a long session's requests are large). A client
that reconnects sends the last id it saw as `Last-Event-ID` (browsers do so
by themselves) and gets every later event, read back from the log: no gaps,
no repeats. The log is checked for growth every POLL_SECONDS (a `stat`);
new whole lines are read and verified off the event loop. A damaged line or
a log cut back ends the stream with an `event: problem` naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
from aiohttp import web

from taplog.proxy.ui.common import UI, guarded, json_error, session_file
from taplog.recorder.store.reader import DamagedLine, LogFollower, LogRewritten, UnsupportedEvent

POLL_SECONDS = 0.25
KEEPALIVE_SECONDS = 15.0


def _start_seq(request: web.Request) -> int | None:
    """Where to resume: Last-Event-ID wins over ?from=; None when neither is a seq."""
    value = request.headers.get("Last-Event-ID") or request.query.get("from") or "0"
    return int(value) if value.isdigit() and len(value) < 19 else None


@guarded
async def session_events(request: web.Request) -> web.StreamResponse:
    path = session_file(request)
    if path is None:
        return json_error(404, f"no session {request.match_info['session']!r} here")
    after = _start_seq(request)
    if after is None:
        return json_error(400, "from / Last-Event-ID: give the seq of the last event seen")
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"}
    )
    await response.prepare(request)
    news = _growth(path) if request.query.get("watch") else _events(LogFollower(path, after))
    closing = request.app[UI].closing
    quiet_since = time.monotonic()
    with contextlib.suppress(ConnectionResetError):
        await response.write(b"retry: 1000\n\n")
        while not closing.is_set():
            try:
                messages = await news()
            except (DamagedLine, UnsupportedEvent, LogRewritten, OSError) as exc:
                problem = orjson.dumps({"error": str(exc)})
                await response.write(b"event: problem\ndata: " + problem + b"\n\n")
                break
            for message in messages:
                await response.write(message)
                quiet_since = time.monotonic()
            if time.monotonic() - quiet_since > KEEPALIVE_SECONDS:
                await response.write(b": keep-alive\n\n")
                quiet_since = time.monotonic()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closing.wait(), POLL_SECONDS)
    return response


News = Callable[[], Awaitable[list[bytes]]]


def _events(follower: LogFollower) -> News:
    """The events recorded since the last look, each as a message with its seq as id."""

    async def news() -> list[bytes]:
        events = await asyncio.to_thread(follower.poll) if follower.has_more() else []
        return [b"id: %d\ndata: %s\n\n" % (e["seq"], orjson.dumps(e)) for e in events]

    return news


def _growth(path: Path) -> News:
    """A message when the log's size changed since the last look (a `stat`, nothing read)."""
    seen = path.stat().st_size

    async def news() -> list[bytes]:
        nonlocal seen
        size = path.stat().st_size
        if size == seen:
            return []
        seen = size
        return [b"data: %s\n\n" % orjson.dumps({"size": size})]

    return news
