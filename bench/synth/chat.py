"""OpenAI Chat Completions as taplog records it: transcript, request, answer and stream.

The same interface as `messages` and `responses`: `tool_spec(name)`, `render(entry)` (one
transcript entry as the SDKs send it back), `request_body(...)` and `answer(...)`, which
returns the stored body, the recorded `sse` blocks (None unless streamed) and the
server-tool blocks the transcript keeps (none here: Chat has no server tools).
"""

from __future__ import annotations

from typing import Any

from bench.synth.catalog import MODELS, Agent
from bench.synth.common import SECOND, Draw, as_text, pieces, sse_data, timed
from bench.synth.transcript import Entry, Reply


def tool_spec(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


def render(entry: Entry, claude: bool = False) -> list:
    """One transcript entry as Chat messages."""
    if entry.role == "user":
        return [{"role": "user", "content": entry.text}]
    message: dict[str, Any] = {"role": "assistant"}
    if entry.text:
        message["content"] = entry.text
    message["annotations"] = []
    if entry.calls:
        message["tool_calls"] = [
            {
                "id": c.call_id,
                "function": {"arguments": c.raw_arguments(), "name": c.name},
                "type": "function",
            }
            for c in entry.calls
        ]
    out: list = [message]
    for r in entry.results:
        out.append({"role": "tool", "tool_call_id": r.call_id, "content": as_text(r.content)})
    return out


def request_body(agent: Agent, model: str, history: list, tools: list, stream: bool) -> dict:
    messages = [{"role": "system", "content": agent.system}]
    messages.extend(history)
    body: dict[str, Any] = {"model": model, "messages": messages, "tools": tools}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def answer(
    reply: Reply, request: dict, rng: Draw, now: int, local: bool, ttfb: float, latency: float
) -> tuple[dict, list[dict] | None, list[dict]]:
    """The completion (or the chunks it streamed as, and the body taplog reassembles)."""
    model_name, fp = MODELS[request["model"]][1], MODELS[request["model"]][2]
    head: dict[str, Any] = {
        "id": "chatcmpl-" + (rng.hexa(32) if local else rng.b62(29)),
        "object": "chat.completion",
        "created": now // SECOND + int(latency // 1000),
        "model": model_name,
    }
    finish = "stop" if not reply.calls or reply.mismatch else "tool_calls"
    usage = _usage(reply.usage, local)
    tool_calls = [
        {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.raw}}
        for c in reply.calls
    ]
    if not request["stream"]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text,
            "refusal": None,
            "annotations": [],
        }
        if tool_calls:
            message["tool_calls"] = tool_calls
        body = {
            **head,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": usage,
        }
        if not local:
            body["service_tier"] = "default"
            body["system_fingerprint"] = fp
        return body, None, []
    sse = timed(_chunks(head, reply.text, tool_calls, finish, usage, fp, local), ttfb, latency)
    message = {"role": "assistant", "content": reply.text, "refusal": None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {
        **head,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
        "system_fingerprint": fp,
    }
    if not local:
        body["service_tier"] = "default"
    return body, sse, []


def _usage(usage: dict[str, int], local: bool) -> dict[str, Any]:
    if local:
        return {
            "prompt_tokens": usage["total"],
            "total_tokens": usage["total"] + usage["output"],
            "completion_tokens": usage["output"],
            "prompt_tokens_details": None,
        }
    return {
        "prompt_tokens": usage["total"],
        "completion_tokens": usage["output"],
        "total_tokens": usage["total"] + usage["output"],
        "prompt_tokens_details": {"cached_tokens": usage["cached"], "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": usage["reason"],
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _chunks(
    head: dict,
    text: str | None,
    tool_calls: list[dict],
    finish: str,
    usage: dict,
    fp: str | None,
    local: bool,
) -> list[str]:
    """The `data:` blocks: role, text deltas, each call's start and argument deltas, usage."""
    head = {**head, "object": "chat.completion.chunk"}
    if not local:
        head["service_tier"] = "default"
        head["system_fingerprint"] = fp

    def chunk(delta: dict, reason: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        return sse_data({**head, "choices": [choice], "usage": None})

    raws = [chunk({"role": "assistant", "content": "" if text else None, "refusal": None})]
    raws += [chunk({"content": piece}) for piece in pieces(text)] if text else []
    for i, call in enumerate(tool_calls):
        start = {**call, "function": {"name": call["function"]["name"], "arguments": ""}}
        raws.append(chunk({"tool_calls": [{"index": i, **start}]}))
        raws += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in pieces(call["function"]["arguments"])
        ]
    raws.append(chunk({}, finish))
    raws.append(sse_data({**head, "choices": [], "usage": usage}))
    raws.append("data: [DONE]\n\n")
    return raws
