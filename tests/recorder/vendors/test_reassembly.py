"""Streams folded back into the non-streaming body, for each API, whatever the chunking.

Fixtures are hand-written in the vendors' exact wire formats (docs/protocols.md sections 1-3);
where the installed SDK has an offline accumulator, the result is cross-checked against it.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taplog.recorder.vendors.anthropic import wire as anthropic_messages
from taplog.recorder.vendors.openai_chat import wire as openai_chat
from taplog.recorder.vendors.openai_responses import wire as openai_responses
from taplog.recorder.vendors.sse import Reassembled, SseEvent, SseSplitter, Summary, parse_block
from tests.builders import tool_call


def data_stream(objs: list[Any], done: bool = True) -> bytes:
    """OpenAI Chat framing: ``data:`` only, then ``[DONE]``."""
    out = b"".join(b"data: " + orjson.dumps(o) + b"\n\n" for o in objs)
    return out + (b"data: [DONE]\n\n" if done else b"")


def named_stream(objs: list[dict]) -> bytes:
    """Responses / Anthropic framing: ``event: <type>`` plus ``data:`` with the same type."""
    return b"".join(
        b"event: " + o["type"].encode() + b"\ndata: " + orjson.dumps(o) + b"\n\n" for o in objs
    )


def parse(raw: bytes, cuts: Sequence[int] = ()) -> list[SseEvent]:
    """Split at the given offsets, then SseSplitter -> parse_block, as the proxy does."""
    splitter = SseSplitter()
    points = sorted({c % (len(raw) + 1) for c in cuts})
    edges = [0, *points, len(raw)]
    blocks = [b for a, z in itertools.pairwise(edges) for b in splitter.feed(raw[a:z])]
    blocks.append(splitter.flush())
    return [e for e in map(parse_block, blocks) if e is not None]


def drop_nones(value: Any, drop: frozenset[str] = frozenset()) -> Any:
    """For SDK cross-checks: SDK models add null defaults and helper keys the wire lacks."""
    if isinstance(value, dict):
        return {k: drop_nones(v, drop) for k, v in value.items() if v is not None and k not in drop}
    if isinstance(value, list):
        return [drop_nones(v, drop) for v in value]
    return value


# --- OpenAI Chat Completions --------------------------------------------------------

HEAD = {"id": "chatcmpl-9", "created": 1767225600, "model": "gpt-4o-2024-08-06"}
HEAD |= {"object": "chat.completion.chunk", "system_fingerprint": "fp_7", "service_tier": "default"}
USAGE = {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240}
USAGE |= {"prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0}}
USAGE |= {"completion_tokens_details": {"reasoning_tokens": 16, "audio_tokens": 0}}


def chunk(delta: dict, finish: str | None = None, index: int = 0, logprobs: Any = None) -> dict:
    choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    return {**HEAD, "choices": [choice], "usage": None}


def tool_start(index: int, call_id: str, name: str) -> dict:
    fn = {"name": name, "arguments": ""}
    return chunk(
        {"tool_calls": [{"index": index, "id": call_id, "type": "function", "function": fn}]}
    )


def tool_args(index: int, fragment: str) -> dict:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})


CHAT_TEXT = [
    chunk({"role": "assistant", "content": "", "refusal": None}),
    chunk({"content": "Hel"}),
    chunk({"content": "lo!"}),
    chunk({}, "stop"),
    {**HEAD, "choices": [], "usage": USAGE},
]
CHAT_TOOLS = [
    chunk({"role": "assistant", "content": None}),
    tool_start(0, "call_a", "get_weather"),
    tool_args(0, '{"ci'),
    tool_args(0, 'ty": "Paris"}'),
    tool_start(1, "call_b", "get_time"),
    tool_args(1, '{"tz":'),
    tool_args(1, ' "CET"}'),
    tool_start(2, "call_c", "list_files"),
    chunk({}, "tool_calls"),
]


def chat_body(message: dict, finish: str, usage: dict | None = None) -> dict:
    choice = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    body = {**HEAD, "object": "chat.completion", "choices": [choice], "usage": usage}
    return body


def sdk_chat(chunks: list[dict]) -> dict:
    from openai.lib.streaming.chat import ChatCompletionStreamState
    from openai.types.chat import ChatCompletionChunk

    state = ChatCompletionStreamState()
    for c in chunks:
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    snap = state.current_completion_snapshot.model_dump(mode="json", exclude_unset=True)
    return drop_nones(snap, frozenset({"index", "parsed", "parsed_arguments"}))


def test_chat_text_with_usage_chunk() -> None:
    got = openai_chat.reassemble(parse(data_stream(CHAT_TEXT)))
    message = {"role": "assistant", "content": "Hello!", "refusal": None}
    assert got == Reassembled(chat_body(message, "stop", USAGE), complete=True, error=None)
    assert drop_nones(got.body, frozenset({"index"})) == sdk_chat(CHAT_TEXT)
    summary = Summary("chatcmpl-9", "gpt-4o-2024-08-06", "stop", 1200, 40, 1024, None, 16)
    assert openai_chat.summarize(got.body) == summary


def test_chat_parallel_tool_calls_and_no_argument_tool() -> None:
    got = openai_chat.reassemble(parse(data_stream(CHAT_TOOLS)))
    calls = [
        tool_call("call_a", "get_weather", '{"city": "Paris"}'),
        tool_call("call_b", "get_time", '{"tz": "CET"}'),
        tool_call("call_c", "list_files", ""),
    ]
    message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": calls}
    assert got == Reassembled(chat_body(message, "tool_calls"), complete=True, error=None)
    assert drop_nones(got.body, frozenset({"index"})) == sdk_chat(CHAT_TOOLS)


def test_chat_logprobs_reasoning_content_and_choices_out_of_order() -> None:
    lp = [{"token": t, "logprob": -0.1, "bytes": None, "top_logprobs": []} for t in "ab"]
    chunks = [
        chunk({"role": "assistant", "reasoning_content": "Think"}, index=1),
        chunk({"reasoning_content": "ing."}, index=1),
        chunk({"content": "b"}, "stop", index=1),
        chunk({"content": "a"}, index=3, logprobs={"content": lp[:1], "refusal": None}),
        chunk({"content": "b"}, "length", index=3, logprobs={"content": lp[1:], "refusal": None}),
    ]
    first, second = openai_chat.reassemble(parse(data_stream(chunks))).body["choices"]
    message = {"role": "assistant", "content": "b", "refusal": None}
    assert first["message"] == {**message, "reasoning_content": "Thinking."}
    assert second["message"] == {**message, "content": "ab"}
    assert second["logprobs"] == {"content": lp, "refusal": None}
    assert (second["index"], second["finish_reason"]) == (3, "length")


def test_chat_refusal_is_concatenated() -> None:
    chunks = [chunk({"role": "assistant", "refusal": "I can't "}), chunk({"refusal": "help."})]
    message = openai_chat.reassemble(parse(data_stream(chunks))).body["choices"][0]["message"]
    assert message == {"role": "assistant", "content": None, "refusal": "I can't help."}


def test_chat_in_band_error_and_cut_stream() -> None:
    error = {"message": "The server had an error", "type": "server_error"}
    error |= {"param": None, "code": None}
    raw = data_stream([*CHAT_TEXT[:2], {"error": error}], done=False)
    got = openai_chat.reassemble(parse(raw + b"data: {not json\n\n"))
    assert got.error == error and not got.complete and got.unparsed == 1
    assert got.body["choices"][0]["message"]["content"] == "Hel"
    assert got.body["choices"][0]["finish_reason"] is None
    assert openai_chat.reassemble([]) == Reassembled(None, False, None)


# --- OpenAI Responses ---------------------------------------------------------------

RESP = {"id": "resp_1", "object": "response", "created_at": 1767225600, "tools": []}
RESP |= {"status": "in_progress", "model": "gpt-5-2026-08-07", "output": [], "usage": None}
RESP |= {"error": None, "incomplete_details": None, "instructions": None}
MSG = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant"}
MSG |= {"content": []}
TEXT_PART = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
FC = {"id": "fc_1", "type": "function_call", "status": "in_progress", "call_id": "call_1"}
FC |= {"name": "get_weather", "arguments": ""}
REASONING = {"id": "rs_1", "type": "reasoning", "summary": []}
R_USAGE = {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512}}
R_USAGE |= {"output_tokens": 70, "output_tokens_details": {"reasoning_tokens": 64}}
R_USAGE |= {"total_tokens": 970}
SUMMARY_DONE = {"type": "summary_text", "text": "Plan."}
PART_DONE = {**TEXT_PART, "text": "Hi there"}
ITEMS_DONE = [
    {**REASONING, "summary": [SUMMARY_DONE]},
    {**MSG, "status": "completed", "content": [PART_DONE]},
    {**FC, "status": "completed", "arguments": '{"city":"Oslo"}'},
]


def ev(kind: str, **fields: Any) -> dict:
    return {"type": f"response.{kind}", **copy.deepcopy(fields)}


def text_ev(kind: str, **fields: Any) -> dict:
    return ev(kind, output_index=1, content_index=0, item_id="msg_1", **fields)


def summary_ev(kind: str, **fields: Any) -> dict:
    return ev(kind, output_index=0, summary_index=0, item_id="rs_1", **fields)


def args_ev(kind: str, **fields: Any) -> dict:
    return ev(kind, output_index=2, item_id="fc_1", **fields)


def responses_events(final_type: str = "completed", **final: Any) -> list[dict]:
    """A reasoning summary, a text message and a function call, in the API's order."""
    done = {**RESP, "status": "completed", "output": ITEMS_DONE, "usage": R_USAGE, **final}
    events = [
        ev("created", response=RESP),
        ev("in_progress", response=RESP),
        ev("output_item.added", output_index=0, item=REASONING),
        summary_ev("reasoning_summary_part.added", part={"type": "summary_text", "text": ""}),
        summary_ev("reasoning_summary_text.delta", delta="Pla"),
        summary_ev("reasoning_summary_text.delta", delta="n."),
        summary_ev("reasoning_summary_text.done", text="Plan."),
        summary_ev("reasoning_summary_part.done", part=SUMMARY_DONE),
        ev("output_item.done", output_index=0, item=ITEMS_DONE[0]),
        ev("output_item.added", output_index=1, item=MSG),
        text_ev("content_part.added", part=TEXT_PART),
        text_ev("output_text.delta", delta="Hi", logprobs=[]),
        text_ev("output_text.delta", delta=" there", logprobs=[]),
        text_ev("output_text.done", text="Hi there", logprobs=[]),
        text_ev("content_part.done", part=PART_DONE),
        ev("output_item.done", output_index=1, item=ITEMS_DONE[1]),
        ev("output_item.added", output_index=2, item=FC),
        args_ev("function_call_arguments.delta", delta='{"city":'),
        args_ev("function_call_arguments.delta", delta='"Oslo"}'),
        args_ev("function_call_arguments.done", arguments='{"city":"Oslo"}'),
        ev("output_item.done", output_index=2, item=ITEMS_DONE[2]),
        ev(final_type, response=done),
    ]
    return [{**e, "sequence_number": n} for n, e in enumerate(events)]


