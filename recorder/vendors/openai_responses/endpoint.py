"""OpenAI Responses at the door: OpenAI's (`openai_chat.endpoint`) but for its path,
/responses, and its stream error, a typed `error` event."""

from __future__ import annotations

import orjson

from taplog.recorder.vendors.openai_chat.endpoint import (
    BASE_URL,
    KEY_HEADERS,
    PREFIX,
    PROVIDER,
    SDK_BASE,
    auth_headers,
    error_body,
)

__all__ = [
    "BASE_URL",
    "KEY_HEADERS",
    "PATH",
    "PREFIX",
    "PROVIDER",
    "SDK_BASE",
    "auth_headers",
    "error_body",
    "stream_error",
]

PATH = "/responses"


def stream_error(message: str) -> bytes:
    """The in-band error event that ends a broken stream."""
    error = {"type": "error", "code": "stream_interrupted", "message": message, "param": None}
    return b"event: error\ndata: " + orjson.dumps(error) + b"\n\n"
