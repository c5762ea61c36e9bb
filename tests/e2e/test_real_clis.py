"""The real coding agents, Claude Code and Codex, through taplog: straight, and through an
outage of their own vendor with the quick failover set-up of docs/failover.md
(`tests.fakes.clis` runs them)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.toolevents import epoch
from tests.fakes.clis import (
    CLAUDE_PROMPT,
    CODEX_PROMPT,
    codex_answer,
    proxy_for,
    run_claude,
    run_codex,
)

pytestmark = pytest.mark.slow


def _outage(events: list[dict]) -> str:
    """How long the outage cost, by the log: the first call's wait (its failed tries and
    the fallback's answer, as the client waited) and the whole tool loop's."""
    answers = [e for e in events if e["type"] == "llm.response"]
    failed = next(e for e in answers if e["status"] != 200)
    served = [e for e in answers if e["status"] == 200][-1]
    loop = (epoch(served["ts"]) - epoch(failed["ts"])) + served["latency_ms"] / 1000
    first = next(e for e in events if e["type"] == "call.answered")
    assert first["status"] == 200 and first["attempt"] > 1  # served after the failed tries
    return f"first call {first['latency_ms'] / 1000:.2f} s, whole tool loop {loop:.2f} s"


def _one_session_with_its_tool_events(proxy, tool: str) -> list[dict]:
    sessions = proxy.wait_for(
        lambda s: any(e["type"] == "tool.post" for events in s.values() for e in events)
    )
    (events,) = [
        events for events in sessions.values() if any(e["type"] == "tool.pre" for e in events)
    ]
    pre = [e for e in events if e["type"] == "tool.pre"]
    post = [e for e in events if e["type"] == "tool.post"]
    assert [e["name"] for e in pre] == [tool]
    assert [e["call_id"] for e in post] == [pre[0]["call_id"]]
    assert "taplog-ok" in json.dumps(post[0]["result"])
    return events


def test_claude_code_works_through_taplog(servers, vendors, tmp_path):
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    result = run_claude(proxy.url, tmp_path)
    assert result["is_error"] is False and "taplog-ok" in result["result"]
    _one_session_with_its_tool_events(proxy, "Bash")
    assert _listed(proxy) == [("Claude Code", CLAUDE_PROMPT)]


def _listed(proxy) -> list[tuple[str, str]]:
    """`taplog sessions`: each session's client and prompt."""
    data = ["--data-dir", str(proxy.data_dir), "--format", "jsonl"]
    listed = CliRunner().invoke(main, ["sessions", *data])
    return [(r["client"], r["prompt"]) for r in map(json.loads, listed.output.splitlines())]


def test_claude_code_finishes_its_tool_loop_while_anthropic_is_down(servers, vendors, tmp_path):
    proxy = proxy_for(servers, vendors, tmp_path / "data", "claude-*=openai:gpt-4.1")
    vendors.anthropic.down = {"status": "529"}
    result = run_claude(proxy.url, tmp_path)
    assert result["is_error"] is False and "taplog-ok" in result["result"], result
    events = _one_session_with_its_tool_events(proxy, "Bash")
    served = [e for e in events if e["type"] == "llm.response" and e["status"] == 200]
    assert served and all(e["provider"] == "openai" for e in served)
    print(f"Claude Code through an Anthropic outage: {_outage(events)}")


def test_codex_works_through_taplog(servers, vendors, tmp_path):
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    assert "taplog-ok" in codex_answer(run_codex(f"{proxy.url}/v1", tmp_path))
    _one_session_with_its_tool_events(proxy, "exec_command")
    assert _listed(proxy) == [("Codex", CODEX_PROMPT)]


def test_codex_finishes_its_tool_loop_while_openai_is_down(servers, vendors, tmp_path):
    proxy = proxy_for(servers, vendors, tmp_path / "data", "gpt-*=anthropic:claude-sonnet-4-5")
    vendors.openai.down = {"status": "503"}
    answer = codex_answer(run_codex(f"{proxy.url}/v1", tmp_path))
    assert "taplog-ok" in answer
    events = _one_session_with_its_tool_events(proxy, "exec_command")
    served = [e for e in events if e["type"] == "llm.response" and e["status"] == 200]
    assert served and all(e["provider"] == "anthropic" for e in served)
    print(f"Codex through an OpenAI outage: {_outage(events)}")


def test_a_codex_command_that_fails_is_recorded_and_shown_as_failed(servers, vendors, tmp_path):
    """Responses results carry no error flag: Codex states the exit code in its own header."""
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    run_codex(f"{proxy.url}/v1", tmp_path, "!shell_fails")
    sessions = proxy.wait_for(
        lambda s: any(e["type"] == "tool.post" for events in s.values() for e in events)
    )
    [post] = [e for events in sessions.values() for e in events if e["type"] == "tool.post"]
    assert (post["is_error"], post["error_from"], post["exit_code"]) == (True, "exit_code", 2)
    assert "Process exited with code 2" in post["result"]  # recorded whole, as Codex sent it
    shown = CliRunner().invoke(main, ["show", post["session"], "--data-dir", str(proxy.data_dir)])
    assert shown.exit_code == 0, shown.output
    assert "1 tool calls (1 failed)" in shown.output
    assert "→ ERROR [exit 2] ls: cannot access '/taplog-nonexistent'" in shown.output
