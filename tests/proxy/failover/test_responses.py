"""Failover for the Responses API (Codex, the Agents SDK) to Anthropic, and back.

The official `openai` SDK's Responses client runs through taplog while the
OpenAI fake fails; the Anthropic fake serves, and the client gets Responses
objects and events that its SDK parses without a warning, Codex's namespaced,
freeform and web search tools included.
"""

from __future__ import annotations

import warnings

import anthropic
import openai
import orjson
import pytest
from openai.types.responses import (
    ResponseCustomToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
)

from taplog.proxy.keys import BREAKERS
from tests.fakes.agents import anthropic_agent, responses_agent
from tests.fakes.harness import model_requests
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

FILE_SEARCH = {"type": "file_search", "vector_store_ids": ["vs_1"]}  # OpenAI's own stores
RESPONSES_LIMITS = {"retries": 1, "ttfb_timeout": 1.0, "idle_timeout": 1.0}
RESPONSES_RULES = {
    "providers": {
        "openai_responses": {
            "type": "openai",
            "api": "responses",
            "base_url": "http://127.0.0.1:9/v1",  # replaced per test with the fake's address
            "api_key_env": "OPENAI_API_KEY",
        }
    },
    "fallback": [
        {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], **RESPONSES_LIMITS},
        {"model": "claude-*", "to": ["openai_responses:gpt-4.1"], **RESPONSES_LIMITS},
    ],
}


@pytest.fixture
def responses_proxy(servers, vendors, tmp_path):
    rules = {
        **RESPONSES_RULES,
        "providers": {
            "openai_responses": {
                **RESPONSES_RULES["providers"]["openai_responses"],
                "base_url": f"{vendors.openai.url}/v1",
            }
        },
    }
    return vendors.proxy(servers, tmp_path / "data", rules)


