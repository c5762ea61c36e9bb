"""Request translation: docs/protocols.md 5.2 and 5.3 row by row, and the 5.8 edge cases.

Every translated body is checked against the official SDKs' request types (deep pydantic
validation of the TypedDicts, and top-level keys limited to the ones each SDK declares).
"""

from __future__ import annotations

from typing import Any

import openai.types.chat.completion_create_params as openai_params
import pytest

from taplog.recorder.vendors.anthropic.thinking import disable_thinking, thinking_conflict
from taplog.recorder.vendors.naming import ClientTool, fit
from taplog.recorder.vendors.openai_chat.request_from_neutral import messages_to_chat
from taplog.recorder.vendors.openai_chat.request_to_neutral import chat_to_messages
from taplog.recorder.vendors.translation import Translated, Untranslatable
from tests.builders import CHAT_WEATHER, CLAUDE_WEATHER, chat, claude, text, tool_call, tool_use
from tests.recorder.vendors.checks import adapters, assert_anthropic_request, declared_keys, force

OPENAI_KEYS = declared_keys(openai_params.CompletionCreateParamsStreaming)


_OPENAI = adapters(
    openai_params.CompletionCreateParamsStreaming, openai_params.CompletionCreateParamsNonStreaming
)


def assert_openai_request(body: dict) -> None:
    assert set(body) <= OPENAI_KEYS, set(body) - OPENAI_KEYS
    force(_OPENAI[bool(body.get("stream"))].validate_python(body))


def chat_to_anthropic(body: dict, **options: Any) -> Translated:
    translated = chat_to_messages(body, model="claude-test", **options)
    assert_anthropic_request(translated.body)
    return translated


def to_openai(body: dict, **options: Any) -> Translated:
    translated = messages_to_chat(body, model="gpt-test", **options)
    assert_openai_request(translated.body)
    return translated


USER = {"role": "user", "content": "hi"}


# ---------------------------------------------------------------- 5.2 OpenAI -> Anthropic


def test_system_and_developer_messages_become_system_text_blocks_in_order():
    body = chat(
        {"role": "system", "content": "one"},
        {"role": "developer", "content": [text("two"), text("three")]},
        USER,
    )
    out = chat_to_anthropic(body).body
    assert out["system"] == [text("one"), text("two\nthree")]
    assert out["messages"] == [{"role": "user", "content": [text("hi")]}]
    assert out["model"] == "claude-test"


def test_user_text_parts_become_text_blocks_and_empty_ones_vanish():
    body = chat({"role": "user", "content": [text("a"), text(""), text("b")]})
    assert chat_to_anthropic(body).body["messages"][0]["content"] == [text("a"), text("b")]


def test_image_data_url_becomes_a_base64_source():
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    out = chat_to_anthropic(chat({"role": "user", "content": [text("see"), part]})).body
    source = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    assert out["messages"][0]["content"] == [text("see"), {"type": "image", "source": source}]


def test_image_http_url_becomes_a_url_source_and_detail_is_dropped():
    part = {"type": "image_url", "image_url": {"url": "https://x.test/a.jpg", "detail": "high"}}
    result = chat_to_anthropic(chat({"role": "user", "content": [part]}))
    image = result.body["messages"][0]["content"][0]
    assert image == {"type": "image", "source": {"type": "url", "url": "https://x.test/a.jpg"}}
    assert "messages[0].content[0].image_url.detail" in result.dropped


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image_url", "image_url": {"url": "data:image/svg+xml;base64,PHN2Zz4="}},
        {"type": "image_url", "image_url": {"url": "ftp://x.test/a.png"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
        {"type": "file", "file": {"file_id": "file-123"}},
    ],
)
def test_parts_anthropic_cannot_take_are_untranslatable(part):
    with pytest.raises(Untranslatable):
        chat_to_messages(chat({"role": "user", "content": [part]}), model="claude-test")


def test_inline_pdf_file_becomes_a_document():
    pdf = {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}
    out = chat_to_anthropic(chat({"role": "user", "content": [{"type": "file", "file": pdf}]})).body
    source = {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}
    assert out["messages"][0]["content"] == [
        {"type": "document", "source": source, "title": "a.pdf"}
    ]


