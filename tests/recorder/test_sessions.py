"""Which session a call lands in: explicit ids, client signals, stitched conversations."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlsplit

import anthropic
import openai
import pytest

from taplog.recorder.sessions import CallClues, Resolution, SessionResolver
from tests.disk import readable
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

TOOL = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def _sessions_of(taplog, count):
    sessions = taplog.wait_responses(count)
    return {
        name: [e for e in events if e["type"] == "llm.request"] for name, events in sessions.items()
    }


def _started(taplog, session):
    return next(e for e in taplog.sessions()[session] if e["type"] == "session.started")


def test_stateless_multi_turn_chat_lands_in_one_session(oai, taplog):
    messages = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris? !plan=get_weather,text"},
    ]
    first = oai.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOL)
    call = first.choices[0].message.tool_calls[0]
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
    second = oai.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOL)
    messages.append({"role": "assistant", "content": second.choices[0].message.content})
    messages.append({"role": "user", "content": "And tomorrow?"})
    oai.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOL)
    # An unrelated conversation started meanwhile gets its own session.
    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "other"}])

    sessions = _sessions_of(taplog, 4)
    sizes = sorted(len(requests) for requests in sessions.values())
    assert sizes == [1, 3]
    stitched = next(name for name, requests in sessions.items() if len(requests) == 3)
    assert _started(taplog, stitched)["source"] == "new"
    events = taplog.sessions()[stitched]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_anthropic_tool_loop_lands_in_one_session(ant, taplog):
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    messages = [{"role": "user", "content": "Paris? !plan=get_weather,text"}]
    first = ant.messages.create(
        model="claude-sonnet-4-6", max_tokens=100, messages=messages, tools=tools
    )
    use = next(b for b in first.content if b.type == "tool_use")
    messages.append(
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]}
    )
    messages.append(
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
        }
    )
    ant.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=messages, tools=tools)
    assert [len(r) for r in _sessions_of(taplog, 2).values()] == [2]


def test_header_and_path_name_the_session(taplog):
    by_header = openai.OpenAI(
        base_url=f"{taplog.url}/v1",
        api_key=OPENAI_KEY,
        default_headers={"X-Taplog-Session": "run-7.a_b"},
    )
    by_path = openai.OpenAI(base_url=f"{taplog.url}/s/nightly-42/v1", api_key=OPENAI_KEY)
    for client in (by_header, by_path, by_path):
        client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "x"}])
    sessions = _sessions_of(taplog, 3)
    assert {k: len(v) for k, v in sessions.items()} == {"run-7.a_b": 1, "nightly-42": 2}
    assert _started(taplog, "run-7.a_b")["source"] == "header"
    assert _started(taplog, "nightly-42")["source"] == "path"
    assert sessions["nightly-42"][0]["path"] == "/v1/chat/completions"


@pytest.mark.parametrize("bad", ["../x", "a/b", "x" * 200, "", ".hidden", "a b"])
def test_invalid_header_ids_are_refused_and_create_nothing(taplog, bad):
    client = openai.OpenAI(
        base_url=f"{taplog.url}/v1",
        api_key=OPENAI_KEY,
        max_retries=0,
        default_headers={"X-Taplog-Session": bad},
    )
    with pytest.raises(openai.BadRequestError, match="invalid session id"):
        client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "x"}])
    assert taplog.sessions() == {}
    assert not any(taplog.data_dir.rglob("*.jsonl*"))


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/s/../v1/messages", "invalid session id"),
        ("/s/a%2Fb/v1/messages", "invalid session id"),
        ("/s//v1/messages", "invalid session id"),
        ("/s/%2e%2e/v1/messages", "invalid session id"),
        ("/s/ok/v1/messages/../messages", "'.' or '..'"),
        ("/s/" + "y" * 200 + "/v1/messages", "invalid session id"),
    ],
)
def test_invalid_path_ids_are_refused_in_the_anthropic_error_shape(taplog, path, reason):
    address = urlsplit(taplog.url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=5)
    body = json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": []})
    connection.request(
        "POST", path, body, {"x-api-key": ANTHROPIC_KEY, "content-type": "application/json"}
    )
    reply = connection.getresponse()
    error = json.loads(reply.read())
    assert reply.status == 400
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert reason in error["error"]["message"]
    assert not any(taplog.data_dir.rglob("*.jsonl*"))


def test_claude_code_session_signals(taplog):
    session_uuid = "4f6c2a7e-0b1d-4c8e-9a3f-5e2d1c0b9a87"
    by_header = anthropic.Anthropic(
        base_url=taplog.url,
        api_key=ANTHROPIC_KEY,
        default_headers={"X-Claude-Code-Session-Id": session_uuid},
    )
    by_header.messages.create(
        model="claude-sonnet-4-6", max_tokens=10, messages=[{"role": "user", "content": "a"}]
    )
    plain = anthropic.Anthropic(base_url=taplog.url, api_key=ANTHROPIC_KEY)
    user_id = json.dumps({"device_id": "d1", "account_uuid": "", "session_id": session_uuid})
    plain.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=10,
        metadata={"user_id": user_id},
        messages=[{"role": "user", "content": "b"}],
    )
    plain.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=10,
        metadata={"user_id": f"user_abc_account_x_session_{session_uuid}"},
        messages=[{"role": "user", "content": "c"}],
    )
    assert {k: len(v) for k, v in _sessions_of(taplog, 3).items()} == {session_uuid: 3}
    assert _started(taplog, session_uuid)["source"] == "client:claude-code"


def test_client_ids_in_other_shapes_are_mapped_and_kept(taplog, oai):
    odd = "conv/with spaces:and:colons"
    oai.chat.completions.create(
        model="gpt-4.1", prompt_cache_key=odd, messages=[{"role": "user", "content": "x"}]
    )
    (session,) = _sessions_of(taplog, 1)
    assert session.startswith("conv_with_spaces_and_colons-")
    started = _started(taplog, session)
    assert started["source"] == "client:prompt_cache_key" and started["original"] == odd


def test_previous_response_id_continues_the_session(oai, taplog):
    first = oai.responses.create(model="gpt-4.1", input="first turn")
    with oai.responses.stream(
        model="gpt-4.1", input="second turn", previous_response_id=first.id
    ) as stream:
        second = stream.get_final_response()
    oai.responses.create(model="gpt-4.1", input="third turn", previous_response_id=second.id)
    sessions = _sessions_of(taplog, 3)
    assert [len(v) for v in sessions.values()] == [3]
    events = next(iter(taplog.sessions().values()))
    assert [e["source"] for e in events if e["type"] == "session.started"] == ["new"]


def test_no_key_reaches_the_data_dir(taplog, fake):
    planted = "sk-planted-canary-9f8e7d6c5b4a3f2e1d0c"
    client = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=planted, max_retries=0)
    client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
    with client.chat.completions.stream(
        model="gpt-4.1", messages=[{"role": "user", "content": "hi again"}]
    ) as stream:
        stream.get_final_completion()
    ant = anthropic.Anthropic(base_url=taplog.url, api_key=planted, max_retries=0)
    ant.messages.create(
        model="claude-sonnet-4-6", max_tokens=5, messages=[{"role": "user", "content": "x"}]
    )
    sessions = taplog.wait_responses(3)
    assert fake.requests[-1].headers["authorization"] == f"Bearer {planted}"
    for path in taplog.data_dir.rglob("*"):
        if path.is_file():
            assert planted.encode() not in readable(path), path
    fingerprints = {
        e["key_fingerprint"] for evs in sessions.values() for e in evs if e["type"] == "llm.request"
    }
    assert len(fingerprints) == 1 and next(iter(fingerprints)).startswith("key:")


def test_codex_session_header_names_the_session(taplog):
    client = openai.OpenAI(
        base_url=f"{taplog.url}/v1",
        api_key=OPENAI_KEY,
        default_headers={
            "session_id": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
            "originator": "codex_cli_rs",
        },
    )
    for text in ("one", "two"):
        client.responses.create(model="gpt-5-codex", input=text, store=False)
    sessions = _sessions_of(taplog, 2)
    assert {k: len(v) for k, v in sessions.items()} == {"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b": 2}
    assert _started(taplog, "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b")["source"] == "client:codex"


def _turns(first: str, count: int) -> list[dict]:
    """The request bodies of a stateless chat: each resends the transcript so far."""
    messages = [{"role": "user", "content": first}]
    bodies = []
    for turn in range(count):
        bodies.append({"model": "gpt-4.1", "messages": list(messages)})
        messages += [
            {"role": "assistant", "content": f"answer {turn}"},
            {"role": "user", "content": f"next {turn}"},
        ]
    return bodies


def _resolve(resolver: SessionResolver, body: dict) -> Resolution:
    return resolver.resolve(
        CallClues("openai.chat", {"user-agent": "OpenAI/Python"}, body, "key:1")
    )


def test_a_conversation_idle_past_the_session_timeout_starts_a_new_session():
    resolver = SessionResolver(idle_seconds=0.05)
    first, second, third = _turns("plan a trip", 3)
    started = _resolve(resolver, first).session
    assert _resolve(resolver, second).session == started
    time.sleep(0.1)
    assert _resolve(resolver, third).session != started


def test_stitching_memory_is_bounded_and_keeps_the_recent_conversations():
    resolver = SessionResolver(max_entries=20)
    openings = [_turns(f"task {n}", 2) for n in range(100)]
    sessions = [_resolve(resolver, turns[0]).session for turns in openings]
    assert _resolve(resolver, openings[-1][1]).session == sessions[-1]
    assert _resolve(resolver, openings[0][1]).session != sessions[0]  # long forgotten
