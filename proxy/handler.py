"""The request path: admit, read, resolve the session, record, forward.

Order matters and is part of the contract:
0. take a `/t/<token>/` prefix off the path and check the inbound token
   (missing or wrong: 401 in the client's error shape, nothing recorded);
1. route the path (a bad one is a 400 in the client's error shape);
2. refuse with 503 when the recorder cannot take more (record or refuse),
   before anything reaches a vendor;
3. read the body (over the limit: 413; not all there within the body
   timeout: 408; naming an upstream of its own: 400); one sent with a
   Content-Encoding is decoded for taplog's own use (`proxy.content_encoding`:
   undecodable 400, over the limit decoded 413) and sent on as it came;
4. with `--replay`, answer from the recording when it holds the call (or
   refuse a miss in strict mode): nothing recorded, no session resolved;
5. resolve the session (a bad explicit id: 400, nothing created);
6. in a fleet (`--coordination`), hold the session's lease, or send the call on to the
   instance that owns it (`proxy.coordination`), which serves and records it;
7. hand `session.started` to the recorder; over a budget or caught in a loop
   (`proxy.limits`), refuse with a 403 in the client's error shape, recorded;
8. serve the call along its chain
   (`proxy.chain`: a call without a fallback rule is a chain of one), which
   records every try and its answer whatever happens to it.
"""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from taplog.proxy import auth, chain, content_encoding, errors, routing
from taplog.proxy.call import Call
from taplog.proxy.failover.rules import Rule
from taplog.proxy.keys import SERVICES, Services
from taplog.proxy.replay import REPLAYER
from taplog.proxy.routing import PASSTHROUGH, RouteError
from taplog.recorder import __version__
from taplog.recorder.events import new_id, session_started
from taplog.recorder.secrets import api_key, fingerprint, secret_values
from taplog.recorder.secrets_by_value import scrub_text
from taplog.recorder.sessions import CallClues, InvalidSessionId, Resolution
from taplog.recorder.store.writer import EventRecord, SessionStart
from taplog.recorder.vendors.apis import provider_endpoint, requested
from taplog.recorder.vendors.clients import retry_count


def _is_json(request: web.Request) -> bool:
    return request.content_type in ("application/json", "")


