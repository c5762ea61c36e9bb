"""Codex's namespace, freeform and hosted web search tools, OpenAI Responses -> Anthropic,
and Claude Code's web search, Anthropic -> OpenAI Responses.

Requests are checked against the official SDKs' request types (`to_anthropic`,
`to_responses`), answers parsed by the SDK's own models into its typed items
(`ResponseFunctionToolCall` with its ``namespace``, `ResponseCustomToolCall`,
`ResponseFunctionWebSearch`; `anthropic.types.Message`). The property test streams random
answers that mix all of them and requires exactly the items of the non-streaming
translation, through taplog's reassembler and the SDK's accumulator (the Responses ->
Anthropic property test in `test_translate_responses_streams` mixes in web searches).
"""

from __future__ import annotations

from typing import Any

import openai
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
)

from taplog.recorder.vendors.naming import ClientTool, fit
from taplog.recorder.vendors.openai_chat.request_from_neutral import messages_to_chat
from taplog.recorder.vendors.openai_responses import wire as openai_responses
from taplog.recorder.vendors.openai_responses.answers import messages_answer_to_responses
from taplog.recorder.vendors.openai_responses.request_to_neutral import responses_to_messages
from taplog.recorder.vendors.openai_responses.stream_from_neutral import AnthropicToResponsesStream
from taplog.recorder.vendors.translation import Untranslatable
from tests.builders import (
    CLAUDE_WEATHER,
    CREATED,
    MESSAGE_STOP,
    REQUEST,
    RESPONSE_ID,
    RESPONSES_WEATHER,
    a_message,
    a_response,
    a_text,
    block_delta,
    block_start,
    block_stop,
    claude,
    claude_answer,
    item_events,
    json_delta,
    message_delta,
    message_start,
    numbered,
    request,
    said,
    split,
    text_delta,
    user,
)
from tests.recorder.vendors.checks import (
    check_sequence,
    deltas_add_up,
    responses_to_anthropic,
    run_responses_to_messages,
    run_to_responses,
    sdk_response,
    sse_events,
    to_claude,
    to_responses,
    types,
)

GRAMMAR = 'start: "*** Begin Patch" LF hunk+ "*** End Patch" LF?'
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files. This is a FREEFORM tool.",
    "format": {"type": "grammar", "syntax": "lark", "definition": GRAMMAR},
}
SPAWN = {
    "type": "function",
    "name": "spawn_agent",
    "description": "Start a sub-agent.",
    "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
    "strict": False,
    "defer_loading": True,
}
MULTI_AGENT = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "Tools to run sub-agents.",
    "tools": [SPAWN, {"type": "custom", "name": "notes", "format": {"type": "text"}}],
}
NAMESPACED = {
    "multi_agent_v1__spawn_agent": ClientTool("spawn_agent", "multi_agent_v1"),
    "multi_agent_v1__notes": ClientTool("notes", "multi_agent_v1", freeform=True),
    "apply_patch": ClientTool("apply_patch", freeform=True),
}
SEARCH = {"type": "web_search_20250305", "name": "web_search"}
PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"


# ---------------------------------------------------------------- requests


def test_namespace_tools_are_flattened_with_the_namespace_in_name_and_description():
    result = responses_to_anthropic(
        request(user("hi"), tools=[RESPONSES_WEATHER, MULTI_AGENT, APPLY_PATCH])
    )
    tools = {tool["name"]: tool for tool in result.body["tools"]}
    assert list(tools) == [
        "weather",
        "multi_agent_v1__spawn_agent",
        "multi_agent_v1__notes",
        "apply_patch",
    ]
    spawn = tools["multi_agent_v1__spawn_agent"]
    assert spawn["description"] == (
        "Start a sub-agent.\n\nPart of the multi_agent_v1 tools: Tools to run sub-agents."
    )
    assert spawn["input_schema"] == SPAWN["parameters"]
    assert result.tools == NAMESPACED  # the answer translators give names and groups back
    assert result.dropped == ["tools[1].tools[0].defer_loading"]


