"""Stream translation (docs/protocols.md 5.5, 5.6; edge cases 9, 10, 11, 16).

Golden tests pin the event sequences. The property tests build a vendor's stream for a
random answer (text in random deltas, 0-3 tool calls with arguments split anywhere, some
with none, thinking), translate it, cut the output bytes at random, reassemble them with
taplog's own reassemblers and with the official SDK accumulators, and require exactly the
non-streaming translation of the same answer.
"""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState

from taplog.recorder.vendors.anthropic import wire as anthropic_messages
from taplog.recorder.vendors.naming import ClientTool
from taplog.recorder.vendors.openai_chat import wire as openai_chat
from taplog.recorder.vendors.openai_chat.answers import (
    chat_answer_to_messages,
    messages_answer_to_chat,
)
from taplog.recorder.vendors.openai_chat.stream_from_neutral import AnthropicToChatStream
from taplog.recorder.vendors.openai_chat.stream_to_neutral import ChatToAnthropicStream
from taplog.recorder.vendors.sse import SseEvent
from tests.builders import (
    COUNTS,
    CREATED,
    INPUTS,
    MESSAGE_STOP,
    NAMES,
    TEXT_BLOCK,
    anthropic_answers,
    block_delta,
    block_start,
    block_stop,
    json_delta,
    message_delta,
    message_start,
    split,
    text_delta,
    tool_block,
    tool_call,
)
from tests.recorder.vendors.checks import (
    anthropic_events,
    messages_view,
    sdk_message,
    sse_events,
)


def data_of(events: list[SseEvent]) -> list[Any]:
    return [e.data if e.data == "[DONE]" else orjson.loads(e.data) for e in events]


# ---------------------------------------------------------------- Anthropic event builders


def run_to_chat(events: list[dict], **options: Any) -> tuple[list[Any], AnthropicToChatStream]:
    options.setdefault("include_usage", True)
    stream = AnthropicToChatStream(created=CREATED, **options)
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    chunks = data_of(sse_events(raw))
    for chunk in chunks:  # an OpenAI client parses every chunk
        if chunk != "[DONE]" and "error" not in chunk:
            openai.types.chat.ChatCompletionChunk.model_validate(chunk)
    return chunks, stream


def deltas(chunks: list[Any]) -> list[Any]:
    """(delta, finish_reason) per chunk with a choice; "usage"/"[DONE]"/errors as they are."""
    out = []
    for chunk in chunks:
        if chunk == "[DONE]" or "error" in chunk:
            out.append(chunk)
        elif chunk["choices"]:
            out.append((chunk["choices"][0]["delta"], chunk["choices"][0]["finish_reason"]))
        else:
            out.append(("usage", chunk["usage"]))
    return out


# ---------------------------------------------------------------- 5.5 Anthropic -> OpenAI


def test_a_text_answer_becomes_the_openai_chunk_sequence():
    events = [
        message_start(cache_read_input_tokens=100),
        block_start(0, TEXT_BLOCK),
        {"type": "ping"},
        block_delta(0, text_delta("Hel")),
        block_delta(0, text_delta("lo")),
        block_stop(0),
        message_delta("end_turn", 7),
        MESSAGE_STOP,
    ]
    chunks, stream = run_to_chat(events)
    assert deltas(chunks) == [
        ({"role": "assistant", "content": ""}, None),
        ({"content": "Hel"}, None),
        ({"content": "lo"}, None),
        ({}, "stop"),
        (
            "usage",
            {
                "prompt_tokens": 110,
                "completion_tokens": 7,
                "total_tokens": 117,
                "prompt_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
            },
        ),
        "[DONE]",
    ]
    first = chunks[0]
    assert first["id"] == "chatcmpl-01" and first["model"] == "claude-served"
    assert first["object"] == "chat.completion.chunk" and first["created"] == CREATED
    assert all(c["id"] == "chatcmpl-01" for c in chunks[:-1])
    assert all(c["usage"] is None for c in chunks[:4])
    assert stream.finished and stream.error is None


