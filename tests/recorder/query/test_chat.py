"""A session as a chat (`recorder.query.chat`): every API's agent loop through taplog, a
failed-over one, and sessions built by hand for what the SDK agents never send (a
sub-agent, items no reader knows)."""

from __future__ import annotations

import pytest

from taplog.recorder.query.chat import chat_text, conversation
from taplog.recorder.query.chat_page import chat_page
from taplog.recorder.query.connect import connect
from tests.builders import (
    a_response,
    chat,
    claude,
    claude_answer,
    request,
    text,
    tool_call,
    tool_use,
)
from tests.fakes.agents import AGENTS, PLAN
from tests.fakes.harness import FAILOVER_RULES
from tests.fakes.reading_traffic import bodies_read
from tests.fakes.ui_traffic import openai_client


def loop(failing: bool) -> list[tuple]:
    """The SDK agents' loop (tests/fakes/agents.py), each turn once: the prompt, two tools
    in parallel, a failing one (flagged where the API has the flag), the plan's last step."""
    return [
        ("user", PLAN),
        ("tool", "get_weather", "sunny, 21°C", False),
        ("tool", "get_time", "12:00", False),
        ("tool", "read_file", "error: README.md: no such file", failing),
        ("assistant", "Echo: Plan my trip to Paris."),
    ]


def assert_the_loop(entries: list[dict], failing: bool) -> None:
    """The loop, then its five more turns: a prompt and an answer each."""
    found = shown(entries)
    assert found[:5] == loop(failing)
    assert [kind for kind, *_ in found[5:]] == ["user", "assistant"] * 5
    assert [said for kind, said in found[5:] if kind == "user"] == [
        f"More, please ({n})." for n in range(5)
    ]


def shown(entries: list[dict]) -> list[tuple]:
    """The entries as (kind, text), a tool as (tool, name, result, failed)."""
    found = []
    for entry in entries:
        if entry["kind"] == "tool":
            found.append(("tool", entry["name"], entry["printed"], entry["is_error"]))
        else:
            found.append((entry["kind"], entry["text"]))
    return found


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("api", sorted(AGENTS))
def test_every_api_reads_as_its_turns_once(request, taplog, api, stream):
    agent, client_fixture, _, _ = AGENTS[api]
    agent(request.getfixturevalue(client_fixture), stream)
    ((events),) = taplog.wait_responses(8).values()
    (thread,) = conversation(events)
    assert thread["agent"] is None
    assert_the_loop(thread["entries"], api == "anthropic")  # a Responses stream chains


def test_a_failed_over_call_reads_as_the_fallback_answered(servers, vendors, tmp_path):
    proxy = vendors.proxy(servers, tmp_path / "data", FAILOVER_RULES)
    vendors.openai.down = {"status": "503"}
    AGENTS["chat"][0](openai_client(proxy, "down"), False)
    events = proxy.wait_for(lambda s: len(s.get("down", [])) > 50)["down"]
    (thread,) = conversation(events)
    notes = [e for e in thread["entries"] if e["kind"] == "note"]
    assert notes and all(
        n["text"].startswith("failover openai:gpt-4.1 → anthropic:") for n in notes
    )
    assert_the_loop([e for e in thread["entries"] if e["kind"] != "note"], False)


def _session(*calls: tuple[str, dict, dict | None], headers: list[dict] | None = None) -> list:
    """Events of calls built by hand: (API, request body, answer body or None: failed)."""
    events, seq = [], 0
    for n, (api, body, answer) in enumerate(calls):
        seq += 1
        sent = (headers or [{}] * len(calls))[n]
        exchange = f"ex{n}"
        events.append(
            {"type": "llm.request", "seq": seq, "exchange": exchange, "api": api, "body": body}
            | {"headers": sent}
        )
        seq += 1
        status, outcome = (200, "ok") if answer is not None else (529, "upstream_error")
        events.append(
            {"type": "llm.response", "seq": seq, "exchange": exchange, "body": answer}
            | {"status": status, "outcome": outcome}
        )
    return events


