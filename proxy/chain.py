"""Every call goes along its chain: the client's own target first, then its rule's.

A call whose model has no fallback rule is a chain of one: its own vendor,
no retries, the `--*-timeout` settings (`proxy.failover.rules.plain_rule`). A rule
adds targets (minus those whose circuit breaker is open; when all are open,
the likeliest of them), `retries` more tries each for retryable failures
(`retry-after` honoured when it fits, else a short jittered backoff; a
timeout only `timeout_retries` more, 0 by default: a silent vendor is not
waited on again), and its own timeouts. A prompt refused as too long for a
target's context window goes on to the next target whose window (litellm's
catalogue) is larger, the others skipped.

    each try                                        then
    ───────────────────────────────────────────────  ──────────────────────────────────
    nothing else could serve the call after it      committed at once: the answer goes
      (the last try, the call as the client made      through as it comes, whatever its
      it, no earlier error to fall back on)           status (proxy.relay)
    otherwise an error status                       read whole and judged
                                                     (proxy.failover.attempts.verdict)
              a stream                              read to its first event
              a body                                read whole (to --max-answer-mb)
    judged good                                     relayed (proxy.relay)
    judged bad                                      the call moves on

Only before the first byte reaches the client can a call move on; after
that, the relay ends a broken answer or continues it elsewhere. Every try is
recorded (proxy.call), and so is what the client got. When every target
failed, the client gets the error of its own vendor, else taplog's in its
API's shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from taplog.proxy import errors
from taplog.proxy.call import Call, Try
from taplog.proxy.failover.attempts import (
    FINAL,
    OK,
    RETRY,
    Attempt,
    as_sent,
    plan,
    verdict,
)
from taplog.proxy.failover.breaker import Breaker
from taplog.proxy.failover.rules import Target
from taplog.proxy.observe.log_lines import log_circuit
from taplog.proxy.relay import can_continue, read_whole, relay, watch_for
from taplog.proxy.upstream import (
    BrokenStream,
    UpstreamFailure,
    classify,
    open_upstream,
    response_headers,
)
from taplog.recorder.bodies import parse_json
from taplog.recorder.vendors.anthropic.thinking import carries_gemini_thinking
from taplog.recorder.vendors.apis import API_MODULES
from taplog.recorder.vendors.errors import context_overflow, retry_after
from taplog.recorder.vendors.openai_responses.chaining import needs_unchaining
from taplog.recorder.vendors.sse import SseTooLarge
from taplog.recorder.vendors.translation import Untranslatable
from taplog.recorder.vendors.watch import BodyWatch, Passed, StreamWatch

MAX_WAIT = 5.0  # never sleep longer than this for a retry


class _NoTimer(contextlib.AbstractAsyncContextManager):
    """No timer of its own, where the idle timeout bounds the wait just as well."""

    async def __aexit__(self, *exc_info: object) -> None:
        return None

    def expired(self) -> bool:
        return False


NO_TIMER = _NoTimer()
LLM_APIS = frozenset(API_MODULES)
LARGER, UNKNOWN, SMALLER = "larger", "unknown", "smaller"  # a context window, to a refused one


@dataclass(slots=True)
class Outcome:
    """What the call's tries came to so far, for the answer when all of them fail."""

    primary_error: tuple[Try, bytes] | None = None  # the client's own vendor's, and its body
    last: UpstreamFailure | None = None
    wait: float | None = None  # seconds the last failed vendor asked to wait (retry-after)
    too_long_for: int | None = None  # the context window that refused the prompt (0: unknown)

    def fit(self, target: Target) -> str:
        """After a refusal for length, whether `target`'s context window is `LARGER`,
        `UNKNOWN` (no catalogue knows it: worth a try after the larger ones) or `SMALLER`
        (not larger); before one, `LARGER`."""
        if self.too_long_for is None:
            return LARGER
        window = target.context_window()
        if window is None:
            return UNKNOWN
        return LARGER if window > self.too_long_for else SMALLER


