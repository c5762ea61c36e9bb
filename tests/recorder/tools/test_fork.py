"""`taplog fork`: retry a recorded SDK tool session from a tool step with another answer."""

from __future__ import annotations

from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.store.reader import read_session
from taplog.recorder.verify import verify
from tests.fakes.agents import OUTCOMES, chat_agent

ENVELOPE = ("session", "prev", "h")


def fork_cli(taplog, *args: str):
    return CliRunner().invoke(main, ["fork", *args, "--data-dir", str(taplog.data_dir)])


def strip(event: dict) -> dict:
    return {k: v for k, v in event.items() if k not in ENVELOPE}


def test_fork_at_a_tool_step_and_continue_with_another_answer(taplog, oai):
    chat_agent(oai, stream=False)
    ((origin, events),) = taplog.wait_responses(8).items()
    origin_file = taplog.data_dir / "sessions" / f"{origin}.jsonl"
    origin_bytes = origin_file.read_bytes()
    asked = [e for e in events if e["type"] == "tool.pre"][:2]  # the two parallel calls
    at = asked[-1]["seq"]

    result = fork_cli(taplog, origin, "--at", str(at), "--as", "retry-1")
    assert result.exit_code == 0, result.output
    assert result.output == "retry-1\n"

    forked = read_session(taplog.data_dir, "retry-1")
    assert [strip(e) for e in forked[:at]] == [strip(e) for e in events[:at]]
    assert all(e["session"] == "retry-1" for e in forked)
    mark = forked[at]
    assert mark["type"] == "session.forked" and mark["seq"] == at + 1
    assert (mark["origin"], mark["at"]) == (origin, at)
    assert mark["origin_hash"] == events[at - 1]["h"]

    # Continue the fork: the same history, but the tools answer differently this time.
    request = [e for e in forked if e["type"] == "llm.request"][-1]["body"]
    answer = [e for e in forked if e["type"] == "llm.response"][-1]["body"]
    message = answer["choices"][0]["message"]
    other = {"get_weather": "rain, 9°C", "get_time": "23:00"}
    messages = [*request["messages"], message] + [
        {"role": "tool", "tool_call_id": c["id"], "content": other[c["function"]["name"]]}
        for c in message["tool_calls"]
    ]
    oai.chat.completions.create(
        model="gpt-4.1",
        messages=messages,
        tools=request["tools"],
        extra_headers={"X-Taplog-Session": "retry-1"},
    )
    sessions = taplog.wait_for(lambda s: len(s["retry-1"]) > at + 3)
    continued = sessions["retry-1"][at + 1 :]
    posts = [e for e in continued if e["type"] == "tool.post"]
    assert {p["name"]: p["result"] for p in posts} == other
    assert all(p["flags"] == [] for p in posts)  # paired with the copied tool calls
    assert [e["seq"] for e in sessions["retry-1"]] == list(range(1, len(sessions["retry-1"]) + 1))

    # The original is untouched; both logs verify.
    assert origin_file.read_bytes() == origin_bytes
    assert {p["result"] for p in sessions[origin] if p["type"] == "tool.post"} == {
        out for out, _ in OUTCOMES.values()
    }
    assert all(report.ok for report in verify(taplog.data_dir))


def test_fork_refuses_what_it_cannot_do(taplog, oai):
    chat_agent(oai, stream=False)
    ((origin, events),) = taplog.wait_responses(8).items()
    result = fork_cli(taplog, origin, "--at", str(len(events) + 1))
    assert result.exit_code == 1 and f"has no event {len(events) + 1}" in result.output
    assert fork_cli(taplog, origin, "--at", "3", "--as", "a").exit_code == 0
    result = fork_cli(taplog, origin, "--at", "3", "--as", "a")
    assert result.exit_code == 1 and "'a' already exists" in result.output
    result = fork_cli(taplog, origin, "--at", "3", "--as", "../x")
    assert result.exit_code == 1 and "invalid session id" in result.output
    result = fork_cli(taplog, "nope", "--at", "3")
    assert result.exit_code == 1 and "no session 'nope'" in result.output
    default = fork_cli(taplog, origin, "--at", "2")
    assert default.exit_code == 0 and default.output.startswith(f"{origin}-fork2-")
    assert sorted(p.name for p in (taplog.data_dir / "sessions").iterdir()) == sorted(
        f"{s}.jsonl" for s in (origin, "a", default.output.strip())
    )
