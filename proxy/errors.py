"""Errors that taplog itself answers, in the shape the client's SDK parses.

Each provider's shape is its endpoint's (`recorder.vendors.apis`); taplog's own
messages start with `taplog:`. The status code drives the SDKs' retry
decisions, so it is chosen with care by the caller.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from taplog.proxy.routing import provider_for
from taplog.recorder.vendors.apis import endpoint, provider_endpoint
from taplog.recorder.vendors.errors import any_client_error


def error_body(provider: str, status: int, message: str, code: str) -> bytes:
    return orjson.dumps(provider_endpoint(provider).error_body(status, f"taplog: {message}", code))


def any_api_error_body(message: str, code: str) -> bytes:
    """A 400 body for a request whose API is not known: both SDKs read this shape."""
    return orjson.dumps(any_client_error(f"taplog: {message}", code))


def error_response(provider: str, status: int, message: str, code: str) -> web.Response:
    return web.Response(
        status=status,
        body=error_body(provider, status, message, code),
        content_type="application/json",
        headers={"x-taplog-error": code},
    )


def stream_error_event(api: str, message: str, sse: bool = True) -> bytes:
    """An in-band error event that ends a broken stream in the client's own API format
    (`sse` False: a Gemini stream that is one JSON array, which it closes)."""
    module = endpoint(api)
    return (module.stream_error if sse else module.array_stream_error)(f"taplog: {message}")


@web.middleware
async def in_api_shape(request: web.Request, handler: Any) -> web.StreamResponse:
    """What aiohttp itself would answer as text (no route for a path holding a line break,
    a method no route takes, such as CONNECT) is answered in the client's API shape too."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == "application/json":
            raise
        message = f"{exc.reason}: taplog serves no {request.method} at this path"
        code = "not_found" if exc.status == 404 else "invalid_request"
        return error_response(
            provider_for(request.raw_path, request.headers), exc.status, message, code
        )
