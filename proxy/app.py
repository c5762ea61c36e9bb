"""The aiohttp application: routes, lifetimes of the recorder and the upstream pool."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiohttp import web

from proxy.config import Settings
from proxy.handler import proxy_call
from proxy.state import LIFECYCLE, POOL, RECORDER, RESOLVER, SETTINGS, Lifecycle
from proxy.upstream import open_pool
from recorder.lock import DataDirLock
from recorder.sessions import SessionResolver
from recorder.writer import Recorder


async def _recorder(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS]
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    recorder = Recorder(
        settings.data_dir,
        fsync=settings.fsync,
        high_water_bytes=int(settings.queue_high_water_mb * 1024 * 1024),
        session_idle_seconds=settings.session_idle_minutes * 60,
    )
    recorder.start()
    app[RECORDER] = recorder
    try:
        yield
    finally:
        await asyncio.to_thread(recorder.close)
        lock.release()


async def _pool(app: web.Application) -> AsyncIterator[None]:
    app[POOL] = open_pool(app[SETTINGS])
    yield
    await app[POOL].close()


async def _mark_stopping(app: web.Application) -> None:
    app[LIFECYCLE].stopping = True


async def healthz(request: web.Request) -> web.Response:
    """The process is alive and serving."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready to record: the disk works and the recorder queue has room."""
    health = request.app[RECORDER].health()
    return web.json_response(health, status=200 if health["accepting"] else 503)


def create_app(settings: Settings) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SETTINGS] = settings
    app[LIFECYCLE] = Lifecycle()
    app[RESOLVER] = SessionResolver(idle_seconds=settings.session_idle_minutes * 60)
    app.cleanup_ctx.append(_recorder)
    app.cleanup_ctx.append(_pool)
    app.on_shutdown.append(_mark_stopping)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_route("*", "/{tail:.*}", proxy_call)
    return app
