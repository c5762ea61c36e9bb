"""Failover among all three vendors: the `google-genai` SDK's agent served by Claude or
OpenAI while Gemini is down, and the Anthropic and OpenAI SDKs' agents served by Gemini
while their vendor is down, tool loops and all, with each vendor's own key.
"""

from __future__ import annotations

import base64

import httpx
import orjson
import pytest

from taplog.proxy.keys import BREAKERS
from taplog.recorder.vendors.gemini.thoughts import SKIP_VALIDATION
from tests.fakes.agents import AGENTS, GEMINI_MODEL, PLAN, TOOL_NAMES, gemini_agent
from tests.fakes.clients import STORY_ANSWER, anthropic_at, ask_sdk, gemini_at, openai_at
from tests.fakes.harness import model_requests, serve_replay
from tests.fakes.keys import (
    ANTHROPIC_FALLBACK_KEY,
    GEMINI_FALLBACK_KEY,
    GEMINI_KEY,
    OPENAI_FALLBACK_KEY,
    key_traces,
)

QUICK = {"retries": 1, "ttfb_timeout": 1.0, "idle_timeout": 1.0}
TARGETS = {"anthropic": "anthropic:claude-sonnet-4-6", "openai": "openai:gpt-4.1"}


def _rules(*pairs: tuple[str, str]) -> dict:
    return {"fallback": [{"model": model, "to": [to], **QUICK} for model, to in pairs]}


def _events(taplog, served: int) -> list[dict]:
    """The one session's events, once `served` answers are in."""

    def done(sessions):
        answers = [e for evs in sessions.values() for e in evs if e["type"] == "llm.response"]
        return sum(a["outcome"] == "ok" for a in answers) >= served

    (events,) = taplog.wait_for(done).values()
    return events


def _tool_events_paired(events: list[dict]) -> None:
    pres = [e for e in events if e["type"] == "tool.pre"]
    posts = [e for e in events if e["type"] == "tool.post"]
    assert [p["name"] for p in pres] == ["get_weather", "get_time", "read_file"]
    assert sorted(p["call_id"] for p in posts) == sorted(p["call_id"] for p in pres)


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_a_gemini_agent_is_served_through_openai_s_responses_api(
    servers, vendors, tmp_path, stream
):
    """An OpenAI provider that serves other APIs' clients through Responses (`api =
    "responses"`): Gemini's calls reach it as Responses calls, through the hub."""
    provider = {
        "type": "openai",
        "base_url": f"{vendors.openai.url}/v1",
        "api_key_env": "OPENAI_API_KEY",
        "api": "responses",
    }
    rules = {
        **_rules(("gemini-*", "viaresponses:gpt-4.1")),
        "providers": {"viaresponses": provider},
    }
    taplog = vendors.proxy(servers, tmp_path / "data", rules)
    vendors.gemini.down = {"status": "503"}

    texts = gemini_agent(gemini_at(taplog.url), stream)

    assert texts[:3] == ["", "", "Echo: Plan my trip to Paris."]
    served = [r for r in vendors.openai.requests if r.path == "/v1/responses"]
    assert len(served) == 8
    _tool_events_paired(_events(taplog, 8))


@pytest.mark.parametrize("to", sorted(TARGETS))
@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_gemini_agent_finishes_its_tool_loop_while_gemini_is_down(
    servers, vendors, tmp_path, to, stream, asynchronous
):
    taplog = vendors.proxy(servers, tmp_path / "data", _rules(("gemini-*", TARGETS[to])))
    vendors.gemini.down = {"status": "503"}

    texts = gemini_agent(gemini_at(taplog.url), stream, asynchronous)

    # two tool turns, the plan's text step, then past the plan's end (the fake's "Done")
    assert texts[:3] == ["", "", "Echo: Plan my trip to Paris."] and len(texts) == 8
    assert all(text.startswith("Done: ") for text in texts[3:])
    fallback = vendors.anthropic if to == "anthropic" else vendors.openai
    served = model_requests(fallback)
    assert len(served) == 8  # two tool turns, the plan's text, five more turns
    key = {"anthropic": ("x-api-key", ANTHROPIC_FALLBACK_KEY)}.get(
        to, ("authorization", f"Bearer {OPENAI_FALLBACK_KEY}")
    )
    assert all(r.headers[key[0]] == key[1] for r in served)
    assert not any(trace.encode() in r.body for r in served for trace in key_traces(GEMINI_KEY))
    events = _events(taplog, 8)
    failovers = [e for e in events if e["type"] == "failover"]
    assert failovers and {(f["from_provider"], f["to_provider"]) for f in failovers} == {
        ("gemini", to)
    }
    _tool_events_paired(events)


