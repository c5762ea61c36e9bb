"""Gemini at the door: where Google's Gemini API is, how a call is keyed, how a refusal reads.

base URL      the host alone (https://generativelanguage.googleapis.com): a path
              carries its own version (/v1beta, /v1, /v1alpha), which goes upstream as
              it came (the `google-genai` SDKs choose it; `GOOGLE_GEMINI_BASE_URL`
              names the host)
paths         /v1beta/models/{model}:generateContent, :streamGenerateContent (?alt=sse),
              :countTokens, …, /v1beta/models, /v1beta/files, /upload/v1beta/files, and
              the same under /v1: every call is Gemini's; the first two are its API
              (`gemini.generate`), the rest passed through
spoken by     a request with `x-goog-api-client` or `x-goog-api-key` (the SDKs send
              both), whatever its path; else a versioned Gemini path (`OWN_PATHS`) or a
              model method only Google's APIs have (`OWN_METHODS`: `…:generateContent`)
key           `x-goog-api-key`, or `?key=` in the URL (curl, REST examples); its keys
              start `AIza`
refusal       {"error": {"code", "message", "status"}}, as Google's APIs answer
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

from taplog.recorder.vendors.sse import event_bytes

VENDOR = "Gemini"  # as its users write it
PROVIDER = "gemini"
BASE_URL = "https://generativelanguage.googleapis.com"
PREFIX = ""  # between the base URL and a path: the path carries its version
# Its API is a model's method, not a path: `…/models/{model}:generateContent` (the model
# in the path, not the body) and its stream, `:streamGenerateContent`.
API_METHODS = frozenset({"generateContent", "streamGenerateContent"})
STREAMING_METHOD = "streamGenerateContent"
API_VERSION = "/v1beta"  # taplog's own calls: the version the SDKs use (v1 has no tools)
FEATURE_HEADERS: tuple[str, ...] = ()
SDK_BASE = ""  # what a client's base URL ends in: the SDKs add /v1beta/… themselves
VERSIONED = True  # a client's path goes upstream with its version, as it came
KEY_HEADERS = ("x-goog-api-key",)
KEY_PARAMETER = "key"  # the query parameter a key may come in instead
MARK_HEADERS = ("x-goog-api-client", "x-goog-api-key")  # sent by Google's clients alone
# Path families only Gemini serves, as the client sent them (their version is their own).
OWN_PATHS = ("/v1beta", "/v1alpha", "/upload")
# Google's custom methods on a model (`/v1/models/gemini-2.5-pro:generateContent`): its
# `/v1` paths are otherwise OpenAI's (`/v1/models`), whose model ids may hold colons too.
OWN_METHODS = frozenset(
    {
        "generateContent",
        "streamGenerateContent",
        "countTokens",
        "embedContent",
        "batchEmbedContents",
        "batchGenerateContent",
        "asyncBatchEmbedContent",
        "predict",
        "predictLongRunning",
    }
)
BASE_URL_VARIABLE = "GOOGLE_GEMINI_BASE_URL"

_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def keyed_for(headers: Mapping[str, str]) -> bool:
    """Whether a request is keyed the Gemini way: `x-goog-api-key`."""
    return "x-goog-api-key" in headers


def owns_key(key: str) -> bool:
    """Whether a key is Google's by its shape (an API key: `AIza` and 35 more)."""
    return key.startswith("AIza")


def auth_headers(key: str) -> dict[str, str]:
    """The headers that key a call taplog makes with its own key."""
    return {"x-goog-api-key": key}


def call_path(model: str, stream: bool) -> str:
    """Where a call of a model goes, streamed as SSE or whole (taplog's own calls)."""
    if stream:
        return f"{API_VERSION}/models/{model}:{STREAMING_METHOD}?alt=sse"
    return f"{API_VERSION}/models/{model}:generateContent"


def error_body(status: int, message: str, code: str) -> dict:
    """A refusal as Google's APIs write one (the SDKs read `code`, `message`, `status`;
    taplog's own code goes in `details`, where Google puts the reason)."""
    kind = _STATUSES.get(status, "INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    reason = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": code}
    return {"error": {"code": status, "message": message, "status": kind, "details": [reason]}}


def model_of(path: str) -> str | None:
    """The model a call's path names (`/v1beta/models/gemini-2.5-pro:generateContent?…`)."""
    resource = path.partition("?")[0].rpartition("/models/")[2]
    model = resource.rpartition(":")[0]
    return model or None


def with_model(url: str, model: str) -> str:
    """A call's URL with another model in its path (its method and query kept)."""
    path, query, rest = url.partition("?")
    head, models, resource = path.rpartition("/models/")
    method = resource.rpartition(":")[2]
    return f"{head}{models}{model}:{method}{query}{rest}"


def stream_error(message: str) -> bytes:
    """The error event that ends a broken stream (Google sends the error body as data)."""
    return event_bytes(None, error_body(500, message, "stream_interrupted"))


def array_stream_error(message: str) -> bytes:
    """The error that ends a broken stream sent as one JSON array (no `alt=sse`): its last
    element, and the array's end, so a client reads the error rather than cut JSON."""
    return b"," + orjson.dumps(error_body(500, message, "stream_interrupted")) + b"]"
