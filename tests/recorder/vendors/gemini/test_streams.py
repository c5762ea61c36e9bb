"""Stream translation between Gemini and Anthropic Messages.

Golden tests pin the event and chunk sequences of realistic streams: Gemini's thought
summaries, a text answer signed on an empty last part, parallel calls signed on the first,
usage on several chunks; Claude's thinking, text and two tool calls. The property tests
build random streams, translate them, cut the output bytes anywhere, fold them back with
the target API's reassembler (`anthropic.wire`, `gemini.wire`, the Anthropic SDK's
accumulator) and require the non-streaming translation of the folded source answer; a
Gemini stream sent through Anthropic and back must keep its text, calls and signatures on
the same parts.
"""

from __future__ import annotations

import itertools
from typing import Any

import orjson
import pytest
from google.genai import types as genai
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taplog.recorder.vendors.anthropic import wire as anthropic_messages
from taplog.recorder.vendors.gemini import wire as gemini
from taplog.recorder.vendors.gemini.stream_from_neutral import AnthropicToGeminiStream
from taplog.recorder.vendors.gemini.stream_to_neutral import GeminiToAnthropicStream
from taplog.recorder.vendors.naming import ClientTool
from tests.builders import (
    COUNTS,
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
    text_delta,
    tool_block,
)
from tests.recorder.vendors.checks import anthropic_events, sdk_message, sse_events
from tests.recorder.vendors.gemini.test_answers import (
    ASKS_THOUGHTS,
    SIG_1,
    SIG_2,
    call,
    to_gemini,
    to_messages,
)

VERSION = "gemini-3-pro-preview-11-2025"
RID = "Rt9xaPm2"


def chunk(*parts: dict, finish: str | None = None, usage: dict | None = None) -> dict:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    body: dict[str, Any] = {"candidates": [candidate]}
    if usage is not None:
        body["usageMetadata"] = usage
    return {**body, "modelVersion": VERSION, "responseId": RID}


def usage(prompt: int, candidates: int = 0, thoughts: int = 0, cached: int = 0) -> dict:
    """usageMetadata as Gemini writes it: counts that are 0 left out."""
    counts = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": candidates,
        "totalTokenCount": prompt + candidates + thoughts,
        "cachedContentTokenCount": cached,
        "thoughtsTokenCount": thoughts,
    }
    return {key: value for key, value in counts.items() if value}


def gemini_bytes(chunks: list[dict]) -> bytes:
    """A Gemini stream as Google sends it: `data:` events ended by CRLF."""
    return b"".join(b"data: " + orjson.dumps(c) + b"\r\n\r\n" for c in chunks)


def folded(chunks: list[dict]) -> dict:
    """The answer `generateContent` would have given for these chunks."""
    result = gemini.reassemble(sse_events(gemini_bytes(chunks)))
    assert result.error is None
    return result.body


def anthropic_bytes(events: list[dict]) -> bytes:
    """An Anthropic stream as Anthropic sends it: named events."""
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in events
    )


# ---------------------------------------------------------------- Gemini -> Anthropic client


def run_to_messages(chunks: list[dict], **options: Any) -> tuple[list[dict], Any, bytes]:
    stream = GeminiToAnthropicStream(model="gemini-asked-for", **options)
    raw = b"".join(b for c in chunks for b in stream.feed(c))
    return anthropic_events(raw), stream, raw


THOUGHTFUL = [  # Gemini 3 with includeThoughts: usage as running totals on every chunk
    chunk(
        {"text": "**Comparing climates**\n\nOslo", "thought": True},
        usage=usage(1200, thoughts=14, cached=1000),
    ),
    chunk({"text": " lies further north.", "thought": True}, usage=usage(1200, 0, 30, 1000)),
    chunk({"text": "Oslo is "}, usage=usage(1200, 2, 30, 1000)),
    chunk({"text": "colder."}, usage=usage(1200, 3, 30, 1000)),
    chunk({"text": "", "thoughtSignature": SIG_1}, finish="STOP", usage=usage(1200, 4, 30, 1000)),
]

PARALLEL_CALLS = [  # the signature on the first call only, the finish on a chunk of its own
    chunk({"text": "**Looking up both cities**", "thought": True}, usage=usage(300, 0, 25)),
    chunk(
        call("weather", {"city": "Oslo"}, "fc_1", SIG_1),
        call("weather", {"city": "Rome", "days": [1, 2]}, "fc_2"),
        usage=usage(300, 18, 25),
    ),
    chunk({"text": ""}, finish="STOP", usage=usage(300, 18, 25)),
]