@pytest.mark.parametrize("agent", sorted(AGENTS))
@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_claude_and_openai_agents_are_served_by_gemini_while_their_vendor_is_down(
    servers, vendors, tmp_path, agent, stream
):
    run, kind, _, _ = AGENTS[agent]
    rules = _rules(("claude-*", f"gemini:{GEMINI_MODEL}"), ("gpt-*", f"gemini:{GEMINI_MODEL}"))
    taplog = vendors.proxy(servers, tmp_path / "data", rules)
    own = vendors.anthropic if kind == "ant" else vendors.openai
    own.down = {"status": "503"}
    client = anthropic_at(taplog.url) if kind == "ant" else openai_at(taplog.url)

    run(client, stream)

    served = model_requests(vendors.gemini)
    assert len(served) == 8
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert {f"{r.path}?{r.query}".rstrip("?") for r in served} == {
        f"/v1beta/models/{GEMINI_MODEL}:{method}"
    }
    assert all(r.headers["x-goog-api-key"] == GEMINI_FALLBACK_KEY for r in served)
    events = _events(taplog, 8)
    assert {(f["from_provider"], f["to_provider"]) for f in events if f["type"] == "failover"} == {
        ("anthropic" if kind == "ant" else "openai", "gemini")
    }
    _tool_events_paired(events)
    # Every call Gemini made comes back on its part: its own signature where the client
    # kept it (Claude's clients keep thinking blocks), Google's stand-in where it could not.
    later = [orjson.loads(r.body) for r in served[1:4]]
    signed = [
        part.get("thoughtSignature")
        for body in later
        for content in body["contents"]
        if content["role"] == "model"
        for part in content["parts"][:1]
        if "functionCall" in part
    ]
    assert signed and all(signed)
    if agent == "anthropic":
        assert SKIP_VALIDATION not in signed
        assert all(base64.b64decode(s) for s in signed)
    else:
        assert set(signed) == {SKIP_VALIDATION}


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_a_run_recorded_through_an_outage_replays_as_its_client_got_it(
    servers, vendors, tmp_path, stream, caplog
):
    taplog = vendors.proxy(servers, tmp_path / "data", _rules(("gemini-*", TARGETS["openai"])))
    vendors.gemini.down = {"status": "503"}
    texts = gemini_agent(gemini_at(taplog.url), stream)
    _events(taplog, 8)
    heard = [len(v.requests) for v in (vendors.gemini, vendors.openai, vendors.anthropic)]
    caplog.set_level("INFO", logger="taplog")

    replayed = gemini_agent(gemini_at(serve_replay(servers, taplog.data_dir)), stream)

    assert replayed == texts
    said = [r.getMessage() for r in caplog.records if r.name == "taplog"]
    assert sum(m.startswith("replay hit") for m in said) == 8
    assert not [m for m in said if m.startswith("replay miss")]
    assert [len(v.requests) for v in (vendors.gemini, vendors.openai, vendors.anthropic)] == heard


def test_a_stream_gemini_breaks_for_a_claude_client_is_continued_into_one_whole_answer(
    servers, vendors, tmp_path
):
    """Gemini serves an Anthropic client while Claude is down, breaks off mid-stream, and
    the next target continues the answer: the client gets one whole answer, never a
    passage twice, as between OpenAI and Anthropic."""
    rule = {"model": "claude-*", "to": [f"gemini:{GEMINI_MODEL}", "openai:gpt-4.1"], **QUICK}
    taplog = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})
    vendors.anthropic.down = {"status": "503"}
    vendors.gemini.down = {"cut": "3"}

    got = ask_sdk(taplog.url, "anthropic.messages", stream=True)

    assert (got.error, got.text) == (None, STORY_ANSWER)
    answers = [e for e in _events(taplog, 1) if e["type"] == "llm.response"]
    tried = [(a["provider"], a["outcome"]) for a in answers]
    assert ("gemini", "upstream_cut") in tried and tried[-1] == ("openai", "ok")
    assert answers[-1]["rescue"]["verdict"] in ("continued", "trimmed")  # Claude is still down


