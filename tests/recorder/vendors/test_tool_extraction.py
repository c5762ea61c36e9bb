"""Tool-call extraction from each API's shapes: server tools, odd input, restarts."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from taplog.recorder.calls import LlmRequest, LlmResponse
from taplog.recorder.events import LLM_REQUEST, LLM_RESPONSE, make_event
from taplog.recorder.store.reader import read_session
from taplog.recorder.store.writer import Recorder
from taplog.recorder.toolevents import ToolLedger
from taplog.recorder.vendors.anthropic import wire as anthropic_messages
from taplog.recorder.vendors.apis import API_MODULES
from taplog.recorder.vendors.openai_chat import wire as openai_chat
from taplog.recorder.vendors.openai_responses import wire as openai_responses


def _answer(**fields):
    return make_event(LLM_RESPONSE, "s", "ex_1", **fields)


def test_anthropic_server_tools_pair_within_the_answer():
    body = {
        "content": [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"query": "taplog"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": [{"type": "web_search_result", "url": "https://example.com"}],
            },
            {
                "type": "server_tool_use",
                "id": "srvtoolu_2",
                "name": "web_fetch",
                "input": {"url": "x"},
            },
            {
                "type": "web_fetch_tool_result",
                "tool_use_id": "srvtoolu_2",
                "content": {
                    "type": "web_fetch_tool_result_error",
                    "error_code": "url_not_accessible",
                },
            },
            {"type": "text", "text": "Found it."},
        ],
        "stop_reason": "end_turn",
    }
    ledger = ToolLedger()
    events = ledger.asked(
        _answer(finish_reason="end_turn"),
        anthropic_messages.tool_calls(body),
        anthropic_messages.NORMAL_STOPS,
    )
    assert [(e["type"], e["call_id"], e["server"]) for e in events] == [
        ("tool.pre", "srvtoolu_1", True),
        ("tool.post", "srvtoolu_1", True),
        ("tool.pre", "srvtoolu_2", True),
        ("tool.post", "srvtoolu_2", True),
    ]
    assert events[1]["result"][0]["url"] == "https://example.com" and events[1]["is_error"] is False
    assert events[3]["is_error"] is True
    assert all(e["flags"] == [] for e in events)  # a server tool ending the turn is normal
    assert ledger.pending == {}


def test_responses_hosted_and_custom_tools():
    body = {
        "output": [
            {
                "type": "web_search_call",
                "id": "ws_1",
                "status": "completed",
                "action": {"type": "search", "query": "q"},
            },
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "name": "lookup",
                "server_label": "db",
                "arguments": "{}",
                "output": "42",
                "error": None,
            },
            {
                "type": "custom_tool_call",
                "id": "ctc_1",
                "call_id": "call_c",
                "name": "apply",
                "input": "*** patch",
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_f",
                "name": "f",
                "arguments": '{"a": ',
            },
        ]
    }
    calls = {c.call_id: c for c in openai_responses.tool_calls(body)}
    assert calls["ws_1"].server and calls["ws_1"].name == "web_search"
    assert calls["ws_1"].arguments == {"action": {"type": "search", "query": "q"}}
    assert calls["ws_1"].result == "completed" and calls["ws_1"].is_error is False
    assert calls["mcp_1"].name == "lookup" and calls["mcp_1"].result == "42"
    assert calls["call_c"].arguments == "*** patch" and not calls["call_c"].server
    assert calls["call_f"].arguments is None and "not valid JSON" in calls["call_f"].arguments_error
    assert calls["call_f"].arguments_raw == '{"a": '


def test_results_are_read_from_every_api():
    chat = {
        "messages": [
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "ok"}]}
        ]
    }
    assert [(r.call_id, r.result) for r in openai_chat.tool_results(chat)] == [
        ("call_1", [{"type": "text", "text": "ok"}])
    ]
    responses = {
        "input": [
            {"type": "function_call_output", "call_id": "call_2", "output": "done"},
            {"type": "shell_call_output", "call_id": "call_3", "output": []},
        ]
    }
    assert [r.call_id for r in openai_responses.tool_results(responses)] == ["call_2", "call_3"]
    messages = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": "boom",
                        "is_error": True,
                    },
                    {"type": "text", "text": "go on"},
                ],
            }
        ]
    }
    (result,) = anthropic_messages.tool_results(messages)
    assert (result.call_id, result.result, result.is_error) == ("toolu_1", "boom", True)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "type",
                    "role",
                    "content",
                    "tool_calls",
                    "function",
                    "arguments",
                    "call_id",
                    "tool_use_id",
                    "input",
                    "output",
                    "choices",
                    "message",
                    "messages",
                    "name",
                    "is_error",
                ]
            ),
            inner,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@given(
    st.dictionaries(
        st.sampled_from(["choices", "content", "output", "messages", "input"]), JSONISH, max_size=3
    )
)
def test_extraction_never_raises_on_odd_bodies(body):
    for module in API_MODULES.values():
        module.tool_calls(body)
        module.tool_results(body)


def test_pairing_survives_a_restart(tmp_path):
    """A call asked before a restart is answered after it: one pair, timed, no orphan."""
    use = {"type": "tool_use", "id": "toolu_9", "name": "get_time", "input": {}}
    answer = orjson.dumps(
        {"id": "msg_1", "model": "claude-sonnet-4-6", "content": [use], "stop_reason": "tool_use"}
    )
    result = {"type": "tool_result", "tool_use_id": "toolu_9", "content": "noon"}
    request = orjson.dumps({"messages": [{"role": "user", "content": [result]}]})
    common = dict(session="s", api="anthropic.messages", provider="anthropic")

    recorder = Recorder(tmp_path)
    recorder.start()
    recorder.record(
        LlmResponse(
            exchange="ex_1",
            status=200,
            headers={"content-type": "application/json"},
            chunks=[(1.0, answer)],
            outcome="ok",
            latency_ms=1,
            ttfb_ms=1,
            **common,
        )
    )
    recorder.close()

    recorder = Recorder(tmp_path)
    recorder.start()
    recorder.record(
        LlmRequest(
            exchange="ex_2",
            method="POST",
            path="/v1/messages",
            upstream_url="u",
            headers={},
            key_fingerprint=None,
            body=request,
            parsed=orjson.loads(request),
            **common,
        )
    )
    recorder.close()

    events = read_session(tmp_path, "s")
    assert [e["type"] for e in events] == [LLM_RESPONSE, "tool.pre", LLM_REQUEST, "tool.post"]
    post = events[-1]
    assert post["name"] == "get_time" and post["flags"] == [] and post["duration_ms"] >= 0
