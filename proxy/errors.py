"""Errors that taplog itself answers, in the shape the client's SDK parses.

OpenAI SDKs read `{"error": {"message", "type", "param", "code"}}`; Anthropic
SDKs read `{"type": "error", "error": {"type", "message"}}`. The status code
drives the SDKs' retry decisions, so it is chosen with care by the caller.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from taplog.proxy.routing import provider_for

_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    404: "not_found",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    504: "timeout_error",
}


def error_body(provider: str, status: int, message: str, code: str) -> bytes:
    message = f"taplog: {message}"
    if provider == "anthropic":
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    kind = _OPENAI_TYPES.get(status, "server_error")
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


def any_api_error_body(message: str, code: str) -> bytes:
    """A 400 body for a request whose API is not known: both SDKs read this shape."""
    error = {"type": "invalid_request_error", "message": f"taplog: {message}", "param": None}
    return orjson.dumps({"type": "error", "error": {**error, "code": code}})


def error_response(provider: str, status: int, message: str, code: str) -> web.Response:
    return web.Response(
        status=status,
        body=error_body(provider, status, message, code),
        content_type="application/json",
        headers={"x-taplog-error": code},
    )


def stream_error_event(api: str, message: str) -> bytes:
    """An in-band error event that ends a broken stream in the client's own API format."""
    message = f"taplog: {message}"
    if api == "openai.responses":
        error = {"type": "error", "code": "stream_interrupted", "message": message, "param": None}
        return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
    if api == "anthropic.messages":
        error = {"type": "error", "error": {"type": "api_error", "message": message}}
        return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
    error = {
        "error": {
            "message": message,
            "type": "server_error",
            "param": None,
            "code": "stream_interrupted",
        }
    }
    return b"data: " + orjson.dumps(error) + b"\n\n"


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
        return error_response(provider_for(request.raw_path), exc.status, message, code)
