"""OpenAI at the door: where Chat Completions is, how a call is keyed, how a refusal reads.

    base URL      with its version (https://api.openai.com/v1): paths come after it
    path          /chat/completions; every path no API claims goes to OpenAI's base URL
                  (any OpenAI-compatible server), passed through
    spoken by     a request with `openai-organization`, `openai-project` or `openai-beta`,
                  or on its model APIs' paths (`OWN_PATHS`); else any request no other
                  vendor's headers, paths or key style claim
    key           `Authorization: Bearer` (Azure OpenAI's `api-key` is a key too); its keys
                  start `sk-proj-`, `sk-svcacct-`, `sk-admin-`, or hold `T3BlbkFJ`
                  (base64 of "OpenAI", in every key it issues); other `sk-` keys are
                  other vendors' too (DeepSeek, Moonshot…), so they prove nothing
    refusal       {"error": {"message", "type", "param", "code"}}; in a stream, the same
                  body as a `data:` event

Responses (`openai_responses.endpoint`) shares all of it but its path and stream error.
"""

from __future__ import annotations

from collections.abc import Mapping

from taplog.recorder.vendors.sse import event_bytes

VENDOR = "OpenAI"  # as its users write it
PROVIDER = "openai"
BASE_URL = "https://api.openai.com/v1"
PREFIX = ""  # between the base URL and a path: the base URL carries its /v1
PATH = "/chat/completions"
SDK_BASE = "/v1"  # what a client's base URL ends in
KEY_HEADERS = ("api-key", "authorization")
FEATURE_HEADERS: tuple[str, ...] = ()  # a body's fields need no header to be taken
MARK_HEADERS = ("openai-organization", "openai-project", "openai-beta")
# Its model APIs' families; every other path no vendor claims is its too (the default).
OWN_PATHS = ("/chat/completions", "/responses", "/completions", "/embeddings")
BASE_URL_VARIABLE = "OPENAI_BASE_URL"
OWN_METHODS: frozenset[str] = frozenset()  # model methods in a path (Gemini's `:generateContent`)
VERSIONED = False  # a path goes upstream without the version a client gave it
API_METHODS: frozenset[str] = frozenset()  # its API is a path (`PATH`), not a method
_KEY_PREFIXES = ("sk-proj-", "sk-svcacct-", "sk-admin-")
_KEY_MARK = "T3BlbkFJ"

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    404: "not_found",
}


def keyed_for(headers: Mapping[str, str]) -> bool:
    """Whether a request is keyed only the way OpenAI keys are: a bearer token proves
    nothing (every vendor takes one), so never."""
    return False


def owns_key(key: str) -> bool:
    """Whether a key is OpenAI's by its shape."""
    return key.startswith(_KEY_PREFIXES) or (key.startswith("sk-") and _KEY_MARK in key)


def auth_headers(key: str) -> dict[str, str]:
    """The headers that key a call taplog makes with its own key."""
    return {"authorization": f"Bearer {key}"}


def error(message: str, kind: str, code: str | None) -> dict:
    """An OpenAI error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def error_body(status: int, message: str, code: str) -> dict:
    """A refusal as the OpenAI SDKs parse it."""
    return error(message, _ERROR_TYPES.get(status, "server_error"), code)


def stream_error(message: str) -> bytes:
    """The in-band error chunk that ends a broken stream."""
    return event_bytes(None, error(message, "server_error", "stream_interrupted"))