async def proxy_call(request: web.Request) -> web.StreamResponse:
    received = time.perf_counter()
    app = request.app
    services = app[SERVICES]
    settings, recorder = services.settings, services.recorder
    token, target = auth.split_token(request.raw_path)
    headers = {name.lower(): value for name, value in request.headers.items()}
    if not services.tokens.accepts(token, headers.get(auth.TOKEN_HEADER)):
        return errors.error_response(
            routing.provider_for(target, headers), 401, auth.REFUSED, "unauthorized"
        )
    try:
        route = routing.route(target, request.method, headers, settings)
    except RouteError as exc:
        return errors.error_response(
            exc.provider, 400, _route_refusal(request, token, exc), "invalid_path"
        )
    if route.probe:
        return await probe_answer(request)
    foreign = routing.foreign_key(headers, route, settings)
    if foreign is not None:
        return errors.error_response(route.provider, 400, foreign, "key_for_another_vendor")
    if not recorder.accepting:
        reason = recorder.health()["reason"]
        message = f"not recording ({reason}); the call was not sent to the vendor"
        return errors.error_response(route.provider, 503, message, "recorder_unavailable")
    declared = request.content_length
    if declared is not None and declared > settings.max_body_bytes:  # refused before it comes
        message = f"request body is over the {settings.max_body_mb:g} MiB limit (--max-body-mb)"
        refused = errors.error_response(route.provider, 413, message, "request_too_large")
        refused.force_close()  # the body is not read
        return refused
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
    encoded = None  # the client's bytes, when `body` is their decoded copy
    if content_encoding.HEADER in request.headers:  # sent on as it came, decoded for the log
        try:
            decoded = await content_encoding.decoded(request.headers, body, settings.max_body_mb)
        except content_encoding.Refused as exc:
            return errors.error_response(route.provider, exc.status, str(exc), exc.code)
        if decoded is not body:
            encoded, body = body, decoded

    parsed, layout = (
        services.bodies.parse(body, route.api)
        if route.api != PASSTHROUGH or _is_json(request)
        else (None, None)
    )
    override = routing.upstream_override(headers, parsed)
    if override is not None:
        message = (
            f"the {override} would choose the upstream; "
            "taplog forwards only to its configured vendors"
        )
        return errors.error_response(route.provider, 400, message, "upstream_override")
    replayer = app.get(REPLAYER)
    replay_miss = None
    if replayer is not None:
        replayed = await replayer.answer(request, route.provider, route.api, parsed)
        if isinstance(replayed, web.StreamResponse):
            return replayed
        replay_miss = replayed
    key_fp = fingerprint(api_key(headers) or next(iter(route.query_keys), None))
    clues = CallClues(route.api, headers, parsed, key_fp, route.session, retry_count(headers) > 0)
    try:
        resolution = services.resolver.resolve(clues)
    except InvalidSessionId as exc:
        return errors.error_response(route.provider, 400, str(exc), "invalid_session_id")

    epoch = resumed = None
    if services.ownership is not None:  # a fleet: one instance writes a session at a time
        new = resolution.source == "new"
        wire = body if encoded is None else encoded  # the owner gets the call as it came
        owned = await services.ownership.serve_here(request, wire, resolution.session, new)
        if isinstance(owned, web.StreamResponse):
            return owned  # its owner served (and recorded) it
        epoch, resumed = owned.epoch, owned.resumed
    call = Call(
        services=services,
        route=route,
        method=request.method,
        session=resolution.session,
        id=new_id("ex"),
        secrets=secret_values(headers)
        + tuple(key.encode() for key in route.query_keys)
        + ((token.encode(),) if token else ()),
        received=received,
        body=body,
        encoded=encoded,
        parsed=parsed,
        layout=layout,
        headers=request.headers,
        key_fingerprint=key_fp,
        rule=_rule(services, route.api, route.path, parsed),
        replay_miss=replay_miss,
        epoch=epoch,
    )
    if resolution.first_seen or resumed is not None:  # written once per log, however told
        started = _session_started(resolution, route.api, headers, epoch, call.secrets)
        recorder.record(SessionStart(started))
    if resumed is not None:
        recorder.record(EventRecord(resumed))
    if services.limits is not None and (refused := services.limits.refusal(call)) is not None:
        return refused  # over a budget, or a loop: recorded, no vendor called
    serving = chain.serve(request, call)
    if replayer is not None:
        return await replayer.forwarding(call.id, recorder, serving)
    if services.ownership is None:
        return await serving
    services.ownership.started(call.session)  # its lease is renewed while it is in flight
    try:
        return await serving
    finally:
        services.ownership.ended(call.session)


async def probe_answer(request: web.Request) -> web.Response:
    """A base URL's reachability probe (`HEAD /v1`, `GET /`), answered here rather than by
    a vendor: nothing forwarded, no session made."""
    return web.json_response({"service": "taplog"})


def _route_refusal(request: web.Request, token: str | None, refused: RouteError) -> str:
    """A route refusal's message; for a doubled version, the base URL that works (its
    token, a secret, only named)."""
    if refused.base is None:
        return str(refused)
    variable = provider_endpoint(refused.provider).BASE_URL_VARIABLE
    prefix = f"{auth.PREFIX}<token>" if token else ""
    base = f"{request.scheme}://{request.host}{prefix}{refused.base}"
    return f"{refused}: set {variable}={base}"


def _rule(services: Services, api: str, path: str, parsed: object) -> Rule:
    """The call's fallback rule when its model (in its body, or its path: Gemini's) has
    one, else the plain chain of one."""
    if api in chain.LLM_APIS and isinstance(parsed, dict):
        rule = services.fallbacks.rule_for(requested(api, path, parsed)[0])
        if rule is not None:
            return rule
    return services.plain_rule


def _session_started(
    resolution: Resolution,
    api: str,
    headers: dict[str, str],
    epoch: int | None,
    secrets: tuple[bytes, ...],
) -> dict:
    agent = headers.get("user-agent")  # a header like any: it may hold a key
    return session_started(
        resolution.session,
        epoch,
        source=resolution.source,
        original=resolution.original,
        api=api,
        user_agent=agent and scrub_text(agent, secrets),
        taplog_version=__version__,
    )
