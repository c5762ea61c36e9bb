"""The agent's calls: `llm.request` events, pass-through calls, and the payload shapes.

`client_request` builds the call an agent makes now from its transcript; `emit_request`
logs it (with the `tool.post` of each result it carries for the first time). Pass-through
calls (count_tokens, models, embeddings) are forwarded by taplog without knowing their
API, so they are logged whole here, answer included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bench.synth import chat, messages, responses
from bench.synth.catalog import CHAT, MESSAGES, MODELS, PASSTHROUGH
from bench.synth.common import body_fields, dumps_as_sent
from bench.synth.headers import LOCAL_URL, PATHS, vendor_url
from bench.synth.tool_events import post_results
from bench.synth.tools import tool_specs
from bench.synth.transcript import Result

if TYPE_CHECKING:
    from bench.synth.session import Session


def request_payload(
    api: str,
    provider: str,
    method: str,
    path: str,
    url: str,
    model: str | None,
    *,
    stream: bool,
    key: str,
    headers: dict[str, str],
    body: Any,
    **extra: Any,
) -> dict:
    """An `llm.request` payload in the order the proxy writes it (`extra` before the body)."""
    return {
        "api": api,
        "provider": provider,
        "method": method,
        "path": path,
        "upstream_url": url,
        "model": model,
        "stream": stream,
        "attempt": 1,
        "key_fingerprint": key,
        "headers": headers,
        **extra,
        "body": body,
    }


def response_payload(
    api: str,
    provider: str,
    status: int | None,
    outcome: str,
    error: str | None,
    *,
    latency: float,
    ttfb: float | None,
    overhead: float | None,
    headers: dict[str, str],
    stream: bool,
    fields: dict[str, Any],
) -> dict:
    """An `llm.response` payload's common part, in the order the proxy writes it."""
    return {
        "api": api,
        "provider": provider,
        "status": status,
        "outcome": outcome,
        "error": error,
        "latency_ms": round(latency, 3),
        "ttfb_ms": None if ttfb is None else round(ttfb, 3),
        "overhead_ms": overhead,
        "headers": headers,
        "stream": stream,
        **fields,
    }


def client_request(s: Session, stream: bool | None = None) -> dict:
    """The call the agent makes now, from its transcript (not yet logged)."""
    agent, plan = s.agent, s.plan
    model, provider, api = plan.model, MODELS[plan.model][0], agent.api
    if stream is None:
        stream = plan.stream if s.rng.random() > 0.04 else not plan.stream
        stream = stream or agent.tools == "codex"
    base = LOCAL_URL if agent.local else vendor_url(provider)
    path = PATHS[api]
    if agent.tools == "claude":
        path += "?beta=true"
    return request_payload(
        api,
        provider,
        "POST",
        path,
        base + path,
        model,
        stream=stream,
        key=s.key,
        headers=s.request_headers(provider),
        body=_request_body(s, api, model, stream),
    )


def _request_body(s: Session, api: str, model: str, stream: bool) -> dict:
    agent, tools = s.agent, tool_specs(api, s.agent.tools)
    if api == MESSAGES:
        return messages.request_body(agent, model, s.transcript(api), tools, stream, s.key, s.sid)
    if api == CHAT:
        return chat.request_body(agent, model, s.transcript(api), tools, stream)
    if s.chained and s.last_response_id is not None:
        last = s.entries[-1]
        news = responses.render(last)[-(len(last.results) or 1) :]
        return responses.request_body(agent, model, news, tools, stream, s.sid, s.last_response_id)
    return responses.request_body(agent, model, s.transcript(api), tools, stream, s.sid, None)


def emit_request(
    s: Session,
    exchange: str,
    request: dict,
    attempt: int,
    results: list[Result] | tuple = (),
) -> None:
    """An `llm.request` (and the `tool.post` of each result it carries for the first time)."""
    payload = dict(request)
    payload["attempt"] = attempt
    if attempt == 0:  # the breaker was open: logged, never sent (proxy/chain.py)
        body = payload.pop("body")
        payload["sent"] = False
        payload["body"] = body
    s.emit("llm.request", exchange, payload)
    s.stats[("api", request["api"])] += 1
    s.stats[("model", request["model"])] += 1
    s.stats[("stream", request["stream"])] += 1
    post_results(s, exchange, request["api"], results)
    s.last_call_us = s.now


def passthrough_due(s: Session, first: bool) -> bool:
    agent = s.agent
    if agent.name == "openai-python-chat" and first and s.rng.random() < 0.15:
        return True
    return s.rng.random() < agent.passthrough


def passthrough(s: Session) -> None:
    """A call taplog forwards without knowing its API: count_tokens, embeddings, models."""
    rng = s.rng
    exchange = f"ex_{rng.hexa(16)}"
    provider, method, path, model, body, answer = _passthrough_call(s)
    request = request_payload(
        PASSTHROUGH,
        provider,
        method,
        path,
        vendor_url(provider) + path,
        model,
        stream=False,
        key=s.key,
        headers=s.request_headers(provider),
        body=body,
    )
    s.emit("llm.request", exchange, request)
    s.stats[("api", PASSTHROUGH)] += 1
    latency = rng.lognorm_ms(180, 0.5, 5_000)
    s.advance(latency * 1000)
    raw = dumps_as_sent(answer, provider)
    payload = response_payload(
        PASSTHROUGH,
        provider,
        200,
        "ok",
        None,
        latency=latency,
        ttfb=latency * 0.97,
        overhead=s.overhead_ms(),
        headers=s.response_headers(provider, False, len(raw)),
        stream=False,
        fields=body_fields(answer, raw),
    )
    s.emit("llm.response", exchange, payload)
    s.stats[("outcome", "ok")] += 1
    s.advance(rng.randint(2, 40) * 1000)


def _passthrough_call(s: Session) -> tuple[str, str, str, str | None, Any, Any]:
    """Provider, method, path, model, body and answer of a pass-through call."""
    rng = s.rng
    if s.agent.api == MESSAGES:
        body = {
            "messages": s.transcript(MESSAGES)[-1:],
            "model": s.plan.model,
            "tools": tool_specs(MESSAGES, s.agent.tools)[:2],
        }
        answer = {"input_tokens": s.context + rng.randint(100, 3000)}
        path = "/v1/messages/count_tokens?beta=true"
        return "anthropic", "POST", path, s.plan.model, body, answer
    if rng.random() < 0.3:
        models = ("gpt-4.1", "gpt-4.1-mini", "gpt-4o-mini", "gpt-5", "o4-mini")
        listed = [
            {"id": m, "object": "model", "created": 1744316542, "owned_by": "system"}
            for m in models
        ]
        return "openai", "GET", "/v1/models", None, None, {"object": "list", "data": listed}
    texts = [rng.choice(s.pools.steps) for _ in range(rng.randint(1, 2))]
    model = "text-embedding-3-small"
    body = {"input": texts, "model": model, "dimensions": 64, "encoding_format": "base64"}
    answer = {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": rng.b64(256)}
            for i in range(len(texts))
        ],
        "model": model,
        "usage": {"prompt_tokens": 12 * len(texts), "total_tokens": 12 * len(texts)},
    }
    return "openai", "POST", "/v1/embeddings", model, body, answer
