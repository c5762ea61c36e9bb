"""Where a client call goes: provider, API and upstream URL, from what the request speaks.

    [/s/<session>] [/v1] <path>[?query]  → the provider whose API the request speaks
                                           (its base URL, its prefix, then <path>)

Which provider is `recorder.vendors.apis.provider_of_request`'s: the headers only one
vendor's clients send (`anthropic-version`, `anthropic-beta`, `x-api-key` alone,
`x-goog-api-client`, `x-goog-api-key`), else the paths only one vendor serves
(`/messages`, `/complete`, `/organizations`, `/v1beta/…`, `…:generateContent`), else OpenAI
(any OpenAI-compatible server). So every Anthropic or Gemini SDK call goes to its vendor,
models, files and the admin API included, whatever its path. Gemini's paths keep the
version the client gave them (`/v1beta`, `/v1`); the others' go behind their base URL's.

Upstream hosts come only from configuration; the client's path (kept raw,
percent-encoding and query string included) is appended to a configured base,
so no request can pick another host. Dot segments are refused outright, and so
are body fields and headers that other gateways read as an upstream address
(`api_base`, `X-Base-URL`, …): whoever sends one expects a redirect taplog will
not make, and should hear so rather than have the call go elsewhere silently.

A key goes only to the vendor it was sent for (`foreign_key`): a request carrying a key
of one vendor's shape (`sk-ant-…`, `AIza…`, in a header or in `?key=`) that would reach
another's upstream is refused, unless
that upstream is the one configured for the key's vendor, or the vendor's own host.

Near misses are answered here, never forwarded: a doubled version (`/v1/v1/messages`,
from a base URL that ends in /v1 where the SDK adds it) is a 400 naming the right base
URL; the base URL itself (`/`, `/v1`, a `/s/<session>` alone) is a reachability probe,
answered by taplog and recorded nowhere. A missing `/v1` is put right: both SDK styles work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from taplog.proxy.config import Settings
from taplog.recorder.vendors.apis import (
    VERSION,
    api_of_path,
    key_owners,
    provider_endpoint,
    provider_of_request,
    query_keys,
    unversioned,
    upstream_path,
)

PASSTHROUGH = "passthrough"
_DEFAULT_PORTS = {"http": 80, "https": 443}

UPSTREAM_FIELDS = frozenset({"api_base", "base_url", "api_url", "azure_endpoint", "upstream_url"})
UPSTREAM_HEADERS = frozenset({"x-api-base", "x-base-url", "x-upstream-url", "x-target-url"})


class RouteError(Exception):
    """A request target taplog will not forward; `provider` picks the error shape, and
    `base` (a doubled version) is the path the client's base URL should end in."""

    def __init__(self, message: str, provider: str, base: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.base = base


@dataclass(frozen=True, slots=True)
class CallRoute:
    """Where a client call goes, from its path alone (`route`)."""

    provider: str  # "openai", "anthropic" or "gemini" (`recorder.vendors.apis.PROVIDERS`)
    api: str  # openai.chat, openai.responses, anthropic.messages, gemini.generate or passthrough
    path: str  # the client's path and query, without the /s/<session> prefix
    upstream_url: str
    session: str | None  # named by a /s/<session>/ prefix, not yet validated
    probe: bool = False  # the base URL itself: answered by taplog, never forwarded
    query_keys: tuple[str, ...] = ()  # keys in its query (`?key=`: Gemini's REST way)


def _split_session(path: str) -> tuple[str | None, str]:
    if not path.startswith("/s/"):
        return None, path
    session, slash, rest = path[3:].partition("/")
    return unquote(session), slash + rest


def provider_for(raw_target: str, headers: Mapping[str, str]) -> str:
    """The provider whose error shape a refusal of this target takes."""
    path = _split_session(raw_target.partition("?")[0])[1]
    lowered = {name.lower(): value for name, value in headers.items()}
    return provider_of_request(unversioned(path), lowered)


def route(
    raw_target: str, method: str, headers: Mapping[str, str], settings: Settings
) -> CallRoute:
    """Route a raw request target (path and query, as the client sent them) with its
    lower-cased headers."""
    path, question, query = raw_target.partition("?")
    session, path = _split_session(path)
    rest = unversioned(path)
    provider = provider_of_request(rest, headers)
    if not raw_target.startswith("/"):
        raise RouteError("request target must be a path", provider)
    if any(segment in (".", "..") for segment in unquote(path).split("/")):
        raise RouteError("path must not contain '.' or '..' segments", provider)
    if rest == VERSION or rest.startswith(f"{VERSION}/"):
        sdk_base = provider_endpoint(provider).SDK_BASE
        message = (
            f"the path {path} has {VERSION} twice (the base URL ends in {VERSION} and the "
            "client adds it again)"
        )
        prefix = "" if session is None else f"/s/{session}"
        raise RouteError(message, provider, base=prefix + sdk_base)
    upstream = settings.base_url(provider).rstrip("/") + upstream_path(provider, path)
    api = (api_of_path(provider, rest) or PASSTHROUGH) if method == "POST" else PASSTHROUGH
    target = path + question + query
    probe = rest in ("", "/")
    keys = tuple(query_keys(query))
    return CallRoute(provider, api, target, upstream + question + query, session, probe, keys)


def foreign_key(headers: Mapping[str, str], route: CallRoute, settings: Settings) -> str | None:
    """Why this call must not go on, when it carries another vendor's key (beside its own,
    or alone); else None.

    A key may go to the upstream configured for its own vendor, or to that vendor's own
    host (an `openai_base` of Anthropic's OpenAI-compatible endpoint, say)."""
    upstream = _origin(route.upstream_url)
    owners = key_owners(headers, route.query_keys) - {route.provider}
    strangers = [owner for owner in sorted(owners) if not _takes(upstream, owner, settings)]
    if not strangers:
        return None
    owner = provider_endpoint(strangers[0])
    served = provider_endpoint(route.provider)
    return (
        f"this request carries an {owner.VENDOR} key but speaks {served.VENDOR}'s API, so it "
        f"would go to {served.VENDOR}'s upstream; taplog sends a key only to the vendor it "
        f"was sent for, and forwarded nothing. Make {owner.VENDOR} calls with its own client "
        f"({owner.BASE_URL_VARIABLE} pointing at taplog), or set {route.provider}_base to a "
        "server that takes this key"
    )


def _takes(upstream: tuple[str, str, int | None], owner: str, settings: Settings) -> bool:
    """Whether `upstream` takes `owner`'s keys: it is the upstream configured for that
    vendor, or the vendor's own host."""
    own = (settings.base_url(owner), provider_endpoint(owner).BASE_URL)
    return upstream in {_origin(url) for url in own}


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or ""), parts.port or _DEFAULT_PORTS.get(parts.scheme)


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