def test_assistant_text_then_tool_calls_become_text_then_tool_use():
    body = chat(
        USER,
        {"role": "assistant", "content": "Let me look.", "tool_calls": [tool_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    )
    out = chat_to_anthropic(body, allow_prefill=False).body
    assert out["messages"][1] == {
        "role": "assistant",
        "content": [text("Let me look."), tool_use("call_1")],
    }
    assert out["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"}],
    }


def test_run_of_tool_messages_is_one_user_message_with_the_following_text_after():
    body = chat(
        USER,
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c1"), tool_call("c2")]},
        {"role": "tool", "tool_call_id": "c1", "content": "r1"},
        {"role": "tool", "tool_call_id": "c2", "content": [text("r2")]},
        {"role": "user", "content": "and now?"},
    )
    out = chat_to_anthropic(body).body
    assert len(out["messages"]) == 3
    assert out["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "r1"},
        {"type": "tool_result", "tool_use_id": "c2", "content": [text("r2")]},
        text("and now?"),
    ]


def test_tools_become_name_description_input_schema_with_an_empty_object_default():
    bare = {"type": "function", "function": {"name": "now"}}
    strict = {"type": "function", "function": {**CHAT_WEATHER["function"], "strict": True}}
    out = chat_to_anthropic(chat(USER, tools=[CHAT_WEATHER, bare, strict])).body
    assert out["tools"] == [
        CLAUDE_WEATHER,
        {"name": "now", "input_schema": {"type": "object"}},
        {**CLAUDE_WEATHER, "strict": True},
    ]
    assert "tool_choice" not in out


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        (
            {"type": "function", "function": {"name": "weather"}},
            {"type": "tool", "name": "weather"},
        ),
    ],
)
def test_tool_choice_variants(choice, expected):
    out = chat_to_anthropic(chat(USER, tools=[CHAT_WEATHER], tool_choice=choice)).body
    assert out["tool_choice"] == expected


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        (None, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", {"type": "any", "disable_parallel_tool_use": True}),
        ("none", {"type": "none"}),
    ],
)
def test_parallel_tool_calls_false_disables_parallel_tool_use(choice, expected):
    extra = {} if choice is None else {"tool_choice": choice}
    body = chat(USER, tools=[CHAT_WEATHER], parallel_tool_calls=False, **extra)
    assert chat_to_anthropic(body).body["tool_choice"] == expected


def test_tool_settings_without_tools_are_dropped():
    result = chat_to_anthropic(chat(USER, tool_choice="auto", parallel_tool_calls=True))
    assert "tool_choice" not in result.body
    assert result.dropped == ["tool_choice (no tools)", "parallel_tool_calls (no tools)"]


def test_allowed_tools_narrow_the_tool_list():
    other = {"type": "function", "function": {"name": "time"}}
    allowed = {"mode": "required", "tools": [{"type": "function", "function": {"name": "time"}}]}
    choice = {"type": "allowed_tools", "allowed_tools": allowed}
    out = chat_to_anthropic(chat(USER, tools=[CHAT_WEATHER, other], tool_choice=choice)).body
    assert [tool["name"] for tool in out["tools"]] == ["time"]
    assert out["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"max_completion_tokens": 300, "max_tokens": 200}, 300),
        ({"max_tokens": 200}, 200),
        ({}, 4096),
    ],
)
def test_max_tokens_comes_from_either_key_else_the_default(extra, expected):
    assert chat_to_anthropic(chat(USER, **extra)).body["max_tokens"] == expected


def test_the_default_max_tokens_is_configurable():
    assert chat_to_anthropic(chat(USER), default_max_tokens=777).body["max_tokens"] == 777


@pytest.mark.parametrize(
    ("stop", "expected"), [("END", ["END"]), (["a", "b"], ["a", "b"]), ([], None)]
)
def test_stop_becomes_a_stop_sequences_list(stop, expected):
    assert chat_to_anthropic(chat(USER, stop=stop)).body.get("stop_sequences") == expected


