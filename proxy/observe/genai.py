"""Recorded events as OpenTelemetry GenAI span attributes (docs/protocols.md §8).

Pure functions of the events, no OpenTelemetry import: `proxy.observe.traces` keeps the
events of a call and asks these for the attributes of its span.

- `call_attributes`: a call's `chat` span, from the request of the try that answered, its
  last answer and `call.answered`: provider, models, response id, finish reasons, usage,
  server address, `error.type`, and the session as `gen_ai.conversation.id`;
- `tool_attributes`: an `execute_tool` span, from `tool.pre` and `tool.post`;
- `input_messages` / `output_messages`: content, only with `--otlp-content`, in the parts
  the conventions name (`text`, `tool_call`, `tool_call_response`), read through each
  API's own reader (`recorder.vendors.transcripts`), so no vendor field is named here.

Phoenix and other OpenInference readers know neither the `gen_ai.*` names nor a session
without their own: each span also carries `session.id`, `openinference.span.kind` and the
token counts and model under their OpenInference names (a handful of attributes).
Never a header; bodies as recorded, so with their secrets already redacted.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import orjson

from taplog.recorder.events import Event
from taplog.recorder.vendors.apis import conversation
from taplog.recorder.vendors.transcripts import result_text, said

Attributes = dict[str, Any]

USAGE = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}
OPENINFERENCE_TOKENS = {
    "input_tokens": "llm.token_count.prompt",
    "output_tokens": "llm.token_count.completion",
}


def ts_ns(ts: str) -> int:
    """An event's `ts` (`2026-11-30T00:49:33.123456Z`) in nanoseconds since the epoch."""
    moment = datetime.fromisoformat(ts)
    return (int(moment.timestamp()) * 1_000_000 + moment.microsecond) * 1000


def error_type(status: object, outcome: object) -> str | None:
    """`error.type`: None for a success, else the HTTP status when the vendor refused, else
    the outcome (`timeout`, `unreachable`, …), as the `gen_ai_*` metrics label it."""
    if outcome == "ok":
        return None
    if outcome == "upstream_error" and isinstance(status, int) and status >= 400:
        return str(status)
    return str(outcome or "error")


def call_attributes(request: Event, response: Event | None, answered: Event) -> Attributes:
    """The `chat` span of one call: `request` is the llm.request of the try that answered."""
    requested = request.get("model")
    served = (response or {}).get("model") or answered.get("model")
    attributes: Attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": request.get("provider"),
        "gen_ai.request.model": requested,
        "gen_ai.response.model": served,
        "gen_ai.conversation.id": answered["session"],
        "gen_ai.request.stream": request.get("stream"),
        "session.id": answered["session"],
        "openinference.span.kind": "LLM",
        "llm.model_name": served or requested,
        "llm.provider": request.get("provider"),
        "error.type": error_type(answered.get("status"), answered.get("outcome")),
        "http.response.status_code": answered.get("status"),
    }
    attributes.update(_server(request.get("upstream_url")))
    if response is not None:
        attributes.update(_answer(response))
    return {name: value for name, value in attributes.items() if value is not None}


def _answer(response: Event) -> Attributes:
    found: Attributes = {"gen_ai.response.id": response.get("response_id")}
    if finish := response.get("finish_reason"):
        found["gen_ai.response.finish_reasons"] = [str(finish)]
    if response.get("stream") and isinstance(response.get("ttfb_ms"), int | float):
        found["gen_ai.response.time_to_first_chunk"] = response["ttfb_ms"] / 1000
    usage = response.get("usage") or {}
    for field, name in USAGE.items():
        if isinstance(count := usage.get(field), int):
            found[name] = count
    for field, name in OPENINFERENCE_TOKENS.items():
        if isinstance(count := usage.get(field), int):
            found[name] = count
    if isinstance(usage.get("input_tokens"), int) and isinstance(usage.get("output_tokens"), int):
        found["llm.token_count.total"] = usage["input_tokens"] + usage["output_tokens"]
    return found


def _server(url: object) -> Attributes:
    if not isinstance(url, str):
        return {}
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return {}
    return {"server.address": parts.hostname, "server.port": port}


def tool_attributes(pre: Event | None, post: Event, content: bool) -> Attributes:
    """The `execute_tool` span of one tool run (`pre`: None when the asking answer is not
    remembered, an orphan result)."""
    flags = post.get("flags") or ()
    failed = "unanswered" if "unanswered" in flags else ("error" if post.get("is_error") else None)
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": post.get("name"),
        "gen_ai.tool.call.id": post.get("call_id"),
        "gen_ai.tool.type": "extension" if post.get("server") else "function",
        "gen_ai.conversation.id": post["session"],
        "session.id": post["session"],
        "openinference.span.kind": "TOOL",
        "tool.name": post.get("name"),
        "error.type": failed,
    }
    if content:
        if pre is not None and "arguments" in pre:
            attributes["gen_ai.tool.call.arguments"] = _text(pre["arguments"])
        if "result" in post:
            attributes["gen_ai.tool.call.result"] = _text(result_text(post["result"]))
    return {name: value for name, value in attributes.items() if value is not None}


def input_messages(request: Event) -> Attributes:
    """`gen_ai.system_instructions` and `gen_ai.input.messages` of a request (inline bodies
    only: one moved to a blob is left out)."""
    module, body = conversation(request.get("api") or ""), request.get("body")
    if module is None or not isinstance(body, dict):
        return {}
    reading = module.read_request(body)
    found: Attributes = {"gen_ai.input.messages": _json([_message(t) for t in reading.turns])}
    if reading.system:
        parts = [{"type": "text", "content": text} for text in reading.system]
        found["gen_ai.system_instructions"] = _json(parts)
    return found


def output_messages(api: object, response: Event) -> Attributes:
    """`gen_ai.output.messages` of an answer, read in the API of the try that gave it."""
    module, body = conversation(str(api or "")), response.get("body")
    if module is None or not isinstance(body, dict) or response.get("status") != 200:
        return {}
    messages = [_message(turn) for turn in module.read_answer(body)]
    for message in messages:
        message["finish_reason"] = str(response.get("finish_reason") or "")
    return {"gen_ai.output.messages": _json(messages)}


def _message(turn: dict[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for part in said(turn):
        if part.kind == "text":
            parts.append({"type": "text", "content": part.text})
        elif part.kind == "tool_call":
            call = {"type": "tool_call", "id": part.call_id, "name": part.name}
            parts.append({**call, "arguments": part.value})
        elif part.kind == "tool_result":
            response = result_text(part.value)
            parts.append({"type": "tool_call_response", "id": part.call_id, "response": response})
        else:
            parts.append({"type": part.text or "item"})
    return {"role": turn["role"], "parts": parts}


def _text(value: Any) -> str:
    """A string as it is, anything else as JSON."""
    return value if isinstance(value, str) else _json(value)


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()
