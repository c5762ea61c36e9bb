"""Non-streaming answers between Gemini and Anthropic Messages, parsed by the official SDKs
(`anthropic` and `google-genai`): blocks and parts, thought signatures both ways, tool-call
ids and names, finish reasons, usage, and a Gemini answer's round trip through Anthropic."""

from __future__ import annotations

import re
from typing import Any

import anthropic
import pytest
from google.genai import types as genai

from taplog.recorder.vendors.gemini.answers import (
    gemini_answer_to_messages,
    messages_answer_to_gemini,
)
from taplog.recorder.vendors.naming import ClientTool, fit
from tests.builders import claude_answer, text, tool_use

MODEL = "gemini-3-pro-preview"
SIG_1 = "Q2lRQl9mYWtl"  # base64, as Google's signatures are
SIG_2 = "Q2lRQl9vdGhlcg=="
ASKS_THOUGHTS = {"contents": [], "generationConfig": {"thinkingConfig": {"includeThoughts": True}}}


def to_messages(answer: dict, **options: Any) -> dict:
    genai.GenerateContentResponse.model_validate(answer)  # the answer is Gemini's shape
    body = gemini_answer_to_messages(answer, model=options.pop("model", MODEL), **options)
    anthropic.types.Message.model_validate(body)  # an Anthropic client accepts it
    return body


def to_gemini(answer: dict, request: dict | None = None, **options: Any) -> dict:
    body = messages_answer_to_gemini(
        answer, request=request or {"contents": []}, model=MODEL, **options
    )
    genai.GenerateContentResponse.model_validate(body)  # a Gemini client accepts it
    return body


def gemini_answer(*parts: dict, finish: str | None = "STOP", **extra: Any) -> dict:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 12, "candidatesTokenCount": 5, "totalTokenCount": 17}
    return {
        "candidates": [candidate],
        "usageMetadata": usage,
        "modelVersion": "gemini-3-pro-preview-11-2025",
        "responseId": "Rt9xaPm2",
        **extra,
    }


def call(name: str, args: dict, call_id: str | None = None, signature: str | None = None) -> dict:
    given = {"id": call_id} if call_id else {}
    part: dict[str, Any] = {"functionCall": {**given, "name": name, "args": args}}
    if signature:
        part["thoughtSignature"] = signature
    return part


def thinking(value: str, signature: str) -> dict:
    return {"type": "thinking", "thinking": value, "signature": signature}


def parts_of(body: dict) -> list[dict]:
    return body["candidates"][0]["content"]["parts"]


# ------------------------------------------------------------- Gemini -> Anthropic client


def test_thoughts_text_and_parallel_calls_become_blocks_with_their_signatures():
    answer = gemini_answer(
        {"text": "**Checking both cities**", "thought": True},
        {"text": "Let me look."},
        call("weather", {"city": "Oslo"}, "fc_1", SIG_1),
        call("weather", {"city": "Rome"}, "fc_2"),
    )
    body = to_messages(answer)
    assert body == {
        "id": "msg_Rt9xaPm2",
        "type": "message",
        "role": "assistant",
        "model": "gemini-3-pro-preview-11-2025",
        "content": [
            thinking("**Checking both cities**", "gemini."),
            text("Let me look."),
            thinking("", "gemini." + SIG_1),
            tool_use("fc_1", "weather", {"city": "Oslo"}),
            tool_use("fc_2", "weather", {"city": "Rome"}),
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5},
    }


def test_a_signed_thought_keeps_its_signature_on_its_own_block():
    body = to_messages(gemini_answer({"text": "plan", "thought": True, "thoughtSignature": SIG_1}))
    assert body["content"] == [thinking("plan", "gemini." + SIG_1)]


def test_a_signed_text_answer_ending_on_an_empty_signed_part():
    answer = gemini_answer(
        {"text": "Oslo is colder.", "thoughtSignature": SIG_1},
        {"text": "", "thoughtSignature": SIG_2},
    )
    assert to_messages(answer)["content"] == [
        thinking("", "gemini." + SIG_1),
        text("Oslo is colder."),
        thinking("", "gemini." + SIG_2),
    ]


def test_empty_unsigned_parts_and_parts_taplog_never_asks_for_make_no_block():
    answer = gemini_answer(
        {"text": ""},
        {"text": "", "thought": True},
        {"inlineData": {"mimeType": "image/png", "data": "iVBORw0K"}, "thoughtSignature": SIG_1},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"text": "Done."},
    )
    assert to_messages(answer)["content"] == [text("Done.")]