def test_responses_completed_body_is_the_terminal_response() -> None:
    events = responses_events()
    got = openai_responses.reassemble(parse(named_stream(events)))
    assert got == Reassembled(events[-1]["response"], complete=True, error=None)
    summary = Summary("resp_1", "gpt-5-2026-08-07", "completed", 900, 70, 512, None, 64)
    assert openai_responses.summarize(got.body) == summary


def test_responses_terminal_without_output_is_filled_from_done_items() -> None:
    events = responses_events(output=None)
    got = openai_responses.reassemble(parse(named_stream(events)))
    assert got.body == {**events[-1]["response"], "output": ITEMS_DONE}


def test_responses_incomplete_and_failed() -> None:
    reason = {"reason": "max_output_tokens"}
    events = responses_events("incomplete", status="incomplete", incomplete_details=reason)
    got = openai_responses.reassemble(parse(named_stream(events)))
    assert got.complete
    assert openai_responses.summarize(got.body).finish_reason == "max_output_tokens"
    error = {"code": "server_error", "message": "boom"}
    events = responses_events("failed", status="failed", error=error)
    got = openai_responses.reassemble(parse(named_stream(events)))
    assert got.complete and got.error == error
    assert openai_responses.summarize(got.body).finish_reason == "failed"


def test_responses_cut_stream_is_stitched_from_deltas() -> None:
    skip = {"output_item.done", "output_text.done", "content_part.done", "completed"}
    skip |= {"function_call_arguments.done", "reasoning_summary_text.done"}
    skip |= {"reasoning_summary_part.done"}
    cut = [e for e in responses_events() if e["type"].removeprefix("response.") not in skip]
    got = openai_responses.reassemble(parse(named_stream(cut)))
    stitched = [ITEMS_DONE[0], *({**item, "status": "in_progress"} for item in ITEMS_DONE[1:])]
    assert got == Reassembled({**RESP, "output": stitched}, complete=False, error=None)


