"""The real coding agents, Claude Code and Codex, through taplog: straight, and through an
outage of their own vendor with the quick failover set-up of docs/failover.md.

Each CLI runs non-interactively in a scratch directory against the fake vendors, and works
through a one-tool loop: the model asks for one harmless shell `echo`, the CLI runs it and
sends the result, the model answers with it ("Done: … taplog-ok"). `.ci/run` installs the
pinned CLIs with npm into `.ci/clis` (see there); elsewhere these tests are skipped with
how to install them, or `TAPLOG_CLIS` names another `node_modules/.bin`.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.proxy.failover.rules import load_fallbacks
from taplog.recorder.toolevents import epoch
from tests import ROOT
from tests.fakes.harness import start_taplog
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

BIN = Path(os.environ.get("TAPLOG_CLIS", ROOT / ".ci/clis/node_modules/.bin"))
CLAUDE, CODEX = BIN / "claude", BIN / "codex"
PROMPT = "Run the shell command, then report what it printed. !plan={tool}"
QUIET = {  # no telemetry, updates or error reports: the CLIs talk to the fakes only
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_ERROR_REPORTING": "1",
}

pytestmark = pytest.mark.slow


def _needs(cli: Path) -> None:
    if not cli.exists():
        pytest.skip(
            f"{cli.name} is not installed here: npm install --prefix .ci/clis "
            "@anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0 (as .ci/run does)"
        )


def _proxy(servers, vendors, data: Path, *fallback: str):
    """taplog in front of both fakes, with `--fallback` rules as a user would type them."""
    openai_base, anthropic_base = f"{vendors.openai.url}/v1", vendors.anthropic.url
    fallbacks = load_fallbacks(openai_base, anthropic_base, {}, fallback)
    return start_taplog(
        servers, data, fallbacks, openai_base=openai_base, anthropic_base=anthropic_base
    )


def _claude(proxy, scratch: Path) -> dict:
    _needs(CLAUDE)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(scratch / "home"),
        "ANTHROPIC_BASE_URL": proxy.url,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        **QUIET,
    }
    argv = [str(CLAUDE), "-p", PROMPT.format(tool="Bash"), "--output-format", "json"]
    done = _run([*argv, "--allowedTools", "Bash"], env, scratch)
    return json.loads(done.stdout)


def _codex(proxy, scratch: Path, directives: str = "") -> list[dict]:
    _needs(CODEX)
    home = scratch / "codex"
    home.mkdir()
    (home / "config.toml").write_text(
        f"""model = "gpt-5.5"
model_provider = "taplog"
check_for_update_on_startup = false

[model_providers.taplog]
name = "taplog"
base_url = "{proxy.url}/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
"""
    )
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(scratch / "home"),
        "CODEX_HOME": str(home),
        "OPENAI_API_KEY": OPENAI_KEY,
    }
    argv = [str(CODEX), "exec", "--json", "--skip-git-repo-check"]
    done = _run([*argv, f"{PROMPT.format(tool='exec_command')} {directives}"], env, scratch)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _run(argv: list[str], env: dict[str, str], scratch: Path) -> subprocess.CompletedProcess:
    work = scratch / "work"
    work.mkdir(parents=True, exist_ok=True)
    (scratch / "home").mkdir(exist_ok=True)
    done = subprocess.run(
        argv,
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


def _codex_answer(events: list[dict]) -> str:
    messages = [
        e["item"]["text"] for e in events if e.get("item", {}).get("type") == "agent_message"
    ]
    return messages[-1] if messages else ""


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
    proxy = _proxy(servers, vendors, tmp_path / "data")
    result = _claude(proxy, tmp_path)
    assert result["is_error"] is False and "taplog-ok" in result["result"]
    _one_session_with_its_tool_events(proxy, "Bash")
    assert _listed(proxy) == [("Claude Code", PROMPT.format(tool="Bash"))]


def _listed(proxy) -> list[tuple[str, str]]:
    """`taplog sessions`: each session's client and prompt."""
    data = ["--data-dir", str(proxy.data_dir), "--format", "jsonl"]
    listed = CliRunner().invoke(main, ["sessions", *data])
    return [(r["client"], r["prompt"]) for r in map(json.loads, listed.output.splitlines())]


def test_claude_code_finishes_its_tool_loop_while_anthropic_is_down(servers, vendors, tmp_path):
    proxy = _proxy(servers, vendors, tmp_path / "data", "claude-*=openai:gpt-4.1")
    vendors.anthropic.down = {"status": "529"}
    result = _claude(proxy, tmp_path)
    assert result["is_error"] is False and "taplog-ok" in result["result"], result
    events = _one_session_with_its_tool_events(proxy, "Bash")
    served = [e for e in events if e["type"] == "llm.response" and e["status"] == 200]
    assert served and all(e["provider"] == "openai" for e in served)
    print(f"Claude Code through an Anthropic outage: {_outage(events)}")


def test_codex_works_through_taplog(servers, vendors, tmp_path):
    proxy = _proxy(servers, vendors, tmp_path / "data")
    assert "taplog-ok" in _codex_answer(_codex(proxy, tmp_path))
    _one_session_with_its_tool_events(proxy, "exec_command")
    assert _listed(proxy) == [("Codex", PROMPT.format(tool="exec_command"))]


def test_codex_finishes_its_tool_loop_while_openai_is_down(servers, vendors, tmp_path):
    proxy = _proxy(servers, vendors, tmp_path / "data", "gpt-*=anthropic:claude-sonnet-4-5")
    vendors.openai.down = {"status": "503"}
    answer = _codex_answer(_codex(proxy, tmp_path))
    assert "taplog-ok" in answer
    events = _one_session_with_its_tool_events(proxy, "exec_command")
    served = [e for e in events if e["type"] == "llm.response" and e["status"] == 200]
    assert served and all(e["provider"] == "anthropic" for e in served)
    print(f"Codex through an OpenAI outage: {_outage(events)}")


def test_a_codex_command_that_fails_is_recorded_and_shown_as_failed(servers, vendors, tmp_path):
    """Responses results carry no error flag: Codex states the exit code in its own header."""
    proxy = _proxy(servers, vendors, tmp_path / "data")
    _codex(proxy, tmp_path, "!shell_fails")
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
