"""The aiohttp application: routes, lifetimes of the recorder and the upstream pool.

taplog's own endpoints, beside the proxied API paths:

    GET /          200, answered by taplog itself (clients such as Claude Code probe
                   their base URL with `HEAD /`): nothing forwarded, no session
    GET /healthz   200 {"status": "ok"} while the process serves
    GET /readyz    200 when it can record; 503 with the reason when it cannot
                   (writer failing, queue over its high-water mark, data dir
                   not writable, shutting down)
    GET /metrics   Prometheus text format (proxy.observe.metrics); with inbound tokens
                   configured it needs one (X-Taplog-Token, Authorization:
                   Bearer, or GET /t/<token>/metrics), see proxy.auth

None of them reveals configuration, keys, paths or upstream URLs. With the
`ui` setting, the web UI (proxy.ui) is mounted at /ui/ and /t/<token>/ui/.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from aiohttp import web

from taplog.proxy import auth, errors
from taplog.proxy.auth import Tokens
from taplog.proxy.beside_recorder import (
    compact_idle,
    recorder_for,
    start_ledger,
    start_reports,
    start_shipping,
    start_tracing,
)
from taplog.proxy.config import Settings
from taplog.proxy.failover.breaker import Breakers, SharedBreakers
from taplog.proxy.failover.responses_history import ResponsesHistory, SharedHistory
from taplog.proxy.failover.rules import Fallbacks, load_fallbacks
from taplog.proxy.handler import probe_answer, proxy_call
from taplog.proxy.keys import (
    BREAKERS,
    FALLBACKS,
    LIFECYCLE,
    LIMITS,
    OWNERSHIP,
    POOL,
    RECORDER,
    RESOLVER,
    RESPONSES_HISTORY,
    SERVICES,
    SETTINGS,
    TOKENS,
    Lifecycle,
    services_of,
)
from taplog.proxy.limits import Limits, tracked
from taplog.proxy.observe.labels import Bounded
from taplog.proxy.observe.metrics import CONTENT_TYPE, Metrics, call_tracker, stream_tracker
from taplog.proxy.processes.link import RecorderLink
from taplog.proxy.replay import REPLAYER, Replayer
from taplog.proxy.upstream import open_pool
from taplog.recorder.events import new_id
from taplog.recorder.retention import start_retention
from taplog.recorder.sessions import SessionResolver
from taplog.recorder.store.lock import DataDirLock
from taplog.recorder.store.lognames import log_exists
from taplog.recorder.store.writer import Recorder
from taplog.recorder.tools.recorded_answers import load_index
from taplog.recorder.usage import UsageTables
from taplog.recorder.vendors.apis import DEFAULT_PROVIDER

log = logging.getLogger("taplog")

METRICS = web.AppKey("metrics", Metrics)
RECORDER_SOCKET = web.AppKey("recorder_socket", str)
RUN = web.AppKey("run", str)  # this start of `taplog serve`, shared by its workers
DISK_CHECK_SECONDS = 2.0


async def _recorder(app: web.Application) -> AsyncIterator[None]:
    if (socket_path := app.get(RECORDER_SOCKET)) is not None:
        async with _recorder_process(app, socket_path):
            yield
        return
    settings = app[SETTINGS]
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    recorder = recorder_for(settings, app[METRICS])
    if REPLAYER in app:
        recorder.observe(app[REPLAYER].observe)
    reports = start_reports(settings, recorder)
    ledger = start_ledger(settings, recorder)
    if ledger is not None:  # the request path reads the ledger's own totals
        app[LIMITS] = Limits(settings, ledger.tables)
    tracing = start_tracing(settings, recorder, app[METRICS])
    recorder.start()
    app[RECORDER] = recorder
    shipper = start_shipping(settings, app[METRICS])
    try:
        yield
    finally:
        await asyncio.to_thread(recorder.close)
        if shipper is not None:  # once the last line is written: the last round ships it
            await asyncio.to_thread(shipper.finish, settings.shutdown_grace)
        if reports is not None:
            await asyncio.to_thread(reports.stop)
        if tracing is not None:
            await asyncio.to_thread(tracing.stop)
        lock.release()


@contextlib.asynccontextmanager
async def _recorder_process(app: web.Application, socket_path: str) -> AsyncIterator[None]:
    """A worker's recorder: the recorder process (`proxy.processes`), which holds the data
    dir and its lock, compacts, and counts the recorded events for /metrics."""
    settings, resolver = app[SETTINGS], app[RESOLVER]
    usage = UsageTables()  # the recorder process's totals, as it sends them
    link = RecorderLink(
        socket_path,
        settings.data_dir / "sessions",
        int(settings.queue_high_water_mb * 1024 * 1024),
        learn=resolver.learn,
        usage=usage.put,
    )
    if tracked(settings) is not None:
        app[LIMITS] = Limits(settings, usage)
    await link.connect()
    app[RECORDER] = link
    resolver.share = link.tell  # what it learns, the other workers learn
    app[RESPONSES_HISTORY] = SharedHistory(link)
    try:
        yield
    finally:
        await link.aclose()


async def _coordination(app: web.Application) -> AsyncIterator[None]:
    """With `--coordination`: the fleet's session leases and circuit breakers, through
    Redis."""
    url = app[SETTINGS].coordination
    if not url:
        yield
        return
    from taplog.proxy.coordination.breakers import FleetBreakers
    from taplog.proxy.coordination.clients import connect
    from taplog.proxy.coordination.forward import FleetOwnership
    from taplog.proxy.coordination.leases import SessionLeases

    client = connect(url)
    settings = app[SETTINGS]
    breakers = app[BREAKERS] = FleetBreakers(client, f"{settings.instance_name}:{os.getpid()}")
    leases = SessionLeases(client, settings.instance_name, app[RUN])
    app[OWNERSHIP] = FleetOwnership(leases, app[POOL], settings, app[METRICS].ownership)
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(breakers.refresh_forever()), loop.create_task(leases.renew_forever())]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await breakers.sent()
        await client.aclose()


async def _pool(app: web.Application) -> AsyncIterator[None]:
    app[POOL] = open_pool(app[SETTINGS])
    yield
    await app[POOL].close()


async def _compactor(app: web.Application) -> AsyncIterator[None]:
    """Compact idle sessions in the background, off the event loop (where the recorder
    runs: a worker leaves it to the recorder process)."""
    idle = app[SETTINGS].compact_after_minutes * 60
    here = idle and RECORDER_SOCKET not in app
    task = asyncio.create_task(_compact_forever(app[SETTINGS].data_dir, idle)) if here else None
    yield
    if task is not None:
        task.cancel()


async def _compact_forever(data_dir: Path, idle_seconds: float) -> None:
    while True:
        await asyncio.sleep(min(60.0, idle_seconds))
        await asyncio.to_thread(compact_idle, data_dir, idle_seconds)


async def _retention(app: web.Application) -> AsyncIterator[None]:
    """Prune old sessions where the recorder runs (a worker leaves it to the recorder process)."""
    recorder, settings = app[RECORDER], app[SETTINGS]
    timer = None
    if isinstance(recorder, Recorder):
        timer = start_retention(settings.data_dir, settings.retention_days, recorder)
    yield
    if timer is not None:
        await asyncio.to_thread(timer.stop)


async def _services(app: web.Application) -> None:
    """What every call is handed, once the recorder and the pool are up."""
    app[SERVICES] = services_of(app)


async def _mark_stopping(app: web.Application) -> None:
    app[LIFECYCLE].stopping = True


async def healthz(request: web.Request) -> web.Response:
    """The process is alive and serving."""
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready to record: not stopping, the writer healthy, its queue below the mark, the
    data dir writable. The disk check runs off the loop and gives up after a while."""
    recorder = request.app[RECORDER]
    health = recorder.health()
    if isinstance(recorder, RecorderLink) and health["accepting"]:
        try:  # its queue, as the recorder process has it
            health = await recorder.ask("health")
        except ConnectionError as exc:
            health = {**health, "accepting": False, "reason": str(exc)}
    reason = health["reason"]
    if request.app[LIFECYCLE].stopping:
        reason = "shutting down"
    elif reason is None:
        reason = await _disk_problem(recorder.sessions_dir)
    body = {
        "ready": reason is None,
        "accepting": health["accepting"],
        "reason": reason,
        "queued_records": health["queued_records"],
        "queued_bytes": health["queued_bytes"],
    }
    return web.json_response(body, status=200 if reason is None else 503)


