"""Answers that are not ones, and the retries that follow them.

A call fails as vendors fail: an error status (429, 500, 503, 529; local servers out of
memory), a timeout or, for local servers, no connection at all. Who retries depends on the
session: the client's SDK (a new exchange, its retry count in the headers) or, under a
fallback rule, taplog itself (another attempt in the same exchange; see `failover`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from bench.synth.calls import client_request, emit_request, response_payload
from bench.synth.common import SECOND, Draw, body_fields, dumps_as_sent

if TYPE_CHECKING:
    from bench.synth.session import Session


class Failure(NamedTuple):
    status: int | None
    outcome: str
    error: str | None
    latency: float
    ttfb: float | None
    headers: dict[str, str]
    fields: dict[str, Any]


def backoff_us(rng: Draw) -> int:
    """The SDK's wait before it retries (retry-after, or its own backoff)."""
    return int(rng.uniform(0.4, 8.0) * SECOND)


def retry(s: Session, exchange: str, request: dict) -> tuple[str, dict]:
    """A failed answer and the call again; returns the exchange and request that go on."""
    failed_answer(s, exchange, request)
    if s.plan.rule:  # taplog retries itself, in the same exchange
        s.advance(backoff_us(s.rng))
        emit_request(s, exchange, request, 2)
        return exchange, request
    # The client's SDK retries: a new call.
    s.advance(backoff_us(s.rng))
    s.retry_count += 1
    exchange = f"ex_{s.rng.hexa(16)}"
    request = client_request(s, stream=request["stream"])
    emit_request(s, exchange, request, 1)
    s.retry_count = 0
    return exchange, request


def failed_answer(s: Session, exchange: str, request: dict) -> str:
    """An answer that is not one; returns why, as taplog words it for a failover.

    Without a fallback rule the call goes through proxy/forward.py: the vendor's error
    is passed on, and taplog answers 504/502 itself when the vendor is silent or gone.
    With one, proxy/failover.py records the try: no status when nothing came back, and
    `error` says why (`HTTP 529`, `the vendor did not answer in time`, ...).
    """
    rng, provider = s.rng, request["provider"]
    if s.agent.local:
        kind = rng.choice(("unreachable", "500", "timeout"))
    elif provider == "anthropic":
        kind = rng.choices(("529", "429", "500", "timeout"), weights=(45, 30, 17, 8))[0]
    else:
        kind = rng.choices(("429", "500", "503", "timeout"), weights=(55, 25, 12, 8))[0]
    if kind in ("timeout", "unreachable"):
        failure = _silence(rng, kind, provider, s.plan.rule)
    else:
        failure = _vendor_failure(s, int(kind), provider, request["model"])
    s.advance(failure.latency * 1000)
    payload = response_payload(
        request["api"],
        provider,
        failure.status,
        failure.outcome,
        failure.error,
        latency=failure.latency,
        ttfb=failure.ttfb,
        overhead=None if s.plan.rule else s.overhead_ms(),
        headers=failure.headers,
        stream=False,
        fields=failure.fields,
    )
    s.emit("llm.response", exchange, payload)
    s.stats[("outcome", failure.outcome)] += 1
    s.stats[("status", failure.status)] += 1
    return failure.error or f"HTTP {failure.status}"


def _silence(rng: Draw, kind: str, provider: str, rule: bool) -> Failure:
    """No answer: a timeout, or a vendor that cannot be reached."""
    error = {
        "timeout": "the vendor did not answer in time",
        "unreachable": "cannot reach the vendor",
    }[kind]
    if kind == "unreachable":
        latency = rng.uniform(0.3, 4)
    elif rule:
        latency = 60_000 + rng.uniform(0, 30)  # the rule's ttfb_timeout
    else:
        latency = 600_000 + rng.uniform(0, 50) if rng.random() < 0.7 else 10_000.0
    if rule:
        return Failure(None, kind, error, latency, None, {}, {"body": None})
    status = 504 if kind == "timeout" else 502
    answer = _taplog_error(provider, status, error, kind)
    headers = {"content-type": "application/json"}
    return Failure(
        status, kind, error, latency, None, headers, body_fields(answer, orjson.dumps(answer))
    )


def _vendor_failure(s: Session, status: int, provider: str, model: str) -> Failure:
    """The vendor's error answer, passed on as it came."""
    rng, local = s.rng, s.agent.local
    error = f"HTTP {status}" if s.plan.rule else None
    latency = rng.lognorm_ms(250 if status == 429 else 900, 0.6, 30_000)
    ttfb = latency * rng.uniform(0.97, 0.999)
    answer = _vendor_error(rng, provider, status, model, local)
    raw = dumps_as_sent(answer, provider, local)
    headers = s.response_headers(provider, False, len(raw), status)
    if status in (429, 529):
        headers["retry-after"] = str(rng.randint(1, 20))
    return Failure(
        status, "upstream_error", error, latency, ttfb, headers, body_fields(answer, raw)
    )


def _taplog_error(provider: str, status: int, message: str, code: str) -> dict:
    """taplog's own error answer in the client's format (proxy/errors.py)."""
    if provider == "anthropic":
        kind = "timeout_error" if status == 504 else "api_error"
        return {"type": "error", "error": {"type": kind, "message": f"taplog: {message}"}}
    return {
        "error": {
            "message": f"taplog: {message}",
            "type": "server_error",
            "param": None,
            "code": code,
        }
    }


_ANTHROPIC_ERRORS = {
    529: ("overloaded_error", "Overloaded"),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 450,000 "
        "input tokens per minute. Please retry after the time in the retry-after header.",
    ),
    500: ("api_error", "Internal server error"),
}
_OPENAI_ERRORS = {
    500: "The server had an error while processing your request. Sorry about that!",
    503: "The engine is currently overloaded, please try again later.",
}


def _vendor_error(rng: Draw, provider: str, status: int, model: str, local: bool) -> dict:
    if local:
        return {
            "object": "error",
            "message": "CUDA out of memory while serving the request",
            "type": "InternalServerError",
            "param": None,
            "code": status,
        }
    if provider == "anthropic":
        kind, message = _ANTHROPIC_ERRORS[status]
        return {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_011C" + rng.b62(20),
        }
    if status == 429:
        used = rng.randint(25_000, 29_900)
        return {
            "error": {
                "message": f"Rate limit reached for {model} in organization org-acme on tokens "
                f"per min (TPM): Limit 30000, Used {used}, Requested {rng.randint(800, 6000)}. "
                f"Please try again in {rng.uniform(0.5, 9):.3f}s. Visit "
                "https://platform.openai.com/account/rate-limits to learn more.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
    message = _OPENAI_ERRORS[status]
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