@pytest.fixture
def responses_oai(responses_proxy):
    return openai.OpenAI(base_url=f"{responses_proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)


def responses_requests(fake):
    return [r for r in fake.requests if r.path == "/v1/responses"]


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_a_responses_agent_finishes_its_tool_loop_while_openai_is_down(
    vendors, responses_proxy, responses_oai, stream
):
    """Non-stream resends its history (store=false); stream chains with previous_response_id."""
    vendors.openai.down = {"status": "503"}
    with warnings.catch_warnings():
        # the SDK's typed objects parse without a warning (pydantic warns with UserWarning)
        warnings.simplefilter("error", UserWarning)
        responses_agent(responses_oai, stream)

    served = model_requests(vendors.anthropic)
    assert len(served) == 8
    (events,) = responses_proxy.wait_for(
        lambda s: (
            sum(
                e["type"] == "llm.response" and e["outcome"] == "ok"
                for ev in s.values()
                for e in ev
            )
            == 8
        )
    ).values()
    pres = [e for e in events if e["type"] == "tool.pre"]
    posts = [e for e in events if e["type"] == "tool.post"]
    assert [p["name"] for p in pres] == ["get_weather", "get_time", "read_file"]
    assert sorted(p["call_id"] for p in posts) == sorted(p["call_id"] for p in pres)
    if stream:  # each chained call carried the whole conversation to Anthropic
        last = orjson.loads(served[-1].body)
        assert len(last["messages"]) > 10


def test_previous_response_id_chains_across_a_switch_and_back(
    vendors, responses_proxy, responses_oai
):
    first = responses_oai.responses.create(model="gpt-4.1", input="Remember the word: tangerine.")
    assert first.id.startswith("resp_") and not first.id.startswith("resp_tl")  # OpenAI's own

    vendors.openai.down = {"status": "503"}
    with responses_oai.responses.stream(
        model="gpt-4.1", input="Which word?", previous_response_id=first.id
    ) as s:
        second = s.get_final_response()
    assert second.id.startswith("resp_tl") and second.model == "claude-sonnet-4-6"
    (to_anthropic,) = model_requests(vendors.anthropic)
    texts = [str(m["content"]) for m in orjson.loads(to_anthropic.body)["messages"]]
    assert "tangerine" in texts[0] and "Echo: Remember" in texts[1]  # the history, rebuilt

    vendors.openai.down = {}
    responses_proxy.app[BREAKERS]["openai:gpt-4.1"].cool_down = 0.0
    third = responses_oai.responses.create(
        model="gpt-4.1", input="And now?", previous_response_id=second.id
    )
    assert third.model == "gpt-4.1"  # back at OpenAI, which never saw `second`
    sent = orjson.loads(responses_requests(vendors.openai)[-1].body)
    assert "previous_response_id" not in sent and sent["store"] is False
    assert [item.get("role") or item.get("type") for item in sent["input"]][-1] == "user"
    assert len(sent["input"]) == 5  # turn 1 in and out, turn 2 in and out, turn 3
    sessions = responses_proxy.sessions()
    assert len(sessions) == 1  # the whole chain is one session


def test_an_answer_sent_with_store_false_is_not_kept_for_a_chain(
    vendors, responses_proxy, responses_oai
):
    """Not stored at OpenAI, so nothing can chain to it (Codex resends its whole input): a
    call that names it is not made whole from a copy taplog kept, even to fail over."""
    first = responses_oai.responses.create(
        model="gpt-4.1", input="Remember the word: tangerine.", store=False
    )
    vendors.openai.down = {"status": "503"}
    with pytest.raises(openai.APIStatusError) as refused:
        responses_oai.responses.create(
            model="gpt-4.1", input="Which word?", previous_response_id=first.id
        )
    assert refused.value.status_code == 503
    assert model_requests(vendors.anthropic) == []  # no conversation made up for it


def test_what_the_target_cannot_take_is_refused_when_the_rule_says_so(servers, vendors, tmp_path):
    rules = {
        "fallback": [
            {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], **RESPONSES_LIMITS,
             "leave_out_untranslatable": False}
        ]
    }  # fmt: skip
    proxy = vendors.proxy(servers, tmp_path / "data", rules)
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    vendors.openai.down = {"status": "503"}
    with pytest.raises(openai.InternalServerError) as refused:
        client.responses.create(model="gpt-4.1", input="search", tools=[FILE_SEARCH])
    assert model_requests(vendors.anthropic) == []
    assert proxy.events("failover") == []  # the call never moved
    (answered,) = proxy.events("call.answered")
    assert (answered["status"], answered["provider"]) == (503, "openai")
    assert answered["skipped"][0].startswith("anthropic:claude-sonnet-4-6 was skipped")
    # The body is OpenAI's own error; why no fallback served the call is said beside it.
    skipped = refused.value.response.headers["x-taplog-fallback"]
    assert skipped.startswith("anthropic:claude-sonnet-4-6 was skipped, not translatable")
    assert "tools[0]: 'file_search' tools have no Anthropic equivalent" in skipped


def test_an_anthropic_agent_fails_over_to_a_responses_model(vendors, responses_proxy):
    vendors.anthropic.down = {"status": "529"}
    client = anthropic.Anthropic(base_url=responses_proxy.url, api_key=ANTHROPIC_KEY, max_retries=0)
    anthropic_agent(client, stream=True)
    served = responses_requests(vendors.openai)
    assert len(served) == 8
    assert all(orjson.loads(r.body)["store"] is False for r in served)


