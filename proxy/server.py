"""Run the proxy until SIGINT/SIGTERM, then drain: stop accepting, let calls
in flight finish within the grace period, flush the logs, exit 0."""

from __future__ import annotations

import asyncio
import logging
import signal

from aiohttp import web

from proxy import auth
from proxy.app import create_app
from proxy.config import Settings
from proxy.fallbacks import Fallbacks
from proxy.replay import REPLAYER
from proxy.runner import ProxyRunner
from proxy.state import LIFECYCLE
from recorder import __version__

log = logging.getLogger("taplog")


class ServeError(RuntimeError):
    """taplog cannot start; the message says why and what to do."""


def _client_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def client_base(settings: Settings, port: int) -> str:
    """The base URL clients use (before /v1): a token prefix as the variable it comes from."""
    base = f"http://{_client_host(settings.host)}:{port}"
    if settings.auth_tokens:  # never printed: the variable it usually comes from
        base += "/t/$TAPLOG_AUTH_TOKEN"
    return base


def banner(settings: Settings, port: int, replayed: int | None = None) -> str:
    base = client_base(settings, port)
    replaying = ""
    if replayed is not None:
        url = f"http://{_client_host(settings.host)}:{port}"
        replaying = f"taplog replay: {replayed} calls on {url} (misses: {settings.replay_mode})\n"
    ui = f"  web UI: {base}/ui/\n" if settings.ui else ""
    return (
        f"{replaying}taplog {__version__} recording to {settings.data_dir.resolve() / 'sessions'}\n"
        f"  export OPENAI_BASE_URL={base}/v1\n"
        f"  export ANTHROPIC_BASE_URL={base}\n"
        f"{ui}"
        "Ready. Ctrl-C stops after the calls in flight finish."
    )


async def serve(settings: Settings, fallbacks: Fallbacks | None = None) -> None:
    problem = auth.binding_problem(settings)
    if problem is not None:
        raise ServeError(problem)
    if not (settings.auth_tokens or auth.is_loopback(settings.host)):
        log.error(auth.INSECURE_WARNING, settings.host or "every interface")
    app = create_app(settings, fallbacks)
    runner = ProxyRunner(
        app,
        settings.header_timeout,
        shutdown_timeout=settings.shutdown_grace,
        access_log=None,
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        try:
            await site.start()
        except OSError as exc:
            raise ServeError(
                f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}"
            ) from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        replayer = app.get(REPLAYER)
        replayed = None if replayer is None else len(replayer.index)
        print(banner(settings, runner.addresses[0][1], replayed), flush=True)
        await stop.wait()
        log.info("stopping; finishing calls in flight")
        app[LIFECYCLE].stopping = True
    finally:
        await runner.cleanup()