def test_blank_stop_sequences_are_dropped():
    result = chat_to_anthropic(chat(USER, stop=["\n", "END"]))
    assert result.body["stop_sequences"] == ["END"]
    assert "stop (blank sequences)" in result.dropped


@pytest.mark.parametrize(("key", "value"), [("user", "u-42"), ("safety_identifier", "u-42")])
def test_user_or_safety_identifier_becomes_metadata_user_id(key, value):
    assert chat_to_anthropic(chat(USER, **{key: value})).body["metadata"] == {"user_id": "u-42"}


def test_safety_identifier_wins_over_user_and_e_mail_addresses_are_never_forwarded():
    both = chat_to_anthropic(chat(USER, user="old", safety_identifier="new")).body
    assert both["metadata"] == {"user_id": "new"}
    mail = chat_to_anthropic(chat(USER, user="ann@example.com"))
    assert "metadata" not in mail.body
    assert mail.dropped == ["user (looks like an e-mail address)"]
    fallback = chat_to_anthropic(chat(USER, safety_identifier="a@b.io", user="u-1")).body
    assert fallback["metadata"] == {"user_id": "u-1"}


@pytest.mark.parametrize(
    ("effort", "expected"),
    [
        ("minimal", "low"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "xhigh"),
        ("max", "max"),
    ],
)
def test_reasoning_effort_becomes_adaptive_thinking_with_an_effort(effort, expected):
    out = chat_to_anthropic(chat(USER, reasoning_effort=effort)).body
    assert out["thinking"] == {"type": "adaptive"}
    assert out["output_config"] == {"effort": expected}


@pytest.mark.parametrize(
    ("effort", "extra", "budget", "max_tokens"),
    [
        ("low", {}, 2048, 4096 + 2048),
        ("high", {}, 16384, 4096 + 16384),
        ("high", {"max_completion_tokens": 10000}, 10000 - 1024, 10000),
        ("minimal", {"max_tokens": 3000}, 1024, 3000),
    ],
)
def test_reasoning_effort_becomes_a_thinking_budget_for_older_models(
    effort, extra, budget, max_tokens
):
    body = chat(USER, reasoning_effort=effort, **extra)
    out = chat_to_anthropic(body, thinking_style="budget").body
    assert out["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert out["max_tokens"] == max_tokens


def test_no_thinking_when_there_is_no_room_for_a_budget_or_effort_is_none():
    small = chat_to_anthropic(
        chat(USER, reasoning_effort="high", max_tokens=1500), thinking_style="budget"
    )
    assert "thinking" not in small.body
    assert small.dropped == ["reasoning_effort (max tokens leave no room for a thinking budget)"]
    none = chat_to_anthropic(chat(USER, reasoning_effort="none"))
    assert "thinking" not in none.body and none.dropped == []


def test_no_thinking_while_a_tool_is_forced():
    body = chat(USER, tools=[CHAT_WEATHER], tool_choice="required", reasoning_effort="high")
    result = chat_to_anthropic(body)
    assert "thinking" not in result.body and "output_config" not in result.body
    assert result.dropped == ["reasoning_effort (Anthropic cannot think while a tool is forced)"]


def test_sampling_parameters_are_dropped_unless_enabled():
    result = chat_to_anthropic(chat(USER, temperature=0.2, top_p=0.9))
    assert "temperature" not in result.body and "top_p" not in result.body
    assert result.dropped == ["temperature", "top_p"]


def test_enabled_sampling_clamps_temperature_and_keeps_top_p_only_alone():
    result = chat_to_anthropic(chat(USER, temperature=1.7, top_p=0.9), sampling=True)
    assert result.body["temperature"] == 1.0 and "top_p" not in result.body
    assert result.dropped == ["top_p (Anthropic refuses it next to temperature)"]
    assert chat_to_anthropic(chat(USER, top_p=0.5), sampling=True).body["top_p"] == 0.5


def test_sampling_is_never_sent_with_thinking():
    result = chat_to_anthropic(chat(USER, temperature=0.5, reasoning_effort="low"), sampling=True)
    assert "temperature" not in result.body and "temperature" in result.dropped


def test_response_format_json_schema_becomes_output_config_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}
    out = chat_to_anthropic(chat(USER, response_format=fmt)).body
    assert out["output_config"] == {"format": {"type": "json_schema", "schema": schema}}


