"""Vendor errors through one small taxonomy, and out in the other vendor's shape (protocols.md 5.7).

Each vendor's error (HTTP status plus body, or an in-band stream error) is classified once
into an `ErrorKind`; the kind decides the client-facing status and body in the other API.
The kind also says what to do next, which the proxy's failover rule (5.1) follows:

kind        Anthropic                           OpenAI               next step
----------  ----------------------------------  -------------------  -------------------
INVALID     400 invalid_request_error           400, 422             answer 4xx
AUTH        401 authentication_error            401                  answer 4xx
PERMISSION  403 permission_error                403                  answer 4xx
NOT_FOUND   404 not_found_error                 404                  answer 4xx
TOO_LARGE   413 request_too_large               413 (400 going out)  answer 4xx
BILLING     402 billing_error, 429 spend limit  429 quota            stop: won't clear
RATE_LIMIT  429 rate_limit_error                429                  retry / fail over*
SERVER      500 api_error, other 5xx            500, other 5xx, 409  retry / fail over
TIMEOUT     504 timeout_error                   504, 408             retry / fail over
OVERLOADED  529 overloaded_error                503                  retry / fail over

(* configurable, 5.1.) Anthropic's 413 reaches OpenAI clients as 400
``context_length_exceeded``, the code OpenAI gives an oversized prompt. The message is kept
word for word; a missing or unreadable body gets a message naming the upstream status.
An in-band error (status below 400, as after HTTP 200) is classified by its type/code.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from taplog.recorder.vendors.sse import as_str, dig

__all__ = [
    "ErrorKind",
    "anthropic_error_kind",
    "anthropic_error_to_openai",
    "any_client_error",
    "context_overflow",
    "error_message",
    "openai_error_kind",
    "openai_error_to_anthropic",
    "retry_after",
    "spend_limit",
]


class ErrorKind(StrEnum):
    INVALID = "invalid"
    AUTH = "auth"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    TOO_LARGE = "too_large"
    BILLING = "billing"
    RATE_LIMIT = "rate_limit"
    SERVER = "server"
    TIMEOUT = "timeout"
    OVERLOADED = "overloaded"

    @property
    def transient(self) -> bool:
        """Worth a retry or a failover (rate limits only when configured so)."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {ErrorKind.RATE_LIMIT, ErrorKind.SERVER, ErrorKind.TIMEOUT, ErrorKind.OVERLOADED}
)

_ANTHROPIC_TYPES = {
    "invalid_request_error": ErrorKind.INVALID,
    "authentication_error": ErrorKind.AUTH,
    "permission_error": ErrorKind.PERMISSION,
    "not_found_error": ErrorKind.NOT_FOUND,
    "request_too_large": ErrorKind.TOO_LARGE,
    "billing_error": ErrorKind.BILLING,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "api_error": ErrorKind.SERVER,
    "timeout_error": ErrorKind.TIMEOUT,
    "overloaded_error": ErrorKind.OVERLOADED,
}
_TO_ANTHROPIC = {kind: name for name, kind in _ANTHROPIC_TYPES.items()}
_ANTHROPIC_STATUS = {
    ErrorKind.INVALID: 400,
    ErrorKind.AUTH: 401,
    ErrorKind.BILLING: 402,
    ErrorKind.PERMISSION: 403,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.TOO_LARGE: 413,
    ErrorKind.RATE_LIMIT: 429,
    ErrorKind.SERVER: 500,
    ErrorKind.TIMEOUT: 504,
    ErrorKind.OVERLOADED: 529,
}
_BY_STATUS = {
    400: ErrorKind.INVALID,
    422: ErrorKind.INVALID,
    401: ErrorKind.AUTH,
    402: ErrorKind.BILLING,
    403: ErrorKind.PERMISSION,
    404: ErrorKind.NOT_FOUND,
    413: ErrorKind.TOO_LARGE,
    429: ErrorKind.RATE_LIMIT,
    408: ErrorKind.TIMEOUT,
    504: ErrorKind.TIMEOUT,
    503: ErrorKind.OVERLOADED,
    529: ErrorKind.OVERLOADED,
}
# kind -> (status, error.type, error.code) as OpenAI sends them
_OPENAI = {
    ErrorKind.INVALID: (400, "invalid_request_error", None),
    ErrorKind.AUTH: (401, "invalid_request_error", "invalid_api_key"),
    ErrorKind.PERMISSION: (403, "invalid_request_error", None),
    ErrorKind.NOT_FOUND: (404, "invalid_request_error", "model_not_found"),
    ErrorKind.TOO_LARGE: (400, "invalid_request_error", "context_length_exceeded"),
    ErrorKind.BILLING: (429, "insufficient_quota", "insufficient_quota"),
    ErrorKind.RATE_LIMIT: (429, "requests", "rate_limit_exceeded"),
    ErrorKind.SERVER: (500, "server_error", None),
    ErrorKind.TIMEOUT: (504, "server_error", "timeout"),
    ErrorKind.OVERLOADED: (503, "server_error", None),
}
_OPENAI_INBAND = {
    "insufficient_quota": ErrorKind.BILLING,
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "requests": ErrorKind.RATE_LIMIT,
    "tokens": ErrorKind.RATE_LIMIT,
    "invalid_request_error": ErrorKind.INVALID,
    "context_length_exceeded": ErrorKind.INVALID,
    "timeout": ErrorKind.TIMEOUT,
}


