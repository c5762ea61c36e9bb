"""The tool policy's gate, driven by the official SDKs against the fake vendor: a call a
rule refuses never reaches the agent (a text says why in its place), the answer stays
one its SDK accepts, calls no rule refuses pass, and the log says what was decided."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest
from google.genai import types as genai_types

from taplog.proxy.tool_policy import load_policy
from taplog.recorder.store.reader import read_all
from tests.fakes.clients import gemini_at, scrape
from tests.fakes.harness import FAILOVER_RULES, serve_on_fake, start_on_fake
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

POLICY = load_policy(
    {
        "tool_policy": [
            {
                "id": "no-weather",
                "name": "get_weather",
                "fields": {"city": "^Paris$"},
                "action": "deny",
                "reason": "weather is off limits",
            },
            {"id": "watch-reads", "name": "read_file", "action": "flag"},
        ]
    },
    None,
    None,
)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "path": {"type": "string"}}}
NAMES = ("get_weather", "read_file")
ANTHROPIC_TOOLS = [{"name": n, "description": n, "input_schema": SCHEMA} for n in NAMES]
CHAT_TOOLS = [{"type": "function", "function": {"name": n, "parameters": SCHEMA}} for n in NAMES]
RESPONSES_TOOLS = [{"type": "function", "name": n, "parameters": SCHEMA} for n in NAMES]
ALONE = "check the weather !plan=get_weather !events=9"
BOTH = "check both !plan=get_weather+read_file !events=9"


@pytest.fixture
def gated(servers, fake, tmp_path):
    return start_on_fake(servers, fake, tmp_path / "data", tool_policy_rules=POLICY)


def _refusal_said(text: str) -> None:
    assert "taplog" in text and "no-weather" in text and "weather is off limits" in text


def _decisions(taplog) -> list[tuple[str, str, str]]:
    taplog.flush()
    found = [e for e in taplog.events() if e["type"] in ("tool.denied", "tool.flagged")]
    return [(e["type"], e["rule"], e["name"]) for e in found]


def _anthropic(taplog) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=taplog.url, api_key=ANTHROPIC_KEY, max_retries=0)


def _openai(taplog) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)


def _claude_says(taplog, prompt: str, stream: bool):
    """The Anthropic SDK's message for `prompt`, streamed and accumulated by the SDK or not."""
    ask = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "tools": ANTHROPIC_TOOLS,
        "messages": [{"role": "user", "content": prompt}],
    }
    client = _anthropic(taplog)
    if not stream:
        return client.messages.create(**ask)
    with client.messages.stream(**ask) as events:
        return events.get_final_message()