def test_stream_flag_is_kept():
    assert chat_to_anthropic(chat(USER, stream=True)).body["stream"] is True
    assert chat_to_anthropic(chat(USER, stream=False)).body["stream"] is False
    assert "stream" not in chat_to_anthropic(chat(USER)).body


def test_custom_tools_and_legacy_functions_are_untranslatable():
    custom = {"type": "custom", "custom": {"name": "grammar"}}
    for body in (
        chat(USER, tools=[custom]),
        chat(USER, functions=[CHAT_WEATHER["function"]]),
        chat(USER, {"role": "function", "name": "f", "content": "x"}),
    ):
        with pytest.raises(Untranslatable):
            chat_to_messages(body, model="claude-test")


# ---------------------------------------------------------------- 5.3 Anthropic -> OpenAI


def test_system_becomes_the_first_developer_message_for_reasoning_models():
    body = claude(
        USER, system=[text("one"), {**text("two"), "cache_control": {"type": "ephemeral"}}]
    )
    result = to_openai(body)
    assert result.body["messages"][0] == {
        "role": "developer",
        "content": [text("one"), text("two")],
    }
    assert result.dropped == ["cache_control (OpenAI caches prompts by itself)"]
    plain = to_openai(claude(USER, system="sys"), reasoning_model=False).body
    assert plain["messages"][0] == {"role": "system", "content": "sys"}


def test_tool_results_become_tool_messages_before_the_rest_of_the_user_message():
    body = claude(
        USER,
        {
            "role": "assistant",
            "content": [text("Checking."), tool_use("toolu_1"), tool_use("toolu_2")],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [text("a"), text("b")],
                },
                text("thanks"),
            ],
        },
    )
    messages = to_openai(body).body["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": "Checking.",
        "tool_calls": [tool_call("toolu_1"), tool_call("toolu_2")],
    }
    assert messages[2:] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [text("a"), text("b")]},
        {"role": "user", "content": "thanks"},
    ]


def test_assistant_tool_use_only_has_null_content_and_compact_arguments():
    value = {"city": "Zürich", "days": [1, 2]}
    body = claude(
        USER,
        {"role": "assistant", "content": [tool_use("toolu_1", value=value)]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    )
    messages = to_openai(body).body["messages"]
    assert messages[1]["content"] is None
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"city":"Zürich","days":[1,2]}'
    assert messages[2] == {"role": "tool", "tool_call_id": "toolu_1", "content": ""}


def test_thinking_blocks_are_dropped_on_the_way_to_openai():
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    redacted = {"type": "redacted_thinking", "data": "xyz"}
    body = claude(USER, {"role": "assistant", "content": [thinking, redacted, text("hello")]}, USER)
    result = to_openai(body)
    assert result.body["messages"][1] == {"role": "assistant", "content": "hello"}
    assert result.dropped == ["thinking blocks (never replayed to another vendor)"]


def test_an_assistant_message_with_only_thinking_disappears():
    thinking = {"type": "thinking", "thinking": "", "signature": "sig"}
    body = claude(USER, {"role": "assistant", "content": [thinking]}, USER)
    assert [m["role"] for m in to_openai(body).body["messages"]] == ["user", "user"]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        (
            {"type": "tool", "name": "weather"},
            {"type": "function", "function": {"name": "weather"}},
        ),
    ],
)
def test_tool_choice_variants_to_openai(choice, expected):
    out = to_openai(claude(USER, tools=[CLAUDE_WEATHER], tool_choice=choice)).body
    assert out["tool_choice"] == expected
    assert out["tools"] == [{"type": "function", "function": CHAT_WEATHER["function"]}]


