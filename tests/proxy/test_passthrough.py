"""The three LLM APIs through taplog with the official SDKs: unchanged answers, full logs.

Each test runs the same call directly against the fake vendor and through
taplog, compares what the SDK returns, compares the raw stream bytes with what
the vendor wrote, and reads the session log back from disk.
"""

from __future__ import annotations

import httpx
import orjson
import pytest

from taplog.recorder.bodies import decode_body

TOOLS_CHAT = [
    {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
    for n in ("get_weather", "get_time")
]
TOOLS_RESPONSES = [
    {"type": "function", "name": n, "parameters": {"type": "object"}}
    for n in ("get_weather", "get_time")
]
TOOLS_ANTHROPIC = [
    {"name": n, "input_schema": {"type": "object"}} for n in ("get_weather", "get_time")
]
PARALLEL = "Weather and time in Paris? !plan=get_weather+get_time"


def _only(events, event_type):
    found = [e for e in events if e["type"] == event_type]
    assert len(found) == 1, found
    return found[0]


def _exchange(taplog, count=1):
    """The request and response events of the latest call, after `count` calls."""
    sessions = taplog.wait_responses(count)
    events = [e for evs in sessions.values() for e in evs]
    response = max((e for e in events if e["type"] == "llm.response"), key=lambda e: e["ts"])
    request = next(
        e for e in events if e["type"] == "llm.request" and e["exchange"] == response["exchange"]
    )
    return request, response


def _assert_request_logged_as_sent(fake, request):
    """The log rebuilds the exact bytes the vendor received."""
    assert decode_body(request) == fake.requests[-1].body


def _stream_bytes(response) -> bytes:
    return b"".join(entry["raw"].encode() for entry in response["sse"])


# -- OpenAI Chat Completions -----------------------------------------------------------


def test_chat_non_stream_is_unchanged_and_logged(oai, oai_direct, fake, taplog):
    kwargs = dict(model="gpt-4.1", messages=[{"role": "user", "content": "hello there"}])
    direct = oai_direct.chat.completions.create(**kwargs)
    through = oai.chat.completions.create(**kwargs)
    assert through == direct

    request, response = _exchange(taplog)
    _assert_request_logged_as_sent(fake, request)
    assert request["api"] == "openai.chat" and request["model"] == "gpt-4.1"
    assert request["stream"] is False
    assert decode_body(response) == fake.sent[-1]
    assert response["status"] == 200 and response["outcome"] == "ok"
    assert response["finish_reason"] == "stop"
    assert response["usage"]["input_tokens"] == direct.usage.prompt_tokens
    assert response["usage"]["output_tokens"] == direct.usage.completion_tokens
    assert response["cost_usd"] > 0
    assert response["latency_ms"] >= response["ttfb_ms"] > 0


def test_chat_stream_bytes_and_reassembly(oai, oai_direct, fake, taplog):
    kwargs = dict(
        model="gpt-4.1",
        messages=[{"role": "user", "content": PARALLEL}],
        tools=TOOLS_CHAT,
        stream_options={"include_usage": True},
    )
    with oai_direct.chat.completions.stream(**kwargs) as stream:
        direct = stream.get_final_completion()
    with oai.chat.completions.with_streaming_response.create(stream=True, **kwargs) as raw:
        through_bytes = b"".join(raw.iter_bytes())
    assert through_bytes == fake.sent[-1]
    with oai.chat.completions.stream(**kwargs) as stream:
        through = stream.get_final_completion()
    assert through == direct

    request, response = _exchange(taplog, 2)
    _assert_request_logged_as_sent(fake, request)
    assert response["stream"] is True and response["stream_complete"] is True
    assert _stream_bytes(response) == fake.sent[-1]
    assert all(b["t_ms"] >= 0 for b in response["sse"])
    message = response["body"]["choices"][0]["message"]
    calls = [
        (c["function"]["name"], orjson.loads(c["function"]["arguments"]))
        for c in message["tool_calls"]
    ]
    assert calls == [
        (c.function.name, orjson.loads(c.function.arguments))
        for c in direct.choices[0].message.tool_calls
    ]
    assert len(calls) == 2
    assert response["finish_reason"] == "tool_calls"
    assert response["usage"]["output_tokens"] == direct.usage.completion_tokens


# -- OpenAI Responses ------------------------------------------------------------------


def test_responses_non_stream(oai, oai_direct, fake, taplog):
    kwargs = dict(model="gpt-4.1", input=PARALLEL, tools=TOOLS_RESPONSES)
    direct = oai_direct.responses.create(**kwargs)
    through = oai.responses.create(**kwargs)
    assert through == direct

    request, response = _exchange(taplog)
    _assert_request_logged_as_sent(fake, request)
    assert request["api"] == "openai.responses"
    assert decode_body(response) == fake.sent[-1]
    assert [item["type"] for item in response["body"]["output"]] == ["function_call"] * 2
    assert response["response_id"] == direct.id


def test_responses_stream(oai, oai_direct, fake, taplog):
    kwargs = dict(model="gpt-4.1", input="Tell me !events=5", instructions="Be brief.")
    with oai_direct.responses.stream(**kwargs) as stream:
        direct = stream.get_final_response()
    with oai.responses.with_streaming_response.create(stream=True, **kwargs) as raw:
        assert b"".join(raw.iter_bytes()) == fake.sent[-1]
    with oai.responses.stream(**kwargs) as stream:
        through = stream.get_final_response()
    assert through.output_text == direct.output_text == "Echo: Tell me"

    request, response = _exchange(taplog, 2)
    _assert_request_logged_as_sent(fake, request)
    assert _stream_bytes(response) == fake.sent[-1]
    assert response["stream_complete"] is True
    assert response["body"]["output"][0]["content"][0]["text"] == "Echo: Tell me"
    assert response["body"]["status"] == "completed"
    assert response["usage"]["input_tokens"] == direct.usage.input_tokens


# -- Anthropic Messages ----------------------------------------------------------------


def test_messages_non_stream(ant, ant_direct, fake, taplog):
    kwargs = dict(
        model="claude-sonnet-4-6",
        max_tokens=256,
        system="You are terse.",
        messages=[{"role": "user", "content": PARALLEL}],
        tools=TOOLS_ANTHROPIC,
    )
    direct = ant_direct.messages.create(**kwargs)
    through = ant.messages.create(**kwargs)
    assert through == direct

    request, response = _exchange(taplog)
    _assert_request_logged_as_sent(fake, request)
    assert request["api"] == "anthropic.messages" and request["provider"] == "anthropic"
    assert decode_body(response) == fake.sent[-1]
    assert response["finish_reason"] == "tool_use"
    assert response["cost_usd"] > 0


def test_messages_stream_with_thinking_and_tools(ant, ant_direct, fake, taplog):
    kwargs = dict(
        model="claude-sonnet-4-6",
        max_tokens=1024,
        messages=[{"role": "user", "content": PARALLEL + " !thinking"}],
        tools=TOOLS_ANTHROPIC,
    )
    with ant_direct.messages.stream(**kwargs) as stream:
        direct = stream.get_final_message()
    with ant.messages.with_streaming_response.create(stream=True, **kwargs) as raw:
        assert b"".join(raw.iter_bytes()) == fake.sent[-1]
    with ant.messages.stream(**kwargs) as stream:
        through = stream.get_final_message()
    assert through == direct

    request, response = _exchange(taplog, 2)
    _assert_request_logged_as_sent(fake, request)
    assert _stream_bytes(response) == fake.sent[-1]
    blocks = response["body"]["content"]
    assert [b["type"] for b in blocks] == [b.type for b in direct.content]
    thinking = blocks[0]
    assert thinking["type"] == "thinking"
    assert thinking["signature"] == direct.content[0].signature
    assert thinking["thinking"] == direct.content[0].thinking
    tools = [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    assert tools == [(b.name, b.input) for b in direct.content if b.type == "tool_use"]
    assert response["body"]["usage"]["output_tokens"] == direct.usage.output_tokens


@pytest.mark.parametrize("auth", ["x-api-key", "authorization"])
def test_anthropic_auth_styles_and_version_headers_forwarded(taplog, fake, auth):
    value = "sk-ant-raw-0123456789" if auth == "x-api-key" else "Bearer sk-ant-raw-0123456789"
    headers = {
        auth: value,
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "tools-2024-04-04",
        "x-taplog-session": "auth-check",
        "connection": "keep-alive, x-hop",
        "x-hop": "1",
    }
    body = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    }
    reply = httpx.post(f"{taplog.url}/v1/messages?beta=true", json=body, headers=headers)
    assert reply.status_code == 200
    got = fake.requests[-1]
    assert got.query == "beta=true"
    assert got.headers[auth] == value
    assert got.headers["anthropic-version"] == "2023-06-01"
    assert got.headers["anthropic-beta"] == "tools-2024-04-04"
    assert "x-taplog-session" not in got.headers and "x-hop" not in got.headers


# -- everything else -------------------------------------------------------------------


def test_other_endpoints_pass_through_and_are_recorded(oai, oai_direct, taplog):
    assert [m.id for m in oai.models.list()] == [m.id for m in oai_direct.models.list()]
    vector = oai.embeddings.create(model="text-embedding-3-small", input="hi")
    assert vector == oai_direct.embeddings.create(model="text-embedding-3-small", input="hi")

    sessions = taplog.wait_responses(2)
    requests = [e for evs in sessions.values() for e in evs if e["type"] == "llm.request"]
    assert sorted((r["method"], r["path"], r["api"]) for r in requests) == [
        ("GET", "/v1/models", "passthrough"),
        ("POST", "/v1/embeddings", "passthrough"),
    ]


def test_paths_without_v1_work(taplog, fake):
    import openai

    client = openai.OpenAI(base_url=taplog.url, api_key="sk-test-nov1-0123456789", max_retries=0)
    answer = client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "no prefix"}]
    )
    assert answer.choices[0].message.content == "Echo: no prefix"
    assert fake.requests[-1].path == "/v1/chat/completions"


