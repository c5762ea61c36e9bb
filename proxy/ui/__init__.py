"""The web UI: pages over the same views as `taplog sql`, and a live event stream.

Mounted by `taplog ui` (its own small server) and by `taplog serve --ui` (on
the proxy), the same way, under two prefixes:

    /ui/…              open on loopback; with inbound tokens, a token header
    /t/<token>/ui/…    the token in the path, for browsers (proxy.auth)

    …/                                       the page (plain HTML, CSS, JS
    …/static/<file>                          modules shipped in static/)
    …/api/sessions?since&until&model&text&sort&order&limit
    …/api/sessions/<session>?before&limit   summary; a page of calls, tool runs (clipped), marks
    …/api/sessions/<session>/calls/<exchange>
    …/api/sessions/<session>/tools/<call_id> a tool run whole
    …/api/sessions/<session>/chat?last&before a page of the conversation
    …/api/sessions/<session>/events          live: SSE from a seq (proxy.ui.live)
    …/api/overview?since

The page uses relative URLs only, so it works under either prefix. It never
builds HTML from recorded content: everything recorded is set as text.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

from taplog.proxy import auth
from taplog.proxy.auth import Tokens
from taplog.proxy.observe.metrics import OWN_ROUTES
from taplog.proxy.ui import api, live
from taplog.proxy.ui.common import UI, UiState, guarded

STATIC_DIR = Path(__file__).parent / "static"
_TYPES = {
    ".html": "text/html",
    ".css": "text/css",
    ".js": "text/javascript",
    ".svg": "image/svg+xml",
}


def _static_files() -> dict[str, tuple[bytes, str]]:
    """The shipped files by name (a fixed set: no path from a request reaches the disk)."""
    return {
        path.name: (path.read_bytes(), _TYPES[path.suffix])
        for path in STATIC_DIR.iterdir()
        if path.suffix in _TYPES
    }


STATIC = web.AppKey("ui_static", dict)


@guarded
async def page(request: web.Request) -> web.Response:
    body, kind = request.app[STATIC]["index.html"]
    return web.Response(body=body, content_type=kind, charset="utf-8")


@guarded
async def static(request: web.Request) -> web.Response:
    found = request.app[STATIC].get(request.match_info["name"])
    if found is None:
        return web.Response(status=404, text="no such file\n")
    body, kind = found
    return web.Response(body=body, content_type=kind, charset="utf-8")


@guarded
async def missing(request: web.Request) -> web.Response:
    return web.Response(status=404, text="taplog: no such page in the UI\n")


async def _to_page(request: web.Request) -> web.Response:
    """`…/ui` to `…/ui/`, so that the page's relative URLs resolve under it."""
    raise web.HTTPFound("ui/")


async def _close_streams(app: web.Application) -> None:
    app[UI].closing.set()


def add_ui(app: web.Application, data_dir: Path, tokens: Tokens, loopback_only: bool) -> None:
    """Add the UI's routes to `app` (before any catch-all route)."""
    app[UI] = UiState(data_dir, tokens, loopback_only)
    app[STATIC] = _static_files()
    app.on_shutdown.append(_close_streams)
    routes = {
        "root": ("", _to_page),
        "page": ("/", page),
        "static": ("/static/{name}", static),
        "sessions": ("/api/sessions", api.sessions),
        "session": ("/api/sessions/{session}", api.session),
        "call": ("/api/sessions/{session}/calls/{exchange}", api.call),
        "tool": ("/api/sessions/{session}/tools/{call_id}", api.tool),
        "chat": ("/api/sessions/{session}/chat", api.chat),
        "events": ("/api/sessions/{session}/events", live.session_events),
        "overview": ("/api/overview", api.overview),
        "missing": ("/{rest:.*}", missing),  # the prefix is the UI's: nothing under it is proxied
    }
    for base, kind in (("/ui", "open"), (auth.PREFIX + "{token}/ui", "token")):
        for name, (path, handler) in routes.items():
            app.router.add_get(base + path, handler, name=f"{OWN_ROUTES}ui-{kind}-{name}")