async def serve(request: web.Request, call: Call) -> web.StreamResponse:
    """Answer the call from the first target of its chain that serves it; the log gets
    what the client got (`call.answered`) whatever happens, the client going away too."""
    response: web.StreamResponse | None = None
    try:
        response = await _serve(request, call)
        return response
    finally:
        call.record_answer(response.status if response is not None else None)


async def _serve(request: web.Request, call: Call) -> web.StreamResponse:
    primary = _primary(call)
    outcome = Outcome()
    if not call.rule.targets:  # a chain of one: its one try goes through as it comes
        call.chain = [primary]
        try:
            attempt = await _attempt(call, primary, primary)
        except Untranslatable as exc:  # it names what its own vendor never saw
            call.record_original(_own_attempt(call, primary))
            return _refuse(call, 400, f"not sent: {exc}", "not_sendable")
        response, _ = await _try_once(request, call, attempt, True, True, outcome)
        return response or _all_failed(call, outcome)
    call.chain = [primary, *call.rule.targets]
    breakers = call.services.breakers
    usable = [t for t in call.chain if breakers[str(t)].allows()] or [
        breakers.likeliest(call.chain)
    ]
    if usable[0] is not primary:  # the call as the client made it is in the log all the same
        call.record_original(_own_attempt(call, primary))
    previous: Target | None = None
    pending, unknown = list(usable), []  # after a refusal for length: larger windows first
    while pending or unknown:
        target = pending.pop(0) if pending else unknown.pop(0)
        fit = outcome.fit(target)
        if fit == SMALLER:
            call.skipped.append(f"{target} was skipped: its context window is not larger")
            continue
        if fit == UNKNOWN and pending:
            unknown.append(target)  # tried once the targets known to be larger were
            continue
        try:
            attempt = await _attempt(call, target, primary)
        except Untranslatable as exc:
            call.skipped.append(f"{target} was skipped, not translatable: {exc}")
            continue
        if target is not primary:  # the call moves: from the last target tried, or past
            reason = outcome.last.message if outcome.last else f"circuit open for {primary}"
            if fit == UNKNOWN:
                reason += f"; tried though its context window is unknown ({target})"
            call.record_failover(previous or primary, target, reason)  # its own, open
        last = not pending and not unknown
        response = await _try_target(request, call, attempt, target is primary, last, outcome)
        if response is not None:
            return response
        previous = target
    return _all_failed(call, outcome)


def _primary(call: Call) -> Target:
    return Target(call.services.fallbacks.providers[call.provider], str(call.model or ""))


def _own_attempt(call: Call, primary: Target) -> Attempt:
    route = call.route
    return as_sent(
        primary,
        call.api,
        call.method,
        route.upstream_url,
        call.headers,
        call.body,
        call.parsed,
        call.encoded,
    )


async def _attempt(call: Call, target: Target, primary: Target) -> Attempt:
    """The request for `target`: the call as made, or changed (model, API) for a fallback.
    Raises Untranslatable when the target cannot take it."""
    if target is primary and not _needs_planning(call):
        return _own_attempt(call, primary)
    await call.load_history()
    return plan(
        target,
        call.provider,
        call.api,
        call.parsed,
        call.body,
        call.headers,
        call.route.upstream_url,
        history=call.history,
        leave_out=call.rule.leave_out_untranslatable,
        encoded=call.encoded,
    )


def _needs_planning(call: Call) -> bool:
    """The client's own target takes the call as made, unless it chains to an answer
    its vendor never gave (a Responses `previous_response_id` taplog made), or carries
    thinking its vendor did not sign (a turn Gemini served, for Claude: looked for only
    when the call's rule can go to Gemini)."""
    parsed = call.parsed
    if not isinstance(parsed, dict):
        return False
    if call.api == "openai.responses":
        return needs_unchaining(parsed, same_provider=True)
    return (
        call.api == "anthropic.messages"
        and any(target.provider.type == "gemini" for target in call.rule.targets)
        and carries_gemini_thinking(call.body)
    )


