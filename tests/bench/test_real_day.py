"""bench/real_day's generator makes a Claude Code day as the CLI sends it: the same bytes for
a seed, valid Messages bodies, threads interleaved, markers moving, a compaction."""

from __future__ import annotations

import hashlib
import itertools
import tempfile
from pathlib import Path

import orjson
import pytest

from bench.real_day import bodies
from bench.real_day.side import CONTINUED
from bench.real_day.texts import LARGEST, SMALLEST
from bench.real_day.thread import Call
from tests.fakes.vendor import Anthropic

CALLS = 260
SEED = 3
CONTEXT_TOKENS = 40_000  # a compaction within CALLS (the default is 300k)


def _day(seed: int = SEED) -> list[Call]:
    return list(bodies.generate(CALLS, seed, CONTEXT_TOKENS))


@pytest.fixture(scope="module")
def day_calls() -> list[tuple[Call, dict]]:
    return [(call, orjson.loads(call.body)) for call in _day()]


def _digest(calls: list[Call]) -> str:
    return hashlib.sha256(b"".join(call.line() for call in calls)).hexdigest()


def _marked(body: dict) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, m in enumerate(body["messages"])
        if isinstance(m["content"], list)
        for j, block in enumerate(m["content"])
        if "cache_control" in block
    ]


def test_the_same_seed_gives_the_same_bytes_and_another_seed_others(day_calls):
    assert len(day_calls) == CALLS
    assert _digest(_day()) == _digest([call for call, _ in day_calls])
    assert _digest(_day(SEED + 1)) != _digest([call for call, _ in day_calls])


def test_a_written_day_reads_back_byte_for_byte(day_calls, tmp_path: Path):
    path = tmp_path / "day.jsonl"
    found = bodies.write((call for call, _ in day_calls), path)
    assert found["calls"] == CALLS and found["bytes"] == sum(len(c.body) for c, _ in day_calls)
    for (call, _), back in zip(day_calls, bodies.load(path), strict=True):
        assert (back.body, back.headers, back.thread, back.path) == (
            call.body,
            call.headers,
            call.thread,
            call.path,
        )


def test_every_body_is_a_valid_messages_request_with_claude_codes_headers(day_calls):
    sessions = set()
    for call, body in day_calls:
        assert Anthropic().validate(body) is None
        assert call.path == "/v1/messages?beta=true"
        assert call.headers["anthropic-version"] == "2023-06-01"
        assert call.headers["anthropic-beta"] and call.headers["user-agent"].startswith(
            "claude-cli/"
        )
        session = call.headers["x-claude-code-session-id"]
        assert orjson.loads(body["metadata"]["user_id"])["session_id"] == session
        sessions.add(session)
        assert call.stream is body["stream"]
    assert len(sessions) == 1


def test_tool_calls_are_answered_and_thinking_is_signed(day_calls):
    sizes = []  # of the results of reads and shell commands
    for _, body in day_calls:
        messages = [m for m in body["messages"] if m["role"] != "system"]
        for asked, answered in itertools.pairwise(messages):
            if asked["role"] != "assistant":
                continue
            ids = [b["id"] for b in asked["content"] if b["type"] == "tool_use"]
            results = [b for b in answered["content"] if b["type"] == "tool_result"]
            assert [r["tool_use_id"] for r in results] == ids
            names = {b["id"]: b["name"] for b in asked["content"] if b["type"] == "tool_use"}
            sizes += [
                len(r["content"].encode())
                for r in results
                if names[r["tool_use_id"]] in ("Bash", "Read")
            ]
            for block in asked["content"]:
                if block["type"] == "thinking":
                    assert block["thinking"] and len(block["signature"]) >= 400
    assert SMALLEST <= min(sizes) < 1_000 and 30_000 < max(sizes) <= LARGEST + 20


def test_main_sub_agent_and_side_calls_interleave(day_calls):
    threads = [call.thread for call, _ in day_calls]
    kinds = {t.split("-")[0] for t in threads}
    assert kinds == {"main", "agent", "side"}
    assert len({t for t in threads if t.startswith("agent-")}) >= 2
    switches = sum(a != b for a, b in itertools.pairwise(threads))
    assert switches > CALLS // 10
    sub_agents = [t for t in threads if t.startswith("agent-")]
    assert any(a != b for a, b in itertools.pairwise(sub_agents)), "sub-agents side by side"
    small = [b for c, b in day_calls if c.thread == "side"]
    assert all(not b.get("tools") for b in small)
    assert {b["stream"] for b in small} == {True, False}  # labels streamed, checks not
    assert all(len(c.body) < 10_000 for c, _ in day_calls if c.thread == "side")


def test_the_cache_marker_moves_to_the_last_user_message(day_calls):
    main = [(c, b) for c, b in day_calls if c.thread == "main"]
    places = []
    for _, body in main:
        (place,) = _marked(body)
        last_user = max(i for i, m in enumerate(body["messages"]) if m["role"] == "user")
        assert place == (last_user, len(body["messages"][last_user]["content"]) - 1)
        places.append(place)
    moved = sum(a != b for a, b in itertools.pairwise(places))
    assert moved >= 0.9 * (len(places) - 1)


def test_reminders_change_and_ride_along(day_calls):
    reminders = {
        block["text"]
        for _, body in day_calls
        for m in body["messages"]
        if m["role"] == "user"
        if isinstance(m["content"], list)
        for block in m["content"]
        if block["type"] == "text" and block["text"].startswith("<system-reminder>")
    }
    assert len(reminders) > 5
    main = [b for c, b in day_calls if c.thread == "main"]
    assert any(m["role"] == "system" for body in main for m in body["messages"][2:])


def test_a_compaction_restarts_the_history_from_a_summary(day_calls):
    index = next(i for i, (c, _) in enumerate(day_calls) if c.kind == "compaction")
    compaction = day_calls[index][1]
    assert len(day_calls[index][0].body) > CONTEXT_TOKENS * 4
    assert "summary" in compaction["messages"][-1]["content"][0]["text"]
    after = next(b for c, b in day_calls[index + 1 :] if c.thread == "main")
    first = after["messages"][0]["content"]
    assert any(block["text"].startswith(CONTINUED) for block in first if block["type"] == "text")
    assert len(after["messages"]) < len(compaction["messages"]) // 4


def test_compare_times_two_trees_beside_the_floor_in_one_run(
    day_calls, capsys, tmp_path, monkeypatch
):
    """`bench/real_day compare`: this tree against another (here itself), each call of the
    day sent to the fake vendor, the bare proxy and both taplogs in turn; their data dirs
    are gone after."""
    from bench.common import ROOT
    from bench.real_day import compare

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    compare.compare([call for call, _ in day_calls[:8]], ROOT, workers=0, rounds=1)
    assert not list(tmp_path.iterdir())
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["round 1", "all 1 rounds"]
    for line in lines:
        cells = line.split(": ", 1)[1].split(" | ")
        assert [cell.split(" p50 ")[0] for cell in cells] == ["bare", "this tree", "other tree"]
        assert all(" p90 " in cell and cell.endswith(("ms", "x)")) for cell in cells)
