"""The request path: admit, read, resolve the session, record, forward.

Order matters and is part of the contract:
0. take a `/t/<token>/` prefix off the path and check the inbound token
   (missing or wrong: 401 in the client's error shape, nothing recorded);
1. route the path (a bad one is a 400 in the client's error shape);
2. refuse with 503 when the recorder cannot take more (record or refuse),
   before anything reaches a vendor;
3. read the body (over the limit: 413; not all there within the body
   timeout: 408; naming an upstream of its own: 400);
4. with `--replay`, answer from the recording when it holds the call (or
   refuse a miss in strict mode): nothing recorded, no session resolved;
5. resolve the session (a bad explicit id: 400, nothing created), hand
   `session.started` / `llm.request` to the recorder, forward, and let
   `forward` record the answer whatever happens to it.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from proxy import auth, errors, routing
from proxy.failover import Call as FailoverCall
from proxy.failover import serve_with_fallbacks
from proxy.fallbacks import Rule
from proxy.forward import Exchange, forward
from proxy.replay import REPLAYER
from proxy.routing import PASSTHROUGH, RouteError
from proxy.state import FALLBACKS, RECORDER, RESOLVER, SETTINGS, TOKENS
from proxy.upstream import request_headers
from recorder import __version__
from recorder.bodies import parse_json
from recorder.events import SESSION_STARTED, make_event, new_id
from recorder.exchange import LlmRequest
from recorder.secrets import api_key, fingerprint, redact_url, safe_headers, secret_values
from recorder.sessions import Call, InvalidSessionId, Resolution
from recorder.writer import EventRecord

FAILOVER_APIS = frozenset({"openai.chat", "openai.responses", "anthropic.messages"})


def _is_json(request: web.Request) -> bool:
    return request.content_type in ("application/json", "")


def _retry_count(headers: dict[str, str]) -> int:
    value = headers.get("x-stainless-retry-count", "0")
    return int(value) if value.isdigit() else 0


async def proxy_call(request: web.Request) -> web.StreamResponse:
    received = time.perf_counter()
    app = request.app
    settings, recorder = app[SETTINGS], app[RECORDER]
    token, target = auth.split_token(request.raw_path)
    if not app[TOKENS].accepts(token, request.headers.get(auth.TOKEN_HEADER)):
        return errors.error_response(
            routing.provider_for(target), 401, auth.REFUSED, "unauthorized"
        )
    try:
        route = routing.route(target, request.method, settings)
    except RouteError as exc:
        return errors.error_response(exc.provider, 400, str(exc), "invalid_path")
    if not recorder.accepting:
        reason = recorder.health()["reason"]
        message = f"not recording ({reason}); the call was not sent to the vendor"
        return errors.error_response(route.provider, 503, message, "recorder_unavailable")
    try:
        if request.content.is_eof():  # all there already (most calls): no timer to set
            body = await request.read()
        else:
            async with asyncio.timeout(settings.body_timeout):
                body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        message = f"request body is over the {settings.max_body_mb:g} MiB limit (--max-body-mb)"
        return errors.error_response(route.provider, 413, message, "request_too_large")
    except TimeoutError:
        message = f"request body not received within {settings.body_timeout:g} s (--body-timeout)"
        refused = errors.error_response(route.provider, 408, message, "request_timeout")
        refused.force_close()  # the rest of the body is not waited for
        return refused

    headers = {name.lower(): value for name, value in request.headers.items()}
    parsed = parse_json(body) if route.api != PASSTHROUGH or _is_json(request) else None
    override = routing.upstream_override(headers, parsed)
    if override is not None:
        message = (
            f"the {override} would choose the upstream; "
            "taplog forwards only to its configured vendors"
        )
        return errors.error_response(route.provider, 400, message, "upstream_override")
    replayer = app.get(REPLAYER)
    if replayer is not None:
        replayed = await replayer.answer(request, route.provider, route.api, parsed)
        if replayed is not None:
            return replayed
    key_fp = fingerprint(api_key(headers))
    call = Call(route.api, headers, parsed, key_fp, route.session, _retry_count(headers) > 0)
    try:
        resolution = app[RESOLVER].resolve(call)
    except InvalidSessionId as exc:
        return errors.error_response(route.provider, 400, str(exc), "invalid_session_id")

    secrets = secret_values(headers) + ((token.encode(),) if token else ())
    exchange = Exchange(route, resolution.session, new_id("ex"), secrets, received, parsed)
    if resolution.first_seen:
        recorder.record(EventRecord(_session_started(resolution, route.api, headers)))
    sending = _send(request, exchange, body, key_fp)
    if replayer is not None:
        return await replayer.forwarding(exchange.id, recorder, sending)
    return await sending


async def _send(
    request: web.Request, exchange: Exchange, body: bytes, key_fp: str | None
) -> web.StreamResponse:
    """Record the request and forward it (with fallbacks when its model has a rule)."""
    app, route, parsed = request.app, exchange.route, exchange.parsed
    rule = _fallback_rule(app, route.api, parsed)
    if rule is not None:
        call = FailoverCall(exchange, parsed, body, request.headers, key_fp, rule)
        return await serve_with_fallbacks(request, call)
    upstream_headers = request_headers(request.headers)
    app[RECORDER].record(
        LlmRequest(
            session=exchange.session,
            exchange=exchange.id,
            api=route.api,
            provider=route.provider,
            method=request.method,
            path=redact_url(route.path),
            upstream_url=redact_url(route.upstream_url),
            headers=safe_headers(upstream_headers.items()),
            key_fingerprint=key_fp,
            body=body,
            parsed=parsed,
            secrets=exchange.secrets,
        )
    )
    return await forward(request, exchange, body, upstream_headers)


def _fallback_rule(app: web.Application, api: str, parsed: object) -> Rule | None:
    """The fallback rule of an LLM call whose model has one, else None (plain forwarding)."""
    if api not in FAILOVER_APIS or not isinstance(parsed, dict):
        return None
    return app[FALLBACKS].rule_for(parsed.get("model"))


def _session_started(resolution: Resolution, api: str, headers: dict[str, str]) -> dict:
    return make_event(
        SESSION_STARTED,
        resolution.session,
        None,
        source=resolution.source,
        original=resolution.original,
        api=api,
        user_agent=headers.get("user-agent"),
        taplog_version=__version__,
    )
