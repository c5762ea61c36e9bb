"""Run the proxy until SIGINT/SIGTERM, then drain: stop accepting, let calls
in flight finish within the grace period, flush the logs, exit 0."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys

from taplog.proxy import auth
from taplog.proxy.app import create_app
from taplog.proxy.config import Settings
from taplog.proxy.failover.rules import Fallbacks
from taplog.proxy.keys import LIFECYCLE
from taplog.proxy.replay import REPLAYER
from taplog.proxy.runner import ProxyRunner, ServeError, listening, until_stopped
from taplog.recorder import __version__
from taplog.recorder.store.lock import announce

log = logging.getLogger("taplog")

# How long the writer thread may hold the GIL while the event loop waits for it
# (Python's default is 5 ms): a tenth of it cut the time taplog adds to a stream's
# first event by about 40 % in bench/run.py, at no cost in throughput.
GIL_SWITCH_SECONDS = 0.0005
# Python collects young objects every 700 allocations and, now and then, walks
# every object it tracks. A call allocates thousands, and the app, the price list
# and aiohttp's tables made at start-up live until exit: frozen once ready and
# collected less often, taplog spent about a tenth less CPU per call (bench/run.py).
GC_THRESHOLDS = (10_000, 20, 20)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop when it is installed (the `fast` extra), else asyncio's own.

    uvloop runs the same code with about a quarter less CPU per call (bench/RESULTS.md);
    without it nothing changes but the speed.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


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


def ready(settings: Settings, port: int, replayed: int | None = None) -> None:
    """Listening: the banner for people, and the clients' base URL in the data dir's lock
    file, for `taplog resume` to name."""
    print(banner(settings, port, replayed), flush=True)
    announce(settings.data_dir, client_base(settings, port))


def check_binding(settings: Settings) -> None:
    """Refuse to listen beyond loopback without tokens, or say loudly that it does."""
    problem = auth.binding_problem(settings)
    if problem is not None:
        raise ServeError(problem)
    if not (settings.auth_tokens or auth.is_loopback(settings.host)):
        log.error(auth.INSECURE_WARNING, settings.host or "every interface")


async def serve(settings: Settings, fallbacks: Fallbacks | None = None) -> None:
    """Serve from this one process, the recorder on a thread (`--workers 0`, replay)."""
    check_binding(settings)
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    app = create_app(settings, fallbacks)
    runner = ProxyRunner(
        app,
        settings.header_timeout,
        shutdown_timeout=settings.shutdown_grace,
        access_log=None,
    )
    async with listening(runner, settings.host, settings.port) as (_, port, *_):
        gc.freeze()  # what start-up made is never collected: stop walking it
        gc.set_threshold(*GC_THRESHOLDS)
        replayer = app.get(REPLAYER)
        replayed = None if replayer is None else len(replayer.index)
        ready(settings, port, replayed)
        if replayer is not None and (passed_over := replayer.index.passed_over_text()):
            print(f"taplog replay: {passed_over}", file=sys.stderr, flush=True)
        await until_stopped()
        log.info("stopping; finishing calls in flight")
        app[LIFECYCLE].stopping = True