async def _disk_problem(folder: Path) -> str | None:
    try:
        async with asyncio.timeout(DISK_CHECK_SECONDS):
            return await asyncio.to_thread(_probe_writable, folder)
    except TimeoutError:
        return f"cannot write to the data dir: no answer within {DISK_CHECK_SECONDS:g} s"


def _probe_writable(folder: Path) -> str | None:
    """Create and drop a nameless file where session logs go (works as root, unlike access)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as exc:
        return f"cannot write to the data dir: {exc.strerror or type(exc).__name__}"


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text format; rendered off the loop from a copy of the breaker states."""
    if not request.app[TOKENS].accepts(*auth.presented(request)):
        return errors.error_response(DEFAULT_PROVIDER, 401, auth.REFUSED, "unauthorized")
    app_metrics, recorder = request.app[METRICS], request.app[RECORDER]
    app_metrics.breaker_states = request.app[BREAKERS].states()
    if not isinstance(recorder, RecorderLink):
        body = await asyncio.to_thread(app_metrics.render)
    else:  # the recorded part is the recorder process's
        recorded = b""  # while the recorder process is away, only this worker's part
        with contextlib.suppress(ConnectionError):
            recorded = await recorder.ask("metrics")
        body = await asyncio.to_thread(app_metrics.render_serving) + recorded
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