def test_without_include_usage_there_is_no_usage_chunk_or_key():
    events = [message_start(), block_start(0, TEXT_BLOCK), block_stop(0)]
    events += [message_delta("max_tokens"), MESSAGE_STOP]
    chunks, stream = run_to_chat(events, include_usage=False)
    assert deltas(chunks) == [
        ({"role": "assistant", "content": ""}, None),
        ({}, "length"),
        "[DONE]",
    ]
    assert all("usage" not in c for c in chunks[:-1])
    assert stream.finished


def test_edge_09_tool_call_index_counts_tool_calls_not_blocks():
    events = [
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "thinking_delta", "thinking": "plan"}),
        block_delta(0, {"type": "signature_delta", "signature": "sig"}),
        block_stop(0),
        block_start(1, TEXT_BLOCK),
        block_delta(1, text_delta("Two calls.")),
        block_stop(1),
        block_start(2, tool_block("toolu_a", "weather")),
        block_delta(2, json_delta('{"city":')),
        block_delta(2, json_delta('"Oslo"}')),
        block_stop(2),
        block_start(3, tool_block("toolu_b", "weather")),
        block_delta(3, json_delta('{"city":"Rome"}')),
        block_stop(3),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    chunks, _ = run_to_chat(events, include_usage=False)
    start = {"type": "function", "function": {"name": "weather", "arguments": ""}}
    assert deltas(chunks)[1:-1] == [
        ({"content": "Two calls."}, None),
        ({"tool_calls": [{"index": 0, "id": "toolu_a", **start}]}, None),
        ({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}, None),
        ({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}, None),
        ({"tool_calls": [{"index": 1, "id": "toolu_b", **start}]}, None),
        ({"tool_calls": [{"index": 1, "function": {"arguments": '{"city":"Rome"}'}}]}, None),
        ({}, "tool_calls"),
    ]