def test_claude_back_after_gemini_served_a_tool_loop_gets_no_thinking_it_did_not_sign(
    servers, vendors, tmp_path
):
    """The agent keeps Gemini's signatures as thinking blocks; Claude would refuse them, so
    they stay with taplog when the call goes back to Claude."""
    taplog = vendors.proxy(
        servers, tmp_path / "data", _rules(("claude-*", f"gemini:{GEMINI_MODEL}"))
    )
    client = anthropic_at(taplog.url)
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in TOOL_NAMES]
    messages: list = [{"role": "user", "content": PLAN}]

    def turn():
        with client.messages.stream(
            model="claude-sonnet-4-6", max_tokens=1024, messages=messages, tools=tools
        ) as answer:
            message = answer.get_final_message()
        messages.append({"role": "assistant", "content": [b.model_dump() for b in message.content]})
        uses = [b for b in message.content if b.type == "tool_use"]
        results = [{"type": "tool_result", "tool_use_id": u.id, "content": "ok"} for u in uses]
        messages.append({"role": "user", "content": results})
        return message

    vendors.anthropic.down = {"status": "503"}
    for _ in range(2):  # Gemini serves the two tool turns
        assert turn().stop_reason == "tool_use"
    kept = [m["content"][0] for m in messages if m["role"] == "assistant"]
    assert all(b["type"] == "thinking" and b["signature"].startswith("gemini.") for b in kept)
    vendors.anthropic.down = {}
    taplog.app[BREAKERS]["anthropic:claude-sonnet-4-6"].cool_down = 0.0
    assert turn().content[0].text == "Echo: Plan my trip to Paris."  # Claude's answer

    (sent,) = [orjson.loads(r.body) for r in model_requests(vendors.anthropic)][-1:]
    blocks = [b for m in sent["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert sum(b["type"] == "tool_use" for b in blocks) == 3
    assert not any(b["type"] == "thinking" for b in blocks)


def test_a_gemini_stream_without_sse_is_served_as_the_json_array_it_asked_for(
    servers, vendors, tmp_path
):
    taplog = vendors.proxy(servers, tmp_path / "data", _rules(("gemini-*", TARGETS["anthropic"])))
    vendors.gemini.down = {"status": "503"}
    body = {"contents": [{"role": "user", "parts": [{"text": "Stream me !events=3"}]}]}
    answer = httpx.post(
        f"{taplog.url}/v1beta/models/{GEMINI_MODEL}:streamGenerateContent",
        json=body,
        headers={"x-goog-api-key": GEMINI_KEY},
    )
    assert answer.status_code == 200 and answer.headers["content-type"].startswith(
        "application/json"
    )
    chunks = answer.json()
    assert isinstance(chunks, list) and len(chunks) > 1
    text = "".join(
        part.get("text", "") for c in chunks for part in c["candidates"][0]["content"]["parts"]
    )
    assert text == "Echo: Stream me"
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_what_only_gemini_can_do_is_left_out_and_recorded_or_refused(servers, vendors, tmp_path):
    """Google Search grounding has no twin at Claude: left out (and recorded) by default,
    the call refused with Gemini's own error when the rule says so."""
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Search for it"}]}],
        "tools": [{"googleSearch": {}}],
    }
    url = f"/v1beta/models/{GEMINI_MODEL}:generateContent"
    headers = {"x-goog-api-key": GEMINI_KEY}
    vendors.gemini.down = {"status": "503"}

    leaving = vendors.proxy(servers, tmp_path / "a", _rules(("gemini-*", TARGETS["anthropic"])))
    answer = httpx.post(leaving.url + url, json=body, headers=headers)
    assert answer.status_code == 200
    assert answer.json()["candidates"][0]["content"]["parts"] == [{"text": "Echo: Search for it"}]
    translated = [e for e in _events(leaving, 1) if e.get("translated_from")]
    assert any("googleSearch" in left for left in translated[0]["dropped"])

    strict = {"fallback": [{**_rules(("gemini-*", TARGETS["anthropic"]))["fallback"][0]}]}
    strict["fallback"][0]["leave_out_untranslatable"] = False
    refusing = vendors.proxy(servers, tmp_path / "b", strict)
    refused = httpx.post(refusing.url + url, json=body, headers=headers)
    assert refused.status_code == 503
    assert refused.json()["error"]["status"] == "UNAVAILABLE"  # Gemini's own, as it came