SIGNED_FIRST = [  # Gemini 2.5: the signature on the first part, text around it unsigned
    chunk({"text": "It is", "thoughtSignature": SIG_1}),
    chunk({"text": " sunny"}),
    chunk({"text": " today."}),
    chunk({"text": "", "thoughtSignature": SIG_2}, finish="STOP", usage=usage(9, 3, 40)),
]


def started(block: dict, index: int) -> dict:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, value: dict) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": value}


def stopped(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


THINKING = {"type": "thinking", "thinking": "", "signature": "gemini."}


def thinking_delta(value: str) -> dict:
    return {"type": "thinking_delta", "thinking": value}


def signature_delta(value: str) -> dict:
    return {"type": "signature_delta", "signature": "gemini." + value}


def test_thought_summaries_and_a_signed_text_answer_become_the_anthropic_events():
    events, stream, _ = run_to_messages(THOUGHTFUL)
    assert events == [
        {
            "type": "message_start",
            "message": {
                "id": "msg_Rt9xaPm2",
                "type": "message",
                "role": "assistant",
                "model": VERSION,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        },
        started(THINKING, 0),
        delta(0, thinking_delta("**Comparing climates**\n\nOslo")),
        delta(0, thinking_delta(" lies further north.")),
        stopped(0),
        started(TEXT_BLOCK, 1),
        delta(1, text_delta("Oslo is ")),
        delta(1, text_delta("colder.")),
        stopped(1),
        started(THINKING, 2),
        delta(2, signature_delta(SIG_1)),
        stopped(2),
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {
                "input_tokens": 200,
                "output_tokens": 34,
                "cache_read_input_tokens": 1000,
                "output_tokens_details": {"thinking_tokens": 30},
            },
        },
        {"type": "message_stop"},
    ]
    assert stream.finished and stream.error is None


def test_parallel_calls_signed_on_the_first_become_tool_use_blocks():
    events, stream, _ = run_to_messages(PARALLEL_CALLS)
    assert events[1:-2] == [
        started(THINKING, 0),
        delta(0, thinking_delta("**Looking up both cities**")),
        stopped(0),
        started(THINKING, 1),
        delta(1, signature_delta(SIG_1)),
        stopped(1),
        started({"type": "tool_use", "id": "fc_1", "name": "weather", "input": {}}, 2),
        delta(2, {"type": "input_json_delta", "partial_json": '{"city":"Oslo"}'}),
        stopped(2),
        started({"type": "tool_use", "id": "fc_2", "name": "weather", "input": {}}, 3),
        delta(3, {"type": "input_json_delta", "partial_json": '{"city":"Rome","days":[1,2]}'}),
        stopped(3),
    ]
    assert events[-2]["delta"]["stop_reason"] == "tool_use"
    assert events[-2]["usage"] == {
        "input_tokens": 300,
        "output_tokens": 43,
        "output_tokens_details": {"thinking_tokens": 25},
    }
    assert stream.finished


def test_a_signed_piece_is_a_part_of_its_own_and_the_text_after_it_a_new_block():
    events, _, _ = run_to_messages(SIGNED_FIRST)
    starts = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "text", "thinking"]
    texts = [e["delta"]["text"] for e in events if e.get("delta", {}).get("type") == "text_delta"]
    assert texts == ["It is", " sunny", " today."]


def test_calls_without_ids_and_tool_names_come_back_as_the_whole_answer_s():
    chunks = [
        chunk(call("w_1", {}), call("now", {}), usage=usage(5)),
        chunk(call("w_1", {"city": "Oslo"}), finish="STOP"),
    ]
    tools = {"w_1": ClientTool("weather.now")}
    events, _, _ = run_to_messages(chunks, tools=tools)
    blocks = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [(b["id"], b["name"]) for b in blocks] == [
        ("call_Rt9xaPm2_0", "weather.now"),
        ("call_Rt9xaPm2_1", "now"),
        ("call_Rt9xaPm2_2", "weather.now"),
    ]
    whole = to_messages(folded(chunks), model="gemini-asked-for", tools=tools)
    assert [(b["id"], b["name"]) for b in whole["content"]] == [
        (b["id"], b["name"]) for b in blocks
    ]