def test_calls_without_ids_get_ids_minted_from_the_answer():
    answer = gemini_answer(call("now", {}), call("weather", {"city": "Oslo"}), call("now", {}))
    ids = [block["id"] for block in to_messages(answer)["content"]]
    assert ids == ["call_Rt9xaPm2_0", "call_Rt9xaPm2_1", "call_Rt9xaPm2_2"]


def test_without_a_response_id_the_minted_ids_are_random_but_one_answer_s():
    answer = gemini_answer(call("now", {}), call("now", {}))
    del answer["responseId"]
    first, second = (to_messages(answer) for _ in range(2))
    key = first["id"].removeprefix("msg_")
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert [b["id"] for b in first["content"]] == [f"call_{key}_0", f"call_{key}_1"]
    assert second["id"] != first["id"]


def test_tool_names_map_back_and_odd_ids_fit_anthropic():
    answer = gemini_answer(call("w_1", {}, "functions.weather:0"))
    block = to_messages(answer, tools={"w_1": ClientTool("weather.now")})["content"][0]
    assert block["name"] == "weather.now"
    assert block["id"] == fit("functions.weather:0", 128) != "functions.weather:0"


@pytest.mark.parametrize(
    ("finish", "called", "stop"),
    [
        ("STOP", False, "end_turn"),
        ("STOP", True, "tool_use"),
        ("MAX_TOKENS", False, "max_tokens"),
        ("MAX_TOKENS", True, "max_tokens"),
        ("SAFETY", False, "refusal"),
        ("RECITATION", False, "refusal"),
        ("PROHIBITED_CONTENT", False, "refusal"),
        ("IMAGE_SAFETY", False, "refusal"),
        ("LANGUAGE", False, "refusal"),
        ("OTHER", False, "refusal"),
        ("MALFORMED_FUNCTION_CALL", False, "end_turn"),
        ("FINISH_REASON_UNSPECIFIED", False, "end_turn"),
        (None, False, "end_turn"),
    ],
)
def test_finish_reason_maps_to_stop_reason(finish, called, stop):
    parts = [call("now", {}, "fc_1")] if called else [{"text": "x"}]
    assert to_messages(gemini_answer(*parts, finish=finish))["stop_reason"] == stop


def test_a_blocked_prompt_is_an_empty_refusal():
    answer = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 40, "totalTokenCount": 40},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "blk1",
    }
    body = to_messages(answer)
    assert body["content"] == [] and body["stop_reason"] == "refusal"
    assert body["usage"] == {"input_tokens": 40, "output_tokens": 0}


def test_cached_tokens_leave_input_tokens_and_thoughts_join_output_tokens():
    usage = {
        "promptTokenCount": 1200,
        "cachedContentTokenCount": 1000,
        "candidatesTokenCount": 40,
        "thoughtsTokenCount": 30,
        "totalTokenCount": 1270,
    }
    body = to_messages(gemini_answer({"text": "x"}, usageMetadata=usage))
    assert body["usage"] == {
        "input_tokens": 200,
        "cache_read_input_tokens": 1000,
        "output_tokens": 70,
        "output_tokens_details": {"thinking_tokens": 30},
    }


def test_the_model_is_the_answer_s_model_version_else_the_one_asked_for():
    answer = gemini_answer({"text": "x"})
    del answer["modelVersion"]
    assert to_messages(answer, model="gemini-2.5-pro")["model"] == "gemini-2.5-pro"


# ------------------------------------------------------------- Anthropic -> Gemini client

CLAUDE_TOOL_TURN = claude_answer(
    thinking("The user wants two cities.", "EqQBCkYIBxgCKkA"),
    text("Checking both."),
    tool_use("toolu_01A", "weather", {"city": "Oslo"}),
    tool_use("toolu_01B", "weather", {"city": "Rome"}),
    stop="tool_use",
)


