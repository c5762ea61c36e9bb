"""OpenAI Responses at the door: OpenAI's (`openai_chat.endpoint`) but for its path,
/responses, and its stream error, a typed `error` event."""

from __future__ import annotations

from taplog.recorder.vendors.openai_chat.endpoint import (
    API_METHODS,
    BASE_URL,
    FEATURE_HEADERS,
    KEY_HEADERS,
    PREFIX,
    PROVIDER,
    SDK_BASE,
    auth_headers,
    error_body,
)
from taplog.recorder.vendors.sse import event_bytes

__all__ = [
    "API_METHODS",
    "BASE_URL",
    "FEATURE_HEADERS",
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
    return event_bytes("error", error)
