"""The floor for a Python proxy: an aiohttp reverse proxy that records nothing.

    python bench/bare_proxy.py PORT UPSTREAM_URL

Forwards every request to UPSTREAM_URL with the same method, path, query,
headers (less hop-by-hop ones) and body, and streams the answer back chunk by
chunk as it arrives. One client session for the whole process, no per-request
objects beyond aiohttp's own. `GET /healthz` answers locally. Listens on
127.0.0.1 only.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping

import aiohttp
from aiohttp import web

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
CLIENT = web.AppKey("client", aiohttp.ClientSession)
UPSTREAM = web.AppKey("upstream", str)


def _headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}


async def forward(request: web.Request) -> web.StreamResponse:
    body = await request.read()
    upstream = request.app[UPSTREAM] + request.path_qs
    async with request.app[CLIENT].request(
        request.method, upstream, headers=_headers(request.headers), data=body
    ) as answer:
        reply = web.StreamResponse(status=answer.status, headers=_headers(answer.headers))
        if answer.content_length is not None:
            reply.content_length = answer.content_length
        await reply.prepare(request)
        async for chunk in answer.content.iter_any():
            await reply.write(chunk)
        await reply.write_eof()
        return reply


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _client(app: web.Application) -> AsyncIterator[None]:
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    app[CLIENT] = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
    yield
    await app[CLIENT].close()


def make_app(upstream: str) -> web.Application:
    app = web.Application(client_max_size=64 * 2**20)
    app[UPSTREAM] = upstream.rstrip("/")
    app.cleanup_ctx.append(_client)
    app.router.add_get("/healthz", healthz)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


if __name__ == "__main__":
    web.run_app(
        make_app(sys.argv[2]),
        host="127.0.0.1",
        port=int(sys.argv[1]),
        print=None,
        access_log=None,
        handler_cancellation=True,
    )
