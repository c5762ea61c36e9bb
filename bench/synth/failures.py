"""Answers that are not ones, and the retries that follow them.

A call fails as vendors fail: an error status (429, 500, 503, 529; local servers out of
memory), a timeout or, for local servers, no connection at all. Who retries depends on the
session: the client's SDK (a new exchange, its retry count in the headers) or, under a
fallback rule, taplog itself (another attempt in the same exchange; see `failover`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

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

    Every call goes along its chain (proxy/chain.py); each try is recorded with no
    status when nothing came back, and `error` says why (`cannot reach the vendor`,
    `the vendor did not answer within …`). A vendor's error answer is passed on as it
    came without a fallback rule; with one, its try says `HTTP 529` and the like.
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
        overhead=s.overhead_ms(),
        headers=failure.headers,
        stream=False,
        fields=failure.fields,
    )
    s.emit("llm.response", exchange, payload)
    s.stats[("outcome", failure.outcome)] += 1
    s.stats[("status", failure.status)] += 1
    return failure.error or f"HTTP {failure.status}"


def _silence(rng: Draw, kind: str, provider: str, rule: bool) -> Failure:
    """No answer: a timeout, or a vendor that cannot be reached; no status either way."""
    if kind == "unreachable":
        return Failure(None, kind, "cannot reach the vendor", rng.uniform(0.3, 4), None, {}, {})
    if rule:
        latency, knob = 60_000 + rng.uniform(0, 30), "ttfb_timeout of the fallback rule"
        error = f"the vendor did not answer within 60 s ({knob})"
    else:
        latency = 600_000 + rng.uniform(0, 50)
        error = "the vendor did not answer within 600 s (--read-timeout)"
    return Failure(None, kind, error, latency, None, {}, {"body": None})


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
