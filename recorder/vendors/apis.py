"""The vendor APIs by name, and the providers that serve them: the one registry.

Each API subpackage owns its whole format; the rest of taplog picks one by API name (or by
provider, or by the path a client called) through this module and knows no vendor by name:

    api_module(api)        its wire module: stream reassembly, answer summary, tool calls
    endpoint(api)          its endpoint: base URL, path, key headers, refusals, stream errors
    conversation(api)      where a request's conversation sits, an answer's text
    splice_module(api)     for an API whose broken streams can be continued: its splice
    provider_endpoint(p)   the endpoint of a provider's main API, which answers for the
                           provider's other paths (passed through) as well
    provider_of_request    the provider whose API a request speaks: its headers first
                           (`anthropic-version`, …), then the paths only one provider
                           serves, else the default provider
    key_owners(headers)    the providers whose keys a request carries, by the keys' shapes
                           (and its query's `?key=`)
    requested(api, …)      the model a request asks for, and whether it streams: from its
                           body, or from its path where the API's method says (Gemini's)

API names are `<provider>.<api>`. A new API is one subpackage and one line in `_APIS` (and,
for a new provider, one in `PROVIDERS`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import unquote_plus

from taplog.recorder.vendors.anthropic import conversation as anthropic_conversation
from taplog.recorder.vendors.anthropic import endpoint as anthropic_endpoint
from taplog.recorder.vendors.anthropic import splice as anthropic_splice
from taplog.recorder.vendors.anthropic import wire as anthropic_wire
from taplog.recorder.vendors.gemini import conversation as gemini_conversation
from taplog.recorder.vendors.gemini import endpoint as gemini_endpoint
from taplog.recorder.vendors.gemini import wire as gemini_wire
from taplog.recorder.vendors.openai_chat import conversation as chat_conversation
from taplog.recorder.vendors.openai_chat import endpoint as chat_endpoint
from taplog.recorder.vendors.openai_chat import splice as chat_splice
from taplog.recorder.vendors.openai_chat import wire as chat_wire
from taplog.recorder.vendors.openai_responses import conversation as responses_conversation
from taplog.recorder.vendors.openai_responses import endpoint as responses_endpoint
from taplog.recorder.vendors.openai_responses import wire as responses_wire


@dataclass(frozen=True, slots=True)
class _Api:
    wire: ModuleType
    endpoint: ModuleType
    conversation: ModuleType
    splice: ModuleType | None = None  # None: its broken streams are not continued


_APIS = {
    "openai.chat": _Api(chat_wire, chat_endpoint, chat_conversation, chat_splice),
    "openai.responses": _Api(responses_wire, responses_endpoint, responses_conversation),
    "anthropic.messages": _Api(
        anthropic_wire, anthropic_endpoint, anthropic_conversation, anthropic_splice
    ),
    "gemini.generate": _Api(gemini_wire, gemini_endpoint, gemini_conversation),
}
API_MODULES: dict[str, ModuleType] = {name: api.wire for name, api in _APIS.items()}
ENDPOINTS: dict[str, ModuleType] = {name: api.endpoint for name, api in _APIS.items()}
SPLICES: dict[str, ModuleType] = {n: api.splice for n, api in _APIS.items() if api.splice}
PROVIDERS = {  # -> its main API
    "openai": "openai.chat",
    "anthropic": "anthropic.messages",
    "gemini": "gemini.generate",
}
DEFAULT_PROVIDER = "openai"  # paths no API claims: OpenAI-compatible servers serve the rest
VERSION = "/v1"  # every API path lives under it; a client may leave it out
# Where a client's key may come, in the order they are looked at: headers, query parameters.
KEY_HEADERS = (
    *anthropic_endpoint.KEY_HEADERS,
    *chat_endpoint.KEY_HEADERS,
    *gemini_endpoint.KEY_HEADERS,
)
KEY_PARAMETERS = (gemini_endpoint.KEY_PARAMETER,)
_BEARER = re.compile(r"(?i)^bearer\s+")
# Request fields that name the run (a user, a cache key), not what is asked.
PER_RUN_FIELDS = frozenset().union(*(api.conversation.PER_RUN for api in _APIS.values()))
# Request fields that ask for a stream, and how.
STREAMING_FIELDS = frozenset().union(*(api.conversation.STREAMING for api in _APIS.values()))


def api_module(api: str) -> ModuleType | None:
    """The wire module of a known LLM API, None for pass-through calls."""
    return API_MODULES.get(api)


def endpoint(api: str) -> ModuleType:
    """The endpoint module of an API; for a pass-through call, the default provider's."""
    return ENDPOINTS.get(api) or ENDPOINTS[PROVIDERS[DEFAULT_PROVIDER]]


