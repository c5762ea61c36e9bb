"""A fake vendor that answers any method on any path, and keeps every request that reached it.

tests/e2e/test_sdk_surface.py calls every method of the official SDKs through taplog in front
of two of these, one per provider, and asks each what reached it: which paths, with which
keys. `FakeVendor` (vendor.py) scripts answers for the three LLM APIs; this one knows no API
and answers every call with something each SDK method can parse:

    a model call (POST /v1/messages, /v1/chat/completions, /v1/responses, /v1/completions)
                            a minimal answer of that API, as JSON or as its SSE stream
    any other call          one generic JSON object: an id, an empty page (`data`, `has_more`),
                            a finished `status` (the word the path's poller waits for), and the
                            few ids SDK helpers read before their next request
    a stream                (`"stream": true` in a JSON or form body, `stream=true` in the
                            query, `accept: text/event-stream`, a path that ends in
                            `/stream`): the events of the path's
                            API (Messages, Chat, Responses, also when a response is streamed
                            again by id, the Agents API's session events), else one generic
                            event and the end (OpenAI's `[DONE]`; Anthropic's streams just end)

Answers never point elsewhere: a batch's `results_url` is relative, so the SDK fetches the
results through whatever base URL it was given (taplog's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatch
from typing import Any

import orjson
from aiohttp import web

Json = dict[str, Any]
PROVIDERS = ("openai", "anthropic")
_FORM_STREAM = re.compile(rb'name="stream"\r\n(?:[^\r\n]*\r\n)*\r\ntrue\r\n')
_GENERIC: Json = {
    "id": "x_1",
    "object": "list",
    "type": "x",
    "data": [],
    "has_more": False,
    "first_id": None,
    "last_id": None,
    "status": "completed",
    "deleted": True,
    # what the SDKs' helpers read from an answer before their next request
    "thread_id": "thread_1",
    "environment_id": "env_1",
    "file_counts": {"in_progress": 0, "completed": 0, "failed": 0, "cancelled": 0, "total": 0},
}
# A finished status, where a helper waits for another word than `completed`.
_STATUS = {"/v1/files": "processed", "/v1/agents/sessions": "idle", "/v1/sessions": "terminated"}


@dataclass(frozen=True, slots=True)
class Reached:
    """One request as the vendor got it."""

    method: str
    target: str  # path and query, as received
    headers: dict[str, str]  # names lower-cased
    body: bytes


@dataclass
class RecordingVendor:
    """A vendor of `provider` ("openai" or "anthropic") that keeps every request (`requests`)."""

    provider: str
    requests: list[Reached] = field(default_factory=list)
    url: str = ""  # set once served

    def __post_init__(self) -> None:
        assert self.provider in PROVIDERS, self.provider

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._answer)
        return app

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(Reached(request.method, request.raw_path, headers, body))
        api = _model_api(self.provider, request.method, request.path)
        if not _asks_stream(request, body):
            return web.json_response(_ANSWERS.get(api) or _generic(request.path))
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for name, data in _events(self.provider, request.path):
            event = f"event: {name}\n" if name else ""
            await response.write(f"{event}data: {data}\n\n".encode())
        await response.write_eof()
        return response


def _model_api(provider: str, method: str, path: str) -> str | None:
    """The model-call API a request calls (None for any other call)."""
    if method != "POST":
        return None
    paths = {"anthropic": ("/v1/messages",), "openai": _OPENAI_MODEL_PATHS}[provider]
    return f"{provider}:{path}" if path in paths else None


def _asks_stream(request: web.Request, body: bytes) -> bool:
    accept = request.headers.get("accept", "")
    if request.query.get("stream") == "true" or "text/event-stream" in accept:
        return True
    if request.path.endswith("/stream"):  # Anthropic's session events: a stream by its path
        return True
    if request.content_type == "application/json" and body:
        parsed = orjson.loads(body)
        return isinstance(parsed, dict) and parsed.get("stream") is True
    return bool(_FORM_STREAM.search(body))


def _generic(path: str) -> Json:
    """The generic answer, its status finished for the path's poller; a batch has results."""
    status = next((s for prefix, s in _STATUS.items() if path.startswith(prefix)), "completed")
    answer = {**_GENERIC, "status": status}
    if path.startswith("/v1/messages/batches/"):
        # relative, so the SDK fetches the results through the base URL it was given
        answer["results_url"] = path.lstrip("/") + "/results"
    if path == "/v1/embeddings":
        vector = {"object": "embedding", "index": 0, "embedding": "AAAAAA=="}  # [0.0], base64
        answer["data"] = [vector]
    return answer


