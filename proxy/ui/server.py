"""`taplog ui`: the web UI on a server of its own, reading a data dir; no proxy needed."""

from __future__ import annotations

import sys

from aiohttp import web

from taplog.proxy import auth
from taplog.proxy.auth import Tokens
from taplog.proxy.config import Settings
from taplog.proxy.runner import ProxyRunner, ServeError, listening, until_stopped
from taplog.proxy.ui import add_ui

UI_EXPOSURE = auth.Exposure(
    "read every recorded session",
    "open http://HOST:PORT/t/<token>/ui/ in the browser",
)


async def _to_ui(request: web.Request) -> web.Response:
    raise web.HTTPFound("ui/")


def create_ui_app(settings: Settings) -> web.Application:
    app = web.Application(client_max_size=64 * 1024)  # GET only: nothing big comes in
    add_ui(app, settings.data_dir, Tokens(settings.auth_tokens), auth.is_loopback(settings.host))
    app.router.add_get("/", _to_ui)
    return app


async def run_ui(settings: Settings) -> None:
    """Serve until SIGINT/SIGTERM; prints the URL once listening."""
    problem = auth.binding_problem(settings, UI_EXPOSURE)
    if problem is not None:
        raise ServeError(problem)
    if not (settings.auth_tokens or auth.is_loopback(settings.host)):
        print(
            f"INSECURE: listening on {settings.host or 'every interface'} without inbound "
            "tokens (--insecure-no-auth): anyone who reaches this port can read every session",
            file=sys.stderr,
        )
    runner = ProxyRunner(
        create_ui_app(settings), settings.header_timeout, shutdown_timeout=2, access_log=None
    )
    async with listening(runner, settings.host, settings.port) as (host, port, *_):
        host = f"[{host}]" if ":" in host else host
        token = "/t/$TAPLOG_AUTH_TOKEN" if settings.auth_tokens else ""
        where = settings.data_dir.resolve() / "sessions"
        print(f"taplog ui reading {where}\n  open http://{host}:{port}{token}/ui/", flush=True)
        await until_stopped()
