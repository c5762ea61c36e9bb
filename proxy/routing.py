"""Where a client call goes: provider, API and upstream URL, from the path alone.

    [/s/<session>] [/v1] <an API's path>[/…]  → that API's provider (its base URL and prefix)
    [/s/<session>] [/v1] <anything else>      → the default provider (OpenAI-compatible)

The APIs, their paths and their providers are `recorder.vendors.apis`'s; with today's:

    [/v1] /messages[/…]   → Anthropic  (anthropic_base + /v1/messages…)
    [/v1] /<anything else> → OpenAI     (openai_base + /<anything else>)

Upstream hosts come only from configuration; the client's path (kept raw,
percent-encoding and query string included) is appended to a configured base,
so no request can pick another host. Dot segments are refused outright, and so
are body fields and headers that other gateways read as an upstream address
(`api_base`, `X-Base-URL`, …): whoever sends one expects a redirect taplog will
not make, and should hear so rather than have the call go elsewhere silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from taplog.proxy.config import Settings
from taplog.recorder.vendors.apis import api_of_path, provider_of_path, unversioned, upstream_path

PASSTHROUGH = "passthrough"

UPSTREAM_FIELDS = frozenset({"api_base", "base_url", "api_url", "azure_endpoint", "upstream_url"})
UPSTREAM_HEADERS = frozenset({"x-api-base", "x-base-url", "x-upstream-url", "x-target-url"})


class RouteError(Exception):
    """A request target taplog will not forward; `provider` picks the error shape."""

    def __init__(self, message: str, provider: str) -> None:
        super().__init__(message)
        self.provider = provider


@dataclass(frozen=True, slots=True)
class CallRoute:
    """Where a client call goes, from its path alone (`route`)."""

    provider: str  # "openai" or "anthropic" (`recorder.vendors.apis.PROVIDERS`)
    api: str  # openai.chat, openai.responses, anthropic.messages or passthrough
    path: str  # the client's path and query, without the /s/<session> prefix
    upstream_url: str
    session: str | None  # named by a /s/<session>/ prefix, not yet validated


def _split_session(path: str) -> tuple[str | None, str]:
    if not path.startswith("/s/"):
        return None, path
    session, slash, rest = path[3:].partition("/")
    return unquote(session), slash + rest


def provider_for(raw_target: str) -> str:
    """The provider whose error shape a refusal of this target takes."""
    return provider_of_path(unversioned(_split_session(raw_target.partition("?")[0])[1]))


def route(raw_target: str, method: str, settings: Settings) -> CallRoute:
    """Route a raw request target (path and query, as the client sent them)."""
    path, question, query = raw_target.partition("?")
    session, path = _split_session(path)
    rest = unversioned(path)
    provider = provider_of_path(rest)
    if not raw_target.startswith("/"):
        raise RouteError("request target must be a path", provider)
    if any(segment in (".", "..") for segment in unquote(path).split("/")):
        raise RouteError("path must not contain '.' or '..' segments", provider)
    if session is not None and not rest:
        raise RouteError("a /s/<session>/ prefix must be followed by an API path", provider)
    upstream = settings.base_url(provider).rstrip("/") + upstream_path(provider, rest)
    api = (api_of_path(provider, rest) or PASSTHROUGH) if method == "POST" else PASSTHROUGH
    return CallRoute(provider, api, path + question + query, upstream + question + query, session)


def upstream_override(headers: dict[str, str], parsed: object) -> str | None:
    """The header or top-level body field by which a call tries to pick its upstream."""
    header = next((name for name in headers if name in UPSTREAM_HEADERS), None)
    if header is not None:
        return f"header {header}"
    if isinstance(parsed, dict):
        field = next((name for name in parsed if name in UPSTREAM_FIELDS), None)
        if field is not None:
            return f"body field {field!r}"
    return None
