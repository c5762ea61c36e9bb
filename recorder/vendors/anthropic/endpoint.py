"""Anthropic at the door: where the Messages API is, how a call is keyed, how a refusal reads.

    base URL      the host alone (https://api.anthropic.com): paths carry their /v1
    path          /v1/messages; every other path (count_tokens, batches, models, files,
                  skills, the admin API, …) is Anthropic's too, passed through
    spoken by     a request with `anthropic-version` or `anthropic-beta` (every Anthropic
                  SDK sends the version), whatever its path; else a path only Anthropic
                  serves (`OWN_PATHS`); else, on a path no vendor claims, `x-api-key`
                  without a bearer token
    key           `x-api-key` (or `Authorization: Bearer`, forwarded as it came); its keys
                  start `sk-ant-`; the calls taplog makes itself pin `anthropic-version`
    refusal       {"type": "error", "error": {"type", "message"}}; in a stream, the same
                  body as an `error` event
    features      `anthropic-beta` turns on the beta fields a body may use
                  (`context_management`, a system message mid-conversation, …)

The rest of taplog asks for these through `recorder.vendors.apis`, by API or provider.
"""

from __future__ import annotations

from collections.abc import Mapping

from taplog.recorder.vendors.sse import event_bytes

VENDOR = "Anthropic"  # as its users write it
PROVIDER = "anthropic"
BASE_URL = "https://api.anthropic.com"
PREFIX = "/v1"  # between the base URL and a path: the base URL is the host alone
PATH = "/messages"
SDK_BASE = ""  # what a client's base URL ends in: the SDKs add /v1/messages themselves
KEY_HEADERS = ("x-api-key",)
MARK_HEADERS = ("anthropic-version", "anthropic-beta")  # sent by Anthropic's clients alone
# The path families no other vendor serves (unversioned). Models, files, skills, agents and
# vaults are everyone's: the headers decide those.
OWN_PATHS = (
    "/messages",
    "/complete",
    "/organizations",
    "/compliance",
    "/deployments",
    "/deployment_runs",
    "/dreams",
    "/environments",
    "/memory_stores",
    "/sessions",
    "/tunnels",
    "/user_profiles",
)
BASE_URL_VARIABLE = "ANTHROPIC_BASE_URL"
OWN_METHODS: frozenset[str] = frozenset()  # model methods in a path (Gemini's `:generateContent`)
VERSIONED = False  # a path goes upstream without the version a client gave it
API_METHODS: frozenset[str] = frozenset()  # its API is a path (`PATH`), not a method
FEATURE_HEADERS = ("anthropic-beta",)  # a body resent as it was needs the ones it was sent with
VERSION = "2023-06-01"  # pinned on the calls taplog makes itself

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    504: "timeout_error",
}


def keyed_for(headers: Mapping[str, str]) -> bool:
    """Whether a request is keyed the Anthropic way: `x-api-key`, no bearer token."""
    return "x-api-key" in headers and "authorization" not in headers


def owns_key(key: str) -> bool:
    """Whether a key is Anthropic's by its shape (API, OAuth and admin keys alike)."""
    return key.startswith("sk-ant-")


def auth_headers(key: str) -> dict[str, str]:
    """The headers that key a call taplog makes with its own key."""
    return {"x-api-key": key, "anthropic-version": VERSION}


def error_body(status: int, message: str, code: str) -> dict:
    """A refusal as the Anthropic SDKs parse it (they have no field for `code`)."""
    kind = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def stream_error(message: str) -> bytes:
    """The in-band error event that ends a broken stream."""
    error = {"type": "error", "error": {"type": "api_error", "message": message}}
    return event_bytes("error", error)
