"""One try of a client call against one target: what is sent, and what came back means.

A target speaks the client's own wire format (the original provider, or another
model or provider of the same kind) or the other one, in which case the body is
translated (recorder.vendors). Whatever came back is judged once, here:

    answer                                   verdict
    ───────────────────────────────────────  ────────────────────────────────
    2xx (a stream whose first event is fine)  ok: relay it to the client
    connection error, timeout                 retry, then fail over
    408, 409, 5xx, 529                        retry, then fail over
    429 rate limit                            retry after the wait the vendor asked for if it fits
                                              (vendors.errors.retry_after), else fail over
    429 spend limit (vendors.errors)          final
    400/413 the prompt is over the context    final for this target; the next one whose
      window (vendors.errors)                   context window is larger takes the call
    400, 401, 403, 404, 413, 422, other 4xx   final: never tried again on any target
    2xx stream whose first event is an error  retry, then fail over (recorder.vendors.watch)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from multidict import CIMultiDict, CIMultiDictProxy

from taplog.proxy.failover.rules import Target
from taplog.proxy.upstream import request_headers
from taplog.recorder import __version__
from taplog.recorder.vendors.anthropic.thinking import without_gemini_thinking
from taplog.recorder.vendors.apis import api_url, endpoint, requested, served_api, streams_sse
from taplog.recorder.vendors.errors import spend_limit
from taplog.recorder.vendors.openai_responses.chaining import needs_unchaining, unchained
from taplog.recorder.vendors.routes import Options, route_for
from taplog.recorder.vendors.translation import Translated, Untranslatable

OK, RETRY, FINAL = "ok", "retry", "final"
_RETRYABLE = frozenset({408, 409, 429, 529})


@dataclass(slots=True)
class Attempt:
    """What one try sends, where, and in which API (made once per try, never changed)."""

    target: Target
    api: str  # the upstream API (or passthrough)
    url: str
    headers: CIMultiDict[str]
    body: bytes
    parsed: Any
    translation: Translated | None  # None: the client's own format
    method: str = "POST"
    own_key: bool = False  # keyed with the target provider's key (not the client's)
    encoded: bytes | None = None  # the client's bytes of `body`, sent as they came (encoded)

    @property
    def stream(self) -> bool:
        """Whether it asks for an SSE stream: in its body, or in its URL (Gemini's method;
        without `alt=sse` its stream is one JSON array, a body like any other)."""
        return requested(self.api, self.url, self.parsed)[1] and streams_sse(self.api, self.url)


def as_sent(
    target: Target,
    api: str,
    method: str,
    url: str,
    headers: CIMultiDictProxy[str],
    body: bytes,
    parsed: Any,
    encoded: bytes | None = None,
) -> Attempt:
    """The call exactly as the client made it, to its own vendor (any method, any path):
    `encoded`, the client's bytes of `body`, go with their Content-Encoding."""
    sent = request_headers(headers)
    return Attempt(target, api, url, sent, body, parsed, None, method, encoded=encoded)


def target_api(target: Target, client_api: str) -> str:
    """The API a target is called with: the client's own where its provider speaks it,
    else the API its provider names (`recorder.vendors.apis.served_api`)."""
    return served_api(target.provider.type, client_api, target.provider.api)


def _url(target: Target, api: str, stream: bool) -> str:
    return api_url(target.provider.base_url, api, target.model, stream)


def _rewritten_headers(client: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """The client's headers over a body taplog wrote: plain JSON, whatever coding the
    client's own body came in (its length is the client library's to set)."""
    headers = request_headers(client)
    if "content-encoding" in headers:
        headers.popall("content-encoding")
        headers["content-type"] = "application/json"
    return headers


def _own_headers(target: Target, api: str, client: CIMultiDictProxy[str]) -> CIMultiDict[str]:
    """Headers for a provider other than the client's: its own key, from the environment."""
    key = target.provider.api_key() or ""
    headers = CIMultiDict(
        {"content-type": "application/json", "accept": client.get("accept", "application/json")}
    )
    headers["user-agent"] = f"{client.get('user-agent', 'unknown')} taplog/{__version__}"
    headers.extend(endpoint(api).auth_headers(key))
    return headers


def _feature_headers(api: str, client: CIMultiDictProxy[str]) -> list[tuple[str, str]]:
    """The client's headers that switch on its body's features (`anthropic-beta`)."""
    return [
        (name, value) for name in endpoint(api).FEATURE_HEADERS for value in client.getall(name, ())
    ]


def plan(
    target: Target,
    client_provider: str,
    client_api: str,
    parsed: dict[str, Any],
    raw: bytes,
    client_headers: CIMultiDictProxy[str],
    client_url: str,
    allow_prefill: bool = False,
    history: list[Any] | None = None,
    leave_out: bool = False,
    encoded: bytes | None = None,
) -> Attempt:
    """The request for `target`; raises Untranslatable when it cannot take the call.

    `history` is the conversation a Responses call chains to with
    `previous_response_id`, for targets that do not hold it themselves. `encoded` is
    the client's own bytes of `raw` (sent with a Content-Encoding): they go where the
    call goes as it came; any body taplog rewrites goes as plain JSON.
    """
    api = target_api(target, client_api)
    same_provider = target.provider.name == client_provider
    model, stream = requested(client_api, client_url, parsed)
    if api != client_api:
        route = route_for(client_api, api)
        if route is None:
            raise Untranslatable(f"taplog cannot serve {client_api} calls from {api}")
        options = Options(target.model, allow_prefill, history, leave_out, stream=stream)
        translation = route.request(parsed, options)
        body = orjson.dumps(translation.body)
        headers = _own_headers(target, api, client_headers)
        url = _url(target, api, stream)
        return Attempt(target, api, url, headers, body, translation.body, translation, own_key=True)
    if same_provider:
        headers = _rewritten_headers(client_headers)
    else:  # the body goes as the client wrote it: the headers its fields need go too
        headers = _own_headers(target, api, client_headers)
        headers.extend(_feature_headers(api, client_headers))
    changed = unchained(parsed, history) if needs_unchaining(parsed, same_provider) else parsed
    if api == "anthropic.messages":
        changed = without_gemini_thinking(changed)
    if same_provider and changed is parsed and model == target.model:
        if encoded is None:  # `raw` is what is sent: its headers as it is
            return Attempt(target, api, client_url, headers, raw, parsed, None)
        client = request_headers(client_headers)  # the call as sent, encoded
        return Attempt(target, api, client_url, client, raw, parsed, None, encoded=encoded)
    if endpoint(api).API_METHODS:  # the model is in the URL (Gemini's): the body stays
        if same_provider:
            url = endpoint(api).with_model(client_url, target.model)
        else:
            url = _url(target, api, stream)
        body = raw if changed is parsed and raw else orjson.dumps(changed)  # raw: b"" (resume)
        return Attempt(target, api, url, headers, body, changed, None, own_key=not same_provider)
    changed = {**changed, "model": target.model}
    url = client_url if same_provider else _url(target, api, stream)
    body = orjson.dumps(changed)
    return Attempt(target, api, url, headers, body, changed, None, own_key=not same_provider)


def verdict(status: int, body: Any) -> str:
    """What an HTTP answer means for this call (see the module table)."""
    if status < 400:
        return OK
    if status == 429 and spend_limit(body):
        return FINAL
    if status in _RETRYABLE or status >= 500:
        return RETRY
    return FINAL