def test_text_and_tool_use_become_parts_and_claude_s_thinking_is_left_out():
    body = to_gemini(CLAUDE_TOOL_TURN)
    assert body == {
        "candidates": [
            {
                "content": {
                    "role": "model",
                    "parts": [
                        {"text": "Checking both."},
                        call("weather", {"city": "Oslo"}, "toolu_01A"),
                        call("weather", {"city": "Rome"}, "toolu_01B"),
                    ],
                },
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "claude-served",
        "responseId": "01AbC",
    }


@pytest.mark.parametrize(
    "request_body",
    [
        ASKS_THOUGHTS,
        {"contents": [], "generation_config": {"thinking_config": {"include_thoughts": True}}},
    ],
)
def test_claude_s_thinking_is_a_thought_part_without_signature_when_asked(request_body):
    assert parts_of(to_gemini(CLAUDE_TOOL_TURN, request_body))[0] == {
        "text": "The user wants two cities.",
        "thought": True,
    }


def test_redacted_thinking_server_tools_and_empty_thinking_are_left_out():
    answer = claude_answer(
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
        thinking("", "EqQBCkYIBxgC"),
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        text("Found it."),
    )
    assert parts_of(to_gemini(answer, ASKS_THOUGHTS)) == [{"text": "Found it."}]


def test_gemini_tagged_thinking_goes_back_on_the_parts_it_came_on():
    answer = claude_answer(
        thinking("plan", "gemini." + SIG_1),
        thinking("more", "gemini."),
        text("Checking."),
        thinking("", "gemini." + SIG_2),
        tool_use("fc_1", "now", {}),
        tool_use("fc_2", "now", {}),
        thinking("", "gemini.U0lHMw=="),
    )
    assert parts_of(to_gemini(answer)) == [
        {"text": "plan", "thought": True, "thoughtSignature": SIG_1},
        {"text": "more", "thought": True},
        {"text": "Checking."},
        call("now", {}, "fc_1", SIG_2),
        call("now", {}, "fc_2"),
        {"text": "", "thoughtSignature": "U0lHMw=="},
    ]


def test_a_signature_the_next_part_cannot_take_gets_an_empty_part_of_its_own():
    answer = claude_answer(
        thinking("", "gemini." + SIG_1),
        thinking("", "gemini." + SIG_2),
        thinking("signed", "gemini.U0lHMw=="),
    )
    assert parts_of(to_gemini(answer)) == [
        {"text": "", "thoughtSignature": SIG_1},
        {"text": "", "thoughtSignature": SIG_2},
        {"text": "signed", "thought": True, "thoughtSignature": "U0lHMw=="},
    ]


def test_adjacent_text_is_one_part_and_an_empty_answer_one_empty_part():
    assert parts_of(to_gemini(claude_answer(text("It is "), text("sunny.")))) == [
        {"text": "It is sunny."}
    ]
    assert parts_of(to_gemini(claude_answer())) == [{"text": ""}]


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("end_turn", "STOP"),
        ("tool_use", "STOP"),
        ("stop_sequence", "STOP"),
        ("pause_turn", "STOP"),
        ("max_tokens", "MAX_TOKENS"),
        ("model_context_window_exceeded", "MAX_TOKENS"),
        ("refusal", "SAFETY"),
        (None, "STOP"),
    ],
)
def test_stop_reason_maps_to_finish_reason(stop, finish):
    body = to_gemini(claude_answer(text("x"), stop=stop))
    assert body["candidates"][0]["finishReason"] == finish


def test_cache_tokens_join_the_prompt_and_thinking_tokens_leave_the_candidates():
    usage = {
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "output_tokens_details": {"thinking_tokens": 3},
    }
    body = to_gemini(claude_answer(text("x"), **usage))
    assert body["usageMetadata"] == {
        "promptTokenCount": 1210,
        "candidatesTokenCount": 2,
        "totalTokenCount": 1215,
        "cachedContentTokenCount": 1000,
        "thoughtsTokenCount": 3,
    }


def test_tool_names_go_back_to_the_client_s():
    answer = claude_answer(tool_use("toolu_1", "w_1", {}), stop="tool_use")
    part = parts_of(to_gemini(answer, tools={"w_1": ClientTool("weather.now")}))[0]
    assert part["functionCall"]["name"] == "weather.now"


# ------------------------------------------------------------- round trip through Anthropic


def test_a_gemini_answer_comes_back_from_anthropic_with_its_parts_and_signatures():
    usage = {
        "promptTokenCount": 1200,
        "candidatesTokenCount": 40,
        "totalTokenCount": 1270,
        "cachedContentTokenCount": 1000,
        "thoughtsTokenCount": 30,
    }
    answer = gemini_answer(
        {"text": "**Planning**", "thought": True, "thoughtSignature": SIG_1},
        {"text": "Checking both.", "thoughtSignature": SIG_2},
        call("weather", {"city": "Oslo", "days": [1, 2]}, "fc_1", "U0lHMw=="),
        call("weather", {"city": "Rome"}, "fc_2"),
        {"text": "", "thoughtSignature": "U0lHNA=="},
        usageMetadata=usage,
    )
    assert to_gemini(to_messages(answer)) == answer