def test_a_blocked_prompt_streams_an_empty_refusal():
    blocked = {
        "promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": usage(40),
        "modelVersion": VERSION,
        "responseId": RID,
    }
    events, stream, _ = run_to_messages([blocked])
    assert [e["type"] for e in events] == ["message_start", "message_delta", "message_stop"]
    assert events[1]["delta"]["stop_reason"] == "refusal"
    assert events[1]["usage"] == {"input_tokens": 40, "output_tokens": 0}
    assert stream.finished


def test_chunks_after_the_finish_are_ignored_and_a_stream_without_one_is_not_finished():
    stream = GeminiToAnthropicStream(model="gemini-asked-for")
    for c in THOUGHTFUL:
        stream.feed(c)
    assert stream.finished and stream.feed(chunk({"text": "more"})) == []
    events, cut, _ = run_to_messages(THOUGHTFUL[:-1])
    assert not cut.finished and cut.error is None
    assert events[-1] == delta(1, text_delta("colder."))


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            {"code": 429, "message": "Quota exceeded.", "status": "RESOURCE_EXHAUSTED"},
            "rate_limit_error",
        ),
        (
            {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"},
            "overloaded_error",
        ),
        (
            {"code": 400, "message": "Bad part.", "status": "INVALID_ARGUMENT"},
            "invalid_request_error",
        ),
        ({"code": 500, "message": "Internal error.", "status": "INTERNAL"}, "api_error"),
        ({"code": 503, "message": "The model is overloaded."}, "overloaded_error"),
    ],
)
def test_an_error_chunk_mid_stream_becomes_an_anthropic_error_event_and_ends_it(error, kind):
    events, stream, raw = run_to_messages([THOUGHTFUL[0], {"error": error}, THOUGHTFUL[1]])
    assert events[-1] == {"type": "error", "error": {"type": kind, "message": error["message"]}}
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "error",
    ]
    assert stream.error == events[-1]["error"] and not stream.finished
    assert stream.feed(THOUGHTFUL[-1]) == []
    result = anthropic_messages.reassemble(sse_events(raw))
    assert result.error == stream.error and not result.complete


@pytest.mark.parametrize("chunks", [THOUGHTFUL, PARALLEL_CALLS, SIGNED_FIRST])
def test_a_gemini_stream_folds_into_the_translation_of_its_folded_answer(chunks):
    expected = to_messages(folded(chunks), model="gemini-asked-for")
    _, stream, raw = run_to_messages(chunks)
    assert stream.finished
    result = anthropic_messages.reassemble(sse_events(raw))
    assert result.complete and result.body == expected
    assert sdk_message(sse_events(raw))["content"] == expected["content"]


# ---------------------------------------------------------------- property: Gemini -> Anthropic

SIGNATURES = st.sampled_from([SIG_1, SIG_2, "U0lHMw=="])
ROUND_TRIP_FINISHES = ["STOP", "MAX_TOKENS", "SAFETY"]
FINISHES = [*ROUND_TRIP_FINISHES, "OTHER", "MALFORMED_FUNCTION_CALL", "RECITATION"]


@st.composite
def gemini_parts(draw: Any, ids: bool) -> list[dict]:
    """A random answer's parts as the chunks bring them: text and thought pieces (some
    empty), signed text and thoughts, calls (with ids if `ids`, else some without), maybe
    a signed empty part last."""
    parts: list[dict] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["text", "thought", "signed", "call"]))
        if kind == "call":
            call_id = f"fc_{len(parts)}" if ids or draw(st.booleans()) else None
            signature = draw(SIGNATURES) if draw(st.booleans()) else None
            parts.append(call(draw(NAMES), draw(INPUTS), call_id, signature))
            continue
        part: dict[str, Any] = {"text": draw(st.text(max_size=12))}
        if kind == "signed":
            part = {"text": draw(st.text(min_size=1, max_size=12))}
            part["thoughtSignature"] = draw(SIGNATURES)
        if kind == "thought" or (kind == "signed" and draw(st.booleans())):
            part["thought"] = True
        parts.append(part)
    if draw(st.booleans()):
        parts.append({"text": "", "thoughtSignature": draw(SIGNATURES)})
    return parts


