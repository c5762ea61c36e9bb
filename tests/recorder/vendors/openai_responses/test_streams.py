"""Stream translation between Anthropic Messages and OpenAI Responses (protocols.md 2, 3, 5.5, 5.6).

Golden tests pin the event sequences. The property tests build a vendor's stream for a
random answer (text in random deltas, 0-3 tool calls with arguments split anywhere, some
with none, thinking or reasoning), translate it, cut the output bytes at random, reassemble
them with taplog's own reassemblers and the official SDK accumulators, and require the
non-streaming translation of the same answer. Every Responses stream must also number its
events 0, 1, 2, ... and follow the event grammar of docs/protocols.md 2.
"""

from __future__ import annotations

import re
from typing import Any

import anthropic
import openai
import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taplog.recorder.vendors.anthropic import wire as anthropic_messages
from taplog.recorder.vendors.naming import ClientTool
from taplog.recorder.vendors.openai_responses import wire as openai_responses
from taplog.recorder.vendors.openai_responses.answers import (
    messages_answer_to_responses,
    responses_answer_to_messages,
)
from taplog.recorder.vendors.openai_responses.stream_from_neutral import AnthropicToResponsesStream
from taplog.recorder.vendors.openai_responses.stream_to_neutral import ResponsesToAnthropicStream
from tests.builders import (
    COUNTS,
    CREATED,
    INPUTS,
    MESSAGE_STOP,
    NAMES,
    REQUEST,
    RESPONSE_ID,
    TEXT_BLOCK,
    a_message,
    a_response,
    a_text,
    anthropic_answers,
    block_delta,
    block_start,
    block_stop,
    item_events,
    json_delta,
    message_delta,
    message_start,
    numbered,
    split,
    text_delta,
    tool_block,
)
from tests.recorder.vendors.checks import (
    ANTHROPIC_EVENT,
    RESPONSES_EVENT,
    check_sequence,
    deltas_add_up,
    messages_view,
    run_responses_to_messages,
    run_to_responses,
    sdk_message,
    sdk_response,
    sse_events,
    types,
)


def payload(event: dict) -> dict:
    return {k: v for k, v in event.items() if k not in ("type", "sequence_number")}


# ---------------------------------------------------------------- Anthropic -> Responses


def test_a_text_answer_becomes_the_full_responses_event_sequence():
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
    out, stream = run_to_responses(events)
    assert types(out) == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    created = out[0]["response"]
    assert created["id"] == RESPONSE_ID and created["status"] == "in_progress"
    assert created["output"] == [] and created["model"] == "claude-served"
    assert payload(out[2]) == {
        "output_index": 0,
        "item": {
            "id": "msg_T1_0",
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        },
    }
    where = {"item_id": "msg_T1_0", "output_index": 0, "content_index": 0}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    assert payload(out[3]) == {**where, "part": part}
    assert payload(out[4]) == {**where, "delta": "Hel", "logprobs": []}
    assert payload(out[6]) == {**where, "text": "Hello", "logprobs": []}
    assert payload(out[7]) == {**where, "part": {**part, "text": "Hello"}}
    final = out[-1]["response"]
    assert final == stream.response and stream.finished and stream.error is None
    assert final["status"] == "completed" and final["output"] == [out[8]["item"]]
    assert final["usage"] == {
        "input_tokens": 110,
        "input_tokens_details": {"cached_tokens": 100, "cache_write_tokens": 0},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 117,
    }
    openai.types.responses.Response.model_validate(final)