async def _try_target(
    request: web.Request,
    call: Call,
    attempt: Attempt,
    is_primary: bool,
    last_target: bool,
    outcome: Outcome,
) -> web.StreamResponse | None:
    rule = call.rule
    breaker = call.services.breakers[str(attempt.target)] if rule.targets else None
    timeouts = 0
    for retry in range(rule.retries + 1):
        committed = (
            last_target
            and retry == rule.retries
            and outcome.primary_error is None
            and attempt.translation is None
        )
        response, judged = await _try_once(request, call, attempt, is_primary, committed, outcome)
        if judged == OK:
            if breaker is not None:
                _succeeded(breaker, str(attempt.target), rule.model)
            return response
        if response is not None:  # a final error of the client's own vendor, passed on as is
            return response
        if judged == FINAL:
            return None
        if breaker is not None and _failed(breaker, str(attempt.target), rule.model):
            return None  # its circuit is open
        if outcome.last is not None and outcome.last.outcome == "timeout":
            timeouts += 1
            if timeouts > rule.timeout_retries:
                return None  # a silent vendor is not waited on again: the next target, at once
        if retry == rule.retries:
            return None
        wait = outcome.wait
        delay = wait if wait is not None else min(2.0, 0.1 * 2**retry) * random.uniform(0.5, 1.0)
        if delay > MAX_WAIT:
            return None  # waiting that long is worse than another vendor
        await asyncio.sleep(delay)
    return None


def _succeeded(breaker: Breaker, target: str, rule: str) -> None:
    if breaker.state != "closed":
        log_circuit(target, rule, "closed")
    breaker.succeeded()


def _failed(breaker: Breaker, target: str, rule: str) -> bool:
    """Count a failure of `target`; whether its circuit is open now (logged when it opens)."""
    was_open = breaker.state == "open"
    breaker.failed()
    if breaker.state != "open":
        return False
    if not was_open:
        log_circuit(target, rule, "open")
    return True


async def _try_once(
    request: web.Request,
    call: Call,
    attempt: Attempt,
    is_primary: bool,
    committed: bool,
    outcome: Outcome,
) -> tuple[web.StreamResponse | None, str]:
    """(the client's response if one was sent, the verdict)."""
    attempt_try = call.start_try(attempt)
    rule = call.rule
    # Waiting for the first byte is bounded by the idle timeout anyway: a timer of its
    # own only when it is shorter (a plain call's are the same: --read-timeout).
    first_byte = (
        asyncio.timeout(rule.ttfb_timeout) if rule.ttfb_timeout < rule.idle_timeout else NO_TIMER
    )
    upstream: aiohttp.ClientResponse | None = None
    judged, ready = OK, []
    outcome.wait = None
    try:
        async with first_byte:
            upstream = await open_upstream(
                call.services.pool, attempt, rule, attempt_try.record_request
            )
            attempt_try.status = upstream.status
            attempt_try.headers = response_headers(upstream)
            # A malformed event matters where the call can still move on or be continued.
            every = not committed or can_continue(call)
            watch = watch_for(call.services.settings, attempt, upstream, every)
            if not committed:
                judged, ready = await _judge(call, attempt_try, upstream, watch)
    except (aiohttp.ClientError, TimeoutError, BrokenStream) as exc:
        failure = classify(exc, rule, first_byte.expired())
        outcome.last = failure
        attempt_try.finish(failure.outcome, failure.message)
        if upstream is not None:
            upstream.close()
        return None, RETRY
    except asyncio.CancelledError:  # the client left (or taplog stops) before any answer
        stopping = call.services.lifecycle.stopping
        attempt_try.finish("shutdown" if stopping else "client_disconnected")
        call.served = attempt_try  # the try it was waiting on: its answer says how it ended
        if upstream is not None:
            upstream.close()
        raise
    if judged == OK:
        return await relay(request, call, attempt_try, upstream, watch, ready), OK
    upstream.release()
    status = upstream.status
    reason = f"HTTP {status}" if status >= 400 else (watch.failure or "a broken stream")
    outcome.last = UpstreamFailure("upstream_error", 502, reason)
    outcome.wait = retry_after(attempt_try.headers)
    body = attempt_try.body()
    if is_primary and attempt.translation is None and status >= 400:
        outcome.primary_error = (attempt_try, body)
    if judged == FINAL and context_overflow(status, parse_json(body)):
        outcome.too_long_for = attempt.target.context_window() or 0
        outcome.last = UpstreamFailure(
            "upstream_error", 502, f"the prompt is too long for {attempt.target}"
        )
        attempt_try.finish("upstream_error", outcome.last.message)
        return None, FINAL  # a target with a larger context window may still take it
    attempt_try.finish("upstream_error", reason)
    if outcome.primary_error is not None and judged == FINAL:
        return _replay(call, outcome.primary_error), FINAL
    return None, judged