@pytest.mark.parametrize("encoding", ["gzip", "brotli"])
def test_compressed_answers_reach_the_client_decoded_and_the_log_holds_json(
    oai, fake, taplog, encoding
):
    answer = oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": f"squeeze !{encoding}"}]
    )
    assert answer.choices[0].message.content == "Echo: squeeze"
    _, response = _exchange(taplog)
    assert "content-encoding" not in response["headers"]
    assert response["body"]["choices"][0]["message"]["content"] == "Echo: squeeze"
    assert decode_body(response) == fake.sent[-1]


def test_binary_bodies_pass_through_exactly_and_are_logged_as_base64(taplog, fake):
    blob = bytes(range(256)) * 4
    reply = httpx.post(
        f"{taplog.url}/v1/files?purpose=batch",
        content=blob,
        headers={
            "authorization": "Bearer sk-test-bin-0123456789",
            "content-type": "application/octet-stream",
        },
    )
    assert reply.status_code == 404  # the fake has no files endpoint: passed on as it came
    assert fake.requests[-1].body == blob
    request, response = _exchange(taplog)
    assert request["api"] == "passthrough" and request["path"] == "/v1/files?purpose=batch"
    assert "body_b64" in request and decode_body(request) == blob
    assert response["status"] == 404 and response["outcome"] == "upstream_error"
    assert decode_body(response) == reply.content