def conversation(api: str) -> ModuleType | None:
    """The conversation module of a known LLM API, None for pass-through calls."""
    found = _APIS.get(api)
    return found.conversation if found is not None else None


def splice_module(api: str) -> ModuleType:
    """The splice module of a continuable API (`SPLICES`)."""
    return SPLICES[api]


def provider_endpoint(provider: str) -> ModuleType:
    """The endpoint of a provider's main API; the default provider's for an unknown one."""
    return ENDPOINTS[PROVIDERS.get(provider) or PROVIDERS[DEFAULT_PROVIDER]]


def unversioned(path: str) -> str:
    """A client's path without its leading `/v1`, if it has one."""
    return path[len(VERSION) :] if path == VERSION or path.startswith(f"{VERSION}/") else path


def provider_of_request(path: str, headers: Mapping[str, str]) -> str:
    """The provider whose API a request speaks: from its (lower-cased) headers when one
    provider's clients alone send them, else from its (unversioned) path when one provider
    alone serves it, else from how it is keyed, else the default."""
    speaking = [name for name in PROVIDERS if _speaks(provider_endpoint(name), headers)]
    if len(speaking) == 1:
        return speaking[0]
    by_path = _provider_of_path(path)
    if by_path is not None:
        return by_path
    keyed = [name for name in PROVIDERS if provider_endpoint(name).keyed_for(headers)]
    return keyed[0] if len(keyed) == 1 else DEFAULT_PROVIDER


def _speaks(endpoint: ModuleType, headers: Mapping[str, str]) -> bool:
    """Whether a request's (lower-cased) headers are the provider's own clients' (a header
    only they send: `MARK_HEADERS`)."""
    return any(name in headers for name in endpoint.MARK_HEADERS)


def _provider_of_path(path: str) -> str | None:
    """The provider that alone serves the (unversioned) path's family, or the custom method
    it calls on a resource (`/models/gemini-2.5-pro:generateContent`)."""
    _, colon, method = path.rpartition("/")[2].rpartition(":")
    for name in PROVIDERS:
        endpoint = provider_endpoint(name)
        if colon and method in endpoint.OWN_METHODS:
            return name
        for family in endpoint.OWN_PATHS:
            if path == family or path.startswith(f"{family}/"):
                return name
    return None


def without_bearer(value: str) -> str:
    """A key header's value without its `Bearer ` scheme, if it has one."""
    return _BEARER.sub("", value)


def key_owners(headers: Mapping[str, str], in_query: Iterable[str] = ()) -> frozenset[str]:
    """The providers whose keys, by their shapes, a request's key headers (and the keys
    its query carries, `query_keys`) are."""
    keys = [without_bearer(headers[name]) for name in KEY_HEADERS if name in headers]
    keys += in_query
    return frozenset(
        name for name in PROVIDERS for key in keys if provider_endpoint(name).owns_key(key)
    )


def query_keys(query: str) -> list[str]:
    """The keys a query string carries in a key parameter (`?key=AIza…`)."""
    found = []
    for pair in query.split("&"):
        name, equals, value = pair.partition("=")
        if equals and unquote_plus(name) in KEY_PARAMETERS:
            found.append(unquote_plus(value))
    return found