def test_disable_parallel_tool_use_becomes_parallel_tool_calls_false():
    choice = {"type": "auto", "disable_parallel_tool_use": True}
    out = to_openai(claude(USER, tools=[CLAUDE_WEATHER], tool_choice=choice)).body
    assert out["parallel_tool_calls"] is False


def test_max_tokens_stop_sequences_and_user_id():
    body = claude(USER, stop_sequences=["END"], metadata={"user_id": "u-7"})
    out = to_openai(body).body
    assert out["max_completion_tokens"] == 1000 and "max_tokens" not in out
    assert out["stop"] == ["END"]
    assert out["safety_identifier"] == "u-7"
    long_id = "user_" + "a" * 64 + "_account_x_session_y"
    hashed = to_openai(claude(USER, metadata={"user_id": long_id})).body["safety_identifier"]
    assert len(hashed) == 64 and hashed != long_id[:64]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "low"),
        ({"thinking": {"type": "enabled", "budget_tokens": 8000}}, "medium"),
        ({"thinking": {"type": "enabled", "budget_tokens": 32000}}, "high"),
        ({"thinking": {"type": "adaptive"}, "output_config": {"effort": "low"}}, "low"),
        ({"output_config": {"effort": "max"}}, "high"),
        ({"thinking": {"type": "adaptive"}}, None),
    ],
)
def test_thinking_budget_or_effort_becomes_a_reasoning_effort_bucket(extra, expected):
    assert to_openai(claude(USER, **extra)).body.get("reasoning_effort") == expected


def test_a_non_reasoning_model_gets_sampling_and_no_reasoning_effort():
    body = claude(USER, temperature=0.3, top_p=0.8, thinking={"type": "adaptive"})
    result = to_openai(body, reasoning_model=False)
    assert result.body["temperature"] == 0.3 and result.body["top_p"] == 0.8
    assert "reasoning_effort" not in result.body
    assert result.dropped == ["thinking/effort (the OpenAI model does not reason)"]
    reasoning = to_openai(body)
    assert "temperature" not in reasoning.body
    assert "temperature (reasoning models refuse it)" in reasoning.dropped


def test_anthropic_only_keys_and_server_tools_are_dropped_and_recorded():
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    body = claude(
        USER,
        top_k=5,
        container="c",
        service_tier="auto",
        cache_control={"type": "ephemeral"},
        tools=[search],
        tool_choice={"type": "auto"},
    )
    result = to_openai(body)
    assert "tools" not in result.body and "tool_choice" not in result.body
    assert result.dropped == [
        "top_k",
        "container",
        "service_tier",
        "cache_control",
        "tools[0] (web_search_20250305: OpenAI cannot run it)",
        "tool_choice (no tools)",
    ]


def test_streaming_asks_for_usage():
    out = to_openai(claude(USER, stream=True)).body
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}


def test_output_format_becomes_a_json_schema_response_format():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = claude(USER, output_config={"format": {"type": "json_schema", "schema": schema}})
    assert to_openai(body).body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "output", "schema": schema, "strict": False},
    }


def test_user_images_and_documents_become_openai_parts():
    png = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
    url = {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JV"},
    }
    body = claude({"role": "user", "content": [text("look"), png, url, pdf]})
    assert to_openai(body).body["messages"][0]["content"] == [
        text("look"),
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
        {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        {
            "type": "file",
            "file": {"file_data": "data:application/pdf;base64,JV", "filename": "document.pdf"},
        },
    ]


def test_tool_search_references_are_dropped_and_deferred_tools_sent():
    deferred = {**CLAUDE_WEATHER, "defer_loading": True}
    reference = {"type": "tool_reference", "tool_name": "weather"}
    body = claude(
        USER,
        {"role": "assistant", "content": [tool_use("toolu_1", "tool_search", {"q": "w"})]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [reference]}],
        },
        tools=[deferred],
    )
    result = to_openai(body)
    assert result.body["tools"] == [{"type": "function", "function": CHAT_WEATHER["function"]}]
    assert result.body["messages"][2] == {"role": "tool", "tool_call_id": "toolu_1", "content": ""}
    assert result.dropped == ["tool_reference blocks (OpenAI is sent every tool)"]


