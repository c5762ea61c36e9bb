"""Anthropic Messages as taplog records it: transcript, request, answer and stream.

The same interface as `chat` and `responses` (see there). Only Messages answers carry
server-tool blocks that the transcript keeps: `answer` returns them for the next request.
"""

from __future__ import annotations

from typing import Any

import orjson

from bench.synth.catalog import MODELS, Agent
from bench.synth.common import Draw, pieces, sse_event, timed
from bench.synth.transcript import Entry, Reply


def tool_spec(name: str) -> dict:
    return {"name": name, "input_schema": {"type": "object"}}


def render(entry: Entry, claude: bool = False) -> list:
    """One transcript entry as Messages turns (Claude Code leaves `is_error` out when false)."""
    if entry.role == "user":
        return [{"role": "user", "content": entry.text}]
    content: list[dict] = []
    if entry.text:
        content.append({"type": "text", "text": entry.text})
    content.extend(entry.server)
    for call in entry.calls:
        arguments = call.arguments
        if not isinstance(arguments, dict):
            arguments = {"input": arguments} if call.bad_json is False else {}
        block = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": arguments}
        content.append(block)
    out: list = [{"role": "assistant", "content": content or [{"type": "text", "text": "…"}]}]
    if entry.results:
        blocks = []
        for r in entry.results:
            block = {"type": "tool_result", "tool_use_id": r.call_id, "content": r.content}
            if r.is_error or not claude:
                block["is_error"] = r.is_error
            blocks.append(block)
        out.append({"role": "user", "content": blocks})
    return out


def request_body(
    agent: Agent, model: str, history: list, tools: list, stream: bool, key: str, sid: str
) -> dict:
    claude = agent.tools == "claude"
    body: dict[str, Any] = {"max_tokens": 32_000 if claude else 2048}
    body["messages"] = history
    body["model"] = model
    if claude:
        body["system"] = [
            {"type": "text", "text": agent.system, "cache_control": {"type": "ephemeral"}}
        ]
        body["metadata"] = {"user_id": f"user_{key[4:]}_account__session_{sid}"}
    else:
        body["system"] = agent.system
    body["tools"] = tools
    if stream:
        body["stream"] = True
    return body


def answer(
    reply: Reply, request: dict, rng: Draw, now: int, local: bool, ttfb: float, latency: float
) -> tuple[dict, list[dict] | None, list[dict]]:
    """The message (or the events it streamed as), and its server-tool blocks."""
    blocks: list[dict] = []
    if reply.thinking:
        blocks.append({"type": "thinking", "thinking": reply.thinking, "signature": rng.b64(96)})
    if reply.text:
        blocks.append({"type": "text", "text": reply.text})
    server = _server_blocks(rng, reply.server)
    blocks += server
    for call in reply.calls:
        blocks.append(
            {"type": "tool_use", "id": call.call_id, "name": call.name, "input": call.arguments}
        )
    usage = reply.usage
    body = {
        "model": MODELS[request["model"]][1],
        "id": "msg_01" + rng.b62(22),
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "stop_reason": "tool_use" if reply.calls and not reply.mismatch else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage["fresh"],
            "cache_creation_input_tokens": usage["write"],
            "cache_read_input_tokens": usage["read"],
            "cache_creation": {
                "ephemeral_5m_input_tokens": usage["write"],
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": usage["output"],
            "service_tier": "standard",
        },
    }
    if not request["stream"]:
        return body, None, server
    return body, timed(_events(rng, body), ttfb, latency), server


def _server_blocks(rng: Draw, uses: list[tuple[str, str]]) -> list[dict]:
    """Each web search as the pair of blocks the answer carries: the use and its result."""
    blocks: list[dict] = []
    for sid, query in uses:
        use = {
            "type": "server_tool_use",
            "id": sid,
            "name": "web_search",
            "input": {"query": query},
        }
        found = {
            "type": "web_search_tool_result",
            "tool_use_id": sid,
            "content": [
                {
                    "type": "web_search_result",
                    "title": f"{query[:30]} - Docs",
                    "url": f"https://docs.acme.example/{rng.hexa(8)}",
                    "encrypted_content": rng.b64(60),
                    "page_age": "3 weeks ago",
                }
            ],
        }
        blocks += [use, found]
    return blocks


# What a streamed block starts as, before its deltas fill it in.
_EMPTY = {
    "thinking": {"thinking": "", "signature": ""},
    "text": {"text": ""},
    "tool_use": {"input": {}},
    "server_tool_use": {"input": {}},
}


def _events(rng: Draw, body: dict) -> list[str]:
    """The named events: message_start, each block's start, deltas and stop, message_delta."""
    usage = body["usage"]
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    raws = [sse_event("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(body["content"]):
        opened = {**block, **_EMPTY.get(block["type"], {})}
        raws.append(
            sse_event(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": opened},
            )
        )
        if i == 0 and rng.random() < 0.5:
            raws.append('event: ping\ndata: {"type": "ping"}\n\n')
        for delta in _deltas(block):
            raws.append(
                sse_event(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": i, "delta": delta},
                )
            )
        raws.append(sse_event("content_block_stop", {"type": "content_block_stop", "index": i}))
    final_usage = {
        "input_tokens": usage["input_tokens"],
        "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
        "cache_read_input_tokens": usage["cache_read_input_tokens"],
        "output_tokens": usage["output_tokens"],
    }
    stop = {"stop_reason": body["stop_reason"], "stop_sequence": None}
    raws.append(
        sse_event("message_delta", {"type": "message_delta", "delta": stop, "usage": final_usage})
    )
    raws.append(sse_event("message_stop", {"type": "message_stop"}))
    return raws


def _deltas(block: dict) -> list[dict]:
    kind = block["type"]
    if kind == "thinking":
        deltas = [{"type": "thinking_delta", "thinking": s} for s in pieces(block["thinking"])]
        return [*deltas, {"type": "signature_delta", "signature": block["signature"]}]
    if kind == "text":
        return [{"type": "text_delta", "text": s} for s in pieces(block["text"])]
    if kind in ("tool_use", "server_tool_use"):
        args = orjson.dumps(block["input"]).decode()
        return [{"type": "input_json_delta", "partial_json": s} for s in ["", *pieces(args)]]
    return []