def _chat_choice(taplog, prompt: str, stream: bool):
    """The OpenAI SDK's first Chat choice for `prompt`, streamed or not."""
    ask = {
        "model": "gpt-4.1",
        "tools": CHAT_TOOLS,
        "messages": [{"role": "user", "content": prompt}],
    }
    client = _openai(taplog)
    if not stream:
        return client.chat.completions.create(**ask).choices[0]
    with client.chat.completions.stream(**ask) as events:
        return events.get_final_completion().choices[0]


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_a_turn_whose_only_call_is_refused_ends_as_an_answer(gated, stream):
    message = _claude_says(gated, ALONE, stream)
    assert message.stop_reason == "end_turn"
    assert [block.type for block in message.content] == ["text"]
    _refusal_said(message.content[0].text)
    assert _decisions(gated) == [("tool.denied", "no-weather", "get_weather")]
    pre = gated.events("tool.pre")
    (denied,) = gated.events("tool.denied")
    assert denied["call_id"] == pre[0]["call_id"] and denied["reason"] == "weather is off limits"
    (answered,) = gated.events("call.answered")
    assert answered["status"] == 200


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_parallel_calls_one_refused_one_passes(gated, stream):
    message = _claude_says(gated, BOTH, stream)
    assert message.stop_reason == "tool_use"
    kinds = [(b.type, getattr(b, "name", None)) for b in message.content]
    assert kinds == [("text", None), ("tool_use", "read_file")]
    _refusal_said(message.content[0].text)
    assert message.content[1].input == {"path": "README.md"}
    assert _decisions(gated) == [
        ("tool.denied", "no-weather", "get_weather"),
        ("tool.flagged", "watch-reads", "read_file"),
    ]
    metrics = scrape(gated)
    assert metrics.value("taplog_tool_policy_decisions_total", action="deny", rule="no-weather")
    assert metrics.value("taplog_tool_policy_decisions_total", action="flag", rule="watch-reads")


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_parallel_calls_one_refused_one_passes(gated, stream):
    choice = _chat_choice(gated, BOTH, stream)
    assert choice.finish_reason == "tool_calls"
    assert [c.function.name for c in choice.message.tool_calls] == ["read_file"]
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"path": "README.md"}
    _refusal_said(choice.message.content)
    assert _decisions(gated) == [
        ("tool.denied", "no-weather", "get_weather"),
        ("tool.flagged", "watch-reads", "read_file"),
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_openai_chat_a_turn_whose_only_call_is_refused_stops(gated, stream):
    choice = _chat_choice(gated, ALONE, stream)
    assert choice.finish_reason == "stop"
    assert not choice.message.tool_calls
    _refusal_said(choice.message.content)


@pytest.mark.parametrize("stream", [False, True])
def test_openai_responses_parallel_calls_one_refused_one_passes(gated, stream):
    ask = {"model": "gpt-4.1", "tools": RESPONSES_TOOLS, "input": BOTH}
    client = _openai(gated)
    if stream:
        with client.responses.stream(**ask) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(**ask)
    kinds = [(item.type, getattr(item, "name", None)) for item in response.output]
    assert kinds == [("message", None), ("function_call", "read_file")]
    _refusal_said(response.output_text)
    assert _decisions(gated) == [
        ("tool.denied", "no-weather", "get_weather"),
        ("tool.flagged", "watch-reads", "read_file"),
    ]


def test_what_the_client_got_is_recorded_beside_what_the_vendor_sent(gated):
    client = _openai(gated)
    ask = {"model": "gpt-4.1", "tools": CHAT_TOOLS, "messages": [{"role": "user", "content": BOTH}]}
    with client.chat.completions.stream(**ask) as events:
        events.get_final_completion()
    gated.flush()
    (session,) = read_all(gated.data_dir).values()
    (response,) = [e for e in session if e["type"] == "llm.response"]
    (answered,) = [e for e in session if e["type"] == "call.answered"]
    vendor_said = json.dumps(response)
    assert "get_weather" in vendor_said  # the vendor's answer, as it came
    client_got = json.dumps(answered)
    assert "no-weather" in client_got and '"get_weather"' not in client_got


def test_a_result_sent_back_for_a_refused_call_is_flagged(gated):
    client = _anthropic(gated)
    first = client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=256,
        tools=ANTHROPIC_TOOLS,
        messages=[{"role": "user", "content": ALONE}],
    )
    (pre,) = gated.events("tool.pre")
    refused = {"type": "tool_use", "id": pre["call_id"], "name": "get_weather", "input": {}}
    client.messages.create(  # an agent that ran the refused call anyway
        model="claude-sonnet-4-6",
        max_tokens=256,
        tools=ANTHROPIC_TOOLS,
        messages=[
            {"role": "user", "content": ALONE},
            {"role": "assistant", "content": [first.content[0].model_dump(), refused]},
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": pre["call_id"], "content": "sunny"}
                ],
            },
        ],
    )
    gated.flush()
    (post,) = gated.events("tool.post")
    assert post["call_id"] == pre["call_id"] and post["flags"] == ["ran_though_refused"]
    assert scrape(gated).value("taplog_tool_anomalies_total", flag="ran_though_refused") == 1


def test_a_translated_answer_is_gated_in_the_clients_api(servers, vendors, tmp_path):
    taplog = vendors.proxy(servers, tmp_path / "data", FAILOVER_RULES, tool_policy_rules=POLICY)
    vendors.openai.down = {"status": "503"}
    client = _openai(taplog)
    ask = {"model": "gpt-4.1", "tools": CHAT_TOOLS, "messages": [{"role": "user", "content": BOTH}]}
    with client.chat.completions.stream(**ask) as events:
        completion = events.get_final_completion()
    choice = completion.choices[0]
    assert [c.function.name for c in choice.message.tool_calls] == ["read_file"]
    _refusal_said(choice.message.content)
    assert vendors.anthropic.requests  # served by the fallback, translated
    assert ("tool.denied", "no-weather", "get_weather") in _decisions(taplog)