def test_a_freeform_tool_takes_one_string_described_by_its_grammar():
    result = responses_to_anthropic(request(user("hi"), tools=[APPLY_PATCH, MULTI_AGENT]))
    patch, _, notes = result.body["tools"]
    assert patch["description"] == APPLY_PATCH["description"]
    schema = patch["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["input"]
    assert list(schema["properties"]) == ["input"]
    described = schema["properties"]["input"]
    assert described["type"] == "string"
    assert "lark grammar" in described["description"] and GRAMMAR in described["description"]
    text = notes["input_schema"]["properties"]["input"]["description"]
    assert "plain text" in text and "grammar" not in text
    assert notes["description"] == "Part of the multi_agent_v1 tools: Tools to run sub-agents."


def test_long_namespaced_names_are_fitted_and_mapped_back():
    group = {**MULTI_AGENT, "name": "n" * 120, "tools": [SPAWN]}
    result = responses_to_anthropic(request(user("hi"), tools=[group]))
    wire = result.body["tools"][0]["name"]
    assert wire == fit("n" * 120 + "__spawn_agent", 128) and len(wire) == 128
    assert result.tools == {wire: ClientTool("spawn_agent", "n" * 120)}


def test_two_tools_with_one_anthropic_name_are_refused():
    flat = {**RESPONSES_WEATHER, "name": "multi_agent_v1__spawn_agent"}
    with pytest.raises(Untranslatable, match=r"tools\[1\]\.tools\[0\]: its Anthropic name"):
        responses_to_messages(request(user("hi"), tools=[flat, MULTI_AGENT]), model="c")


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "custom", "name": "apply_patch"}, "apply_patch"),
        ({"type": "function", "name": "spawn_agent"}, "multi_agent_v1__spawn_agent"),
        ({"type": "custom", "name": "notes"}, "multi_agent_v1__notes"),
    ],
)
def test_a_named_tool_choice_reaches_freeform_and_namespaced_tools(choice, expected):
    body = request(user("hi"), tools=[APPLY_PATCH, MULTI_AGENT], tool_choice=choice)
    assert responses_to_anthropic(body).body["tool_choice"] == {"type": "tool", "name": expected}


def test_allowed_tools_narrow_to_the_flattened_names_and_keep_a_listed_web_search():
    allowed = [
        {"type": "custom", "name": "apply_patch"},
        {"type": "function", "name": "spawn_agent"},
    ]
    choice = {"type": "allowed_tools", "mode": "auto", "tools": allowed}
    tools = [RESPONSES_WEATHER, APPLY_PATCH, MULTI_AGENT, {"type": "web_search"}]
    result = responses_to_anthropic(request(user("hi"), tools=tools, tool_choice=choice))
    names = [tool["name"] for tool in result.body["tools"]]
    assert names == ["apply_patch", "multi_agent_v1__spawn_agent"]
    assert "tools[3] (left out: not among tool_choice.allowed_tools)" in result.dropped
    with_search = {**choice, "tools": [*allowed, {"type": "web_search"}]}
    result = responses_to_anthropic(request(user("hi"), tools=tools, tool_choice=with_search))
    assert result.body["tools"][-1] == SEARCH


@pytest.mark.parametrize("kind", ["web_search", "web_search_preview", "web_search_2025_08_26"])
def test_hosted_web_search_is_claudes_web_search(kind):
    tool = {
        "type": kind,
        "filters": {"allowed_domains": ["docs.python.org"]},
        "user_location": {"type": "approximate", "city": "Oslo", "country": "NO", "region": None},
        "search_context_size": "high",
        "external_web_access": True,
    }
    result = responses_to_anthropic(request(user("hi"), tools=[RESPONSES_WEATHER, tool]))
    assert result.body["tools"][1] == {
        **SEARCH,
        "allowed_domains": ["docs.python.org"],
        "user_location": {"type": "approximate", "city": "Oslo", "country": "NO"},
    }
    assert result.dropped == ["tools[1].search_context_size"]
    assert "web_search" not in result.tools  # a server tool: nothing to give back


