"""PreToolUse / PostToolUse from real SDK agent loops, per API, stream and non-stream.

Each agent asks for two tools in parallel, then one tool that fails, then
gets its answer, then talks five more turns (resending the whole history
where the API is stateless). The log must pair every call exactly once.
"""

from __future__ import annotations

import pytest

from tests.fakes.agents import AGENTS, OUTCOMES, TOOL_NAMES, TOOL_SECONDS
from tests.fakes.harness import start_on_fake

EXPECTED_ARGUMENTS = {
    "get_weather": {"city": "Paris"},
    "get_time": {"q": "get_time"},
    "read_file": {"path": "README.md"},
}


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("api", sorted(AGENTS))
def test_agent_loop_pairs_every_tool_call_exactly_once(request, taplog, api, stream):
    agent, client_fixture, model, has_error_flag = AGENTS[api]
    agent(request.getfixturevalue(client_fixture), stream)

    sessions = taplog.wait_responses(8)  # 3 plan turns + 5 more
    assert len(sessions) == 1, sorted(sessions)
    (events,) = sessions.values()
    pres = [e for e in events if e["type"] == "tool.pre"]
    posts = [e for e in events if e["type"] == "tool.post"]
    assert [p["name"] for p in pres] == list(TOOL_NAMES)
    assert {p["name"]: p["arguments"] for p in pres} == EXPECTED_ARGUMENTS
    assert all(p["flags"] == [] and p["server"] is False and p["model"] == model for p in pres)
    assert len({p["call_id"] for p in pres}) == 3

    by_id = {p["call_id"]: p for p in pres}
    assert sorted(p["call_id"] for p in posts) == sorted(by_id)  # once each, despite resends
    for post in posts:
        asked = by_id[post["call_id"]]
        assert post["name"] == asked["name"]
        assert post["seq"] > asked["seq"] and post["exchange"] != asked["exchange"]
        expected, failed = OUTCOMES[asked["name"]]
        assert post["result"] == expected
        assert post["is_error"] is (failed and has_error_flag)
        assert post["duration_ms"] >= TOOL_SECONDS * 1000
        assert post["flags"] == []


def test_a_result_for_a_call_never_seen_is_flagged_orphan(oai, taplog):
    forged = [
        {"role": "user", "content": "Imported history."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_from_elsewhere",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_from_elsewhere", "content": "rainy"},
    ]
    oai.chat.completions.create(model="gpt-4.1", messages=forged)
    oai.chat.completions.create(
        model="gpt-4.1",
        messages=[
            *forged,
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "x"},
        ],
    )
    posts = [e for e in taplog.events("tool.post")]
    assert len(posts) == 1
    assert posts[0]["call_id"] == "call_from_elsewhere" and posts[0]["flags"] == ["orphan_result"]
    assert posts[0]["name"] is None and posts[0]["duration_ms"] is None


def test_results_in_resent_history_count_once_per_session_whoever_sent_that_history_first(
    ant, taplog
):
    """Agent-sized bodies (over the size taplog parses from where they differ from an
    earlier one): a session's request is read for the results it adds, yet a session that
    sends another session's history has every result in it counted in its own log."""
    padding = {"role": "user", "content": "Read the whole repository first. " * 800}

    def turn(call_id: str) -> list[dict]:
        return [
            {"role": "assistant", "content": [_tool_use(call_id)]},
            {"role": "user", "content": [_tool_result(call_id)]},
        ]

    first = [padding, *turn("toolu_one")]
    grown = [*first, *turn("toolu_two")]
    for session, messages in [("a", first), ("a", grown), ("b", [*grown, *turn("toolu_3")])]:
        ant.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=100,
            messages=messages,
            extra_headers={"x-taplog-session": session},
        )
    sessions = taplog.wait_responses(3)
    posted = {
        session: [e["call_id"] for e in events if e["type"] == "tool.post"]
        for session, events in sessions.items()
    }
    assert posted == {"a": ["toolu_one", "toolu_two"], "b": ["toolu_one", "toolu_two", "toolu_3"]}


def _tool_use(call_id: str) -> dict:
    return {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": "a"}}


def _tool_result(call_id: str) -> dict:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "contents of a"}


