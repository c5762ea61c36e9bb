"""Run aiohttp apps on 127.0.0.1 in a background event loop, for sync SDK clients.

Tests drive taplog with the official, synchronous `openai` and `anthropic`
clients; the servers they talk to (taplog itself and the fake vendors) live on
one event loop in a daemon thread so the test body can block freely.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

from aiohttp import web

from taplog.proxy.runner import ProxyRunner

T = TypeVar("T")


class ServerThread:
    """An event loop in a thread that serves aiohttp apps on loopback ports."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._runners: list[web.AppRunner] = []
        self._listeners: list[asyncio.Server] = []
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def call(self, make: Callable[[], Awaitable[T]], timeout: float = 30) -> T:
        """Run a coroutine on the server loop and wait for its result."""
        future: Future[T] = asyncio.run_coroutine_threadsafe(make(), self.loop)
        return future.result(timeout)

    def serve(
        self,
        app: web.Application,
        runner_class: type[web.AppRunner] = web.AppRunner,
        **runner_kwargs: object,
    ) -> str:
        """Start `app` on 127.0.0.1 at a free port; returns its base URL."""

        async def start() -> str:
            runner = runner_class(app, **runner_kwargs)
            await runner.setup()
            self._runners.append(runner)
            if isinstance(runner, ProxyRunner):
                listener = await runner.listen("127.0.0.1", 0)
                self._listeners.append(listener)
                host, port = listener.sockets[0].getsockname()[:2]
            else:
                site = web.TCPSite(runner, "127.0.0.1", 0)
                await site.start()
                host, port = runner.addresses[0][:2]
            return f"http://{host}:{port}"

        return self.call(start)

    def __enter__(self) -> ServerThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self) -> None:
        async def cleanup() -> None:
            for listener in self._listeners:
                listener.close()
            for runner in reversed(self._runners):
                await runner.cleanup()

        try:
            self.call(cleanup)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
            self.loop.close()
