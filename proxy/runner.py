"""The aiohttp runner taplog serves with, and its answer to requests the HTTP parser refuses.

A connection gets `--header-timeout` seconds to deliver a request's headers
and as long to stay idle between requests: aiohttp's keep-alive timer closes
a connection whose handler is still waiting for a whole request when it
fires, however slowly bytes trickle in, so it bounds slow-header clients too.

aiohttp answers a malformed request with a plain-text 400 that quotes the
offending bytes, and logs a traceback that quotes them again: a broken
`Authorization` line would put its API key into the client's answer and
taplog's own log. Here such a request gets a JSON error both SDKs parse,
naming only the kind of fault, and one log line without the bytes.

aiohttp also decodes a request body sent with a Content-Encoding, leaving the
header to say the bytes are still encoded; taplog's connections keep the
client's bytes (`auto_decompress` off) and decode a copy themselves
(`proxy.content_encoding`), so the call is forwarded as it came.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import socket
from collections.abc import AsyncIterator

from aiohttp import web

from taplog.proxy import errors

log = logging.getLogger("taplog")

# The parser's limits: a request over them is refused before routing.
HTTP_LIMITS = {"max_line_size": 8190, "max_field_size": 8190, "max_headers": 128}

# aiohttp's messages name the fault first, then quote the data after one of these.
_QUOTE_STARTS = re.compile(r":|\n| b?['\"]")


def fault_kind(exc: BaseException | None) -> str:
    """What was wrong with a request, without any of its bytes."""
    message = getattr(exc, "message", "") or ""
    kind = _QUOTE_STARTS.split(message, maxsplit=1)[0].strip()
    return kind[:100] or "malformed HTTP request"


class _ParserFaultsAnswered(web.RequestHandler):
    """aiohttp's protocol for one connection, answering a request its parser refuses as above."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:  # taplog's own failure: aiohttp's generic answer and traceback
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:
            raise ConnectionError("an answer was already under way")
        kind = fault_kind(exc)
        log.warning("refused a malformed request from %s: %s", request.remote, kind)
        refused = web.Response(
            status=status,
            body=errors.any_api_error_body(f"malformed HTTP request: {kind}", "malformed_request"),
            content_type="application/json",
            headers={"x-taplog-error": "malformed_request"},
        )
        refused.force_close()
        return refused


class ProxyRunner(web.AppRunner):
    """`web.AppRunner` whose connections have taplog's parser limits, header timeout and
    parser-fault answers. It listens through `listen`, which makes each connection's protocol
    itself (aiohttp's own sites would make aiohttp's)."""

    def __init__(
        self,
        app: web.Application,
        header_timeout: float,
        *,
        shutdown_timeout: float = 60.0,
        access_log: logging.Logger | None = None,
    ) -> None:
        super().__init__(app, handler_cancellation=True, shutdown_timeout=shutdown_timeout)
        self._connection_options = {
            "keepalive_timeout": header_timeout,
            "access_log": access_log,
            "auto_decompress": False,  # forwarded as sent; see the module
            **HTTP_LIMITS,
        }

    async def listen(
        self, host: str | None, port: int | None, sock: socket.socket | None = None
    ) -> asyncio.Server:
        """Accept connections on host:port, or on a listening socket made before (the runner
        set up first); close it to stop."""
        server, loop = self.server, asyncio.get_running_loop()
        assert server is not None, "set the runner up first"
        return await loop.create_server(
            lambda: _ParserFaultsAnswered(server, loop=loop, **self._connection_options),
            host,
            port,
            sock=sock,
        )


class ServeError(RuntimeError):
    """taplog cannot start; the message says why and what to do."""


@contextlib.asynccontextmanager
async def listening(
    runner: ProxyRunner, host: str | None, port: int | None, sock: socket.socket | None = None
) -> AsyncIterator[tuple]:
    """`runner` set up and listening on host:port (or `sock`), its bound address yielded;
    cleaned up on the way out, letting calls in flight finish within its shutdown timeout."""
    await runner.setup()
    try:
        try:
            listener = await runner.listen(host, port, sock)
        except OSError as exc:
            raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
        try:
            yield listener.sockets[0].getsockname()
        finally:
            listener.close()
    finally:
        await runner.cleanup()


async def until_stopped(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> None:
    """Return at the first of `signals`."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in signals:
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