def _by_status(status: int) -> ErrorKind:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ErrorKind.SERVER if status >= 500 or status == 409 else ErrorKind.INVALID


def anthropic_error_kind(status: int, body: Any) -> ErrorKind:
    """Classify an Anthropic error; the body's ``error.type`` wins over the status."""
    kind = _ANTHROPIC_TYPES.get(as_str(dig(body, "error", "type")) or "")
    if kind is ErrorKind.RATE_LIMIT and dig(body, "error", "details", "error_code") is not None:
        return ErrorKind.BILLING  # the spend-limit variant does not clear by waiting
    if kind is not None:
        return kind
    return _by_status(status) if status >= 400 else ErrorKind.SERVER


def openai_error_kind(status: int, body: Any) -> ErrorKind:
    """Classify an OpenAI error by status, or by type/code when it came in-band."""
    code = as_str(dig(body, "error", "code")) or ""
    kind = as_str(dig(body, "error", "type")) or ""
    if status >= 400:
        if status == 429 and "insufficient_quota" in (code, kind):
            return ErrorKind.BILLING
        return _by_status(status)
    return _OPENAI_INBAND.get(code) or _OPENAI_INBAND.get(kind) or ErrorKind.SERVER


def _message(body: Any, status: int) -> str:
    message = as_str(dig(body, "error", "message"))
    if message is None and isinstance(dig(body, "error"), str):
        message = body["error"]
    return message if message is not None else f"upstream error (HTTP {status})"


def anthropic_error_to_openai(status: int, body: dict | None) -> tuple[int, dict]:
    """An Anthropic error as (status, body) for an OpenAI client."""
    new_status, kind, code = _OPENAI[anthropic_error_kind(status, body)]
    error = {"message": _message(body, status), "type": kind, "param": None, "code": code}
    return new_status, {"error": error}


def openai_error_to_anthropic(status: int, body: dict | None) -> tuple[int, dict]:
    """An OpenAI error as (status, body) for an Anthropic client."""
    kind = openai_error_kind(status, body)
    error = {"type": _TO_ANTHROPIC[kind], "message": _message(body, status)}
    out: dict[str, Any] = {"type": "error", "error": error}
    if request_id := as_str(dig(body, "request_id")):
        out["request_id"] = request_id
    return _ANTHROPIC_STATUS[kind], out


def any_client_error(message: str, code: str) -> dict:
    """An error body both vendors' SDKs read, for a request whose API is not known."""
    error = {"type": "invalid_request_error", "message": message, "param": None}
    return {"type": "error", "error": {**error, "code": code}}


def spend_limit(body: Any) -> bool:
    """A 429 that waiting will not clear: a quota or spend limit (either vendor's)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return False
    return (
        error.get("code") == "insufficient_quota"
        or error.get("type") == "insufficient_quota"
        or (isinstance(error.get("details"), dict) and bool(error["details"].get("error_code")))
    )


def context_overflow(status: int, body: Any) -> bool:
    """A refusal because the prompt does not fit the model's context window."""
    if status not in (400, 413):
        return False
    if isinstance(body, list) and len(body) == 1:  # Gemini's, to a stream without alt=sse
        body = body[0]
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return False
    if error.get("code") == "context_length_exceeded" or error.get("type") == "request_too_large":
        return True
    message = str(error.get("message", "")).lower()
    return any(
        said in message
        for said in ("prompt is too long", "context window", "exceeds the maximum number of tokens")
    )


def error_message(body: Any) -> str | None:
    """The message of a vendor's error body (either vendor's shape), if it has one."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return str(message) if message else None


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds the vendor asked to wait (`retry-after-ms`, `retry-after` seconds or date)."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when else None