def test_round_trip_keeps_the_conversation():
    body = chat(
        {"role": "system", "content": "be brief"},
        USER,
        {"role": "assistant", "content": "Looking.", "tool_calls": [tool_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        tools=[CHAT_WEATHER],
        max_completion_tokens=500,
    )
    there = chat_to_anthropic(body)
    back = to_openai(there.body, reasoning_model=False)
    assert back.body["messages"] == [
        {"role": "system", "content": "be brief"},
        USER,
        {"role": "assistant", "content": "Looking.", "tool_calls": [tool_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    assert back.body["tools"] == [CHAT_WEATHER]
    assert back.body["max_completion_tokens"] == 500


# ---------------------------------------------------------------- 5.8 edge cases


@pytest.mark.parametrize("content", [None, "", "   ", [], [text("")]])
def test_edge_01_tool_calls_with_empty_or_null_content_send_no_empty_text_block(content):
    body = chat(
        USER,
        {"role": "assistant", "content": content, "tool_calls": [tool_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    )
    assert chat_to_anthropic(body).body["messages"][1]["content"] == [tool_use("c1")]


def test_edge_02_is_error_tool_results_keep_their_text_with_a_prefix():
    body = claude(
        USER,
        {"role": "assistant", "content": [tool_use("toolu_1"), tool_use("toolu_2")]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "boom",
                    "is_error": True,
                },
                {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True},
            ],
        },
    )
    result = to_openai(body)
    assert result.body["messages"][2:] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: boom"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error"},
    ]
    assert "messages[2].content[0].is_error (sent as an 'Error: ' prefix)" in result.dropped
    assert all("is_error" not in m for m in result.body["messages"])


def test_edge_03_mid_dialogue_system_and_developer_messages_collapse_into_system():
    body = chat(
        {"role": "system", "content": "first"},
        USER,
        {"role": "assistant", "content": "hello"},
        {"role": "developer", "content": "second"},
        {"role": "user", "content": "more"},
        {"role": "system", "content": "third"},
    )
    out = chat_to_anthropic(body).body
    assert out["system"] == [text("first"), text("second"), text("third")]
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]


def test_edge_04_a_trailing_assistant_message_is_untranslatable_unless_prefill_is_allowed():
    openai_body = chat(USER, {"role": "assistant", "content": "The answer is "})
    with pytest.raises(Untranslatable, match="prefill"):
        chat_to_messages(openai_body, model="claude-test")
    prefill = chat_to_anthropic(openai_body, allow_prefill=True).body["messages"][-1]
    assert prefill == {"role": "assistant", "content": [text("The answer is")]}
    anthropic_body = claude(USER, {"role": "assistant", "content": "{"})
    with pytest.raises(Untranslatable, match="prefill"):
        messages_to_chat(anthropic_body, model="gpt-test")
    kept = to_openai(anthropic_body, allow_prefill=True)
    assert kept.body["messages"][-1] == {"role": "assistant", "content": "{"}
    assert kept.dropped == ["prefill (sent as a finished assistant turn)"]


def test_edge_04_unanswered_trailing_tool_calls_are_untranslatable():
    body = chat(USER, {"role": "assistant", "tool_calls": [tool_call("c1")]})
    with pytest.raises(Untranslatable, match="results are missing"):
        chat_to_messages(body, model="claude-test", allow_prefill=True)


@pytest.mark.parametrize(
    "extra",
    [
        {"n": 2},
        {"logprobs": True},
        {"logprobs": True, "top_logprobs": 3},
        {"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}},
    ],
)
def test_edge_05_several_choices_logprobs_and_audio_are_untranslatable(extra):
    with pytest.raises(Untranslatable):
        chat_to_messages(chat(USER, **extra), model="claude-test")


def test_edge_05_harmless_values_of_those_keys_pass():
    body = chat(USER, n=1, logprobs=False, modalities=["text"])
    assert chat_to_anthropic(body).dropped == []


def test_edge_06_json_object_becomes_a_system_instruction():
    body = chat(
        {"role": "system", "content": "Reply in JSON."},
        USER,
        response_format={"type": "json_object"},
    )
    result = chat_to_anthropic(body)
    assert result.body["system"] == [
        text("Reply in JSON."),
        text("Respond with one valid JSON object and nothing else."),
    ]
    assert "output_config" not in result.body
    assert result.dropped == ["response_format json_object (sent as a system instruction)"]


def test_edge_07_openai_only_keys_never_reach_anthropic():
    everything = {
        "frequency_penalty": 0.1,
        "presence_penalty": 0.1,
        "logit_bias": {"1": 2},
        "seed": 7,
        "store": True,
        "metadata": {"a": "b"},
        "service_tier": "flex",
        "prompt_cache_key": "k",
        "prompt_cache_retention": "24h",
        "prediction": {"type": "content", "content": "x"},
        "verbosity": "low",
        "web_search_options": {},
        "stream_options": {"include_usage": True},
        "some_future_key": 1,
    }
    assert set(everything) - {"some_future_key"} <= OPENAI_KEYS  # all real OpenAI keys
    result = chat_to_anthropic(chat(USER, stream=True, **everything))
    assert set(result.body) == {"model", "max_tokens", "messages", "stream"}
    assert result.dropped == [k for k in everything if k != "stream_options"]


def test_edge_08_a_tool_turn_without_thinking_block_turns_thinking_off():
    loop = [
        USER,
        {"role": "assistant", "content": [tool_use("toolu_1")]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}],
        },
    ]
    body = claude(*loop, thinking={"type": "adaptive"})
    assert thinking_conflict(body)
    repaired = disable_thinking(body)
    assert "thinking" not in repaired.body and repaired.body["messages"] is body["messages"]
    assert body["thinking"] == {"type": "adaptive"}  # the client's body is untouched
    assert repaired.dropped == ["thinking (the current tool turn has no thinking block to replay)"]
    assert_anthropic_request(repaired.body)


def test_edge_08_signature_only_thinking_blocks_count_and_are_kept():
    signed = {"type": "thinking", "thinking": "", "signature": "EqQBCkYIBxgCKkD"}
    turn = {"role": "assistant", "content": [signed, tool_use("toolu_1")]}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}
    body = claude(USER, turn, {"role": "user", "content": [result]}, thinking={"type": "adaptive"})
    assert not thinking_conflict(body)
    assert not thinking_conflict(claude(USER, {"role": "assistant", "content": [tool_use("t")]}))