def api_of_path(provider: str, path: str) -> str | None:
    """The API of `provider` at exactly this (unversioned) path, or at this method of a
    model (Gemini's); None: passed through."""
    for name, module in ENDPOINTS.items():
        if provider == module.PROVIDER and _calls(module, path, exactly=True):
            return name
    return None


def api_ending(path: str) -> str | None:
    """The API a recorded request path calls, whatever came before its API path."""
    return next((name for name, m in ENDPOINTS.items() if _calls(m, path, exactly=False)), None)


def _calls(endpoint: ModuleType, path: str, exactly: bool) -> bool:
    """Whether `path` calls the endpoint's API: its path (exactly, or at the end of a
    recorded one), or a model's method of it (Gemini's `…/models/{model}:generateContent`)."""
    if endpoint.API_METHODS:
        target = path.partition("?")[0]
        resource, colon, method = target.rpartition(":")
        return bool(colon) and method in endpoint.API_METHODS and "/models/" in resource
    return path == endpoint.PATH if exactly else path.endswith(endpoint.PATH)


def requested(api: str, path: str, body: Any) -> tuple[Any, bool]:
    """The model a request asks for and whether it asks for a stream: in its body, or in
    its path for an API whose method says both (Gemini's)."""
    module = ENDPOINTS.get(api)
    if module is not None and module.API_METHODS:
        method = path.partition("?")[0].rpartition(":")[2]
        return module.model_of(path), method == module.STREAMING_METHOD
    fields = body if isinstance(body, dict) else {}
    return fields.get("model"), fields.get("stream") is True


def streams_sse(api: str, path: str) -> bool:
    """Whether a streamed call of `api` at this path takes SSE; Gemini's streams are one
    JSON array unless the query asks for SSE (`alt=sse`, as the SDKs do)."""
    module = ENDPOINTS.get(api)
    if module is None or not module.API_METHODS:
        return True
    return "alt=sse" in path.partition("?")[2].split("&")


def with_model(api: str, body: dict[str, Any], model: str) -> dict[str, Any]:
    """A request of `api` for `model`: in its body, unless the API names the model in its
    path (Gemini's), whose body stays as it is."""
    module = ENDPOINTS.get(api)
    return body if module is not None and module.API_METHODS else {**body, "model": model}


def one_answer(api: str, body: Any) -> Any:
    """An answer's body as one object: a Gemini stream sent as one JSON array (no
    `alt=sse`) folded as its SSE twin would be; any other body as it is."""
    module = ENDPOINTS.get(api)
    if isinstance(body, list) and module is not None and module.API_METHODS:
        return API_MODULES[api].folded(body)
    return body


def upstream_path(provider: str, path: str) -> str:
    """A client's path as it goes after the provider's base URL: without the version the
    client gave it, behind the provider's prefix; or as it came, for a provider whose
    paths carry their own version (Gemini's /v1beta, /v1)."""
    endpoint = provider_endpoint(provider)
    return path if endpoint.VERSIONED else endpoint.PREFIX + unversioned(path)


def api_url(base_url: str, api: str, model: str, stream: bool) -> str:
    """Where a call of `api` goes at a provider with this base URL: its path, or the
    model's method (Gemini's, which names the model and whether it streams)."""
    module = ENDPOINTS[api]
    path = module.call_path(model, stream) if module.API_METHODS else module.PATH
    return base_url.rstrip("/") + module.PREFIX + path


def served_api(provider: str, client_api: str, choice: str) -> str:
    """The API a target of `provider` takes a `client_api` call in: the client's own where
    the provider speaks it, else the one the provider's configuration chose (`choice`:
    `chat`, `responses`), else the provider's main API."""
    own = ENDPOINTS.get(client_api)
    if own is not None and provider == own.PROVIDER:
        return client_api
    chosen = f"{provider}.{choice}"
    return chosen if chosen in ENDPOINTS else PROVIDERS[provider]
