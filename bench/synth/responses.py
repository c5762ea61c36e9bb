"""OpenAI Responses as taplog records it: transcript, request, answer and stream.

The same interface as `chat` and `messages` (see `chat`). Requests may be chained by
`previous_response_id`, sending only what is new; Codex's tools include a custom one
(`apply_patch`, free text in and out).
"""

from __future__ import annotations

from typing import Any

from bench.synth.catalog import MODELS, REASONING, Agent
from bench.synth.common import SECOND, Draw, as_text, pieces, sse_event, timed
from bench.synth.transcript import Entry, Reply


def tool_spec(name: str) -> dict:
    if name == "apply_patch":
        return {"type": "custom", "name": name, "format": {"type": "text"}}
    return {"type": "function", "name": name, "parameters": {"type": "object"}}


def render(entry: Entry, claude: bool = False) -> list:
    """One transcript entry as Responses input items."""
    if entry.role == "user":
        text = {"type": "input_text", "text": entry.text}
        return [{"type": "message", "role": "user", "content": [text]}]
    out: list = []
    if entry.text:
        text = {"type": "output_text", "text": entry.text}
        out.append({"type": "message", "role": "assistant", "content": [text]})
    for c in entry.calls:
        if c.kind == "custom":
            out.append(
                {
                    "type": "custom_tool_call",
                    "call_id": c.call_id,
                    "name": c.name,
                    "input": c.arguments,
                }
            )
        else:
            out.append(
                {
                    "type": "function_call",
                    "call_id": c.call_id,
                    "name": c.name,
                    "arguments": c.raw_arguments(),
                }
            )
    for r in entry.results:
        kind = "custom_tool_call_output" if r.kind == "custom" else "function_call_output"
        out.append({"type": kind, "call_id": r.call_id, "output": as_text(r.content)})
    return out


def request_body(
    agent: Agent,
    model: str,
    history: list,
    tools: list,
    stream: bool,
    sid: str,
    previous: str | None,
) -> dict:
    """The request; `previous` chains it to the last answer (then `history` is only the news)."""
    body: dict[str, Any] = {"model": model, "instructions": agent.system, "input": history}
    if previous is not None:
        body["previous_response_id"] = previous
    body["tools"] = tools
    if agent.tools == "codex":
        body.update(
            tool_choice="auto",
            parallel_tool_calls=False,
            reasoning={"effort": "medium", "summary": "auto"},
            store=False,
            stream=True,
            include=["reasoning.encrypted_content"],
            prompt_cache_key=sid,
        )
    elif stream:
        body["stream"] = True
    return body


def answer(
    reply: Reply, request: dict, rng: Draw, now: int, local: bool, ttfb: float, latency: float
) -> tuple[dict, list[dict] | None, list[dict]]:
    """The response (or the events it streamed as); server tools stay out of the transcript."""
    output = _output(rng, reply, request["model"])
    usage = reply.usage
    usage_obj = {
        "input_tokens": usage["total"],
        "input_tokens_details": {"cached_tokens": usage["cached"]},
        "output_tokens": usage["output"],
        "output_tokens_details": {"reasoning_tokens": usage["reason"]},
        "total_tokens": usage["total"] + usage["output"],
    }
    rid = "resp_" + rng.hexa(48)
    created = now // SECOND
    req = request["body"]

    def response(done: bool) -> dict:
        return {
            "id": rid,
            "object": "response",
            "created_at": created,
            "status": "completed" if done else "in_progress",
            "background": False,
            "completed_at": created + int(latency // 1000) if done else None,
            "error": None,
            "incomplete_details": None,
            "instructions": req.get("instructions"),
            "max_output_tokens": None,
            "model": MODELS[request["model"]][1],
            "output": output if done else [],
            "parallel_tool_calls": req.get("parallel_tool_calls", True),
            "previous_response_id": req.get("previous_response_id"),
            "reasoning": {"effort": "medium", "summary": None},
            "service_tier": "default",
            "store": req.get("store", True),
            "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": req.get("tool_choice", "auto"),
            "tools": [{"type": t.get("type"), "name": t.get("name")} for t in req.get("tools", [])],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage_obj if done else None,
            "user": None,
            "metadata": {},
        }

    body = response(True)
    if not request["stream"]:
        return body, None, []
    return body, timed(_events(response(False), body), ttfb, latency), []


def _output(rng: Draw, reply: Reply, model: str) -> list[dict]:
    """The output items: reasoning, web searches, the message, then the tool calls."""
    output: list[dict] = []
    if model in REASONING and reply.usage["reason"]:
        output.append({"id": "rs_" + rng.hexa(48), "type": "reasoning", "summary": []})
    for _sid, query in reply.server:
        action = {"type": "search", "query": query}
        output.append(
            {
                "id": "ws_" + rng.hexa(48),
                "type": "web_search_call",
                "status": "completed",
                "action": action,
            }
        )
    if reply.text:
        text = {"type": "output_text", "annotations": [], "logprobs": [], "text": reply.text}
        output.append(
            {
                "id": "msg_" + rng.hexa(48),
                "type": "message",
                "status": "completed",
                "content": [text],
                "role": "assistant",
            }
        )
    for call in reply.calls:
        if call.kind == "custom":
            head = {"id": "ctc_" + rng.hexa(48), "type": "custom_tool_call", "status": "completed"}
            output.append(
                {**head, "call_id": call.call_id, "input": call.arguments, "name": call.name}
            )
        else:
            head = {"id": "fc_" + rng.hexa(48), "type": "function_call", "status": "completed"}
            output.append(
                {**head, "arguments": call.raw, "call_id": call.call_id, "name": call.name}
            )
    return output


def _events(pending: dict, body: dict) -> list[str]:
    """The named events, numbered: created, in progress, each item's deltas, completed."""
    evs: list[dict] = []

    def add(kind: str, **fields: Any) -> None:
        evs.append({"type": kind, "sequence_number": len(evs), **fields})

    add("response.created", response=pending)
    add("response.in_progress", response=pending)
    for n, item in enumerate(body["output"]):
        at = {"item_id": item["id"], "output_index": n}
        kind = item["type"]
        if kind == "message":
            text = item["content"][0]["text"]
            opened = {**item, "status": "in_progress", "content": []}
            add("response.output_item.added", output_index=n, item=opened)
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            add("response.content_part.added", **at, content_index=0, part=part)
            for piece in pieces(text):
                add("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
            add("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
            add("response.content_part.done", **at, content_index=0, part={**part, "text": text})
        elif kind in ("function_call", "custom_tool_call"):
            name = "arguments" if kind == "function_call" else "input"
            opened = {**item, "status": "in_progress", name: ""}
            add("response.output_item.added", output_index=n, item=opened)
            family = (
                "function_call_arguments" if kind == "function_call" else "custom_tool_call_input"
            )
            for piece in pieces(item[name]):
                add(f"response.{family}.delta", **at, delta=piece)
            add(f"response.{family}.done", **at, **{name: item[name]})
        else:
            add("response.output_item.added", output_index=n, item=item)
        add("response.output_item.done", output_index=n, item=item)
    add("response.completed", response=body)
    return [sse_event(e["type"], e) for e in evs]