def test_edge_08_openai_history_never_enables_thinking_inside_a_tool_turn():
    body = chat(
        USER,
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        reasoning_effort="high",
    )
    result = chat_to_anthropic(body)
    assert "thinking" not in result.body
    assert result.dropped == ["reasoning_effort (the current tool turn has no thinking block)"]
    body["messages"].append({"role": "user", "content": "next question"})
    body["messages"].insert(3, {"role": "assistant", "content": "done"})
    assert chat_to_anthropic(body).body["thinking"] == {"type": "adaptive"}


def test_edge_08_foreign_reasoning_in_openai_history_is_never_replayed():
    turn = {
        "role": "assistant",
        "content": "hi",
        "reasoning_content": "I thought",
        "thinking_blocks": [{"type": "thinking", "thinking": "x", "signature": "s"}],
    }
    result = chat_to_anthropic(chat(USER, turn, USER))
    assert result.body["messages"][1] == {"role": "assistant", "content": [text("hi")]}
    assert result.dropped == ["messages[1].reasoning_content", "messages[1].thinking_blocks"]


def test_edge_12_all_results_for_one_tool_turn_go_into_the_next_user_message_first():
    body = chat(
        USER,
        {
            "role": "assistant",
            "content": "two calls",
            "tool_calls": [tool_call("a"), tool_call("b"), tool_call("c")],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "user", "content": "interjection"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "tool", "tool_call_id": "c", "content": "3"},
    )
    out = chat_to_anthropic(body).body
    assert len(out["messages"]) == 3
    kinds = [(b["type"], b.get("tool_use_id")) for b in out["messages"][2]["content"]]
    assert kinds == [
        ("tool_result", "a"),
        ("tool_result", "b"),
        ("tool_result", "c"),
        ("text", None),
    ]


