"""Serve a call through its fallback chain: retry, switch vendor, translate back.

The chain is the client's own target first, then the rule's targets, minus
those whose circuit breaker is open. Each target gets up to `retries` more
tries for retryable failures (`retry-after` honoured when it fits, otherwise
a short jittered backoff). Only before the first byte reaches the client can
a call move on; after that a broken stream ends with an error event in the
client's format and no end marker, never passed off as complete.

Every try is recorded (proxy.call_log). The client sees either a complete
answer or, when every target failed, the original error of its own vendor.
"""

from __future__ import annotations

import asyncio
import random

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from proxy import errors
from proxy.attempts import (
    FINAL,
    OK,
    RETRY,
    Attempt,
    first_event_is_error,
    plan,
    retry_after,
    verdict,
)
from proxy.call_log import (
    Call,
    Try,
    record_event,
    record_original,
    record_request,
    record_response,
    switch,
)
from proxy.fallbacks import Target
from proxy.relay import open_upstream, relay, split, splitter
from proxy.state import BREAKERS, FALLBACKS, RESPONSES_HISTORY
from proxy.upstream import BrokenStream, classify, response_headers
from recorder.bodies import parse_json
from recorder.events import FAILOVER
from recorder.translate.requests import Untranslatable
from recorder.wire.sse import parse_block

MAX_WAIT = 5.0  # never sleep longer than this for a retry


async def serve_with_fallbacks(request: web.Request, call: Call) -> web.StreamResponse:
    route = call.exchange.route
    fallbacks, breakers = request.app[FALLBACKS], request.app[BREAKERS]
    primary = Target(fallbacks.providers[route.provider], str(call.parsed.get("model")))
    chain = call.chain = [primary, *call.rule.targets]
    if call.api == "openai.responses":
        call.history = request.app[RESPONSES_HISTORY].items_before(call.parsed)
    usable = [t for t in chain if breakers[str(t)].allows()] or [primary]
    if usable[0] is not primary:  # the call as the client made it is in the log all the same
        record_original(request, call)
        reason = f"circuit open for {primary}"
        record_event(
            request, call, FAILOVER, **switch(primary, usable[0]), reason=reason, attempt=1
        )
    previous: Target | None = None
    for target in usable:
        try:
            attempt = plan(
                target,
                route.provider,
                call.api,
                call.parsed,
                call.body,
                call.headers,
                route.upstream_url,
                history=call.history,
                leave_out=call.rule.leave_out_untranslatable,
            )
        except Untranslatable as exc:
            record_event(
                request,
                call,
                FAILOVER,
                **switch(previous or primary, target),
                reason=f"not translatable: {exc}",
                attempt=None,
            )
            continue
        if previous is not None:
            record_event(
                request,
                call,
                FAILOVER,
                **switch(previous, target),
                reason=call.last_reason,
                attempt=call.attempts + 1,
            )
        response = await _try_target(request, call, attempt, target is primary)
        if response is not None:
            return response
        previous = target
    return _all_failed(call)


async def _try_target(
    request: web.Request, call: Call, attempt: Attempt, is_primary: bool
) -> web.StreamResponse | None:
    breaker = request.app[BREAKERS][str(attempt.target)]
    for retry in range(call.rule.retries + 1):
        call.attempts += 1
        response, outcome, wait = await _try_once(request, call, attempt, is_primary)
        if outcome == OK:
            breaker.succeeded()
            return response
        if response is not None:  # a final error of the client's own vendor, passed on as is
            return response
        if outcome == FINAL:
            return None
        breaker.failed()
        if retry == call.rule.retries or breaker.state == "open":
            return None
        delay = wait if wait is not None else min(2.0, 0.1 * 2**retry) * random.uniform(0.5, 1.0)
        if delay > MAX_WAIT:
            return None  # waiting that long is worse than another vendor
        await asyncio.sleep(delay)
    return None


async def _try_once(
    request: web.Request, call: Call, attempt: Attempt, is_primary: bool
) -> tuple[web.StreamResponse | None, str, float | None]:
    """(the client's response if one was sent, the verdict, seconds to wait before a retry)."""
    attempt_try = Try(attempt, call.attempts)
    record_request(request, call, attempt_try)
    upstream: aiohttp.ClientResponse | None = None
    try:
        async with asyncio.timeout(call.rule.ttfb_timeout):
            upstream = await open_upstream(request, call, attempt)
            status = upstream.status
            if status >= 400:
                body = await upstream.read()
                attempt_try.keep(body)
                outcome = verdict(status, parse_json(body))
            else:
                outcome = await _answer_start(request, upstream, attempt_try)
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        failure = classify(exc)
        call.last_reason = str(exc) if isinstance(exc, BrokenStream) else failure.message
        record_response(
            request, call, attempt_try, None, CIMultiDict(), failure.outcome, call.last_reason
        )
        if upstream is not None:
            upstream.close()
        return None, RETRY, None
    headers = response_headers(upstream)
    if outcome == OK:
        return await relay(request, call, attempt_try, upstream, headers), OK, None
    upstream.release()
    error_body = b"".join(chunk for _, chunk in attempt_try.chunks)
    call.last_reason = (
        f"HTTP {status}" if status >= 400 else "error event at the start of the stream"
    )
    record_response(request, call, attempt_try, status, headers, "upstream_error", call.last_reason)
    if is_primary and attempt.translation is None and status >= 400:
        call.primary_error = (status, headers, error_body)
        if outcome == FINAL:
            return _replay(call.primary_error), FINAL, None
    return None, outcome, retry_after(headers)


async def _answer_start(
    request: web.Request, upstream: aiohttp.ClientResponse, attempt_try: Try
) -> str:
    """Read a stream up to its first event (an error there means the vendor failed), or a
    whole non-stream body (a cut body is a failure that another target can still fix)."""
    if not attempt_try.attempt.stream:
        attempt_try.keep(await upstream.read())
        return OK
    events = splitter(request)
    async for chunk in upstream.content.iter_any():
        attempt_try.keep(chunk)
        for block in split(events, chunk):
            event = parse_block(block)
            if event is not None:
                failed = first_event_is_error(attempt_try.attempt.api, event.event, event.data)
                return RETRY if failed else OK
    return RETRY  # the stream ended before its first event


def _replay(error: tuple[int, CIMultiDict[str], bytes]) -> web.Response:
    status, headers, body = error
    headers = CIMultiDict(headers)
    headers.popall("content-length", None)
    return web.Response(status=status, headers=headers, body=body)


def _all_failed(call: Call) -> web.Response:
    """Every target failed: the client's own vendor's error, else taplog's 502."""
    if call.primary_error is not None:
        return _replay(call.primary_error)
    message = f"every vendor in the fallback chain failed (last: {call.last_reason})"
    return errors.error_response(call.exchange.route.provider, 502, message, "all_targets_failed")
