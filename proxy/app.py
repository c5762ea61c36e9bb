"""The aiohttp application: routes, lifetimes of the recorder and the upstream pool."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from proxy.breaker import Breakers
from proxy.config import Settings
from proxy.fallbacks import Fallbacks, load_fallbacks
from proxy.handler import proxy_call
from proxy.state import (
    BREAKERS,
    FALLBACKS,
    LIFECYCLE,
    POOL,
    RECORDER,
    RESOLVER,
    SETTINGS,
    Lifecycle,
)
from proxy.upstream import open_pool
from recorder.lock import DataDirLock
from recorder.sessions import SessionResolver
from recorder.writer import Recorder

log = logging.getLogger("taplog")


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


async def _compactor(app: web.Application) -> AsyncIterator[None]:
    """Compact idle sessions in the background, off the event loop."""
    idle = app[SETTINGS].compact_after_minutes * 60
    task = asyncio.create_task(_compact_forever(app[SETTINGS].data_dir, idle)) if idle else None
    yield
    if task is not None:
        task.cancel()


async def _compact_forever(data_dir: Path, idle_seconds: float) -> None:
    from recorder.compaction import compact  # DuckDB loads only when needed

    while True:
        await asyncio.sleep(min(60.0, idle_seconds))
        try:
            done = await asyncio.to_thread(compact, data_dir, idle_seconds)
        except Exception:
            log.exception("compaction failed; the JSONL logs are untouched")
            continue
        if done:
            log.info("compacted %d idle sessions", len(done))


async def _mark_stopping(app: web.Application) -> None:
    app[LIFECYCLE].stopping = True


async def healthz(request: web.Request) -> web.Response:
    """The process is alive and serving."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready to record: the disk works and the recorder queue has room."""
    health = request.app[RECORDER].health()
    return web.json_response(health, status=200 if health["accepting"] else 503)


def create_app(settings: Settings, fallbacks: Fallbacks | None = None) -> web.Application:
    app = web.Application(client_max_size=settings.max_body_bytes)
    app[SETTINGS] = settings
    app[FALLBACKS] = fallbacks or load_fallbacks(
        settings.openai_base, settings.anthropic_base, {}, ()
    )
    app[BREAKERS] = Breakers()
    app[LIFECYCLE] = Lifecycle()
    app[RESOLVER] = SessionResolver(idle_seconds=settings.session_idle_minutes * 60)
    app.cleanup_ctx.append(_recorder)
    app.cleanup_ctx.append(_pool)
    app.cleanup_ctx.append(_compactor)
    app.on_shutdown.append(_mark_stopping)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_route("*", "/{tail:.*}", proxy_call)
    return app