def bounded_labels(fallbacks: Fallbacks) -> Bounded:
    models = {rule.model for rule in fallbacks.rules}
    models |= {target.model for rule in fallbacks.rules for target in rule.targets}
    return Bounded(fallbacks.providers, models)


def create_app(
    settings: Settings,
    fallbacks: Fallbacks | None = None,
    recorder_socket: str | None = None,
    breakers: Path | None = None,
    run: str | None = None,
) -> web.Application:
    """The proxy's app; its recorder on a thread of its own, or for a worker of
    `proxy.processes` the recorder process listening at `recorder_socket`, the
    breakers all the workers share in the file `breakers`, and the `run` they share
    (which owns the fleet's session leases they take)."""
    fallbacks = fallbacks or load_fallbacks(
        settings.openai_base, settings.anthropic_base, {}, (), settings.gemini_base
    )
    app_metrics = Metrics(bounded_labels(fallbacks), settings.session_idle_minutes * 60)
    app = web.Application(
        client_max_size=settings.max_body_bytes,
        middlewares=[errors.in_api_shape, call_tracker(app_metrics)],
    )
    app[SETTINGS] = settings
    app[RUN] = run or new_id("run")
    if recorder_socket is not None:
        app[RECORDER_SOCKET] = recorder_socket
    app[FALLBACKS] = fallbacks
    app[METRICS] = app_metrics
    app[BREAKERS] = Breakers() if breakers is None else SharedBreakers(breakers)
    app[LIFECYCLE] = Lifecycle()
    app[TOKENS] = Tokens(settings.auth_tokens)
    sessions_dir = settings.data_dir / "sessions"
    app[RESOLVER] = SessionResolver(
        idle_seconds=settings.session_idle_minutes * 60,
        logged=lambda session: log_exists(sessions_dir, session),
    )
    app[RESPONSES_HISTORY] = ResponsesHistory()
    if settings.replay:
        index = load_index(Path(settings.replay), settings.replay_ignored)
        app[REPLAYER] = Replayer(
            index,
            settings.replay_mode,
            settings.replay_speed,
            settings.tool_policy_rules,
            app_metrics,
        )
    app.cleanup_ctx.append(_recorder)
    app.cleanup_ctx.append(_pool)
    app.cleanup_ctx.append(_coordination)
    app.cleanup_ctx.append(_compactor)
    app.cleanup_ctx.append(_retention)
    app.on_startup.append(_services)  # runs after the cleanup contexts have started
    app.on_shutdown.append(_mark_stopping)
    app.on_response_prepare.append(stream_tracker(app_metrics))
    app.router.add_get("/", probe_answer)  # HEAD too
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get(auth.PREFIX + "{token}/metrics", metrics)
    if settings.ui:
        from taplog.proxy.ui import add_ui

        add_ui(app, settings.data_dir, app[TOKENS], auth.is_loopback(settings.host))
    app.router.add_route("*", "/{tail:.*}", proxy_call)
    return app