def test_tool_calls_become_function_call_items_indexed_by_output_not_block():
    events = [
        message_start(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "thinking_delta", "thinking": "plan"}),
        block_delta(0, {"type": "signature_delta", "signature": "sig"}),
        block_stop(0),
        block_start(1, tool_block("toolu_a", "weather")),
        block_delta(1, json_delta('{"city":')),
        block_delta(1, json_delta(' "Oslo"}')),
        block_stop(1),
        block_start(2, tool_block("toolu_b", "now")),
        block_delta(2, json_delta("")),
        block_stop(2),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    out, stream = run_to_responses(events)
    assert types(out)[2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert out[2]["item"] == {
        "id": "fc_T1_0",
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": "toolu_a",
        "name": "weather",
    }
    assert payload(out[5]) == {
        "item_id": "fc_T1_0",
        "output_index": 0,
        "arguments": '{"city": "Oslo"}',
    }
    assert payload(out[8]) == {"item_id": "fc_T1_1", "output_index": 1, "delta": "{}"}  # 5.8.10
    assert out[10]["item"]["arguments"] == "{}" and out[10]["item"]["status"] == "completed"
    assert [item["call_id"] for item in stream.response["output"]] == ["toolu_a", "toolu_b"]


def test_max_tokens_ends_with_response_incomplete():
    events = [message_start(), block_start(0, TEXT_BLOCK), block_delta(0, text_delta("Hi"))]
    events += [block_stop(0), message_delta("max_tokens"), MESSAGE_STOP]
    out, stream = run_to_responses(events)
    assert out[-1]["type"] == "response.incomplete"
    assert out[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert stream.finished


def test_empty_text_blocks_and_server_tools_send_no_items():
    events = [
        message_start(),
        block_start(0, TEXT_BLOCK),
        block_delta(0, text_delta("")),
        block_stop(0),
        block_start(1, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_fetch"}),
        block_delta(1, json_delta('{"url":"https://x.test"}')),
        block_stop(1),
        block_start(2, {"type": "redacted_thinking", "data": "xyz"}),
        block_stop(2),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
    out, stream = run_to_responses(events)
    assert types(out) == ["response.created", "response.in_progress", "response.completed"]
    assert stream.response["output"] == []


def test_tool_names_map_back_to_the_clients_names():
    events = [message_start(), block_start(0, tool_block("toolu_a", "w_1")), block_stop(0)]
    out, _ = run_to_responses(events, tools={"w_1": ClientTool("weather.now")})
    assert out[2]["item"]["name"] == "weather.now"


def test_an_anthropic_error_becomes_error_and_response_failed_and_nothing_after():
    events = [
        message_start(),
        block_start(0, TEXT_BLOCK),
        block_delta(0, text_delta("Hi")),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        block_stop(0),
        MESSAGE_STOP,
    ]
    out, stream = run_to_responses(events)
    assert types(out)[-2:] == ["error", "response.failed"]
    assert payload(out[-2]) == {"code": "server_error", "message": "Overloaded", "param": None}
    failed = out[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["error"] == {"code": "server_error", "message": "Overloaded"}
    assert stream.error is not None and not stream.finished and stream.response == failed
    result = openai_responses.reassemble(sse_events(_bytes(out)))
    assert result.error == failed["error"]


def test_an_error_before_anything_still_opens_the_response_for_sdk_clients():
    error = {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}}
    out, _ = run_to_responses([error])
    assert types(out) == ["response.created", "response.in_progress", "error", "response.failed"]
    assert out[2]["code"] == "rate_limit_exceeded"
    assert out[3]["response"]["error"]["code"] == "rate_limit_exceeded"


def _bytes(events: list[dict]) -> bytes:
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


# ---------------------------------------------------------------- Responses -> Anthropic


def responses_stream(answer: dict, pieces: dict[int, list[list[str]]]) -> list[dict]:
    opened = {**answer, "status": "in_progress", "output": [], "usage": None}
    events = [
        {"type": "response.created", "response": opened},
        {"type": "response.in_progress", "response": opened},
    ]
    for index, item in enumerate(answer["output"]):
        events += item_events(index, item, pieces=pieces.get(index))
    terminal = "response.completed" if answer["status"] == "completed" else "response.incomplete"
    return numbered([*events, {"type": terminal, "response": answer}])


def a_call(index: int, name: str, arguments: str) -> dict:
    return {
        "id": f"fc_{index}",
        "type": "function_call",
        "status": "completed",
        "call_id": f"call_{index}",
        "name": name,
        "arguments": arguments,
    }


def a_search(index: int, query: str, urls: list[str], status: str = "completed") -> dict:
    sources = [{"type": "url", "url": url} for url in urls]
    return {
        "id": f"ws_{index}",
        "type": "web_search_call",
        "status": status,
        "action": {"type": "search", "query": query, "sources": sources},
    }


REASONING = {"id": "rs_0", "type": "reasoning", "summary": [], "encrypted_content": "gAAA"}


def test_a_responses_text_answer_becomes_the_anthropic_event_sequence():
    answer = a_response(REASONING, a_message("msg_1", a_text("Hello")))
    out, stream = run_responses_to_messages(responses_stream(answer, {1: [["Hel", "lo"]]}))
    assert out == [
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
                "input_tokens": 20,
                "output_tokens": 4,
                "cache_read_input_tokens": 10,
                "cache_creation_input_tokens": 0,
                "output_tokens_details": {"thinking_tokens": 1},
            },
        },
        {"type": "message_stop"},
    ]
    assert stream.finished and stream.error is None


def test_function_calls_open_tool_use_blocks_and_items_without_deltas_still_arrive():
    answer = a_response(
        a_message("msg_1", a_text("Sure.")),
        a_call(1, "w_1", '{"city":"Oslo"}'),
        a_call(2, "now", ""),
    )
    events = responses_stream(answer, {1: [['{"city"', ':"Oslo"}']], 2: [[]]})
    out, _ = run_responses_to_messages(events, tools={"w_1": ClientTool("weather")})
    assert types(out) == [
        "message_start",
        *("content_block_start", "content_block_delta", "content_block_stop"),
        *("content_block_start", "content_block_delta", "content_block_delta"),
        *("content_block_stop", "content_block_start", "content_block_stop"),
        "message_delta",
        "message_stop",
    ]
    starts = [e for e in out if e["type"] == "content_block_start"]
    assert [s["index"] for s in starts] == [0, 1, 2]
    assert starts[1]["content_block"] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "weather",
        "input": {},
    }
    assert out[-2]["delta"]["stop_reason"] == "tool_use"


def test_refusals_and_incomplete_answers_set_the_stop_reason():
    refusal = a_message("msg_1", {"type": "refusal", "refusal": "No."})
    out, _ = run_responses_to_messages(responses_stream(a_response(refusal), {0: [["No."]]}))
    assert out[-2]["delta"]["stop_reason"] == "refusal"
    cut = a_response(
        a_message("msg_1", a_text("x")), status="incomplete", reason="max_output_tokens"
    )
    out, _ = run_responses_to_messages(responses_stream(cut, {0: [["x"]]}))
    assert out[-2]["delta"]["stop_reason"] == "max_tokens"


def test_a_failed_response_becomes_an_anthropic_error():
    failed = {
        **a_response(),
        "status": "failed",
        "error": {"code": "server_error", "message": "boom"},
    }
    events = numbered(
        [
            {"type": "response.created", "response": a_response()},
            {"type": "response.failed", "response": failed},
        ]
    )
    out, stream = run_responses_to_messages(events)
    assert out[-1] == {"type": "error", "error": {"type": "api_error", "message": "boom"}}
    assert stream.error == out[-1]["error"] and not stream.finished
    bad = {**failed, "error": {"code": "invalid_image", "message": "bad image"}}
    out, _ = run_responses_to_messages([{"type": "response.failed", "response": bad}])
    assert out[-1]["error"]["type"] == "invalid_request_error"


def test_an_error_event_becomes_an_anthropic_error_and_nothing_after():
    events = [
        {"type": "response.created", "response": a_response()},
        {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "param": None},
        {"type": "response.completed", "response": a_response()},
    ]
    out, stream = run_responses_to_messages(numbered(events))
    assert types(out) == ["message_start", "error"]
    assert out[-1]["error"] == {"type": "rate_limit_error", "message": "Slow down"}
    assert anthropic_messages.reassemble(sse_events(_bytes(out))).error == stream.error


# ---------------------------------------------------------------- property: Anthropic -> Responses


def responses_view(body: dict) -> dict:
    """What a Responses client reads, arguments parsed."""
    items = []
    for item in body["output"]:
        if item["type"] == "message":
            items.append((item["id"], "".join(p["text"] for p in item["content"])))
        else:
            arguments = orjson.loads(item["arguments"])
            items.append((item["id"], item["call_id"], item["name"], arguments, item["status"]))
    keys = ("id", "model", "status", "incomplete_details", "created_at")
    usage = {k: _set(v) for k, v in body["usage"].items()}  # the SDK adds unset fields as None
    return {"output": items, "usage": usage, **{key: body[key] for key in keys}}


def _set(value: Any) -> Any:
    return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=anthropic_answers(), data=st.data())