def _events(provider: str, path: str) -> list[tuple[str, str]]:
    """A stream's events (name, data) for this path: its API's, else one generic event."""
    for (owner, pattern), events in _STREAMS.items():
        if owner == provider and fnmatch(path, pattern):
            return events
    event = _json({**_GENERIC, "type": "x.done"})
    return [("", event), ("", "[DONE]")] if provider == "openai" else [("x.done", event)]


def _json(value: Json) -> str:
    return orjson.dumps(value).decode()


# -- the model-call APIs' answers, minimal but whole ------------------------------------

_OPENAI_MODEL_PATHS = ("/v1/chat/completions", "/v1/responses", "/v1/completions")
_USAGE = {"input_tokens": 1, "output_tokens": 1}
_MESSAGE: Json = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": _USAGE,
}
_CHAT_USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
_CHAT: Json = {
    "id": "chatcmpl_1",
    "object": "chat.completion",
    "created": 1767225600,
    "model": "gpt-4.1",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "ok", "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ],
    "usage": _CHAT_USAGE,
}
_RESPONSE: Json = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1767225600,
    "model": "gpt-4.1",
    "status": "completed",
    "output": [
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "usage": {**_USAGE, "total_tokens": 2},
}
_COMPLETION: Json = {
    "id": "cmpl_1",
    "object": "text_completion",
    "created": 1767225600,
    "model": "gpt-3.5-turbo-instruct",
    "choices": [{"index": 0, "text": "ok", "finish_reason": "stop", "logprobs": None}],
    "usage": _CHAT_USAGE,
}
_ANSWERS: dict[str | None, Json] = {
    "anthropic:/v1/messages": _MESSAGE,
    "openai:/v1/chat/completions": _CHAT,
    "openai:/v1/responses": _RESPONSE,
    "openai:/v1/completions": _COMPLETION,
}


def _chat_chunk(delta: Json, finish: str | None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
    return _json({**_CHAT, "object": "chat.completion.chunk", "choices": [choice], "usage": None})


def _session_event(kind: str) -> tuple[str, str]:
    turn = {"turn_id": "turn_1", "turn": {"id": "turn_1", "subagent_id": None}}
    event = {"type": f"agent.session.{kind}", "event_id": f"evt_{kind}", "session_id": "x_1"}
    return "", _json({**event, **turn})


_STREAMS: dict[tuple[str, str], list[tuple[str, str]]] = {
    ("anthropic", "/v1/messages"): [
        ("message_start", _json({"type": "message_start", "message": {**_MESSAGE, "content": []}})),
        (
            "content_block_start",
            _json(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
        ),
        (
            "content_block_delta",
            _json(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "ok"},
                }
            ),
        ),
        ("content_block_stop", _json({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            _json(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 1},
                }
            ),
        ),
        ("message_stop", _json({"type": "message_stop"})),
    ],
    ("openai", "/v1/chat/completions"): [
        ("", _chat_chunk({"role": "assistant", "content": "ok"}, None)),
        ("", _chat_chunk({}, "stop")),
        ("", "[DONE]"),
    ],
    ("openai", "/v1/responses*"): [
        (
            name,
            _json(
                {
                    "type": name,
                    "sequence_number": number,
                    "response": {**_RESPONSE, "status": status, "output": output},
                }
            ),
        )
        for number, (name, status, output) in enumerate(
            [
                ("response.created", "in_progress", []),
                ("response.completed", "completed", _RESPONSE["output"]),
            ]
        )
    ],
    ("openai", "/v1/completions"): [("", _json(_COMPLETION)), ("", "[DONE]")],
    # the Agents API's session events: one turn, then the session waits for input again
    ("openai", "/v1/agents/sessions/*/events"): [
        *map(_session_event, ("turn.created", "turn.completed", "idle")),
        ("", "[DONE]"),
    ],
}
