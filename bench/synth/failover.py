"""Failover as proxy/chain.py records it, for sessions under a fallback rule.

A failover keeps every try in one exchange. "error": the primary fails, taplog retries it
a few times, then logs a `failover` event and the rewritten call (attempt numbers run on).
"open": the breaker is open, so the client's request is logged unsent as attempt 0 and
the rewrite is attempt 1, with no failover event. A rewrite to the other vendor is
translated by `recorder.vendors`, as taplog translates it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bench.synth.calls import emit_request, request_payload
from bench.synth.catalog import CHAT, FALLBACK, MODELS, NATIVE_API, TAPLOG_VERSION
from bench.synth.failures import backoff_us, failed_answer
from bench.synth.headers import PATHS, TAPLOG_KEYS, vendor_url
from taplog.recorder.vendors.openai_chat.request_from_neutral import messages_to_chat
from taplog.recorder.vendors.openai_chat.request_to_neutral import chat_to_messages

if TYPE_CHECKING:
    from bench.synth.session import Session


def fail_over(s: Session, exchange: str, request: dict, kind: str, retries: int) -> dict:
    """The rest of a call that moves to its fallback target (`kind` "error" or "open",
    after `retries` more tries on the primary); returns the request served."""
    target = FALLBACK[request["model"]]
    rewritten = rewrite(request, target)
    if kind == "open":
        s.advance(s.rng.randint(100, 900))
        emit_request(s, exchange, rewritten, 1)
        s.stats[("breaker", "open")] += 1
        return rewritten
    reason = failed_answer(s, exchange, request)
    for attempt in range(2, retries + 2):
        s.advance(backoff_us(s.rng) // 4)
        emit_request(s, exchange, request, attempt)
        reason = failed_answer(s, exchange, request)
    s.advance(s.rng.randint(100, 900))
    s.emit(
        "failover",
        exchange,
        {
            "from_provider": request["provider"],
            "from_model": request["model"],
            "to_provider": rewritten["provider"],
            "to_model": target,
            "reason": reason,
            "attempt": retries + 2,
        },
    )
    s.stats[("failover", reason)] += 1
    emit_request(s, exchange, rewritten, retries + 2)
    return rewritten


def rewrite(request: dict, model: str) -> dict:
    """The client's call as taplog sends it to a fallback target (proxy/attempts.plan)."""
    provider = MODELS[model][0]
    api = NATIVE_API[provider]
    if api == request["api"]:  # the same provider, another model: the call as sent
        return {**request, "model": model, "body": {**request["body"], "model": model}}
    convert = chat_to_messages if request["api"] == CHAT else messages_to_chat
    translated = convert(request["body"], model=model)
    user_agent = request["headers"].get("user-agent", "unknown")
    headers = {"content-type": "application/json", "accept": "application/json"}
    headers["user-agent"] = f"{user_agent} taplog/{TAPLOG_VERSION}"
    if provider == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
    return request_payload(
        api,
        provider,
        "POST",
        request["path"],  # the client's path; the URL is the target's
        vendor_url(provider) + PATHS[api],
        model,
        stream=translated.body.get("stream") is True,
        key=TAPLOG_KEYS[provider],
        headers=headers,
        translated_from=request["api"],
        dropped=translated.dropped,
        body=translated.body,
    )
