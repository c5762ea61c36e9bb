"""`taplog fork`: retry a recorded SDK tool session from a tool step with another answer."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.query.connect import connect, query
from taplog.recorder.store.lognames import iter_lines
from taplog.recorder.store.reader import read_session
from taplog.recorder.store.rows import read_rows, rows_of
from taplog.recorder.verify import verify
from tests.disk import log_of
from tests.fakes.agents import OUTCOMES, chat_agent

ENVELOPE = ("session", "prev", "h")


def fork_cli(taplog, *args: str):
    return CliRunner().invoke(main, ["fork", *args, "--data-dir", str(taplog.data_dir)])


def strip(event: dict) -> dict:
    return {k: v for k, v in event.items() if k not in ENVELOPE}


OTHER = {"get_weather": "rain, 9°C", "get_time": "23:00"}


def continue_fork(oai, forked: list[dict], session: str) -> None:
    """The same history, but the tools answer differently this time."""
    request = [e for e in forked if e["type"] == "llm.request"][-1]["body"]
    answer = [e for e in forked if e["type"] == "llm.response"][-1]["body"]
    message = answer["choices"][0]["message"]
    messages = [*request["messages"], message] + [
        {"role": "tool", "tool_call_id": c["id"], "content": OTHER[c["function"]["name"]]}
        for c in message["tool_calls"]
    ]
    oai.chat.completions.create(
        model="gpt-4.1",
        messages=messages,
        tools=request["tools"],
        extra_headers={"X-Taplog-Session": session},
    )


def test_fork_at_a_tool_step_and_continue_with_another_answer(taplog, oai):
    chat_agent(oai, stream=False)
    ((origin, events),) = taplog.wait_responses(8).items()
    origin_file = log_of(taplog.data_dir, origin)
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

    continue_fork(oai, forked, "retry-1")
    sessions = taplog.wait_for(lambda s: len(s["retry-1"]) > at + 3)
    continued = sessions["retry-1"][at + 1 :]
    posts = [e for e in continued if e["type"] == "tool.post"]
    assert {p["name"]: p["result"] for p in posts} == OTHER
    assert all(p["flags"] == [] for p in posts)  # paired with the copied tool calls
    assert all(p["duration_ms"] is None for p in posts)  # asked in the origin: not timed here
    assert [e["seq"] for e in sessions["retry-1"]] == list(range(1, len(sessions["retry-1"]) + 1))

    # The original is untouched; both logs verify.
    assert origin_file.read_bytes() == origin_bytes
    assert {p["result"] for p in sessions[origin] if p["type"] == "tool.post"} == {
        out for out, _ in OUTCOMES.values()
    }
    assert all(report.ok for report in verify(taplog.data_dir))


def test_a_fork_has_its_typed_rows_beside_it_and_lists_from_them(taplog, oai):
    chat_agent(oai, stream=False)
    ((origin, events),) = taplog.wait_responses(8).items()
    at = events[-1]["seq"]
    assert fork_cli(taplog, origin, "--at", str(at), "--as", "copy").exit_code == 0

    log = log_of(taplog.data_dir, "copy")
    assert read_rows(log) == b"".join(rows_of(iter_lines(log)))  # readers take these
    listed = CliRunner().invoke(
        main, ["sessions", "--format", "jsonl", "--data-dir", str(taplog.data_dir)]
    )
    calls = {row["session"]: row["calls"] for row in map(orjson.loads, listed.output.splitlines())}
    assert calls == {origin: 8, "copy": 0}  # a fork counts only the calls made after it


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
        f"{s}.jsonl.zst" for s in (origin, "a", default.output.strip())
    )


def test_a_continued_fork_counts_its_own_time_calls_and_cost_and_names_its_origin(taplog, oai):
    chat_agent(oai, stream=False)
    ((origin, events),) = taplog.wait_responses(8).items()
    at = [e for e in events if e["type"] == "tool.pre"][1]["seq"]
    assert fork_cli(taplog, origin, "--at", str(at), "--as", "retry-2").exit_code == 0
    continue_fork(oai, read_session(taplog.data_dir, "retry-2"), "retry-2")
    taplog.wait_for(lambda s: any(e["type"] == "llm.response" for e in s["retry-2"][at:]))

    con = connect(taplog.data_dir)
    row = dict(zip(*_columns(con, "SELECT * FROM sessions WHERE session = 'retry-2'"), strict=True))
    own = query(con, "SELECT cost_usd FROM llm_calls WHERE session = 'retry-2' AND NOT copied")
    [(own_cost,)] = own.fetchall()
    assert (row["forked_from"], row["forked_at"], row["source"]) == (origin, at, "forked")
    # its call, the two results it sent for the copied calls, and the tool its answer asked
    assert (row["calls"], row["cost_usd"], row["tool_calls"]) == (1, pytest.approx(own_cost), 3)
    assert (row["last_at"] - row["started_at"]).total_seconds() < 5  # from the fork on
    [(spent,)] = query(con, "SELECT sum(cost_usd) FROM llm_calls WHERE NOT copied").fetchall()
    [(total,)] = query(con, "SELECT sum(cost_usd) FROM sessions").fetchall()
    assert total == pytest.approx(spent)  # the copied calls are the origin's, counted once

    shown = CliRunner().invoke(main, ["show", "retry-2", "--data-dir", str(taplog.data_dir)])
    assert shown.exit_code == 0, shown.output
    assert "(forked, " in shown.output and f"forked from {origin} at seq {at}" in shown.output
    assert "1 calls · 3 tool calls (0 failed)" in shown.output
    data = ["--data-dir", str(taplog.data_dir)]
    tail = CliRunner().invoke(main, ["tail", "retry-2", *data, "--lines", "50"])
    assert f"session.forked  from {origin} at seq {at}" in tail.output
    listed = CliRunner().invoke(main, ["sessions", *data, "--format", "jsonl"])
    origins = {r["session"]: r["origin"] for r in map(orjson.loads, listed.output.splitlines())}
    assert origins == {origin: None, "retry-2": origin}


def _columns(con, sql: str) -> tuple[list[str], tuple]:
    relation = query(con, sql)
    return relation.columns, relation.fetchall()[0]