def test_a_web_search_alone_is_sent_and_its_sources_are_not_recorded_as_lost():
    body = request(
        user("hi"),
        tools=[{"type": "web_search"}],
        include=["web_search_call.action.sources", "web_search_call.results"],
    )
    result = responses_to_anthropic(body)
    assert result.body["tools"] == [SEARCH]
    assert result.dropped == ["include 'web_search_call.results' (nothing of that kind comes back)"]


def test_codexs_cached_web_search_is_left_out_or_refused_saying_why():
    cached = {"type": "web_search", "external_web_access": False}
    body = request(user("hi"), tools=[RESPONSES_WEATHER, cached])
    left_out = responses_to_anthropic(body, drop_untranslatable=True)
    assert [tool["name"] for tool in left_out.body["tools"]] == ["weather"]
    assert left_out.dropped == [
        "tools[1] (web_search: left out, external_web_access: false searches OpenAI's cache "
        "only, and Claude's web search reads live pages)"
    ]
    with pytest.raises(Untranslatable, match=r"tools\[1\]: 'web_search' tools .*live pages"):
        responses_to_messages(body, model="c")


def test_history_calls_of_namespaced_and_freeform_tools_become_tool_use_and_results():
    body = request(
        user("go"),
        {"type": "function_call", "call_id": "call_1", "name": "spawn_agent"}
        | {"namespace": "multi_agent_v1", "arguments": '{"message":"hi"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "spawned"},
        {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": PATCH},
        {"type": "custom_tool_call_output", "call_id": "call_2", "output": "Done!"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"}
        | {"action": {"type": "search", "query": "taplog"}},
        said("Patched, and found taplog."),
        user("thanks"),
        tools=[MULTI_AGENT, APPLY_PATCH],
    )
    result = responses_to_anthropic(body)  # the web search item is left out even without leave-out
    calls = result.body["messages"][1]["content"]
    assert calls == [
        {"type": "tool_use", "id": "call_1", "name": "multi_agent_v1__spawn_agent"}
        | {"input": {"message": "hi"}}
    ]
    results = result.body["messages"][2]["content"]
    assert results == [{"type": "tool_result", "tool_use_id": "call_1", "content": "spawned"}]
    assert result.body["messages"][3]["content"] == [
        {"type": "tool_use", "id": "call_2", "name": "apply_patch", "input": {"input": PATCH}},
    ]
    assert result.body["messages"][4]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "call_2",
        "content": "Done!",
    }
    assert result.body["messages"][5]["content"][0]["text"] == "Patched, and found taplog."
    assert (
        "web_search_call items (left out: their findings are in the text that follows)"
        in result.dropped
    )


# ---------------------------------------------------------------- answers

CITATION = {
    "type": "web_search_result_location",
    "url": "https://taplog.test/docs",
    "title": "taplog docs",
    "cited_text": "taplog records calls.",
    "encrypted_index": "Eo8B",
}
FOUND = [
    {"type": "web_search_result", "url": "https://taplog.test/docs", "title": "taplog docs"}
    | {"encrypted_content": "EqgB", "page_age": None},
    {"type": "web_search_result", "url": "https://taplog.test/faq", "title": "FAQ"}
    | {"encrypted_content": "EqgC", "page_age": "2 days ago"},
]


def server_search(call_id: str, query: str) -> dict:
    return {
        "type": "server_tool_use",
        "id": call_id,
        "name": "web_search",
        "input": {"query": query},
    }


def search_result(call_id: str, content: Any = None) -> dict:
    content = FOUND if content is None else content
    return {"type": "web_search_tool_result", "tool_use_id": call_id, "content": content}


def cited(value: str, *citations: dict) -> dict:
    return {"type": "text", "text": value, "citations": list(citations) or None}


def to_items(answer: dict, tools: dict | None = None) -> tuple[list[dict], list[Any]]:
    """The translated items, and the same items as the openai SDK parses them."""
    body = messages_answer_to_responses(
        answer, response_id="resp_X1", created_at=CREATED, request=REQUEST, tools=tools
    )
    return body["output"], openai.types.responses.Response.model_validate(body).output


WHOLE_ANSWER = claude_answer(
    server_search("srvtoolu_1", "taplog"),
    search_result("srvtoolu_1"),
    cited("taplog records calls", CITATION, CITATION),
    cited("."),
    {"type": "tool_use", "id": "toolu_1", "name": "multi_agent_v1__spawn_agent"}
    | {"input": {"message": "hi"}},
    {"type": "tool_use", "id": "toolu_2", "name": "apply_patch", "input": {"input": PATCH}},
    stop="tool_use",
)


def test_an_answer_gives_codex_its_web_search_namespaced_call_and_freeform_call():
    items, parsed = to_items(WHOLE_ANSWER, NAMESPACED)
    search, message, dot, spawn, patch = items
    assert search == {
        "id": "ws_X1_0",
        "type": "web_search_call",
        "status": "completed",
        "action": {
            "type": "search",
            "query": "taplog",
            "sources": [
                {"type": "url", "url": "https://taplog.test/docs"},
                {"type": "url", "url": "https://taplog.test/faq"},
            ],
        },
    }
    assert message["content"][0]["annotations"] == [
        {"type": "url_citation", "start_index": 0, "end_index": 20}
        | {"url": "https://taplog.test/docs", "title": "taplog docs"}
    ]
    assert dot["content"][0]["annotations"] == []
    assert spawn == {
        "id": "fc_X1_3",
        "type": "function_call",
        "status": "completed",
        "arguments": '{"message":"hi"}',
        "call_id": "toolu_1",
        "name": "spawn_agent",
        "namespace": "multi_agent_v1",
    }
    assert patch == {
        "id": "ctc_X1_4",
        "type": "custom_tool_call",
        "status": "completed",
        "input": PATCH,
        "call_id": "toolu_2",
        "name": "apply_patch",
    }
    assert isinstance(parsed[0], ResponseFunctionWebSearch) and parsed[0].action.query == "taplog"
    assert isinstance(parsed[3], ResponseFunctionToolCall)
    assert (parsed[3].name, parsed[3].namespace) == ("spawn_agent", "multi_agent_v1")
    assert isinstance(parsed[4], ResponseCustomToolCall) and parsed[4].input == PATCH


def test_a_failed_search_is_failed_and_one_without_a_result_incomplete():
    error = {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}
    answer = claude_answer(
        server_search("srvtoolu_1", "a"),
        search_result("srvtoolu_1", error),
        server_search("srvtoolu_2", "b"),
        stop="pause_turn",
    )
    items, _ = to_items(answer)
    assert [(item["status"], item["action"]["sources"]) for item in items] == [
        ("failed", []),
        ("incomplete", []),
    ]


def test_a_freeform_call_without_the_input_wrapper_gets_its_json_as_input():
    answer = claude_answer(
        {"type": "tool_use", "id": "toolu_1", "name": "apply_patch", "input": {"patch": "x"}},
        {"type": "tool_use", "id": "toolu_2", "name": "apply_patch", "input": {}},
    )
    items, _ = to_items(answer, NAMESPACED)
    assert [item["input"] for item in items] == ['{"patch":"x"}', ""]


def test_translated_calls_replay_as_history_with_the_same_wire_names():
    first = request(user("go"), tools=[MULTI_AGENT, APPLY_PATCH, {"type": "web_search"}])
    tools = responses_to_anthropic(first).tools
    items, _ = to_items(WHOLE_ANSWER, tools)
    outputs = [
        {"type": "function_call_output", "call_id": "toolu_1", "output": "spawned"},
        {"type": "custom_tool_call_output", "call_id": "toolu_2", "output": "Done!"},
    ]
    follow_up = request(*outputs, previous_response_id="resp_X1", tools=first["tools"])
    out = responses_to_anthropic(follow_up, history=[*first["input"], *items])
    turn = out.body["messages"][1]["content"]  # the search itself is not replayed
    assert [block["type"] for block in turn] == ["text", "text", "tool_use", "tool_use"]
    assert [block.get("name") for block in turn[2:]] == [
        "multi_agent_v1__spawn_agent",
        "apply_patch",
    ]
    assert turn[3]["input"] == {"input": PATCH}
    results = out.body["messages"][2]["content"]
    assert [block["tool_use_id"] for block in results] == ["toolu_1", "toolu_2"]


# ---------------------------------------------------------------- streams


def test_a_freeform_call_streams_its_unwrapped_input_once_its_block_ends():
    wrapped = orjson.dumps({"input": PATCH}).decode()
    events = [
        message_start(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "apply_patch", "input": {}}),
        block_delta(0, json_delta(wrapped[:9])),
        block_delta(0, json_delta(wrapped[9:])),
        block_stop(0),
        message_delta("tool_use"),
        MESSAGE_STOP,
    ]
    out, stream = run_to_responses(events, tools=NAMESPACED)
    assert types(out)[2:] == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, delta, done = out[2:5]
    assert added["item"]["type"] == "custom_tool_call" and added["item"]["input"] == ""
    assert delta["delta"] == PATCH and done["input"] == PATCH
    assert delta["item_id"] == done["item_id"] == "ctc_T1_0"
    assert out[5]["item"] == stream.response["output"][0]
    assert stream.response["output"][0]["input"] == PATCH


def test_a_web_search_streams_its_progress_then_its_sources():
    events = [
        message_start(),
        block_start(0, {**server_search("srvtoolu_1", "taplog"), "input": {}}),
        block_delta(0, json_delta('{"query": "tap')),
        block_delta(0, json_delta('log"}')),
        block_stop(0),
        block_start(1, search_result("srvtoolu_1")),
        block_stop(1),
        block_start(2, {"type": "text", "text": ""}),
        block_delta(2, {"type": "citations_delta", "citation": CITATION}),
        block_delta(2, text_delta("taplog records calls")),
        block_stop(2),
        message_delta("end_turn"),
        MESSAGE_STOP,
    ]
    out, stream = run_to_responses(events)
    assert types(out)[2:] == [
        "response.output_item.added",
        "response.web_search_call.in_progress",
        "response.web_search_call.searching",
        "response.web_search_call.completed",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.annotation.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert out[2]["item"] == {
        "id": "ws_T1_0",
        "type": "web_search_call",
        "status": "in_progress",
        "action": {"type": "search"},
    }
    assert {e["item_id"] for e in out[3:6]} == {"ws_T1_0"}
    assert out[6]["item"]["action"]["query"] == "taplog"
    assert out[10]["annotation"]["url"] == CITATION["url"] and out[10]["annotation_index"] == 0
    expected, _ = to_items(claude_answer(*_whole_blocks(events)))
    assert stream.response["output"] == [
        {**item, "id": item["id"].replace("X1", "T1")} for item in expected
    ]


def _whole_blocks(events: list[dict]) -> list[dict]:
    """The blocks of a hand-written stream, as the non-streaming answer holds them."""
    blocks: dict[int, dict] = {}
    for event in events:
        if event["type"] == "content_block_start":
            blocks[event["index"]] = {**event["content_block"]}
        elif event["type"] == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
            else:
                block["raw"] = block.get("raw", "") + delta["partial_json"]
    for block in blocks.values():
        if "raw" in block:
            block["input"] = orjson.loads(block.pop("raw"))
    return [blocks[i] for i in sorted(blocks)]


HOSTED_NAMES = st.sampled_from(["weather", *NAMESPACED])
QUERIES = st.text(max_size=15)


@st.composite
def hosted_answers(draw: Any) -> tuple[dict, list[dict]]:
    """(an Anthropic message mixing text, citations, tool calls and searches, its stream)."""
    groups: list[list[dict]] = []
    for _ in range(draw(st.integers(0, 2))):
        citations = draw(
            st.lists(st.sampled_from([CITATION, {**CITATION, "url": "https://b.test"}]))
        )
        groups.append([cited(draw(st.text(max_size=30)), *citations)])
    for k in range(draw(st.integers(0, 3))):
        name = draw(HOSTED_NAMES)
        value = (
            {"input": draw(st.text(max_size=30))}
            if name in NAMESPACED and NAMESPACED[name].freeform
            else {"n": k}
        )
        groups.append([{"type": "tool_use", "id": f"toolu_{k}", "name": name, "input": value}])
    for k in range(draw(st.integers(0, 2))):
        call_id = f"srvtoolu_{k}"
        content = draw(
            st.sampled_from(
                [FOUND, [], {"type": "web_search_tool_result_error", "error_code": "unavailable"}]
            )
        )
        groups.append([server_search(call_id, draw(QUERIES)), search_result(call_id, content)])
    groups = draw(st.permutations(groups))
    if draw(st.booleans()):  # a search cut by pause_turn: its result never comes
        groups.append([server_search("srvtoolu_last", draw(QUERIES))])
    blocks = [block for group in groups for block in group]
    events = [message_start()]
    for index, block in enumerate(blocks):
        events += _hosted_block_events(draw, index, block)
    events += [message_delta("end_turn"), MESSAGE_STOP]
    return claude_answer(*blocks), events


def _hosted_block_events(draw: Any, index: int, block: dict) -> list[dict]:
    kind = block["type"]
    if kind == "web_search_tool_result":
        return [block_start(index, block), block_stop(index)]
    if kind == "text":
        deltas = [block_delta(index, text_delta(p)) for p in split(draw, block["text"])]
        at = 0
        for citation in block["citations"] or []:  # in order, anywhere among the text
            at = draw(st.integers(at, len(deltas)))
            deltas.insert(at, block_delta(index, {"type": "citations_delta", "citation": citation}))
            at += 1
        return [block_start(index, {"type": "text", "text": ""}), *deltas, block_stop(index)]
    raw = orjson.dumps(block["input"]).decode()
    deltas = [block_delta(index, json_delta(p)) for p in split(draw, raw)]
    return [block_start(index, {**block, "input": {}}), *deltas, block_stop(index)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=hosted_answers(), data=st.data())
def test_a_stream_of_hosted_and_freeform_tools_translates_like_its_non_stream_answer(answer, data):
    message, events = answer
    expected = messages_answer_to_responses(
        message, response_id=RESPONSE_ID, created_at=CREATED, request=REQUEST, tools=NAMESPACED
    )
    stream = AnthropicToResponsesStream(
        response_id=RESPONSE_ID, created_at=CREATED, request=REQUEST, tools=NAMESPACED
    )
    raw = b"".join(b for event in events for b in stream.feed(event["type"], event))
    assert stream.finished and stream.error is None
    parsed = sse_events(raw, data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    deltas_add_up(check_sequence(parsed))
    assert stream.response["output"] == expected["output"]
    assert openai_responses.reassemble(parsed).body == stream.response
    typed = openai.types.responses.Response.model_validate(expected).model_dump(mode="json")
    assert [_unparsed(item) for item in sdk_response(parsed)["output"]] == typed["output"]


def _unparsed(item: dict) -> dict:
    """An SDK stream item without the fields its parsing helpers add."""
    item = {k: v for k, v in item.items() if k != "parsed_arguments"}
    if item["type"] == "message":
        item["content"] = [{k: v for k, v in p.items() if k != "parsed"} for p in item["content"]]
    return item


# ---------------------------------------------------------------- Claude Code's web search


CLAUDE_SEARCH = {
    "type": "web_search_20250305",
    "name": "web_search",
    "max_uses": 8,
    "allowed_domains": ["taplog.test"],
    "blocked_domains": ["spam.test"],
    "user_location": {"type": "approximate", "city": "Oslo", "timezone": "Europe/Oslo"},
    "cache_control": {"type": "ephemeral"},
}


def test_claudes_web_search_goes_to_openai_as_its_hosted_web_search():
    body = claude(
        {"role": "user", "content": "Search taplog."}, tools=[CLAUDE_WEATHER, CLAUDE_SEARCH]
    )
    result = to_responses(body)
    assert result.body["tools"][1] == {
        "type": "web_search",
        "filters": {"allowed_domains": ["taplog.test"]},
        "user_location": {"type": "approximate", "city": "Oslo", "timezone": "Europe/Oslo"},
    }
    assert result.body["include"] == ["web_search_call.action.sources"]
    assert result.dropped == [
        "tools[1].max_uses (OpenAI's web search has no limit on searches)",
        "tools[1].blocked_domains (OpenAI's web search has no blocked domains)",
        "tools[1].cache_control",
    ]


def test_through_the_chat_api_claudes_web_search_stays_left_out():
    body = claude({"role": "user", "content": "Search."}, tools=[CLAUDE_WEATHER, CLAUDE_SEARCH])
    chat = messages_to_chat(body, model="gpt-test")
    assert [tool["function"]["name"] for tool in chat.body["tools"]] == ["weather"]
    assert chat.dropped == ["tools[1] (web_search_20250305: OpenAI cannot run it)"]


OPENAI_SEARCH = {
    "id": "ws_68ab",
    "type": "web_search_call",
    "status": "completed",
    "action": {
        "type": "search",
        "query": "taplog",
        "sources": [{"type": "url", "url": "https://taplog.test/docs"}],
    },
}
CLAUDE_BLOCKS = [
    {"type": "server_tool_use", "id": "srvtoolu_68ab", "name": "web_search"}
    | {"input": {"query": "taplog"}},
    {
        "type": "web_search_tool_result",
        "tool_use_id": "srvtoolu_68ab",
        "content": [
            {"type": "web_search_result", "url": "https://taplog.test/docs"}
            | {"title": "https://taplog.test/docs", "encrypted_content": "", "page_age": None}
        ],
    },
]


def test_an_openai_web_search_comes_back_as_claudes_search_blocks():
    found = a_message("msg_1", {**a_text("taplog records calls."), "annotations": []})
    opened = {"id": "ws_2", "type": "web_search_call", "status": "completed"}
    opened |= {"action": {"type": "open_page", "url": "https://taplog.test/docs"}}
    failed = {**OPENAI_SEARCH, "id": "ws_3", "status": "failed"}
    body = to_claude(a_response(OPENAI_SEARCH, found, opened, failed))
    assert body["content"][:3] == [
        *CLAUDE_BLOCKS,
        {"type": "text", "text": "taplog records calls."},
    ]
    assert body["content"][3:] == [
        {"type": "server_tool_use", "id": "srvtoolu_3", "name": "web_search"}
        | {"input": {"query": "taplog"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_3"}
        | {"content": {"type": "web_search_tool_result_error", "error_code": "unavailable"}},
    ]  # the opened page has no Anthropic block
    assert body["stop_reason"] == "end_turn"  # a search is no tool turn for the client


def test_an_openai_web_search_streams_as_claudes_search_blocks():
    events = numbered(
        [
            {"type": "response.created", "response": a_response(status="in_progress")},
            *item_events(0, OPENAI_SEARCH),
            {"type": "response.completed", "response": a_response(OPENAI_SEARCH)},
        ]
    )
    out, stream = run_responses_to_messages(events)
    starts = [e["content_block"] for e in out if e["type"] == "content_block_start"]
    assert starts == [{**CLAUDE_BLOCKS[0], "input": {}}, CLAUDE_BLOCKS[1]]
    (delta,) = [e["delta"] for e in out if e["type"] == "content_block_delta"]
    assert orjson.loads(delta["partial_json"]) == {"query": "taplog"}
    assert stream.finished