NOTE = {"type": "url_citation", "url": "https://example.com", "start_index": 0, "end_index": 6}


def test_responses_error_event_unknown_events_and_missing_items() -> None:
    error = {"type": "error", "code": "ERR_SOMETHING", "message": "Something went wrong"}
    error |= {"param": None, "sequence_number": 4}
    events = [
        ev("created", response=RESP),
        ev("future_thing.delta", output_index=0, delta="x"),
        ev("output_text.delta", output_index=5, content_index=2, delta="orphan"),
        ev("function_call_arguments.delta", output_index=3, delta="{}"),
        ev("output_text.annotation.added", output_index=5, content_index=2, annotation=NOTE),
        error,
    ]
    got = openai_responses.reassemble(parse(named_stream(events)))
    assert got.error == error and not got.complete
    part = {"type": "output_text", "text": "orphan", "annotations": [NOTE]}
    assert got.body["output"] == [
        {"type": "function_call", "arguments": "{}"},
        {"type": "message", "role": "assistant", "content": [part]},
    ]


# --- Anthropic Messages -------------------------------------------------------------

A_USAGE = {"input_tokens": 30, "cache_creation_input_tokens": 200}
A_USAGE |= {"cache_read_input_tokens": 1000, "output_tokens": 1, "service_tier": "standard"}
A_MESSAGE = {"id": "msg_01", "type": "message", "role": "assistant", "content": []}
A_MESSAGE |= {"model": "claude-sonnet-4-5", "stop_reason": None, "stop_sequence": None}
A_START = {"type": "message_start", "message": {**A_MESSAGE, "usage": A_USAGE}}