def test_edge_10_tools_without_arguments_get_an_empty_object_fragment():
    events = [
        message_start(),
        block_start(0, tool_block("toolu_a", "now")),
        block_stop(0),
        block_start(1, tool_block("toolu_b", "now")),
        block_delta(1, json_delta("")),
        block_stop(1),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    chunks, _ = run_to_chat(events)
    body = openai_chat.reassemble(sse_events(b"".join(_encode(chunks)))).body
    arguments = [c["function"]["arguments"] for c in body["choices"][0]["message"]["tool_calls"]]
    assert arguments == ["{}", "{}"]


def _encode(chunks: list[Any]) -> list[bytes]:
    return [
        b"data: " + (c.encode() if isinstance(c, str) else orjson.dumps(c)) + b"\n\n"
        for c in chunks
    ]


def test_thinking_redacted_thinking_and_server_tools_send_nothing():
    events = [
        message_start(),
        block_start(0, {"type": "redacted_thinking", "data": "xyz"}),
        block_stop(0),
        block_start(1, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search"}),
        block_delta(1, json_delta('{"q":"x"}')),
        block_stop(1),
        block_delta(2, {"type": "citations_delta", "citation": {}}),
    ]
    chunks, stream = run_to_chat(events)
    assert deltas(chunks) == [({"role": "assistant", "content": ""}, None)]
    assert not stream.finished


def test_tool_names_map_back_to_the_clients_names():
    events = [message_start(), block_start(0, tool_block("toolu_a", "w_1")), block_stop(0)]
    chunks, _ = run_to_chat(events, tools={"w_1": ClientTool("weather.now")})
    assert chunks[1]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "weather.now"


def test_edge_16_an_anthropic_error_after_200_becomes_an_openai_error_and_no_done():
    events = [
        message_start(),
        block_start(0, TEXT_BLOCK),
        block_delta(0, text_delta("Hi")),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        MESSAGE_STOP,
    ]
    chunks, stream = run_to_chat(events)
    assert chunks[-1] == {
        "error": {"message": "Overloaded", "type": "server_error", "param": None, "code": None}
    }
    assert "[DONE]" not in chunks
    assert stream.error is not None and not stream.finished
    result = openai_chat.reassemble(sse_events(b"".join(_encode(chunks))))
    assert result.error["message"] == "Overloaded" and not result.complete


# ---------------------------------------------------------------- 5.6 OpenAI -> Anthropic


def chat_chunk(delta: dict | None = None, finish: str | None = None, **extra: Any) -> dict:
    body = {
        "id": "chatcmpl-9",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": "gpt-served",
        "system_fingerprint": None,
    }
    if delta is not None:
        body["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    return {**body, **extra}


USAGE = {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34}
USAGE_CHUNK = chat_chunk(choices=[], usage=USAGE)


def run_chat_to_messages(
    chunks: list[dict | None], **options: Any
) -> tuple[list, ChatToAnthropicStream]:
    stream = ChatToAnthropicStream(model="gpt-requested", **options)
    raw = b"".join(b for c in chunks for b in stream.feed(c))
    return anthropic_events(raw), stream


def names(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


def test_a_text_answer_becomes_the_anthropic_event_sequence():
    chunks = [
        chat_chunk({"role": "assistant", "content": ""}),
        chat_chunk({"content": "Hel"}),
        chat_chunk({"content": "lo"}),
        chat_chunk({}, "stop"),
        USAGE_CHUNK,
        None,
    ]
    events, stream = run_chat_to_messages(chunks)
    assert events == [
        {
            "type": "message_start",
            "message": {
                "id": "msg_9",
                "type": "message",
                "role": "assistant",
                "model": "gpt-served",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": text_delta("Hel")},
        {"type": "content_block_delta", "index": 0, "delta": text_delta("lo")},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {
                "input_tokens": 30,
                "output_tokens": 4,
                "cache_read_input_tokens": 0,
                "cache_creation_input_tokens": 0,
            },
        },
        {"type": "message_stop"},
    ]
    assert stream.finished and stream.error is None
    assert anthropic_messages.reassemble(sse_events(_anthropic_bytes(events))).complete


def _anthropic_bytes(events: list[dict]) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


def test_each_tool_call_opens_a_new_block_and_closes_the_previous_one():
    first = {"index": 0, "id": "call_a", "type": "function", "function": {"name": "weather"}}
    second = {"index": 1, "id": "call_b", "type": "function", "function": {"name": "now"}}
    chunks = [
        chat_chunk({"role": "assistant", "content": "Sure."}),
        chat_chunk({"tool_calls": [{**first, "function": {"name": "weather", "arguments": ""}}]}),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city"'}}]}),
        chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ':"Oslo"}'}}]}),
        chat_chunk({"tool_calls": [{**second, "function": {"name": "now", "arguments": ""}}]}),
        chat_chunk({}, "tool_calls"),
        USAGE_CHUNK,
    ]
    events, stream = run_chat_to_messages(chunks)
    assert names(events) == [
        "message_start",
        *("content_block_start", "content_block_delta", "content_block_stop"),
        *("content_block_start", "content_block_delta", "content_block_delta"),
        *("content_block_stop", "content_block_start", "content_block_stop"),
        "message_delta",
        "message_stop",
    ]
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1, 2]
    assert starts[1]["content_block"] == {
        "type": "tool_use",
        "id": "call_a",
        "name": "weather",
        "input": {},
    }
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert stream.finished  # the usage chunk ended it; [DONE] is not needed


def test_the_end_waits_for_usage_and_done_without_usage_gives_zero_usage():
    stream = ChatToAnthropicStream(model="gpt-requested")
    stream.feed(chat_chunk({"role": "assistant", "content": "x"}))
    assert names(_parsed(stream.feed(chat_chunk({}, "length")))) == ["content_block_stop"]
    end = _parsed(stream.feed(None))
    assert names(end) == ["message_delta", "message_stop"]
    assert end[0]["delta"]["stop_reason"] == "max_tokens"
    assert end[0]["usage"]["output_tokens"] == 0
    assert stream.finished and stream.feed(USAGE_CHUNK) == []


def test_usage_in_the_finish_chunk_ends_at_once():
    events, stream = run_chat_to_messages(
        [chat_chunk({"role": "assistant", "content": "x"}), chat_chunk({}, "stop", usage=USAGE)]
    )
    assert names(events)[-2:] == ["message_delta", "message_stop"] and stream.finished


