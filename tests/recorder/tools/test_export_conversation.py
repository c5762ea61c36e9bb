"""The conversation through seq N, built from hand-made sessions of each API: the last request,
its answer as the next turn, exported to every API by the failover routes.

Each session is a one-tool loop ending with a final answer ("FINAL: step3"). The export in
every API must hold that answer as its last turn (the fake vendor's reader of that API sees
it as an assistant turn, and its validation takes the body), stop at `--at`, leave out
the last answer's unanswered tool calls only when a prompt follows, and name what it left out.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from taplog.recorder.tools.export import ExportError, export_conversation
from taplog.recorder.tools.resume_request import DEFAULT_PROMPT, resume_body
from taplog.recorder.vendors.translation import Untranslatable
from tests import ROOT
from tests.builders import (
    CHAT_WEATHER,
    CLAUDE_WEATHER,
    RESPONSES_WEATHER,
    SessionLog,
    a_message,
    a_response,
    a_text,
    chat,
    claude,
    claude_answer,
    request,
    text,
    tool_call,
    tool_use,
    user,
)
from tests.fakes.vendor import Anthropic, Chat, Gemini, Responses

FORMATS = ("openai-chat", "anthropic", "responses", "gemini")
READERS = {
    "openai-chat": Chat,
    "anthropic": Anthropic,
    "responses": Responses,
    "gemini": lambda: Gemini(stream=False),
}
GEMINI_PATH = "/v1beta/models/gemini-2.5-flash:generateContent"
ASK = "Weather in Oslo, then say FINAL"
FINAL = "FINAL: step3"


def chat_answer(content: str | None = None, *calls: dict) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = list(calls)
    message["annotations"] = []
    reason = "tool_calls" if calls else "stop"
    choice = {"index": 0, "message": message, "finish_reason": reason, "logprobs": None}
    return {"id": "chatcmpl-1", "object": "chat.completion", "choices": [choice]}


def function_call(call_id: str) -> dict:
    arguments = '{"city":"Oslo"}'
    return {"type": "function_call", "id": "fc_1", "call_id": call_id, "name": "weather",
            "arguments": arguments, "status": "completed"}  # fmt: skip


def anthropic_session(final: dict | None) -> SessionLog:
    log = SessionLog("anthropic.messages")
    first = claude({"role": "user", "content": ASK}, tools=[CLAUDE_WEATHER])
    asked = claude_answer(tool_use("toolu_1"), stop="tool_use")
    log.call(first, asked)
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}
    turns = [*first["messages"], {"role": "assistant", "content": asked["content"]}]
    log.call({**first, "messages": [*turns, {"role": "user", "content": [result]}]}, final)
    return log


def chat_session(final: dict | None) -> SessionLog:
    log = SessionLog("openai.chat")
    first = chat({"role": "user", "content": ASK}, tools=[CHAT_WEATHER])
    log.call(first, chat_answer(None, tool_call("call_1")))
    turns = [
        *first["messages"],
        {"role": "assistant", "tool_calls": [tool_call("call_1")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    ]
    log.call({**first, "messages": turns}, final)
    return log


def responses_session(final: dict | None) -> SessionLog:
    log = SessionLog("openai.responses")
    first = request(user(ASK), tools=[RESPONSES_WEATHER])
    log.call(first, a_response(function_call("call_1")))
    output = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    log.call({**first, "input": [*first["input"], function_call("call_1"), output]}, final)
    return log


def gemini_answer(*parts: dict) -> dict:
    content = {"role": "model", "parts": list(parts)}
    return {"candidates": [{"content": content, "finishReason": "STOP", "index": 0}]}


GEMINI_CALL = {"functionCall": {"id": "call_1", "name": "weather", "args": {"city": "Oslo"}}}


def gemini_session(final: dict | None) -> SessionLog:
    log = SessionLog("gemini.generate", GEMINI_PATH)
    weather = {"name": "weather", "parametersJsonSchema": CHAT_WEATHER["function"]["parameters"]}
    first = {
        "contents": [{"role": "user", "parts": [{"text": ASK}]}],
        "tools": [{"functionDeclarations": [weather]}],
    }
    log.call(first, gemini_answer(GEMINI_CALL))
    result = {
        "functionResponse": {"id": "call_1", "name": "weather", "response": {"output": "sunny"}}
    }
    turns = [
        *first["contents"],
        {"role": "model", "parts": [GEMINI_CALL]},
        {"role": "user", "parts": [result]},
    ]
    log.call({**first, "contents": turns}, final)
    return log


FINALS = {
    "anthropic": (anthropic_session, claude_answer(text(FINAL))),
    "openai-chat": (chat_session, chat_answer(FINAL)),
    "responses": (responses_session, a_response(a_message("msg_2", a_text(FINAL)))),
    "gemini": (gemini_session, gemini_answer({"text": FINAL})),
}
ASKING_AGAIN = {  # a last answer with text and a call of a tool that never ran
    "anthropic": claude_answer(text("One more."), tool_use("toolu_2"), stop="tool_use"),
    "openai-chat": chat_answer("One more.", tool_call("call_2")),
    "responses": a_response(a_message("msg_2", a_text("One more.")), function_call("call_2")),
    "gemini": gemini_answer(
        {"text": "One more."},
        {"functionCall": {"id": "call_2", "name": "weather", "args": {"city": "Oslo"}}},
    ),
}
TURNS = {"responses": "input", "gemini": "contents"}  # else "messages"
ROLES = {"model": "assistant"}


def last_turn(fmt: str, body: dict) -> tuple[str, str]:
    """(role, text) of the body's last turn; a Responses call item counts as the assistant's."""
    turn = body[TURNS.get(fmt, "messages")][-1]
    if turn.get("type") == "function_call":
        return "assistant", ""
    content = turn.get("parts") if fmt == "gemini" else turn.get("content")
    parts = [content] if isinstance(content, str) else [p.get("text", "") for p in content or []]
    return ROLES.get(turn["role"], turn["role"]), "\n".join(parts)


def calls_in_last_turn(fmt: str, body: dict) -> int:
    if fmt == "anthropic":
        return sum(b["type"] == "tool_use" for b in body["messages"][-1]["content"])
    if fmt == "openai-chat":
        return len(body["messages"][-1].get("tool_calls") or [])
    if fmt == "gemini":
        return sum("functionCall" in p for p in body["contents"][-1]["parts"])
    return sum(item.get("type") == "function_call" for item in body["input"][-2:])


def accepted(fmt: str, body: dict) -> Any:
    """What the fake vendor of that API reads of it; it would take the body."""
    reader = READERS[fmt]()
    assert reader.validate(body) is None, (fmt, body)
    return reader.transcript(body)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("source", FORMATS)
def test_the_last_answer_is_the_conversation_s_last_turn_in_every_api(source, fmt):
    build, final = FINALS[source]
    events = build(final).events
    exported = export_conversation(events, fmt)
    assert last_turn(fmt, exported.body) == ("assistant", FINAL)
    read = accepted(fmt, exported.body)
    assert (read.users, read.turns) == ([ASK], 2)  # the tool call's turn and the final one
    assert "stream" not in exported.body
    assert not any("prefill" in what for what in exported.left_out)  # an answer, not a prefill

    ready = export_conversation(events, fmt, prompt="And tomorrow?")
    assert last_turn(fmt, ready.body) == ("user", "And tomorrow?")
    assert accepted(fmt, ready.body).turns == 2


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("source", FORMATS)
def test_at_gives_the_conversation_through_that_seq(source, fmt):
    build, final = FINALS[source]
    log = build(final)
    # seq 2: the first request; 3: its answer; 4: the second request; 5: the final answer
    assert [e["type"] for e in log.events[1:]] == ["llm.request", "llm.response"] * 2
    asked_only = export_conversation(log.events, fmt, at=2).body
    assert last_turn(fmt, asked_only) == ("user", ASK)
    tool_step = export_conversation(log.events, fmt, at=3).body  # the answer asking for it
    assert calls_in_last_turn(fmt, tool_step) == 1
    results = export_conversation(log.events, fmt, at=4).body  # the final answer not yet
    read = accepted(fmt, results)
    assert (read.turns, read.results) == (1, ["sunny"])
    assert export_conversation(log.events, fmt, at=5) == export_conversation(log.events, fmt)
    with pytest.raises(ExportError, match="at or before seq 1"):
        export_conversation(log.events, fmt, at=1)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("source", FORMATS)
def test_tool_calls_that_never_ran_are_kept_as_they_stand_and_left_out_before_a_prompt(source, fmt):
    build, _ = FINALS[source]
    events = build(ASKING_AGAIN[source]).events

    as_it_stands = export_conversation(events, fmt)
    assert calls_in_last_turn(fmt, as_it_stands.body) == 1
    assert as_it_stands.left_out == [] or source != fmt

    ready = export_conversation(events, fmt, prompt="Go on.")
    assert last_turn(fmt, ready.body) == ("user", "Go on.")
    assert "the last answer's tool calls (weather): never run" in ready.left_out
    turns = ready.body[TURNS.get(fmt, "messages")]
    before = {"input": turns[:-1], "messages": turns[:-1], "contents": turns[:-1]}
    assert last_turn(fmt, before) == ("assistant", "One more.")  # its text stays, not its call
    read = accepted(fmt, ready.body)
    assert read.turns == 2 and read.results == []


def test_an_answer_of_nothing_but_a_tool_call_is_left_out_whole_before_a_prompt():
    events = anthropic_session(claude_answer(tool_use("toolu_2"), stop="tool_use")).events
    ready = export_conversation(events, "anthropic", prompt="Go on.")
    *_, asked, result, prompt = ready.body["messages"]
    assert (asked["role"], result["content"][0]["type"]) == ("assistant", "tool_result")
    assert prompt == {"role": "user", "content": "Go on."}


def test_a_failed_or_broken_answer_is_no_turn_and_a_retried_try_s_answer_is():
    log = anthropic_session(None)
    log.call(log.events[-1]["body"], {"type": "error"}, status=529, retry=True)
    assert export_conversation(log.events, "anthropic").body == log.events[-2]["body"]
    cut = claude_answer(text("FINAL: st"))
    log.call(log.events[-2]["body"], cut, retry=True, outcome="upstream_cut")
    assert export_conversation(log.events, "anthropic").body == log.events[-2]["body"]
    log.call(log.events[-2]["body"], retry=True)  # another try, no answer yet
    log.call(log.events[-1]["body"], claude_answer(text(FINAL)), retry=True)
    assert last_turn("anthropic", export_conversation(log.events, "anthropic").body) == (
        "assistant",
        FINAL,
    )


def fixture(name: str) -> dict:
    return json.loads((ROOT / "tests" / "fixtures" / name).read_text())["body"]


def test_claude_code_s_system_message_in_the_middle_stays_in_place_in_every_api():
    log = SessionLog("anthropic.messages")
    log.call(fixture("claude_code_2.1.197_messages.json"), claude_answer(text(FINAL)))
    chat_body = export_conversation(log.events, "openai-chat").body
    roles = [m["role"] for m in chat_body["messages"]]
    assert roles[-3:] == ["user", "developer", "assistant"]  # the agent list, then the answer
    items = export_conversation(log.events, "responses").body["input"]
    assert [i.get("role") for i in items[-3:]] == ["user", "developer", "assistant"]


def test_codex_s_hosted_tools_are_left_out_and_named_as_failover_names_them():
    log = SessionLog("openai.responses")
    body = fixture("codex_0.171.0_responses.json")
    log.call(body, a_response(a_message("msg_2", a_text(FINAL))))
    kinds = [tool["type"] for tool in body["tools"]]
    for fmt in ("anthropic", "openai-chat"):
        exported = export_conversation(log.events, fmt)
        assert last_turn(fmt, exported.body) == ("assistant", FINAL)
        for kind in ("tool_search", "web_search"):
            k = kinds.index(kind)
            assert any(what.startswith(f"tools[{k}] ({kind}:") for what in exported.left_out)


def test_a_refusal_on_the_way_through_anthropic_names_the_route():
    log = SessionLog("openai.responses")
    log.call(request(user(ASK), background=True), a_response(a_message("m", a_text(FINAL))))
    with pytest.raises(Untranslatable, match=r"openai\.responses goes to openai\.chat through"):
        export_conversation(log.events, "openai-chat")


@pytest.mark.parametrize("fmt", FORMATS)
def test_resume_goes_on_with_a_user_turn_after_the_last_answer(fmt):
    build, final = FINALS["anthropic"]
    answered = build(final).events
    body = resume_body(answered, "run-1", fmt, "model-x").body
    assert last_turn(fmt, body) == ("user", DEFAULT_PROMPT)
    assert last_turn(fmt, resume_body(answered, "run-1", fmt, "m", "Now X.").body)[1] == "Now X."

    unanswered = build(None).events  # the last request is asked again, as it was
    assert accepted(fmt, resume_body(unanswered, "run-1", fmt, "model-x").body).results == ["sunny"]
    asking = resume_body(build(ASKING_AGAIN["anthropic"]).events, "run-1", fmt, "model-x")
    assert "the last answer's tool calls (weather): never run" in asking.left_out
    assert accepted(fmt, asking.body).turns == 2