def block(index: int, kind: str, **fields: Any) -> dict:
    content_block = {"type": kind, **fields}
    return {"type": "content_block_start", "index": index, "content_block": content_block}


def delta(index: int, kind: str, **fields: Any) -> dict:
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, **fields}}


def stop(index: int) -> dict:
    return {"type": "content_block_stop", "index": index}


def a_end(reason: str, **usage: Any) -> list[dict]:
    message_delta = {"stop_reason": reason, "stop_sequence": None}
    end = {"type": "message_delta", "delta": message_delta, "usage": usage}
    return [end, {"type": "message_stop"}]


SIGNATURE = "EqQBCgIYAhIM1gbcDa"
ANTHROPIC_TOOLS = [
    A_START,
    {"type": "ping"},
    block(0, "thinking", thinking="", signature=""),
    delta(0, "thinking_delta", thinking="The user wants "),
    delta(0, "thinking_delta", thinking="the weather."),
    delta(0, "signature_delta", signature=SIGNATURE),
    stop(0),
    block(1, "text", text=""),
    delta(1, "text_delta", text="Checking."),
    stop(1),
    block(2, "tool_use", id="toolu_1", name="get_weather", input={}),
    delta(2, "input_json_delta", partial_json=""),
    delta(2, "input_json_delta", partial_json='{"city": "Par'),
    delta(2, "input_json_delta", partial_json='is"}'),
    stop(2),
    block(3, "tool_use", id="toolu_2", name="list_files", input={}),
    stop(3),
    block(4, "tool_use", id="toolu_3", name="now", input={}),
    delta(4, "input_json_delta", partial_json=""),
    stop(4),
    *a_end("tool_use", output_tokens=95),
]
A_CONTENT = [
    {"type": "thinking", "thinking": "The user wants the weather.", "signature": SIGNATURE},
    {"type": "text", "text": "Checking."},
    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
    {"type": "tool_use", "id": "toolu_2", "name": "list_files", "input": {}},
    {"type": "tool_use", "id": "toolu_3", "name": "now", "input": {}},
]


def sdk_anthropic(events: list[dict]) -> dict:
    from anthropic.lib.streaming._messages import accumulate_event

    snap, bufs = None, {}
    for event in copy.deepcopy(events):
        if event["type"] not in {"ping", "message_stop"}:
            snap = accumulate_event(event=event, current_snapshot=snap, json_bufs=bufs)
    return drop_nones(snap.model_dump(mode="json", exclude_unset=True))


def test_anthropic_thinking_tools_and_usage() -> None:
    got = anthropic_messages.reassemble(parse(named_stream(ANTHROPIC_TOOLS)))
    usage = {**A_USAGE, "output_tokens": 95}
    expected = {**A_MESSAGE, "content": A_CONTENT, "stop_reason": "tool_use", "usage": usage}
    assert got == Reassembled(expected, complete=True, error=None)
    assert drop_nones(got.body) == sdk_anthropic(ANTHROPIC_TOOLS)
    summary = Summary("msg_01", "claude-sonnet-4-5", "tool_use", 1230, 95, 1000, 200, None)
    assert anthropic_messages.summarize(got.body) == summary