def test_a_replayed_answer_is_gated_like_a_live_one(servers, fake, tmp_path):
    recording = start_on_fake(servers, fake, tmp_path / "recorded")
    ask = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "tools": ANTHROPIC_TOOLS,
        "messages": [{"role": "user", "content": BOTH}],
    }
    with _anthropic(recording).messages.stream(**ask) as events:
        recorded = events.get_final_message()
    assert [b.type for b in recorded.content] == ["tool_use", "tool_use"]
    recording.flush()
    replaying = start_on_fake(
        servers,
        fake,
        tmp_path / "data",
        replay=str(tmp_path / "recorded"),
        tool_policy_rules=POLICY,
    )
    before = len(fake.requests)
    with _anthropic(replaying).messages.stream(**ask) as events:
        message = events.get_final_message()
    assert len(fake.requests) == before  # answered from the recording
    assert [b.type for b in message.content] == ["text", "tool_use"]
    _refusal_said(message.content[0].text)


def test_workers_hold_answers_to_the_policy_file(fake, tmp_path):
    """`taplog serve --workers 2 --tool-policy FILE`, as a user starts it: each worker
    gates, and the recorder process writes the decisions."""
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[[tool_policy]]\nid = "no-weather"\nname = "get_weather"\n'
        'action = "deny"\nreason = "weather is off limits"\n'
    )
    data = tmp_path / "data"
    taplog = serve_on_fake(fake, data, "--workers", "2", "--tool-policy", str(policy))
    try:
        client = openai.OpenAI(base_url=taplog.openai_base, api_key=OPENAI_KEY, max_retries=0)
        for _ in range(4):  # over both workers
            ask = {"model": "gpt-4.1", "tools": CHAT_TOOLS}
            with client.chat.completions.stream(
                **ask, messages=[{"role": "user", "content": BOTH}]
            ) as events:
                choice = events.get_final_completion().choices[0]
            assert [c.function.name for c in choice.message.tool_calls] == ["read_file"]
            _refusal_said(choice.message.content)
    finally:
        code, err = taplog.stop()
    assert code == 0, err
    denied = [e for events in read_all(data).values() for e in events if e["type"] == "tool.denied"]
    assert [(e["rule"], e["name"]) for e in denied] == [("no-weather", "get_weather")] * 4


def test_a_refusal_before_the_stream_broke_is_recorded(gated):
    """The vendor cuts the stream after the refused call, before the one that passes: the
    client hears the error, and the decision made is in the log all the same."""
    ask = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 256,
        "tools": ANTHROPIC_TOOLS,
        "messages": [{"role": "user", "content": f"{BOTH} !cut=14"}],
    }
    with pytest.raises(anthropic.APIError), _anthropic(gated).messages.stream(**ask) as events:
        events.get_final_message()
    gated.flush()
    assert _decisions(gated) == [("tool.denied", "no-weather", "get_weather")]
    (response,) = gated.events("llm.response")
    assert response["outcome"] == "upstream_cut"


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_parallel_calls_one_refused_one_passes(gated, stream):
    declarations = [
        genai_types.FunctionDeclaration(name=n, parameters_json_schema=SCHEMA) for n in NAMES
    ]
    ask = {
        "model": "gemini-2.5-flash",
        "contents": BOTH,
        "config": genai_types.GenerateContentConfig(
            tools=[genai_types.Tool(function_declarations=declarations)],
            automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True),
        ),
    }
    client = gemini_at(gated.url)
    if stream:
        answers = list(client.models.generate_content_stream(**ask))
    else:
        answers = [client.models.generate_content(**ask)]
    calls = [call for answer in answers for call in answer.function_calls or []]
    assert [(call.name, call.args) for call in calls] == [("read_file", {"path": "README.md"})]
    _refusal_said("".join(answer.text or "" for answer in answers))
    assert _decisions(gated) == [
        ("tool.denied", "no-weather", "get_weather"),
        ("tool.flagged", "watch-reads", "read_file"),
    ]