def test_a_call_never_answered_is_flagged_when_the_session_goes_idle(servers, fake, tmp_path):
    import anthropic

    taplog = start_on_fake(servers, fake, tmp_path / "data", session_idle_minutes=0.01)
    client = anthropic.Anthropic(base_url=taplog.url, api_key="sk-ant-test-0123456789")
    client.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=100,
        messages=[{"role": "user", "content": "Weather? !plan=get_weather"}],
        tools=[{"name": "get_weather", "input_schema": {"type": "object"}}],
    )

    def unanswered(sessions):
        return any(
            e["type"] == "tool.post" and e["flags"] == ["unanswered"]
            for events in sessions.values()
            for e in events
        )

    (events,) = taplog.wait_for(unanswered, timeout=10).values()
    pre, post = (e for e in events if e["type"].startswith("tool."))
    assert post["call_id"] == pre["call_id"] and post["name"] == "get_weather"
    assert post["result"] is None and post["is_error"] is None


def test_tool_calls_with_a_normal_stop_reason_are_flagged(oai, ant, taplog):
    oai.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "x !plan=get_weather !normal_stop"}],
        tools=[{"type": "function", "function": {"name": "get_weather"}}],
    )
    with ant.messages.stream(
        model="claude-sonnet-4-6",
        max_tokens=100,
        messages=[{"role": "user", "content": "y !plan=get_time !normal_stop"}],
        tools=[{"name": "get_time", "input_schema": {"type": "object"}}],
    ) as stream:
        stream.get_final_message()
    taplog.wait_responses(2)
    pres = taplog.events("tool.pre")
    assert sorted(p["name"] for p in pres) == ["get_time", "get_weather"]
    assert all(p["flags"] == ["finish_mismatch"] for p in pres)


def test_no_argument_tools_get_empty_arguments(ant, taplog):
    with ant.messages.stream(
        model="claude-sonnet-4-6",
        max_tokens=100,
        messages=[{"role": "user", "content": "now? !plan=get_time !noargs"}],
        tools=[{"name": "get_time", "input_schema": {"type": "object"}}],
    ) as stream:
        stream.get_final_message()
    taplog.wait_responses(1)
    (pre,) = taplog.events("tool.pre")
    assert pre["arguments"] == {} and pre["arguments_error"] is None


def test_malformed_bodies_are_forwarded_and_recorded_without_tool_events(taplog, fake):
    import httpx

    odd = (
        b'{"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"},'
        b' {"role": "tool", "tool_call_id": 7}, {"role": "tool", "content": []}]}'
    )
    reply = httpx.post(
        f"{taplog.url}/v1/chat/completions",
        content=odd,
        headers={
            "authorization": "Bearer sk-test-odd-0123456789",
            "content-type": "application/json",
        },
    )
    assert fake.requests[-1].body == odd
    taplog.wait_responses(1)
    assert reply.status_code == 200
    (request,) = taplog.events("llm.request")
    assert request["body"]["messages"][1] == {"role": "tool", "tool_call_id": 7}
    assert taplog.events("tool.post") == [] and taplog.events("error") == []


CODEX_RESULT = "Chunk ID: 3b753e\nWall time: 0.0100 seconds\nProcess exited with code {code}\n"
CODEX_RESULT += "Original token count: 9\nOutput:\n{printed}"


@pytest.mark.parametrize(
    ("content", "failed", "exit_code"),
    [
        (CODEX_RESULT.format(code=2, printed="ls: cannot access 'x'\n"), True, 2),
        (CODEX_RESULT.format(code=0, printed="Process exited with code 1\n"), False, 0),
        ("Process exited with code 1", False, None),  # no client header: not judged
        ("rainy", False, None),
    ],
    ids=["exit-2", "exit-0-printing-a-code", "no-header", "plain"],
)
def test_a_chat_result_fails_by_the_exit_code_its_client_states(
    oai, taplog, content, failed, exit_code
):
    """OpenAI's tool messages have no error flag; a client's own header can say it failed."""
    call = {"id": "call_ls", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "List it."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_ls", "content": content},
    ]
    oai.chat.completions.create(model="gpt-4.1", messages=messages)
    [post] = taplog.events("tool.post")
    assert post["result"] == content and post["is_error"] is failed
    assert post.get("exit_code") == exit_code
    assert post.get("error_from") == ("exit_code" if failed else None)
