"""The real coding agents, Claude Code, Codex and the Gemini CLI, through taplog: straight,
and through an outage of their own vendor with the quick failover set-up of
docs/failover.md, to each of the other two vendors (`tests.fakes.clis` runs them)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.store.lognames import log_path
from taplog.recorder.toolevents import epoch
from taplog.recorder.verify import verify
from tests.fakes.clis import (
    CLAUDE_PROMPT,
    CODEX_PROMPT,
    SUB_AGENT_PROMPT,
    codex_answer,
    proxy_for,
    run_claude,
    run_codex,
    run_gemini,
)
from tests.fakes.harness import serve_on_fake, serve_replay, start_on_fake
from tests.fakes.keys import GEMINI_KEY

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
    events = _one_session_with_its_tool_events(proxy, "Bash")
    assert _listed(proxy) == [("Claude Code", CLAUDE_PROMPT)]
    chat = _messages(proxy, events[0]["session"])
    assert _said(chat, "user", CLAUDE_PROMPT) < _said(chat, "tool", 'Bash {"command":"echo')
    assert chat[_said(chat, "tool", "Bash") + 1] == "  → taplog-ok"
    assert chat[-1] == "assistant  Done: taplog-ok"
    assert _said(chat, "context", "<system-reminder>") < _said(chat, "user", CLAUDE_PROMPT)


def test_claude_code_with_a_base_url_ending_in_v1_is_told_the_base_url(servers, vendors, tmp_path):
    """`ANTHROPIC_BASE_URL=…/v1` (Claude Code then calls /v1/v1/messages): it shows taplog's
    message naming the base URL that works; nothing reaches a vendor, no session is made (its
    `HEAD /v1` probe included)."""
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    result = run_claude(f"{proxy.url}/v1", tmp_path, succeeds=False)
    assert result["is_error"] is True
    assert result["result"].endswith(f"set ANTHROPIC_BASE_URL={proxy.url}")
    assert vendors.anthropic.requests == vendors.openai.requests == []
    proxy.flush()
    assert list((tmp_path / "data").rglob("*.jsonl*")) == []


def test_claude_codes_sub_agent_reads_inside_the_tool_call_that_started_it(
    servers, vendors, tmp_path
):
    """Claude Code 2.1.197's Agent tool: the sub-agent's calls come in the same session,
    with its id in a header; its conversation is shown inside the Agent call."""
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    result = run_claude(proxy.url, tmp_path, SUB_AGENT_PROMPT, ("Bash", "Agent"))
    assert result["is_error"] is False and "taplog-ok" in result["result"]
    (events,) = proxy.wait_for(lambda s: sum(_answers(e) for e in s.values()) >= 4).values()
    agents = {e["headers"].get("x-claude-code-agent-id") for e in events if "headers" in e}
    assert len(agents - {None}) == 1  # the sub-agent's calls name it; the main ones do not
    chat = _messages(proxy, events[0]["session"])
    agent = _said(chat, "tool", "Agent {")
    assert chat[agent + 1].startswith("  │ sub-agent ")
    inside = chat[agent + 1 : _at(chat, "  → Done: taplog-ok")]
    assert all(line.startswith("  │ ") for line in inside)
    assert _at(inside, "  │ user       Run the shell") < _at(inside, "  │ tool       Bash")
    assert "  │ assistant  Done: taplog-ok" in inside
    assert chat[-1 - 4].startswith("assistant  Done: Done: taplog-ok")  # and its usage lines


def _answers(events: list[dict]) -> int:
    return sum(e["type"] == "llm.response" for e in events)


def _messages(proxy, session: str) -> list[str]:
    """`taplog show SESSION --messages`, as lines."""
    data = ["--data-dir", str(proxy.data_dir)]
    shown = CliRunner().invoke(main, ["show", session, "--messages", *data])
    assert shown.exit_code == 0, shown.output
    return shown.output.splitlines()


def _said(chat: list[str], speaker: str, start: str) -> int:
    """The first line where `speaker` says something starting with `start`."""
    return _at(chat, f"{speaker:<10} {start}")


def _at(chat: list[str], start: str) -> int:
    return next(i for i, line in enumerate(chat) if line.startswith(start))


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
    events = _one_session_with_its_tool_events(proxy, "exec_command")
    assert _listed(proxy) == [("Codex", CODEX_PROMPT)]
    _assert_codex_chat(_messages(proxy, events[0]["session"]))


def _assert_codex_chat(chat: list[str]) -> None:
    """The prompt, the shell call, its result with the exit code Codex states, the answer."""
    assert _said(chat, "context", "<environment_context>") < _said(chat, "user", CODEX_PROMPT)
    tool = _said(chat, "tool", 'exec_command {"cmd":"echo taplog-ok"}')
    assert chat[tool + 1] == "  → [exit 0] taplog-ok\\n"
    answer = _said(chat, "assistant", "Done: ")
    assert tool < answer and chat[-1].strip() == "taplog-ok"


def test_codex_finishes_its_tool_loop_while_openai_is_down(servers, vendors, tmp_path):
    proxy = proxy_for(servers, vendors, tmp_path / "data", "gpt-*=anthropic:claude-sonnet-4-5")
    vendors.openai.down = {"status": "503"}
    answer = codex_answer(run_codex(f"{proxy.url}/v1", tmp_path))
    assert "taplog-ok" in answer
    events = _one_session_with_its_tool_events(proxy, "exec_command")
    served = [e for e in events if e["type"] == "llm.response" and e["status"] == 200]
    assert served and all(e["provider"] == "anthropic" for e in served)
    print(f"Codex through an OpenAI outage: {_outage(events)}")
    chat = _messages(proxy, events[0]["session"])  # the answers read from the fallback's
    _assert_codex_chat([line for line in chat if not line.startswith("note ")])
    assert any(line.startswith("note       failover openai:gpt-5.5 → anthropic:") for line in chat)


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
    chat = _messages(proxy, post["session"])
    assert "  → ERROR [exit 2] ls: cannot access '/taplog-nonexistent'" in "\n".join(chat)


def test_the_three_clis_work_through_serve_with_workers(servers, fake, tmp_path):
    """`taplog serve --workers 2`, as a user starts it: the recorder in a process of its own.
    The Gemini CLI's run replays from another directory, every call a hit."""
    served = serve_on_fake(fake, tmp_path / "data", "--workers", "2")
    try:
        assert "taplog-ok" in run_claude(served.url, tmp_path / "claude")["result"]
        assert "taplog-ok" in codex_answer(run_codex(f"{served.url}/v1", tmp_path / "codex"))
        gemini = run_gemini(f"{served.url}/s/gemini-cli", tmp_path / "gemini")
        assert "taplog-ok" in gemini["response"]
    finally:
        code, err = served.stop()
    assert code == 0, err
    heard = len(fake.requests)
    cassette = serve_replay(servers, log_path(tmp_path / "data" / "sessions", "gemini-cli"))
    assert run_gemini(cassette, tmp_path / "gemini-again")["response"] == gemini["response"]
    assert len(fake.requests) == heard
    reports = verify(tmp_path / "data")
    assert len(reports) == 3 and all(report.ok for report in reports)
    data = ["--data-dir", str(tmp_path / "data"), "--format", "jsonl"]
    listed = CliRunner().invoke(main, ["sessions", *data])
    clients = {
        json.loads(line)["session"]: json.loads(line)["client"]
        for line in listed.output.splitlines()
    }
    assert sorted(client for session, client in clients.items() if session != "gemini-cli") == [
        "Claude Code",
        "Codex",
    ]
    assert clients["gemini-cli"] == "Gemini CLI"


