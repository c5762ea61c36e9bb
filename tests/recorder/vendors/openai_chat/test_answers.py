"""Non-streaming answers (protocols.md 5.4, 5.8.11, 5.8.15, 5.8.17), parsed by the official SDKs."""

from __future__ import annotations

import anthropic
import openai
import pytest

from taplog.recorder.vendors.naming import ClientTool, fit
from taplog.recorder.vendors.openai_chat.answers import (
    chat_answer_to_messages,
    messages_answer_to_chat,
)
from tests.builders import CREATED, claude_answer, text, tool_call


def to_chat(answer: dict, **options) -> dict:
    body = messages_answer_to_chat(answer, created=CREATED, **options)
    openai.types.chat.ChatCompletion.model_validate(body)  # an OpenAI client accepts it
    return body


def to_messages(answer: dict, **options) -> dict:
    body = chat_answer_to_messages(answer, **options)
    anthropic.types.Message.model_validate(body)  # an Anthropic client accepts it
    return body


def chat_answer(message: dict, finish: str = "stop", usage: dict | None = None) -> dict:
    return {
        "id": "chatcmpl-XyZ",
        "object": "chat.completion",
        "created": CREATED,
        "model": "gpt-served",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "refusal": None, **message},
                "finish_reason": finish,
                "logprobs": None,
            }
        ],
        "usage": usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


# ------------------------------------------------------------- Anthropic -> OpenAI client


def test_text_thinking_and_tool_use_become_content_and_tool_calls():
    answer = claude_answer(
        {"type": "thinking", "thinking": "let me see", "signature": "sig"},
        text("It is "),
        text("sunny."),
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
        stop="tool_use",
    )
    body = to_chat(answer)
    assert body["id"] == "chatcmpl-01AbC"
    assert body["model"] == "claude-served" and body["created"] == CREATED
    assert body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": "It is sunny.",
        "refusal": None,
        "tool_calls": [
            tool_call("toolu_1", "weather", '{"city":"Oslo"}'),
            tool_call("toolu_2", "now", "{}"),
        ],
    }


def test_a_tool_only_answer_has_null_content():
    answer = claude_answer(
        {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}, stop="tool_use"
    )
    assert to_chat(answer)["choices"][0]["message"]["content"] is None


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "length"),
    ],
)
def test_stop_reason_maps_to_finish_reason(stop, finish):
    assert to_chat(claude_answer(text("x"), stop=stop))["choices"][0]["finish_reason"] == finish


def test_edge_15_cache_tokens_are_added_into_prompt_tokens():
    usage = {
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "output_tokens_details": {"thinking_tokens": 3},
    }
    body = to_chat(claude_answer(text("x"), **usage))
    assert body["usage"] == {
        "prompt_tokens": 10 + 1000 + 200,
        "completion_tokens": 5,
        "total_tokens": 1215,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 200},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }
    parsed = openai.types.chat.ChatCompletion.model_validate(body)
    assert parsed.usage.prompt_tokens_details.cached_tokens == 1000


def test_edge_17_tool_names_map_back_and_long_ids_fit_openai():
    long_id = "toolu_vrtx_" + "B" * 40
    answer = claude_answer(
        {"type": "tool_use", "id": long_id, "name": "wire_name", "input": {}}, stop="tool_use"
    )
    body = to_chat(answer, tools={"wire_name": ClientTool("client.name")})
    tool_call = body["choices"][0]["message"]["tool_calls"][0]
    assert tool_call["function"]["name"] == "client.name"
    assert tool_call["id"] == fit(long_id, 40) and len(tool_call["id"]) == 40


def test_server_tool_blocks_are_not_offered_to_the_openai_client():
    answer = claude_answer(
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        text("Found it."),
    )
    message = to_chat(answer)["choices"][0]["message"]
    assert message["content"] == "Found it." and "tool_calls" not in message


# ------------------------------------------------------------- OpenAI -> Anthropic client


def test_content_and_tool_calls_become_text_and_tool_use_blocks():
    message = {
        "content": "Checking.",
        "tool_calls": [
            tool_call("call_1", "weather", '{"city": "Oslo"}'),
            tool_call("call_2", "now", ""),
        ],
    }
    body = to_messages(chat_answer(message, "tool_calls"))
    assert body == {
        "id": "msg_XyZ",
        "type": "message",
        "role": "assistant",
        "model": "gpt-served",
        "content": [
            text("Checking."),
            {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "call_2", "name": "now", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        },
    }


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("content_filter", "refusal"),
    ],
)
def test_finish_reason_maps_to_stop_reason(finish, stop):
    message = {"content": "x", "tool_calls": [tool_call("call_1", "now", "{}")]}
    body = to_messages(chat_answer(message, finish))
    assert body["stop_reason"] == stop and body["stop_sequence"] is None


def test_a_refusal_becomes_text_and_stop_reason_refusal():
    body = to_messages(chat_answer({"content": None, "refusal": "I can't help with that."}))
    assert body["content"] == [text("I can't help with that.")]
    assert body["stop_reason"] == "refusal"


def test_edge_15_cached_tokens_are_taken_out_of_input_tokens():
    usage = {
        "prompt_tokens": 1210,
        "completion_tokens": 40,
        "total_tokens": 1250,
        "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 200},
        "completion_tokens_details": {"reasoning_tokens": 30},
    }
    body = to_messages(chat_answer({"content": "x"}, usage=usage))
    assert body["usage"] == {
        "input_tokens": 10,
        "output_tokens": 40,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "output_tokens_details": {"thinking_tokens": 30},
    }


def test_edge_15_usage_round_trips():
    usage = {"input_tokens": 7, "output_tokens": 9, "cache_read_input_tokens": 100}
    usage |= {"cache_creation_input_tokens": 20}
    there = to_chat(claude_answer(text("x"), **usage))
    back = to_messages(chat_answer({"content": "x"}, usage=there["usage"]))
    assert back["usage"] == usage


def test_edge_11_arguments_cut_by_length_leave_that_call_out():
    message = {
        "content": "Writing the file.",
        "tool_calls": [
            tool_call("call_1", "now", "{}"),
            tool_call("call_2", "write", '{"path": "a.txt", "content": "hel'),
        ],
    }
    body = to_messages(chat_answer(message, "length"))
    assert body["content"] == [
        text("Writing the file."),
        {"type": "tool_use", "id": "call_1", "name": "now", "input": {}},
    ]
    assert body["stop_reason"] == "max_tokens"


def test_edge_11_a_tool_turn_with_no_usable_call_left_ends_the_turn():
    message = {"content": None, "tool_calls": [tool_call("call_1", "write", "[1, 2]")]}
    body = to_messages(chat_answer(message, "tool_calls"))
    assert body["content"] == [] and body["stop_reason"] == "end_turn"


def test_edge_17_invalid_call_ids_fit_anthropic_and_names_map_back():
    message = {"content": None, "tool_calls": [tool_call("functions.weather:0", "w_1", "{}")]}
    body = to_messages(chat_answer(message, "tool_calls"), tools={"w_1": ClientTool("weather")})
    block = body["content"][0]
    assert block["id"] == fit("functions.weather:0", 128) and block["name"] == "weather"


def test_nonstandard_reasoning_content_never_becomes_a_thinking_block():
    body = to_messages(chat_answer({"content": "hi", "reasoning_content": "secret musings"}))
    assert body["content"] == [text("hi")]