def test_an_anthropic_stream_translates_like_its_non_stream_answer(answer, data):
    message, events = answer
    expected = messages_answer_to_responses(
        message, response_id=RESPONSE_ID, created_at=CREATED, request=REQUEST
    )
    openai.types.responses.Response.model_validate(expected)
    stream = AnthropicToResponsesStream(
        response_id=RESPONSE_ID, created_at=CREATED, request=REQUEST
    )
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    assert stream.finished and stream.error is None
    parsed = sse_events(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    deltas_add_up(check_sequence(parsed))
    result = openai_responses.reassemble(parsed)
    assert result.complete and result.error is None
    assert result.body == stream.response
    assert responses_view(result.body) == responses_view(expected)
    assert responses_view(sdk_response(parsed)) == responses_view(expected)


# ---------------------------------------------------------------- property: Responses -> Anthropic

_ANTHROPIC_ORDER = re.compile(r"S(?:BD*E)*MZ")
_ANTHROPIC_LETTERS = {
    "message_start": "S",
    "content_block_start": "B",
    "content_block_delta": "D",
    "content_block_stop": "E",
    "message_delta": "M",
    "message_stop": "Z",
}


def check_anthropic_order(events: list[dict]) -> None:
    """docs/protocols.md 3: one block at a time, indexes 0, 1, 2, ..., each event a valid one."""
    for event in events:
        ANTHROPIC_EVENT.validate_python(event)
    letters = "".join(_ANTHROPIC_LETTERS[e["type"]] for e in events)
    assert _ANTHROPIC_ORDER.fullmatch(letters), letters
    starts = [e["index"] for e in events if e["type"] == "content_block_start"]
    assert starts == list(range(len(starts)))
    open_index = None
    for event in events:
        if event["type"] == "content_block_start":
            open_index = event["index"]
        elif event["type"] in ("content_block_delta", "content_block_stop"):
            assert event["index"] == open_index


STATUSES = st.sampled_from(
    [("completed", None), ("incomplete", "max_output_tokens"), ("incomplete", "content_filter")]
)


@st.composite
def responses_answers(draw: Any) -> tuple[dict, list[dict]]:
    """(a non-streaming Responses answer, the events that deliver it)."""
    output: list[dict] = []
    for k in range(draw(st.integers(0, 2))):
        parts = [a_text(draw(st.text(max_size=30))) for _ in range(draw(st.integers(1, 2)))]
        if draw(st.booleans()):
            parts.append({"type": "refusal", "refusal": draw(st.text(max_size=10))})
        output.append(a_message(f"msg_{k}", *parts))
    for k in range(draw(st.integers(0, 3))):
        value = draw(INPUTS)
        arguments = orjson.dumps(value).decode() if value or draw(st.booleans()) else ""
        output.append(a_call(k, draw(NAMES), arguments))
    for k in range(draw(st.integers(0, 2))):
        urls = draw(st.lists(st.sampled_from(["https://a.test/", "https://b.test/x"]), max_size=2))
        status = draw(st.sampled_from(["completed", "failed"]))
        output.append(a_search(k, draw(st.text(max_size=10)), urls, status))
    output = draw(st.permutations(output))
    if draw(st.booleans()):
        output.insert(0, REASONING)
    status, reason = draw(STATUSES)
    answer = a_response(*output, status=status, reason=reason)
    cached, written = draw(COUNTS), draw(COUNTS)
    answer["usage"] = {
        "input_tokens": cached + written + draw(COUNTS),
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": draw(COUNTS),
        "output_tokens_details": {"reasoning_tokens": draw(COUNTS)},
    }
    answer["usage"]["total_tokens"] = (
        answer["usage"]["input_tokens"] + answer["usage"]["output_tokens"]
    )
    pieces = {}
    for index, item in enumerate(output):
        if item["type"] in ("reasoning", "web_search_call"):
            continue
        if item["type"] == "message" and draw(st.booleans()):
            continue  # a message sent whole in output_item.done, as some servers do
        texts = [p.get("text", p.get("refusal")) for p in item.get("content", [])]
        pieces[index] = [split(draw, t) for t in texts or [item["arguments"]]]
    return answer, responses_stream(answer, pieces)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=responses_answers(), data=st.data())
def test_a_responses_stream_translates_like_its_non_stream_answer(answer, data):
    response, events = answer
    for event in events:  # the generated stream is one a Responses server could send
        RESPONSES_EVENT.validate_python(event)
    expected = responses_answer_to_messages(response)
    anthropic.types.Message.model_validate(expected)
    stream = ResponsesToAnthropicStream(model="gpt-requested")
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    assert stream.finished
    parsed = sse_events(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    check_anthropic_order([orjson.loads(e.data) for e in parsed])
    result = anthropic_messages.reassemble(parsed)
    assert result.complete and result.error is None
    assert result.body == expected
    assert messages_view(sdk_message(parsed)) == messages_view(expected)