def test_a_sub_agent_sits_in_the_tool_call_that_started_it():
    """As Claude Code 2.1.197 sends it (measured, tests/e2e/test_real_clis.py): the sub-agent's
    calls in the same session with its id in a header, its prompt the tool's `prompt`."""
    ask = {"description": "Echo", "prompt": "Print a word", "subagent_type": "general-purpose"}
    start = claude({"role": "user", "content": "Use a sub-agent."})
    started = claude_answer(tool_use("toolu_A", "Agent", ask), stop="tool_use")
    sub = claude({"role": "user", "content": [text("<system-reminder>x</system-reminder>"),
                                                text("Print a word")]}, system="sub")  # fmt: skip
    result = [text("word"), text("agentId: a1")]
    finished = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_A", "content": result}]}  # fmt: skip
    back = claude(
        *start["messages"], {"role": "assistant", "content": started["content"]}, finished
    )
    events = _session(
        ("anthropic.messages", start, started),
        ("anthropic.messages", sub, claude_answer(text("word"))),
        ("anthropic.messages", back, claude_answer(text("It printed: word"))),
        headers=[{}, {"x-claude-code-agent-id": "a1"}, {}],
    )
    (main,) = conversation(events)
    assert [e["kind"] for e in main["entries"]] == ["user", "tool", "assistant"]
    tool = main["entries"][1]
    assert tool["printed"] == "word\nagentId: a1"
    nested = tool["agent"]
    assert nested["agent"] == "a1"
    assert shown(nested["entries"]) == [
        ("system", "sub"),
        ("context", "<system-reminder>x</system-reminder>"),
        ("user", "Print a word"),
        ("assistant", "word"),
    ]
    lines = chat_text([main])
    assert "  │ sub-agent a1" in lines and "  │ assistant  word" in lines
    assert lines[-1] == "assistant  It printed: word"


def test_what_no_reader_knows_is_shown_by_its_type_and_a_failed_call_is_noted():
    image = {"type": "image_url", "image_url": {"url": "https://example.test/cat.png"}}
    odd = {"type": "computer_call", "call_id": "c1", "action": {"type": "click"}}
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"}
    freeform = {"role": "assistant", "tool_calls": [tool_call("call_1", "run", "ls -l")]}
    events = _session(
        ("openai.chat", chat({"role": "user", "content": [text("Look:"), image]}, freeform), None),
        ("openai.responses", request({"role": "user", "content": "Go"}, odd), None),
        ("openai.responses", request({"role": "user", "content": "Go"}), a_response(reasoning)),
    )
    chats, responses = conversation(events)
    assert shown(chats["entries"]) == [
        ("user", "Look:"),
        ("item", "[image_url]"),
        ("tool", "run", None, None),  # its arguments as sent: not JSON
        ("note", "no answer: 529 upstream_error"),
    ]
    assert chats["entries"][2]["arguments"] == "ls -l"
    assert shown(responses["entries"]) == [
        ("user", "Go"),
        ("item", "[computer_call]"),
        ("note", "no answer: 529 upstream_error"),
        ("item", "[reasoning]"),
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("api", sorted(AGENTS))
def test_the_whole_conversation_is_read_from_its_last_request(
    request, taplog, api, stream, counted
):
    """Each earlier call's answer is resent in the last request, so that request alone
    gives every turn, where it was first sent; a Responses stream chains its calls (each
    request holds only its new items), so each is read."""
    agent, client_fixture, _, _ = AGENTS[api]
    agent(request.getfixturevalue(client_fixture), stream)
    ((session, events),) = taplog.wait_responses(8).items()
    taplog.flush()
    page = chat_page(connect(taplog.data_dir, only=session), session, last=None)
    assert page.threads == conversation(events)
    chained = api == "responses" and stream
    assert bodies_read(counted) == (page.calls if chained else 1)