def test_edge_13_images_in_anthropic_tool_results_move_to_a_user_message():
    png = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
    body = claude(
        USER,
        {"role": "assistant", "content": [tool_use("toolu_1", "screenshot")]},
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [text("shot taken"), png],
                },
                text("what do you see?"),
            ],
        },
    )
    result = to_openai(body)
    assert result.body["messages"][2:] == [
        {
            "role": "tool",
            "tool_call_id": "toolu_1",
            "content": [text("shot taken"), text("(attachments follow in the next user message)")],
        },
        {
            "role": "user",
            "content": [
                text("Attachments returned by tool call toolu_1:"),
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}},
                text("what do you see?"),
            ],
        },
    ]
    assert result.dropped == ["messages[2].content[0] attachments (moved to a user message)"]


def test_edge_14_stop_limit_temperature_range_and_max_completion_tokens():
    stops = ["a", "b", "c", "d", "e"]
    result = to_openai(claude(USER, stop_sequences=stops, temperature=1.0), reasoning_model=False)
    assert result.body["stop"] == ["a", "b", "c", "d"]
    assert result.dropped == ["stop_sequences[4:] (OpenAI takes at most 4)"]
    assert result.body["temperature"] == 1.0  # Anthropic 0-1 is inside OpenAI's 0-2
    assert "max_tokens" not in result.body and result.body["max_completion_tokens"] == 1000
    clamped = chat_to_anthropic(chat(USER, temperature=2), sampling=True).body
    assert clamped["temperature"] == 1.0


def test_edge_17_invalid_tool_ids_map_deterministically_and_stay_paired():
    weird = "functions.weather:0"
    body = chat(
        USER,
        {"role": "assistant", "tool_calls": [tool_call(weird)]},
        {"role": "tool", "tool_call_id": weird, "content": "ok"},
    )
    first = chat_to_anthropic(body)
    wire = first.body["messages"][1]["content"][0]["id"]
    assert wire == fit(weird, 128) and wire.startswith("functions_weather_0_")
    assert first.body["messages"][2]["content"][0]["tool_use_id"] == wire
    assert first.tool_ids == {wire: weird}
    body["messages"] += [{"role": "user", "content": "again"}]
    assert chat_to_anthropic(body).body["messages"][1]["content"][0]["id"] == wire  # next turn too


def test_edge_17_long_tool_names_are_fitted_for_openai_and_mapped_back():
    long_name = "mcp__some_server__" + "very_long_tool_name_" * 5
    assert 64 < len(long_name) <= 128
    tool = {"name": long_name, "input_schema": {"type": "object"}}
    body = claude(
        USER,
        {"role": "assistant", "content": [tool_use("toolu_1", long_name)]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
        },
        tools=[tool],
        tool_choice={"type": "tool", "name": long_name},
    )
    result = to_openai(body)
    wire = result.body["tools"][0]["function"]["name"]
    assert len(wire) == 64 and wire == fit(long_name, 64)
    assert result.body["messages"][1]["tool_calls"][0]["function"]["name"] == wire
    assert result.body["tool_choice"]["function"]["name"] == wire
    assert result.tools == {wire: ClientTool(long_name)}


def test_edge_17_long_tool_call_ids_are_fitted_for_openai():
    long_id = "toolu_vrtx_" + "A" * 40
    body = claude(
        USER,
        {"role": "assistant", "content": [tool_use(long_id)]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": long_id, "content": "x"}],
        },
    )
    messages = to_openai(body).body["messages"]
    wire = messages[1]["tool_calls"][0]["id"]
    assert len(wire) == 40 and messages[2]["tool_call_id"] == wire


def test_fit_is_identity_for_valid_values_and_distinguishes_invalid_ones():
    assert fit("call_abc-123", 40) == "call_abc-123"
    assert fit("a.b", 64) != fit("a:b", 64)
    assert fit("", 64).startswith("t_")
    assert all(len(fit("x" * n, 64)) <= 64 for n in range(1, 200))