async def _judge(
    call: Call, attempt_try: Try, upstream: aiohttp.ClientResponse, watch: StreamWatch | BodyWatch
) -> tuple[str, Passed]:
    """Whether a try's answer is good to relay, before any of it reaches the client: an
    error status is read whole, a stream up to its first event, a body whole."""
    if upstream.status >= 400:
        await read_whole(call, attempt_try, upstream, watch)
        return verdict(upstream.status, parse_json(attempt_try.body())), []
    if not attempt_try.attempt.stream:
        return OK, await read_whole(call, attempt_try, upstream, watch)
    if not watch.streamed:
        raise BrokenStream("a stream was asked for; the vendor answered without one")
    ready: Passed = []
    async for chunk in upstream.content.iter_any():
        attempt_try.keep(chunk)
        try:
            ready += watch.feed(chunk)
        except SseTooLarge:
            raise BrokenStream("a stream event is over the --max-sse-event-mb limit") from None
        if watch.failure is not None:
            return RETRY, []
        if watch.events:
            return OK, ready
    raise BrokenStream("the stream ended before its first event")


def _replay(call: Call, error: tuple[Try, bytes]) -> web.Response:
    """The client's own vendor's error as it came; why no fallback served the call rides
    in a header of taplog's own (the body stays the vendor's, for the client's SDK)."""
    primary_try, body = error
    call.served = primary_try
    headers = CIMultiDict(primary_try.headers or {})
    headers.popall("content-length", None)
    if call.skipped:  # a header value: ASCII on one line
        said = "; ".join(call.skipped).encode("ascii", "replace").decode()
        headers["x-taplog-fallback"] = " ".join(said.split())[:2000]
    return web.Response(status=primary_try.status or 502, headers=headers, body=body)


def _refuse(call: Call, status: int, message: str, outcome: str) -> web.Response:
    """taplog's own answer, in the client's API's shape, and in the log as what it got."""
    if call.replay_miss:  # what a replay would have answered, had the recording held it
        message = f"{message}; {call.replay_miss}"
    call.refused = (outcome, message)
    return errors.error_response(call.provider, status, message, outcome)


def _all_failed(call: Call, outcome: Outcome) -> web.Response:
    """Every target failed: the client's own vendor's error, else taplog's in its shape;
    either says which targets were skipped and why."""
    if outcome.primary_error is not None:
        return _replay(call, outcome.primary_error)
    last = outcome.last or UpstreamFailure("unreachable", 502, "no target could take the call")
    if not call.rule.targets:
        return _refuse(call, last.status, last.message, last.outcome)
    message = f"every vendor in the fallback chain failed (last: {last.message})"
    if call.skipped:
        message += "; " + "; ".join(call.skipped)
    return _refuse(call, 502, message, "all_targets_failed")