def _parsed(raw: list[bytes]) -> list[dict]:
    return [orjson.loads(e.data) for e in sse_events(b"".join(raw))]


def test_done_without_a_finish_reason_is_a_broken_stream():
    events, stream = run_chat_to_messages([chat_chunk({"role": "assistant", "content": "x"}), None])
    assert events[-1] == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": "the upstream stream ended without a finish_reason",
        },
    }
    assert stream.error is not None and not stream.finished


def test_edge_16_an_openai_error_after_200_becomes_an_anthropic_error_event():
    error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
    events, stream = run_chat_to_messages(
        [chat_chunk({"role": "assistant", "content": "x"}), {"error": error}, USAGE_CHUNK, None]
    )
    assert events[-1] == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "Rate limit reached"},
    }
    assert stream.error == events[-1]["error"] and not stream.finished
    result = anthropic_messages.reassemble(sse_events(_anthropic_bytes(events)))
    assert result.error["type"] == "rate_limit_error" and not result.complete


def test_reasoning_content_is_not_sent_as_thinking():
    chunks = [
        chat_chunk({"role": "assistant", "content": "", "reasoning_content": "hmm"}),
        chat_chunk({"reasoning_content": " more"}),
        chat_chunk({"content": "Hi"}),
        chat_chunk({}, "stop"),
        USAGE_CHUNK,
    ]
    events, _ = run_chat_to_messages(chunks)
    blocks = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert blocks == ["text"]


def test_a_refusal_streams_as_text_with_stop_reason_refusal():
    chunks = [
        chat_chunk({"role": "assistant", "refusal": "No."}),
        chat_chunk({}, "stop"),
        USAGE_CHUNK,
    ]
    events, _ = run_chat_to_messages(chunks)
    body = anthropic_messages.reassemble(sse_events(_anthropic_bytes(events))).body
    assert body["content"] == [{"type": "text", "text": "No."}]
    assert body["stop_reason"] == "refusal"


def test_edge_11_arguments_cut_by_length_stream_through_with_max_tokens():
    call = {"index": 0, "id": "call_a", "type": "function"}
    chunks = [
        chat_chunk({"role": "assistant", "content": None}),
        chat_chunk(
            {"tool_calls": [{**call, "function": {"name": "write", "arguments": '{"path":"a'}}]}
        ),
        chat_chunk({}, "length"),
        USAGE_CHUNK,
    ]
    events, _ = run_chat_to_messages(chunks)
    body = anthropic_messages.reassemble(sse_events(_anthropic_bytes(events))).body
    assert body["stop_reason"] == "max_tokens"
    assert body["content"][0]["input_raw"] == '{"path":"a'  # incomplete, as Anthropic's own


def test_tool_names_and_invalid_ids_are_fitted_for_the_anthropic_client():
    call = {"index": 0, "id": "functions.w:0", "type": "function"}
    chunks = [
        chat_chunk({"tool_calls": [{**call, "function": {"name": "w_1", "arguments": "{}"}}]})
    ]
    events, _ = run_chat_to_messages(chunks, tools={"w_1": ClientTool("weather")})
    block = events[1]["content_block"]
    assert block["name"] == "weather" and block["id"].startswith("functions_w_0_")


# ---------------------------------------------------------------- property: Anthropic -> OpenAI


def chat_view(body: dict) -> dict:
    """What an OpenAI client reads from a completion, arguments parsed."""
    message = body["choices"][0]["message"]
    calls = [
        (c["id"], c["type"], c["function"]["name"], orjson.loads(c["function"]["arguments"]))
        for c in message.get("tool_calls") or []
    ]
    return {
        "id": body["id"],
        "model": body["model"],
        "created": body["created"],
        "content": message["content"] or None,
        "tool_calls": calls,
        "finish_reason": body["choices"][0]["finish_reason"],
        "usage": body["usage"],
    }


def sdk_chat_completion(events: list[SseEvent]) -> dict:
    state = ChatCompletionStreamState()
    for event in events:
        if event.data != "[DONE]":
            state.handle_chunk(
                openai.types.chat.ChatCompletionChunk.model_validate_json(event.data)
            )
    # the snapshot, not get_final_completion(), which raises on finish_reason "length"
    return state.current_completion_snapshot.model_dump(exclude_none=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=anthropic_answers(), data=st.data())
