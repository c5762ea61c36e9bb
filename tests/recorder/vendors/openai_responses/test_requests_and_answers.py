"""OpenAI Responses <-> Anthropic Messages: requests, answers and refusals (protocols.md 2, 3, 5).

Every translated request is checked against the official SDKs' request types (deep pydantic
validation, top-level keys limited to the declared ones); every translated answer is parsed
by the SDK's own model (`openai.types.responses.Response`, `anthropic.types.Message`).
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from taplog.recorder.vendors.errors import anthropic_error_to_openai
from taplog.recorder.vendors.naming import ClientTool, fit
from taplog.recorder.vendors.openai_responses.answers import (
    messages_answer_to_responses,
)
from taplog.recorder.vendors.openai_responses.request_from_neutral import messages_to_responses
from taplog.recorder.vendors.openai_responses.request_to_neutral import responses_to_messages
from taplog.recorder.vendors.translation import Untranslatable
from tests.builders import (
    CLAUDE_WEATHER,
    CREATED,
    RESPONSES_WEATHER,
    claude,
    claude_answer,
    request,
    said,
    text,
    tool_use,
    user,
)
from tests.recorder.vendors.checks import responses_to_anthropic, to_claude, to_responses


def function_call(call_id: str, arguments: str = '{"city":"Oslo"}', name: str = "weather") -> dict:
    return {
        "type": "function_call",
        "id": "fc_1",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def function_output(call_id: str, output: Any = "sunny") -> dict:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


PNG = "data:image/png;base64,iVBORw0KGgo="
PDF = "data:application/pdf;base64,JVBERi0="


# ---------------------------------------------------------------- Responses -> Anthropic


def test_a_string_input_with_instructions_becomes_system_and_one_user_message():
    out = responses_to_anthropic(
        {"model": "gpt-test", "instructions": "Be brief.", "input": "hi"}
    ).body
    assert out == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": [text("Be brief.")],
        "messages": [{"role": "user", "content": [text("hi")]}],
    }


def test_system_and_developer_items_join_the_instructions_in_order():
    body = request(
        {"role": "developer", "content": "two"},
        user("hi"),
        {"role": "system", "content": [{"type": "input_text", "text": "three"}]},
        instructions="one",
    )
    out = responses_to_anthropic(body).body
    assert out["system"] == [text("one"), text("two"), text("three")]
    assert out["messages"] == [{"role": "user", "content": [text("hi")]}]


def test_user_parts_become_text_image_and_document_blocks():
    parts = [
        {"type": "input_text", "text": "see"},
        {"type": "input_image", "image_url": PNG, "detail": "auto"},
        {"type": "input_image", "image_url": "https://x.test/a.jpg", "detail": "high"},
        {"type": "input_file", "file_data": PDF, "filename": "a.pdf"},
    ]
    result = responses_to_anthropic(request(user(parts)))
    source = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    pdf = {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}
    assert result.body["messages"][0]["content"] == [
        text("see"),
        {"type": "image", "source": source},
        {"type": "image", "source": {"type": "url", "url": "https://x.test/a.jpg"}},
        {"type": "document", "source": pdf, "title": "a.pdf"},
    ]
    assert result.dropped == ["input[0].content[2].detail"]


def test_a_replayed_tool_turn_becomes_text_and_tool_use_then_results_first():
    body = request(
        user("weather in Oslo and Rome?"),
        said("Let me look."),
        function_call("call_1"),
        function_call("call_2", '{"city":"Rome"}'),
        function_output("call_1"),
        function_output("call_2", [{"type": "input_text", "text": "rain"}]),
        user("thanks"),
    )
    out = responses_to_anthropic(body).body
    assert out["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                text("Let me look."),
                tool_use("call_1"),
                tool_use("call_2", value={"city": "Rome"}),
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": [text("rain")]},
                text("thanks"),
            ],
        },
    ]


def test_a_call_without_assistant_text_gets_its_own_turn_and_bad_arguments_become_empty():
    body = request(user("go"), function_call("call_1", '{"city":'), function_output("call_1", ""))
    result = responses_to_anthropic(body)
    assert result.body["messages"][1] == {
        "role": "assistant",
        "content": [tool_use("call_1", value={})],
    }
    assert result.body["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_1"}],
    }
    assert result.dropped == ["input[1].arguments (not a JSON object, sent as {})"]


def test_function_outputs_with_images_keep_them_in_the_tool_result():
    output = [{"type": "input_text", "text": "chart:"}, {"type": "input_image", "image_url": PNG}]
    body = request(user("plot"), function_call("call_1"), function_output("call_1", output))
    result = responses_to_anthropic(body).body["messages"][2]["content"][0]
    assert [block["type"] for block in result["content"]] == ["text", "image"]


def test_the_rebuilt_history_goes_before_the_input():
    history = [user("first"), said("one"), function_call("call_1"), function_output("call_1")]
    body = request(user("second"), previous_response_id="resp_prev")
    out = responses_to_anthropic(body, history=history).body
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user"]
    assert out["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"},
        text("second"),
    ]


def test_store_false_clients_that_resend_history_need_no_chain():
    body = request(user("first"), said("one"), user("second"), store=False)
    result = responses_to_anthropic(body)
    assert [m["role"] for m in result.body["messages"]] == ["user", "assistant", "user"]
    assert "store" in result.dropped


def test_flat_function_tools_and_strict_only_when_true():
    strict = {**RESPONSES_WEATHER, "name": "now", "strict": True, "defer_loading": False}
    result = responses_to_anthropic(request(user("hi"), tools=[RESPONSES_WEATHER, strict]))
    assert result.body["tools"] == [
        CLAUDE_WEATHER,
        {**CLAUDE_WEATHER, "name": "now", "strict": True},
    ]
    assert result.dropped == ["tools[1].defer_loading"]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"type": "function", "name": "weather"}, {"type": "tool", "name": "weather"}),
    ],
)
def test_tool_choice_variants(choice, expected):
    out = responses_to_anthropic(
        request(user("hi"), tools=[RESPONSES_WEATHER], tool_choice=choice)
    ).body
    assert out["tool_choice"] == expected


def test_allowed_tools_narrow_the_list_and_parallel_false_disables_parallel_use():
    now = {**RESPONSES_WEATHER, "name": "now"}
    choice = {
        "type": "allowed_tools",
        "mode": "required",
        "tools": [{"type": "function", "name": "now"}],
    }
    body = request(
        user("hi"), tools=[RESPONSES_WEATHER, now], tool_choice=choice, parallel_tool_calls=False
    )
    out = responses_to_anthropic(body).body
    assert [t["name"] for t in out["tools"]] == ["now"]
    assert out["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


def test_limits_effort_format_and_stream():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = request(
        user("hi"),
        max_output_tokens=2000,
        reasoning={"effort": "high", "summary": "auto"},
        text={"format": {"type": "json_schema", "name": "a", "schema": schema}, "verbosity": "low"},
        stream=True,
    )
    result = responses_to_anthropic(body)
    assert result.body["max_tokens"] == 2000
    assert result.body["thinking"] == {"type": "adaptive"}
    assert result.body["output_config"] == {
        "effort": "high",
        "format": {"type": "json_schema", "schema": schema},
    }
    assert result.body["stream"] is True
    assert result.dropped == ["reasoning.summary (no reasoning items come back)", "text.verbosity"]


def test_json_object_format_becomes_a_system_instruction_named_in_client_words():
    result = responses_to_anthropic(request(user("hi"), text={"format": {"type": "json_object"}}))
    assert result.body["system"] == [text("Respond with one valid JSON object and nothing else.")]
    assert result.dropped == ["text.format json_object (sent as a system instruction)"]


def test_no_thinking_while_a_tool_is_forced_and_the_drop_names_reasoning_effort():
    choice = {"type": "function", "name": "weather"}
    body = request(
        user("hi"), tools=[RESPONSES_WEATHER], tool_choice=choice, reasoning={"effort": "low"}
    )
    result = responses_to_anthropic(body)
    assert "thinking" not in result.body
    assert result.dropped == ["reasoning.effort (Anthropic cannot think while a tool is forced)"]


def test_edge_08_a_tool_turn_served_without_thinking_turns_thinking_off():
    history = [user("go"), function_call("call_1")]
    body = request(
        function_output("call_1"), reasoning={"effort": "medium"}, previous_response_id="r"
    )
    result = responses_to_anthropic(body, history=history)
    assert "thinking" not in result.body
    assert "reasoning.effort (the current tool turn has no thinking block)" in result.dropped


def test_sampling_passes_only_when_enabled_and_user_ids_become_metadata():
    body = request(user("hi"), temperature=0.5, top_p=0.9, safety_identifier="u-1")
    assert "temperature" not in responses_to_anthropic(body).body
    out = responses_to_anthropic(body, sampling=True).body
    assert out["temperature"] == 0.5 and "top_p" not in out
    assert out["metadata"] == {"user_id": "u-1"}


def test_openai_only_keys_are_dropped_and_recorded():
    body = request(
        user("hi"),
        store=True,
        metadata={"k": "v"},
        include=["reasoning.encrypted_content"],
        prompt_cache_key="pk",
        truncation="auto",
        service_tier="flex",
    )
    result = responses_to_anthropic(body)
    assert result.dropped == [
        "store",
        "metadata",
        "prompt_cache_key",
        "truncation",
        "service_tier",
        "include 'reasoning.encrypted_content' (nothing of that kind comes back)",
    ]


def test_reasoning_items_without_encrypted_content_are_left_out_and_recorded():
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "hm"}],
    }
    result = responses_to_anthropic(request(user("a"), reasoning, said("b"), user("c")))
    assert [m["role"] for m in result.body["messages"]] == ["user", "assistant", "user"]
    assert result.dropped == [
        "reasoning items (OpenAI's reasoning is never replayed to another vendor)"
    ]


def test_long_tool_names_and_odd_call_ids_are_fitted_and_recorded():
    name = "mcp.server/" + "x" * 200
    body = request(
        user("go"),
        function_call("call:1", name=name),
        function_output("call:1"),
        tools=[{**RESPONSES_WEATHER, "name": name}],
    )
    result = responses_to_anthropic(body)
    wire = result.body["tools"][0]["name"]
    assert wire == fit(name, 128) and result.tools == {wire: ClientTool(name)}
    assert result.body["messages"][1]["content"][0]["id"] == fit("call:1", 128)
    assert result.body["messages"][2]["content"][0]["tool_use_id"] == fit("call:1", 128)


def test_a_trailing_assistant_message_is_untranslatable_unless_prefill_is_allowed():
    body = request(user("hi"), said("Sure, "))
    with pytest.raises(Untranslatable, match="assistant"):
        responses_to_messages(body, model="claude-test")
    out = responses_to_anthropic(body, allow_prefill=True).body
    assert out["messages"][-1] == {"role": "assistant", "content": [text("Sure,")]}


HOSTED_TOOLS = [
    {"type": "web_search", "external_web_access": False},
    {"type": "tool_search", "execution": "client"},
    {"type": "file_search", "vector_store_ids": ["vs_1"]},
    {"type": "code_interpreter", "container": {"type": "auto"}},
    {"type": "mcp", "server_label": "x", "server_url": "https://x.test"},
    {"type": "image_generation"},
    {"type": "computer_use_preview", "display_width": 1, "display_height": 1},
    {"type": "local_shell"},
    {"type": "shell"},
    {"type": "apply_patch"},
]


@pytest.mark.parametrize("tool", HOSTED_TOOLS, ids=lambda tool: tool["type"])
def test_hosted_tools_without_an_equivalent_are_untranslatable_and_say_why(tool):
    with pytest.raises(Untranslatable) as refused:
        responses_to_messages(
            request(user("hi"), tools=[RESPONSES_WEATHER, tool]), model="claude-test"
        )
    prefix = f"tools[1]: '{tool['type']}' tools have no Anthropic equivalent: "
    assert str(refused.value).startswith(prefix) and len(str(refused.value)) > len(prefix) + 10


ENCRYPTED = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"}


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (request(user("hi"), conversation="conv_1"), "conversation"),
        (request(user("hi"), conversation={"id": "conv_1"}), "conversation"),
        (request(user("hi"), background=True), "background"),
        (request(user("hi"), previous_response_id="resp_1"), "previous_response_id"),
        (request(user("hi"), prompt={"id": "pmpt_1"}), "prompt"),
        (request(user("hi"), n=2), "n=2"),
        (request(user("hi"), top_logprobs=3), "logprobs"),
        (request(user("hi"), include=["message.output_text.logprobs"]), "logprobs"),
        (request(user("hi"), ENCRYPTED, said("a"), user("b")), r"input\[1\]: encrypted"),
        (request({"type": "item_reference", "id": "msg_1"}), "item_reference"),
        (request(user("hi"), {"type": "custom_tool_call", "call_id": "c"}), "custom_tool_call"),
        (request(user([{"type": "input_image", "file_id": "file-1"}])), "file_id"),
        (request(user([{"type": "input_file", "file_id": "file-1"}])), "file ids"),
        (request(user([{"type": "input_image", "image_url": "ftp://x"}])), "image must"),
        (request(user([{"type": "input_audio", "input_audio": {}}])), "input_audio"),
        (request(user("hi"), tool_choice={"type": "web_search_preview"}), "tool_choice"),
        (request(user("hi"), text={"format": {"type": "json_schema", "name": "a"}}), "schema"),
        (request(user("hi"), instructions=[user("x")]), "instructions"),
        (request(), "no input items"),
        (request(said("a"), function_call("call_1")), "results are missing"),
    ],
)
def test_what_anthropic_cannot_serve_is_refused_with_a_reason(body, reason):
    with pytest.raises(Untranslatable, match=reason):
        responses_to_messages(body, model="claude-test", history=None)


def test_with_drop_untranslatable_hosted_tools_and_encrypted_reasoning_are_left_out():
    body = request(
        user("hi"),
        ENCRYPTED,
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        said("found it"),
        user("more"),
        tools=[RESPONSES_WEATHER, {"type": "file_search", "vector_store_ids": ["vs_1"]}],
        tool_choice={"type": "file_search"},
    )
    result = responses_to_anthropic(body, drop_untranslatable=True)
    assert [t["name"] for t in result.body["tools"]] == ["weather"]
    assert "tool_choice" not in result.body
    assert [m["role"] for m in result.body["messages"]] == ["user", "assistant", "user"]
    assert result.dropped == [
        "encrypted reasoning items (left out: only OpenAI can read them)",
        "web_search_call items (left out: their findings are in the text that follows)",
        "tools[1] (file_search: left out, it searches vector stores held by OpenAI)",
        "tool_choice (file_search: left out, taplog forces only function and custom tools on "
        "Anthropic)",
    ]


def test_drop_untranslatable_never_covers_state_held_by_openai():
    with pytest.raises(Untranslatable, match="conversation"):
        responses_to_messages(
            request(user("hi"), conversation="conv_1"), model="c", drop_untranslatable=True
        )


# ---------------------------------------------------------------- Anthropic -> Responses


def test_an_anthropic_tool_conversation_becomes_responses_items():
    result_content = [
        text("sunny"),
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
    ]
    body = claude(
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                text("Looking."),
                tool_use("toolu_1"),
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": result_content},
                text("and tomorrow?"),
            ],
        },
        system=[text("Be brief.")],
        tools=[CLAUDE_WEATHER],
        stream=True,
    )
    result = to_responses(body)
    out = result.body
    assert out["instructions"] == "Be brief."
    assert out["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "weather?"}],
        },
        {"type": "message", "role": "assistant", "content": "Looking."},
        {
            "type": "function_call",
            "call_id": "toolu_1",
            "name": "weather",
            "arguments": '{"city":"Oslo"}',
        },
        {
            "type": "function_call_output",
            "call_id": "toolu_1",
            "output": "sunny\n(attachments follow in the next user message)",
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Attachments returned by tool call toolu_1:"},
                {
                    "type": "input_image",
                    "image_url": "data:image/png;base64,iVBO",
                    "detail": "auto",
                },
                {"type": "input_text", "text": "and tomorrow?"},
            ],
        },
    ]
    assert out["tools"] == [{**RESPONSES_WEATHER, "strict": False}]
    assert out["stream"] is True and out["store"] is False and out["max_output_tokens"] == 1000
    assert "thinking blocks (never replayed to another vendor)" in result.dropped


def test_choice_effort_format_user_and_stop_sequences():
    schema = {"type": "object"}
    body = claude(
        {"role": "user", "content": "hi"},
        tools=[CLAUDE_WEATHER],
        tool_choice={"type": "tool", "name": "weather", "disable_parallel_tool_use": True},
        thinking={"type": "enabled", "budget_tokens": 20000},
        output_config={"format": {"type": "json_schema", "schema": schema}},
        metadata={"user_id": "u-1"},
        stop_sequences=["END"],
        max_tokens=8,
    )
    result = to_responses(body)
    out = result.body
    assert out["tool_choice"] == {"type": "function", "name": "weather"}
    assert out["parallel_tool_calls"] is False
    assert out["reasoning"] == {"effort": "high"}
    assert out["text"] == {
        "format": {"type": "json_schema", "name": "output", "schema": schema, "strict": False}
    }
    assert out["safety_identifier"] == "u-1"
    assert out["max_output_tokens"] == 16
    assert "stop" not in out and "stop_sequences" not in out
    assert "stop_sequences (the Responses API has no stop sequences)" in result.dropped
    assert "max_tokens 8 (raised to 16, the minimum)" in result.dropped


def test_tool_names_are_fitted_for_openai_and_a_prefill_is_refused():
    name = "n" * 100
    result = to_responses(
        claude({"role": "user", "content": "hi"}, tools=[{**CLAUDE_WEATHER, "name": name}])
    )
    assert result.tools == {fit(name, 64): ClientTool(name)}
    with pytest.raises(Untranslatable, match="prefill"):
        messages_to_responses(
            claude({"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}),
            model="gpt-test",
        )


# ---------------------------------------------------------------- answers


CLIENT_REQUEST = {
    "model": "gpt-test",
    "instructions": "Be brief.",
    "input": "hi",
    "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "previous_response_id": "resp_prev",
    "store": False,
    "metadata": {"k": "v"},
    "max_output_tokens": 500,
    "reasoning": {"effort": "low"},
}


def to_response(answer: dict, **options: Any) -> dict:
    options.setdefault("request", CLIENT_REQUEST)
    body = messages_answer_to_responses(
        answer, response_id="resp_X1", created_at=CREATED, **options
    )
    openai.types.responses.Response.model_validate(body)  # a Responses client accepts it
    return body


def test_an_anthropic_answer_becomes_message_and_function_call_items():
    answer = claude_answer(
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        text("It is "),
        text(""),
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
        stop="tool_use",
        cache_read_input_tokens=100,
        cache_creation_input_tokens=20,
        output_tokens_details={"thinking_tokens": 3},
    )
    body = to_response(answer)
    assert body["output"] == [
        {
            "id": "msg_X1_0",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "It is ", "annotations": [], "logprobs": []}
            ],
        },
        {
            "id": "fc_X1_1",
            "type": "function_call",
            "status": "completed",
            "arguments": '{"city":"Oslo"}',
            "call_id": "toolu_1",
            "name": "weather",
        },
        {
            "id": "fc_X1_2",
            "type": "function_call",
            "status": "completed",
            "arguments": "{}",
            "call_id": "toolu_2",
            "name": "now",
        },
    ]
    assert body["status"] == "completed" and body["incomplete_details"] is None
    assert body["usage"] == {
        "input_tokens": 130,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 20},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 3},
        "total_tokens": 135,
    }


def test_the_response_echoes_what_the_client_sent_and_names_the_served_model():
    body = to_response(claude_answer(text("hi")))
    assert body["id"] == "resp_X1" and body["object"] == "response"
    assert body["created_at"] == CREATED and body["model"] == "claude-served"
    assert body["instructions"] == "Be brief."
    assert body["tools"] == [{**CLIENT_REQUEST["tools"][0], "strict": None}]
    assert body["tool_choice"] == "auto" and body["parallel_tool_calls"] is False
    assert body["previous_response_id"] == "resp_prev" and body["store"] is False
    assert body["metadata"] == {"k": "v"} and body["max_output_tokens"] == 500
    assert body["reasoning"] == {"effort": "low", "summary": None}
    assert body["text"] == {"format": {"type": "text"}}


def test_defaults_are_echoed_for_a_bare_request():
    body = to_response(claude_answer(text("hi")), request={"model": "m", "input": "hi"})
    assert body["tools"] == [] and body["tool_choice"] == "auto"
    assert body["parallel_tool_calls"] is True and body["store"] is True
    assert body["metadata"] == {} and body["instructions"] is None


@pytest.mark.parametrize(
    ("stop", "status", "reason"),
    [
        ("end_turn", "completed", None),
        ("stop_sequence", "completed", None),
        ("tool_use", "completed", None),
        ("max_tokens", "incomplete", "max_output_tokens"),
        ("model_context_window_exceeded", "incomplete", "max_output_tokens"),
        ("pause_turn", "incomplete", "max_output_tokens"),
        ("refusal", "incomplete", "content_filter"),
    ],
)
def test_stop_reasons_become_status_and_incomplete_details(stop, status, reason):
    body = to_response(claude_answer(text("x"), stop=stop))
    assert body["status"] == status
    assert body["incomplete_details"] == (reason and {"reason": reason})


def test_answer_tool_names_map_back_and_ids_fit_openai():
    long_id = "toolu_" + "x" * 60
    answer = claude_answer({"type": "tool_use", "id": long_id, "name": "w_1", "input": {}})
    item = to_response(answer, tools={"w_1": ClientTool("weather.now")})["output"][0]
    assert item["name"] == "weather.now" and item["call_id"] == fit(long_id, 40)


def response_answer(*output: dict, status: str = "completed", **extra: Any) -> dict:
    return {
        "id": "resp_9",
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "model": "gpt-served",
        "output": list(output),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 130,
            "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 20},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 2},
            "total_tokens": 135,
        },
        **extra,
    }


def output_message(*parts: dict) -> dict:
    return {
        "id": "msg_1",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": list(parts),
    }


def output_text(value: str) -> dict:
    return {"type": "output_text", "text": value, "annotations": []}


def test_a_responses_answer_becomes_an_anthropic_message():
    answer = response_answer(
        {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"},
        output_message(output_text("It is "), output_text("sunny.")),
        {
            "type": "function_call",
            "id": "fc_1",
            "call_id": "call_1",
            "name": "w_1",
            "arguments": '{"city":"Oslo"}',
        },
        {
            "type": "function_call",
            "id": "fc_2",
            "call_id": "call_2",
            "name": "now",
            "arguments": "",
        },
    )
    body = to_claude(answer, tools={"w_1": ClientTool("weather")})
    assert body == {
        "id": "msg_9",
        "type": "message",
        "role": "assistant",
        "model": "gpt-served",
        "content": [
            text("It is sunny."),
            tool_use("call_1"),
            {"type": "tool_use", "id": "call_2", "name": "now", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
            "output_tokens_details": {"thinking_tokens": 2},
        },
    }


def test_refusals_incomplete_answers_and_cut_arguments():
    refusal = output_message({"type": "refusal", "refusal": "No."})
    assert to_claude(response_answer(refusal))["stop_reason"] == "refusal"
    cut = {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": '{"a":'}
    incomplete = response_answer(
        output_message(output_text("x")),
        cut,
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
    )
    body = to_claude(incomplete)
    assert body["stop_reason"] == "max_tokens" and body["content"] == [text("x")]
    filtered = response_answer(status="incomplete", incomplete_details={"reason": "content_filter"})
    assert to_claude(filtered)["stop_reason"] == "refusal"


def test_errors_reach_responses_clients_in_openai_shape():
    status, body = anthropic_error_to_openai(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    assert status == 503
    assert body == {
        "error": {"message": "Overloaded", "type": "server_error", "param": None, "code": None}
    }


def test_a_translated_answer_replays_as_history_with_its_call_ids_paired():
    """previous_response_id across a switch: the answer's items come back as history."""
    answer = claude_answer(
        text("Checking."),
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        stop="tool_use",
    )
    first = request(user("weather?"), tools=[RESPONSES_WEATHER])
    served = to_response(answer, request=first)
    history = [*first["input"], *served["output"]]
    call_id = served["output"][1]["call_id"]
    follow_up = request(function_output(call_id), previous_response_id=served["id"])
    out = responses_to_anthropic(follow_up, history=history).body
    assert out["messages"] == [
        {"role": "user", "content": [text("weather?")]},
        {"role": "assistant", "content": [text("Checking."), tool_use("toolu_1")]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}],
        },
    ]