@st.composite
def gemini_streams(draw: Any, ids: bool = False, finishes: list[str] = FINISHES) -> list[dict]:
    """The chunks of a random Gemini answer: its parts in random groups (some chunks with
    none, some with usage only), usage on some chunks (the last counts), the finish reason
    on the last chunk."""
    parts = draw(gemini_parts(ids))
    cuts = sorted(draw(st.lists(st.integers(0, len(parts)), max_size=5)))
    edges = [0, *cuts, len(parts)]
    prompt, cached = draw(st.integers(1, 5000)), draw(COUNTS)
    chunks = []
    for k, (a, z) in enumerate(itertools.pairwise(edges)):
        last = k == len(edges) - 2
        counts = usage(prompt + cached, draw(COUNTS), draw(COUNTS), cached)
        body = chunk(
            *parts[a:z],
            finish=draw(st.sampled_from(finishes)) if last else None,
            usage=counts if draw(st.booleans()) else None,
        )
        body["responseId"] = "r-" + str(len(parts))
        if not parts[a:z] and not last and draw(st.booleans()):
            del body["candidates"]  # a chunk with usage only
        chunks.append(body)
    return chunks


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=gemini_streams(), data=st.data())
def test_a_gemini_stream_translates_like_its_folded_answer(chunks, data):
    expected = to_messages(folded(chunks), model="gemini-asked-for")
    stream = GeminiToAnthropicStream(model="gemini-asked-for")
    raw = b"".join(b for c in chunks for b in stream.feed(c))
    assert stream.finished
    parsed = sse_events(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    result = anthropic_messages.reassemble(parsed)
    assert result.complete and result.error is None
    assert result.body == expected
    assert sdk_message(parsed)["content"] == expected["content"]


# ---------------------------------------------------------------- Anthropic -> Gemini client


def run_to_gemini(
    events: list[dict], request: dict | None = None, **options: Any
) -> tuple[list[dict], AnthropicToGeminiStream, bytes]:
    stream = AnthropicToGeminiStream(request=request or {"contents": []}, model=VERSION, **options)
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    chunks = [orjson.loads(e.data) for e in sse_events(raw)] if stream.sse else orjson.loads(raw)
    for body in chunks:  # a Gemini client parses every chunk
        if "error" not in body:
            genai.GenerateContentResponse.model_validate(body)
    return chunks, stream, raw


CLAUDE_TOOL_TURN = [
    message_start(cache_read_input_tokens=100),
    block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
    block_delta(0, {"type": "thinking_delta", "thinking": "Two cities, "}),
    block_delta(0, {"type": "thinking_delta", "thinking": "two calls."}),
    block_delta(0, {"type": "signature_delta", "signature": "EqQBCkYIBxgCKkA"}),
    block_stop(0),
    {"type": "ping"},
    block_start(1, TEXT_BLOCK),
    block_delta(1, text_delta("Checking ")),
    block_delta(1, text_delta("both.")),
    block_stop(1),
    block_start(2, tool_block("toolu_01A", "weather")),
    block_delta(2, json_delta('{"city":')),
    block_delta(2, json_delta('"Oslo"}')),
    block_stop(2),
    block_start(3, tool_block("toolu_01B", "weather")),
    block_delta(3, json_delta("")),
    block_stop(3),
    message_delta("tool_use", 40),
    MESSAGE_STOP,
]


def gemini_chunk(*parts: dict, **extra: Any) -> dict:
    candidate = {"content": {"role": "model", "parts": list(parts)}, **extra, "index": 0}
    return {"candidates": [candidate], "modelVersion": "claude-served", "responseId": "01"}


def test_claude_s_thinking_text_and_calls_become_gemini_chunks():
    chunks, stream, _ = run_to_gemini(CLAUDE_TOOL_TURN, ASKS_THOUGHTS)
    last = gemini_chunk({"text": ""}, finishReason="STOP")
    last["usageMetadata"] = {
        "promptTokenCount": 110,
        "candidatesTokenCount": 40,
        "totalTokenCount": 150,
        "cachedContentTokenCount": 100,
    }
    assert chunks == [
        gemini_chunk({"text": "Two cities, ", "thought": True}),
        gemini_chunk({"text": "two calls.", "thought": True}),
        gemini_chunk({"text": "Checking "}),
        gemini_chunk({"text": "both."}),
        gemini_chunk(call("weather", {"city": "Oslo"}, "toolu_01A")),
        gemini_chunk(call("weather", {}, "toolu_01B")),
        last,
    ]
    assert stream.finished and stream.error is None


def test_claude_s_thinking_is_not_sent_unless_the_request_asked_for_thoughts():
    chunks, _, _ = run_to_gemini(CLAUDE_TOOL_TURN)
    parts = [part for body in chunks for part in body["candidates"][0]["content"]["parts"]]
    assert not any(part.get("thought") for part in parts)
    assert parts[0] == {"text": "Checking "}


def test_the_json_array_framing_parses_as_the_list_of_chunks():
    chunks, _, _ = run_to_gemini(CLAUDE_TOOL_TURN, ASKS_THOUGHTS)
    stream = AnthropicToGeminiStream(request=ASKS_THOUGHTS, model=VERSION, sse=False)
    pieces = [b for event in CLAUDE_TOOL_TURN for b in stream.feed(event["type"], event)]
    assert pieces[0].startswith(b"[{") and all(p.startswith(b",{") for p in pieces[1:])
    assert pieces[-1].endswith(b"}]")
    assert orjson.loads(b"".join(pieces)) == chunks


@pytest.mark.parametrize(
    ("kind", "code", "status"),
    [
        ("overloaded_error", 503, "UNAVAILABLE"),
        ("rate_limit_error", 429, "RESOURCE_EXHAUSTED"),
        ("invalid_request_error", 400, "INVALID_ARGUMENT"),
        ("api_error", 500, "INTERNAL"),
    ],
)
@pytest.mark.parametrize("sse", [True, False])
def test_an_anthropic_error_mid_stream_becomes_a_gemini_error_chunk_and_ends_it(
    kind, code, status, sse
):
    events = [
        message_start(),
        block_start(0, TEXT_BLOCK),
        block_delta(0, text_delta("Hi")),
        {"type": "error", "error": {"type": kind, "message": "Overloaded"}},
        block_delta(0, text_delta(" there")),
        MESSAGE_STOP,
    ]
    chunks, stream, raw = run_to_gemini(events, sse=sse)
    assert chunks[0] == gemini_chunk({"text": "Hi"})
    assert chunks[1:] == [
        {
            "error": {
                "code": code,
                "message": "Overloaded",
                "status": status,
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": kind}],
            }
        }
    ]
    assert stream.error == chunks[1]["error"] and not stream.finished
    if sse:
        result = gemini.reassemble(sse_events(raw))
        assert result.error == chunks[1] and not result.complete


def tagged_thinking(index: int, pieces: list[str], signature: str, start: str) -> list[dict]:
    """A thinking block's events; `start` is the signature its start carries."""
    block = {"type": "thinking", "thinking": "", "signature": start}
    deltas = [block_delta(index, thinking_delta(p)) for p in pieces]
    signed = block_delta(index, {"type": "signature_delta", "signature": signature})
    return [block_start(index, block), *deltas, signed, block_stop(index)]


def test_gemini_tagged_blocks_go_out_whole_on_the_parts_they_sign():
    """Only Gemini's own answers carry tagged blocks (through another client's history):
    a signed block and the block a signature goes to are held and sent whole."""
    events = [
        message_start(),
        *tagged_thinking(0, ["pl", "an"], "gemini." + SIG_1, start="gemini."),
        *tagged_thinking(1, [], "gemini." + SIG_2, start="gemini."),
        block_start(2, TEXT_BLOCK),
        block_delta(2, text_delta("Hello ")),
        block_delta(2, text_delta("there.")),
        block_stop(2),
        block_start(3, TEXT_BLOCK),
        block_delta(3, text_delta("More.")),
        block_stop(3),
        *tagged_thinking(4, [], "gemini.U0lHMw==", start="gemini."),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
    answer = anthropic_messages.reassemble(sse_events(anthropic_bytes(events))).body
    chunks, _, _ = run_to_gemini(events)
    assert folded(chunks)["candidates"][0]["content"]["parts"] == [
        {"text": "plan", "thought": True, "thoughtSignature": SIG_1},
        {"text": "Hello there.", "thoughtSignature": SIG_2},
        {"text": "More."},
        {"text": "", "thoughtSignature": "U0lHMw=="},
    ]
    assert folded(chunks) == to_gemini(answer)


@pytest.mark.parametrize("request_body", [ASKS_THOUGHTS, {"contents": []}])
def test_a_block_tagged_only_by_its_signature_delta_signs_the_next_part(request_body):
    events = [
        message_start(),
        *tagged_thinking(0, ["plan"], "gemini." + SIG_1, start=""),
        block_start(1, tool_block("fc_1", "now")),
        block_stop(1),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    chunks, _, _ = run_to_gemini(events, request_body)
    thought = [{"text": "plan", "thought": True}] if request_body is ASKS_THOUGHTS else []
    assert folded(chunks)["candidates"][0]["content"]["parts"] == [
        *thought,
        call("now", {}, "fc_1", SIG_1),
        {"text": ""},
    ]


def test_a_call_cut_by_max_tokens_is_left_out():
    events = [
        message_start(),
        block_start(0, tool_block("toolu_01A", "write")),
        block_delta(0, json_delta('{"path":"a.txt","content":"hel')),
        block_stop(0),
        message_delta("max_tokens"),
        MESSAGE_STOP,
    ]
    chunks, _, _ = run_to_gemini(events)
    assert [c["candidates"][0]["content"]["parts"] for c in chunks] == [[{"text": ""}]]
    assert chunks[0]["candidates"][0]["finishReason"] == "MAX_TOKENS"


def test_tool_names_go_back_to_the_client_s():
    events = [message_start(), block_start(0, tool_block("toolu_1", "w_1")), block_stop(0)]
    chunks, _, _ = run_to_gemini(events, tools={"w_1": ClientTool("weather.now")})
    assert chunks[0]["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == (
        "weather.now"
    )


# ---------------------------------------------------------------- property: Anthropic -> Gemini


def without_closing_part(body: dict) -> dict:
    """A folded stream without the empty text part a stream's last chunk brings, when it
    stayed a part of its own (after a call or a thought)."""
    parts = body["candidates"][0]["content"]["parts"]
    if len(parts) > 1 and parts[-1] == {"text": ""}:
        body["candidates"][0]["content"]["parts"] = parts[:-1]
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=anthropic_answers(), thoughts=st.booleans(), data=st.data())
def test_an_anthropic_stream_translates_like_its_non_stream_answer(answer, thoughts, data):
    message, events = answer
    request = ASKS_THOUGHTS if thoughts else {"contents": []}
    expected = to_gemini(message, request)
    _, stream, raw = run_to_gemini(events, request)
    assert stream.finished
    parsed = sse_events(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    result = gemini.reassemble(parsed)
    assert result.complete and result.error is None
    assert without_closing_part(result.body) == expected


# ---------------------------------------------------------------- round trip through Anthropic


def gemini_view(body: dict) -> dict:
    """What a Gemini client keeps of an answer: its parts, with empty unsigned text left
    out and the unsigned text pieces around it joined again (they carry nothing), the
    finish reason, the counts that are not 0, the model and the id."""
    parts: list[dict] = []
    for part in body["candidates"][0]["content"]["parts"]:
        plain = set(part) <= {"text", "thought"}
        if plain and not part["text"]:
            continue
        last = parts[-1] if parts else None
        if (
            plain
            and last
            and set(last) <= {"text", "thought"}
            and last.get("thought") == part.get("thought")
        ):
            parts[-1] = {**last, "text": last["text"] + part["text"]}
        else:
            parts.append(part)
    counts = body.get("usageMetadata") or {}
    return {
        "parts": parts,
        "finish": body["candidates"][0].get("finishReason"),
        "usage": {key: value for key, value in counts.items() if value},
        "model": body["modelVersion"],
        "id": body["responseId"],
    }


def round_trip(chunks: list[dict], request: dict) -> tuple[list[dict], AnthropicToGeminiStream]:
    """Gemini chunks sent to an Anthropic client, its events sent on to a Gemini client."""
    _, _, raw = run_to_messages(chunks)
    back = AnthropicToGeminiStream(request=request, model="claude-unused")
    out = b"".join(b for e in sse_events(raw) for b in back.feed(e.event, orjson.loads(e.data)))
    return [orjson.loads(e.data) for e in sse_events(out)], back


@pytest.mark.parametrize("chunks", [THOUGHTFUL, PARALLEL_CALLS, SIGNED_FIRST])
@pytest.mark.parametrize("request_body", [ASKS_THOUGHTS, {"contents": []}])
def test_a_gemini_stream_comes_back_through_anthropic_with_its_parts_and_signatures(
    chunks, request_body
):
    again, back = round_trip(chunks, request_body)
    assert back.finished
    assert folded(again) == folded(chunks)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=gemini_streams(ids=True, finishes=ROUND_TRIP_FINISHES))
def test_any_gemini_stream_with_call_ids_comes_back_through_anthropic(chunks):
    again, back = round_trip(chunks, {"contents": []})
    assert back.finished
    assert gemini_view(folded(again)) == gemini_view(folded(chunks))
