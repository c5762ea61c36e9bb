"""Answers: what the model says, in its API's shape, logged as `llm.response`.

`answer` decides a `Reply` (text, thinking, tool calls, server-side tools, token counts),
has the API's module shape it (and its stream), cuts the stream short when the client
disconnects, logs the response with the summary the recorder derives from it, and then
runs the agent's tools: the results go out with the next request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from bench.synth.calls import response_payload
from bench.synth.catalog import MODELS, REASONING, RESPONSES
from bench.synth.common import MINUTE, SECOND, Draw, body_fields, dumps_as_sent
from bench.synth.shapes import SHAPES
from bench.synth.tool_events import announce_calls
from bench.synth.tools import make_call, tool_result, tool_time_us
from bench.synth.transcript import Call, Entry, Reply, Result
from taplog.recorder import prices
from taplog.recorder.vendors.apis import api_module
from taplog.recorder.vendors.sse import Summary, parse_block

if TYPE_CHECKING:
    from bench.synth.session import Session


def answer(
    s: Session,
    exchange: str,
    request: dict,
    calls: int,
    server: int,
    final: bool = False,
    disconnect: bool = False,
) -> list[Result]:
    """The `llm.response` and its `tool.pre` events; returns the results to come."""
    rng = s.rng
    api, provider, model = request["api"], request["provider"], request["model"]
    stream = request["stream"]
    if final and s.plan.ending == "normal" and stream and not server and rng.random() < 0.1:
        disconnect = True
    reply = make_reply(s, api, provider, model, calls, server)
    reply.mismatch = bool(calls) and api != RESPONSES and rng.random() < 0.012
    reply.usage = usage_numbers(s, model, provider, reply.output)
    ttfb, latency = _timing(rng, model, reply, stream)
    body, sse, server_blocks = SHAPES[api].answer(
        reply, request, rng, s.now, s.agent.local, ttfb, latency
    )
    if disconnect:
        assert sse is not None
        body, sse, latency = _disconnected(rng, api, sse)
        fields: dict[str, Any] = {"sse": sse, "body": body, "stream_complete": False}
    elif stream:
        fields = {"sse": sse, "body": body, "stream_complete": True}
    else:
        fields = body_fields(body, dumps_as_sent(body, provider, s.agent.local))
    s.advance(latency * 1000)
    outcome = "client_disconnected" if disconnect else "ok"
    summary = _log_response(s, exchange, request, body, fields, outcome, latency, ttfb)
    s.last_input = reply.usage["total"]
    s.last_call_us = s.now
    s.context += reply.output // 2
    if outcome != "ok":
        return []
    if summary.response_id and api == RESPONSES:
        s.last_response_id = summary.response_id
    entry = Entry("assistant", reply.text, reply.calls)
    entry.server = server_blocks
    s.add_entry(entry)
    asked = s.now
    announce_calls(s, exchange, api_module(api).tool_calls(body), summary.model, reply.mismatch)
    return _run_tools(s, reply.calls, asked)


def make_reply(s: Session, api: str, provider: str, model: str, calls: int, server: int) -> Reply:
    """What the model says: a step before tool calls, or a final answer."""
    rng, p = s.rng, s.pools
    text: str | None
    if calls:
        share = 0.2 if api == RESPONSES else 0.45
        text = rng.choice(p.steps) if rng.random() < share else None
    else:
        text = rng.choice(p.finals)
    thinking = None
    if provider == "anthropic" and model != "claude-haiku-4-5" and rng.random() < 0.15:
        thinking = rng.choice(p.thoughts)
    made = [make_call(rng, p, s.agent, api) for _ in range(calls)]
    uses = []
    for _ in range(server):
        query = rng.choice(p.steps)[:40]
        uses.append(("srvtoolu_01" + rng.b62(22), query))
    output = len(text or "") // 4 + sum(len(c.raw or "{}") // 3 for c in made) + rng.randint(5, 60)
    if not calls:
        output += rng.randint(60, 900)
    return Reply(text, thinking, made, uses, output)


def usage_numbers(s: Session, model: str, provider: str, output: int) -> dict[str, int]:
    """Token counts in the shape the answer reports them (per vendor)."""
    rng = s.rng
    s.context += rng.randint(150, 2_500)
    total = s.context
    warm = s.now - s.last_call_us < 5 * MINUTE + 60 * SECOND
    if provider == "anthropic":
        if s.agent.tools == "claude" and warm and s.last_input:
            read = min(total - 50, s.last_input)
            write = total - read - rng.randint(3, 20)
        elif s.agent.tools == "claude":
            read, write = 0, total - rng.randint(3, 20)
        else:
            read = write = 0
        fresh = total - read - write
        return {"fresh": fresh, "read": read, "write": write, "output": output, "total": total}
    cached = 0
    if warm and s.last_input >= 1024 and not s.agent.local:
        cached = min(s.last_input, total) // 128 * 128 if rng.random() < 0.8 else 0
    reasoning = 0
    if model in REASONING:
        reasoning = rng.randint(0, 1_500) // 64 * 64
    return {"total": total, "cached": cached, "output": output + reasoning, "reason": reasoning}


def _timing(rng: Draw, model: str, reply: Reply, stream: bool) -> tuple[float, float]:
    """Time to first byte and total latency, in ms: prompt size and output speed."""
    ttfb = (
        rng.lognorm_ms(2_600 if model == "claude-opus-4-6" else 1_100, 0.6, 60_000)
        + reply.usage["total"] / 400
    )
    latency = ttfb + reply.output / MODELS[model][3] * 1000 * rng.uniform(0.7, 1.4)
    if not stream:
        ttfb = latency * rng.uniform(0.97, 0.999)
    return ttfb, latency


def _disconnected(rng: Draw, api: str, sse: list[dict]) -> tuple[Any, list[dict], float]:
    """The stream cut where the client left: what arrived, reassembled, and when it ended."""
    cut = rng.randint(2, max(2, len(sse) - 2))
    sse = sse[:cut]
    latency = sse[-1]["t_ms"] + rng.uniform(1, 300)
    result = api_module(api).reassemble(
        e for e in (parse_block(block["raw"].encode()) for block in sse) if e is not None
    )
    return result.body, sse, latency


def _log_response(
    s: Session,
    exchange: str,
    request: dict,
    body: Any,
    fields: dict[str, Any],
    outcome: str,
    latency: float,
    ttfb: float,
) -> Summary:
    """The `llm.response` with what the recorder derives from its body; returns the summary."""
    provider, stream = request["provider"], request["stream"]
    length = None if stream else len(fields.get("body_raw") or orjson.dumps(body))
    payload = response_payload(
        request["api"],
        provider,
        200,
        outcome,
        None,
        latency=latency,
        ttfb=ttfb,
        overhead=s.overhead_ms(),
        headers=s.response_headers(provider, stream, length),
        stream=stream,
        fields=fields,
    )
    summary = api_module(payload["api"]).summarize(body)
    payload.update(_derived(provider, summary))
    s.emit("llm.response", exchange, payload)
    s.stats[("outcome", payload["outcome"])] += 1
    s.stats[("status", 200)] += 1
    s.stats[("finish", summary.finish_reason)] += 1
    s.stats[("priced", payload["cost_usd"] is not None)] += 1
    return summary


def _derived(provider: str, summary: Summary) -> dict[str, Any]:
    """What the recorder adds to an answer from its body: ids, finish, usage and price."""
    return {
        "response_id": summary.response_id,
        "model": summary.model,
        "finish_reason": summary.finish_reason,
        "usage": {
            "input_tokens": summary.input_tokens,
            "output_tokens": summary.output_tokens,
            "cached_tokens": summary.cached_tokens,
            "cache_write_tokens": summary.cache_write_tokens,
            "reasoning_tokens": summary.reasoning_tokens,
        },
        "cost_usd": prices.cost_usd(
            provider,
            summary.model,
            summary.input_tokens,
            summary.output_tokens,
            summary.cached_tokens,
            summary.cache_write_tokens,
        ),
    }


def _run_tools(s: Session, calls: list[Call], asked: int) -> list[Result]:
    """The agent runs the calls (in parallel: it waits for the slowest) and keeps the results."""
    results = []
    longest = 0
    for call in calls:
        content, failed = tool_result(s.rng, s.pools, s.agent, call.name)
        results.append(Result(call.call_id, call.name, content, failed, asked, call.kind))
        longest = max(longest, tool_time_us(s.rng, call.name))
        s.stats[("tool_name", call.name)] += 1
    s.pending_calls = calls
    if results:
        s.advance(longest)
    return results