def test_anthropic_citations_redacted_thinking_server_tools() -> None:
    cite = {"type": "char_location", "cited_text": "Sky is blue.", "document_index": 0}
    cite |= {"document_title": None, "start_char_index": 0, "end_char_index": 12}
    result = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}
    search = {"id": "srvtoolu_1", "name": "web_search"}
    usage = {"input_tokens": 31, "output_tokens": 50, "cache_read_input_tokens": None}
    usage |= {"server_tool_use": {"web_search_requests": 1}}
    events = [
        A_START,
        block(0, "redacted_thinking", data="EmwKAhgB"),
        stop(0),
        block(1, "server_tool_use", **search, input={}),
        delta(1, "input_json_delta", partial_json='{"query": "sky"}'),
        stop(1),
        {"type": "content_block_start", "index": 2, "content_block": result},
        stop(2),
        block(3, "text", text="", citations=[]),
        delta(3, "citations_delta", citation=cite),
        delta(3, "text_delta", text="Blue."),
        stop(3),
        *a_end("end_turn", **usage),
    ]
    got = anthropic_messages.reassemble(parse(named_stream(events)))
    assert got.body["content"] == [
        {"type": "redacted_thinking", "data": "EmwKAhgB"},
        {"type": "server_tool_use", **search, "input": {"query": "sky"}},
        result,
        {"type": "text", "text": "Blue.", "citations": [cite]},
    ]
    del usage["cache_read_input_tokens"]  # null in message_delta: message_start's value stays
    assert got.body["usage"] == {**A_USAGE, **usage}
    assert drop_nones(got.body) == sdk_anthropic(events)


def test_anthropic_error_after_200_and_cut_tool_input() -> None:
    error = {"type": "overloaded_error", "message": "Overloaded"}
    events = [*ANTHROPIC_TOOLS[:13], {"type": "error", "error": error, "request_id": "req_1"}]
    got = anthropic_messages.reassemble(parse(named_stream(events)))
    assert got.error == error and not got.complete
    tool = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    assert got.body["content"][2] == {**tool, "input_raw": '{"city": "Par'}
    assert got.body["stop_reason"] is None


def test_anthropic_bad_json_sparse_indexes_and_orphan_deltas() -> None:
    events = [
        A_START,
        block(2, "tool_use", id="toolu_9", name="f", input={}),
        delta(2, "input_json_delta", partial_json="{oops"),
        stop(2),
        block(0, "text", text="A"),
        delta(7, "text_delta", text="orphan"),
        delta(8, "future_delta", words="x", count=3),
        stop(9),
        *a_end("end_turn", output_tokens=3),
    ]
    raw = named_stream(events) + b"event: ping\ndata: \n\n"
    got = anthropic_messages.reassemble(parse(raw))
    assert got.complete and got.unparsed == 1
    assert got.body["content"] == [
        {"type": "text", "text": "A"},
        {"type": "tool_use", "id": "toolu_9", "name": "f", "input": {}, "input_raw": "{oops"},
        {"type": "text", "text": "orphan"},
        {"words": "x"},
    ]


# --- summaries never raise --------------------------------------------------------------

EMPTY = Summary(None, None, None, None, None, None, None, None)


@pytest.mark.parametrize("module", [openai_chat, openai_responses, anthropic_messages])
@pytest.mark.parametrize(
    "body",
    [
        None,
        {},
        [],
        "x",
        {"usage": "x", "choices": [1], "id": 3},
        {"usage": {"input_tokens": True, "prompt_tokens": "9"}},
    ],
)
def test_summarize_odd_input(module: Any, body: Any) -> None:
    assert module.summarize(body) == EMPTY


# --- chunk boundaries never matter ---------------------------------------------------

STREAMS = [
    (openai_chat, data_stream(CHAT_TEXT) + data_stream(CHAT_TOOLS)),
    (openai_responses, named_stream(responses_events())),
    (openai_responses, named_stream(responses_events()[:-3])),
    (anthropic_messages, named_stream(ANTHROPIC_TOOLS)),
    (anthropic_messages, named_stream(ANTHROPIC_TOOLS[:14])),
]


@pytest.mark.parametrize(("module", "raw"), STREAMS)
@given(cuts=st.lists(st.integers(0, 100_000), max_size=40), crlf=st.booleans())
@settings(max_examples=60, deadline=None)
def test_random_splits_reassemble_the_same(module: Any, raw: bytes, cuts: list, crlf: bool) -> None:
    whole = module.reassemble(parse(raw))
    assert whole.body is not None
    if crlf:
        raw = raw.replace(b"\n", b"\r\n")
    assert module.reassemble(parse(raw, cuts)) == whole