def test_what_the_target_cannot_take_is_left_out_by_default(vendors, responses_proxy):
    client = openai.OpenAI(base_url=f"{responses_proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    vendors.openai.down = {"status": "503"}
    answer = client.responses.create(
        model="gpt-4.1", input="search for taplog", tools=[FILE_SEARCH]
    )
    assert answer.output_text == "Echo: search for taplog"
    (sent,) = model_requests(vendors.anthropic)
    assert "tools" not in orjson.loads(sent.body)
    translated = [e for e in responses_proxy.events("llm.request") if e.get("translated_from")]
    assert any("tools[0]" in dropped for dropped in translated[0]["dropped"])  # the log says so


PATCH = "*** Begin Patch\n*** Add File: hi.txt\n+hi\n*** End Patch\n"  # the fake's apply_patch
CODEX_TOOLS = [
    {
        "type": "namespace",
        "name": "multi_agent_v1",
        "description": "Run sub-agents.",
        "tools": [
            {
                "type": "function",
                "name": "spawn_agent",
                "description": "Start a sub-agent.",
                "parameters": {"type": "object", "properties": {"message": {"type": "string"}}},
                "strict": False,
            }
        ],
    },
    {
        "type": "custom",
        "name": "apply_patch",
        "description": "Edit files. This is a FREEFORM tool.",
        "format": {"type": "grammar", "syntax": "lark", "definition": "start: /(.|\\n)+/"},
    },
    {"type": "web_search"},
]


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_codexs_namespaced_freeform_and_web_search_tools_come_back_from_claude(
    vendors, responses_proxy, responses_oai, stream
):
    vendors.openai.down = {"status": "503"}
    prompt = "!plan=multi_agent_v1__spawn_agent+apply_patch !web_search=taplog !preamble Patch."
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # the SDK parses every item and event
        if stream:
            events = list(
                responses_oai.responses.create(
                    model="gpt-4.1", input=prompt, tools=CODEX_TOOLS, stream=True
                )
            )
            answer = events[-1].response
            done = [e.item for e in events if e.type == "response.output_item.done"]
            assert [item.id for item in done] == [item.id for item in answer.output]
        else:
            answer = responses_oai.responses.create(
                model="gpt-4.1", input=prompt, tools=CODEX_TOOLS
            )

    (sent,) = model_requests(vendors.anthropic)
    offered = orjson.loads(sent.body)["tools"]
    assert [tool["name"] for tool in offered] == [
        "multi_agent_v1__spawn_agent",
        "apply_patch",
        "web_search",
    ]
    assert offered[2]["type"] == "web_search_20250305"
    search, message, spawn, patch = answer.output
    assert isinstance(search, ResponseFunctionWebSearch) and search.status == "completed"
    assert search.action.query == "taplog"
    assert [source.url for source in search.action.sources] == [
        "https://taplog.test/docs",
        "https://taplog.test/faq",
    ]
    (citation,) = message.content[0].annotations
    assert citation.type == "url_citation" and citation.url == "https://taplog.test/docs"
    assert message.content[0].text[citation.start_index : citation.end_index] == "Let me check."
    assert isinstance(spawn, ResponseFunctionToolCall)
    assert (spawn.name, spawn.namespace) == ("spawn_agent", "multi_agent_v1")
    assert orjson.loads(spawn.arguments) == {"message": "say hi"}
    assert isinstance(patch, ResponseCustomToolCall)
    assert (patch.name, patch.namespace, patch.input) == ("apply_patch", None, PATCH)


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_claude_codes_web_search_is_served_by_openais_through_responses(
    vendors, responses_proxy, stream
):
    vendors.anthropic.down = {"status": "529"}
    client = anthropic.Anthropic(base_url=responses_proxy.url, api_key=ANTHROPIC_KEY, max_retries=0)
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 8}
    ask = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 1000,
        "messages": [{"role": "user", "content": "!web_search=taplog What is taplog?"}],
        "tools": [search],
    }
    if stream:
        with client.messages.stream(**ask) as events:
            answer = events.get_final_message()
    else:
        answer = client.messages.create(**ask)

    (sent,) = responses_requests(vendors.openai)
    body = orjson.loads(sent.body)
    assert body["tools"] == [{"type": "web_search"}]
    assert body["include"] == ["web_search_call.action.sources"]
    use, result, said = answer.content
    assert use.type == "server_tool_use" and use.name == "web_search"
    assert use.input == {"query": "taplog"}
    assert result.type == "web_search_tool_result" and result.tool_use_id == use.id
    assert [found.url for found in result.content] == [
        "https://taplog.test/docs",
        "https://taplog.test/faq",
    ]
    assert said.type == "text" and said.text == "Echo: What is taplog?"
    assert answer.stop_reason == "end_turn"