def test_the_gemini_cli_works_through_taplog(servers, fake, tmp_path):
    """Its tool loop reaches Gemini through taplog as it came, key and all; its calls are
    one session (found from the transcript: it sends no session id), the tool call
    paired with its result, the log whole."""
    proxy = start_on_fake(servers, fake, tmp_path / "data")
    result = run_gemini(proxy.url, tmp_path)
    assert "taplog-ok" in result["response"]
    streamed = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert [(r.path, r.query) for r in fake.requests] == [(streamed, "alt=sse")] * 2
    assert all(r.headers["x-goog-api-key"] == GEMINI_KEY for r in fake.requests)
    events = _one_session_with_its_tool_events(proxy, "run_shell_command")
    answers = [e for e in events if e["type"] == "llm.response"]
    assert [(e["api"], e["status"]) for e in answers] == [("gemini.generate", 200)] * 2
    assert all(report.ok for report in verify(proxy.data_dir))
    data = ["--data-dir", str(proxy.data_dir)]
    shown = CliRunner().invoke(main, ["show", events[0]["session"], "--messages", *data])
    assert shown.exit_code == 0, shown.output
    assert "Run the shell command" in shown.output and "taplog-ok" in shown.output
    assert "run_shell_command" in shown.output


@pytest.mark.parametrize("to", ["anthropic:claude-sonnet-4-6", "openai:gpt-4.1"])
def test_the_gemini_cli_finishes_its_tool_loop_while_gemini_is_down(servers, vendors, tmp_path, to):
    proxy = proxy_for(servers, vendors, tmp_path / "data", f"gemini-*={to}")
    vendors.gemini.down = {"status": "503"}
    result = run_gemini(proxy.url, tmp_path)
    assert "taplog-ok" in result["response"], result
    events = _one_session_with_its_tool_events(proxy, "run_shell_command")
    served = [e for e in events if e["type"] == "llm.response" and e["status"] == 200]
    assert served and {e["provider"] for e in served} == {to.partition(":")[0]}
    print(f"Gemini CLI through a Gemini outage, to {to}: {_outage(events)}")
    shown = CliRunner().invoke(
        main, ["show", events[0]["session"], "--messages", "--data-dir", str(proxy.data_dir)]
    )
    assert shown.exit_code == 0 and "taplog-ok" in shown.output, shown.output
    assert "failover gemini:gemini-2.5-flash → " + to in shown.output


def test_claude_code_and_codex_finish_their_tool_loops_served_by_gemini(servers, vendors, tmp_path):
    rules = ("claude-*=gemini:gemini-2.5-flash", "gpt-*=gemini:gemini-2.5-flash")
    proxy = proxy_for(servers, vendors, tmp_path / "data", *rules)
    vendors.anthropic.down = {"status": "529"}
    vendors.openai.down = {"status": "503"}
    claude = run_claude(f"{proxy.url}/s/claude", tmp_path / "claude")
    assert claude["is_error"] is False and "taplog-ok" in claude["result"], claude
    assert "taplog-ok" in codex_answer(run_codex(f"{proxy.url}/s/codex/v1", tmp_path / "codex"))
    sessions = proxy.wait_for(
        lambda s: sum(e["type"] == "tool.post" for v in s.values() for e in v) >= 2
    )
    for name, tool in (("claude", "Bash"), ("codex", "exec_command")):
        events = sessions[name]
        assert [e["name"] for e in events if e["type"] == "tool.pre"] == [tool]
        served = [e for e in events if e["type"] == "llm.response" and e["status"] == 200]
        assert served and {e["provider"] for e in served} == {"gemini"}
        print(f"{name} through its vendor's outage, to Gemini: {_outage(events)}")