def test_an_anthropic_stream_translates_like_its_non_stream_answer(answer, data):
    message, events = answer
    expected = chat_view(messages_answer_to_chat(message, created=CREATED))
    stream = AnthropicToChatStream(include_usage=True, created=CREATED)
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    assert stream.finished
    parsed = sse_events(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    result = openai_chat.reassemble(parsed)
    assert result.complete and result.error is None
    assert chat_view(result.body) == expected
    sdk = chat_view(sdk_chat_completion(parsed))
    assert {**sdk, "usage": None} == {**expected, "usage": None}
    assert sdk["usage"] == expected["usage"]


# ---------------------------------------------------------------- property: OpenAI -> Anthropic

FINISHES = st.sampled_from(["stop", "length", "tool_calls", "content_filter"])


@st.composite
def chat_answers(draw: Any) -> tuple[dict, list[dict | None]]:
    """(a non-streaming chat.completion, the chunks that deliver it, None for [DONE])."""
    text = draw(st.text(max_size=40))
    calls = []
    for k in range(draw(st.integers(0, 3))):
        value = draw(INPUTS)
        arguments = orjson.dumps(value).decode() if value or draw(st.booleans()) else ""
        calls.append(tool_call(f"call_{k}", draw(NAMES), arguments))
    cached = draw(COUNTS)
    written = draw(COUNTS)
    usage = {
        "prompt_tokens": cached + written + draw(COUNTS),
        "completion_tokens": draw(COUNTS),
        "prompt_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if draw(st.booleans()):
        usage["completion_tokens_details"] = {"reasoning_tokens": draw(COUNTS)}
    finish = draw(FINISHES)
    message = {"role": "assistant", "content": text or None, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    answer = {
        "id": "chatcmpl-" + draw(st.text(alphabet="abcXYZ0189", min_size=1, max_size=8)),
        "object": "chat.completion",
        "created": CREATED,
        "model": "gpt-served",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": usage,
    }
    return answer, _chunks(draw, answer, text, calls)


def _chunks(draw: Any, answer: dict, text: str, calls: list[dict]) -> list[dict | None]:
    def make(delta: dict | None, finish: str | None = None, **extra: Any) -> dict:
        return {**chat_chunk(delta, finish, **extra), "id": answer["id"]}

    chunks = [make({"role": "assistant", "content": ""})]
    chunks += [make({"reasoning_content": p}) for p in split(draw, draw(st.text(max_size=20)))]
    chunks += [make({"content": p}) for p in split(draw, text)]
    for k, call in enumerate(calls):
        pieces = split(draw, call["function"]["arguments"])
        first = pieces.pop(0) if pieces and draw(st.booleans()) else ""
        start = {"index": k, "id": call["id"], "type": "function"}
        start["function"] = {"name": call["function"]["name"], "arguments": first}
        chunks.append(make({"tool_calls": [start]}))
        chunks += [
            make({"tool_calls": [{"index": k, "function": {"arguments": p}}]}) for p in pieces
        ]
    finish = answer["choices"][0]["finish_reason"]
    if draw(st.booleans()):
        chunks.append(make({}, finish, usage=answer["usage"]))
    else:
        chunks += [make({}, finish), make(None, choices=[], usage=answer["usage"])]
    return [*chunks, None]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=chat_answers(), data=st.data())
def test_an_openai_stream_translates_like_its_non_stream_answer(answer, data):
    completion, chunks = answer
    expected = chat_answer_to_messages(completion)
    anthropic.types.Message.model_validate(expected)
    stream = ChatToAnthropicStream(model="gpt-requested")
    raw = b"".join(b for c in chunks for b in stream.feed(c))
    assert stream.finished
    parsed = sse_events(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    result = anthropic_messages.reassemble(parsed)
    assert result.complete and result.error is None
    assert result.body == expected
    assert messages_view(sdk_message(parsed)) == messages_view(expected)
