"""Claude Code and Codex through taplog's tool policy (issue #35, docs/tool-policy.md):
`taplog serve --tool-policy FILE`, as a user starts it, in front of the fake vendor, which
has each agent's shell run `rm` of a sentinel file (`!shell_rm=PATH`) or its harmless echo.

A denied call never reaches the agent: the file survives, the agent's turn ends with
taplog's refusal as its answer, and the log has `tool.denied` for the call and no result.
A call no rule matches runs as always; a `flag` rule lets the call run and records
`tool.flagged`, which also shows that without the gate the `rm` would have gone through.
The sentinel lies in the agent's working directory, which Codex's `workspace-write`
sandbox lets it write (its default, read-only, would fail the `rm` with no gate at all).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from taplog.recorder.store.reader import read_all
from taplog.recorder.verify import verify
from tests.fakes.clis import CLAUDE_PROMPT, codex_answer, run_claude, run_codex
from tests.fakes.harness import TaplogProcess, serve_on_fake, until

pytestmark = pytest.mark.slow
REASON = "no deletes in tests"
_DECISION = re.compile(
    r'^taplog_tool_policy_decisions_total\{action="(\w+)",rule="([^"]*)"\} (\S+)$', re.M
)


def _claude(url: str, scratch: Path, directives: str) -> str:
    """Claude Code's answer to the shell prompt with these directives."""
    result = run_claude(url, scratch, f"{CLAUDE_PROMPT} {directives}")
    assert result["is_error"] is False, result
    return result["result"]


def _codex(url: str, scratch: Path, directives: str) -> str:
    """Codex's last message; a command it ran shows as a `command_execution` item."""
    return codex_answer(run_codex(f"{url}/v1", scratch, directives, "workspace-write"))


# Each agent: how to run it, its shell tool, and the argument that holds the command.
AGENTS: dict[str, tuple[Callable[[str, Path, str], str], str, str]] = {
    "claude": (_claude, "Bash", "command"),
    "codex": (_codex, "exec_command", "cmd"),
}


def _policy(tool: str, field: str, action: str, rule: str) -> str:
    return f"""[[tool_policy]]
id = "{rule}"
name = "{tool}"
fields = {{ {field} = '^rm\\b' }}
action = "{action}"
reason = "{REASON}"
"""


@contextmanager
def _served(fake, tmp_path: Path, policy: str) -> Iterator[TaplogProcess]:
    """`taplog serve --tool-policy FILE` in front of the fake; stopped cleanly after."""
    file = tmp_path / "policy.toml"
    file.write_text(policy)
    served = serve_on_fake(fake, tmp_path / "data", "--tool-policy", str(file))
    try:
        yield served
    finally:
        code, err = served.stop()
    assert code == 0, err


def _decisions(served: TaplogProcess) -> dict[tuple[str, str], float]:
    """`taplog_tool_policy_decisions_total` by (action, rule), from /metrics."""
    text = httpx.get(f"{served.url}/metrics").text
    return {(action, rule): float(n) for action, rule, n in _DECISION.findall(text)}


def _tool_session(data: Path) -> list[dict]:
    """The one session whose answers asked for a tool, read back once taplog stopped; the
    log verified whole."""
    assert all(report.ok for report in verify(data))
    (events,) = [
        events for events in read_all(data).values() if any(e["type"] == "tool.pre" for e in events)
    ]
    return events


def _of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def _sentinel(tmp_path: Path) -> Path:
    """A file in the agent's working directory (`tests.fakes.clis.run` makes it `work/`)."""
    sentinel = tmp_path / "work" / "sentinel.txt"
    sentinel.parent.mkdir(parents=True)
    sentinel.write_text("keep me")
    return sentinel


@pytest.mark.parametrize("agent", AGENTS)
def test_a_denied_rm_is_not_run_and_the_agent_ends_its_turn_with_the_refusal(fake, tmp_path, agent):
    run, tool, field = AGENTS[agent]
    sentinel = _sentinel(tmp_path)
    with _served(fake, tmp_path, _policy(tool, field, "deny", "no-rm")) as served:
        answer = run(served.url, tmp_path, f"!shell_rm={sentinel}")
        decisions = until(lambda: _decisions(served), 10)
    assert sentinel.read_text() == "keep me"
    assert "taplog" in answer and "no-rm" in answer and REASON in answer, answer
    assert not answer.startswith("Done:")  # no result went back to the fake: none was made
    events = _tool_session(tmp_path / "data")
    [asked] = _of(events, "tool.pre")  # what the vendor sent is recorded as it came
    assert asked["name"] == tool and asked["arguments"][field] == f"rm {sentinel}"
    [denied] = _of(events, "tool.denied")
    assert (denied["rule"], denied["reason"], denied["name"]) == ("no-rm", REASON, tool)
    assert (denied["call_id"], denied["partial"]) == (asked["call_id"], False)
    assert _of(events, "tool.post") == [] and _of(events, "tool.flagged") == []
    assert decisions == {("deny", "no-rm"): 1.0}


@pytest.mark.parametrize("agent", AGENTS)
def test_a_command_no_rule_matches_still_runs(fake, tmp_path, agent):
    run, tool, field = AGENTS[agent]
    with _served(fake, tmp_path, _policy(tool, field, "deny", "no-rm")) as served:
        answer = run(served.url, tmp_path, "")
        decisions = _decisions(served)
    assert answer.startswith("Done:") and "taplog-ok" in answer, answer
    events = _tool_session(tmp_path / "data")
    [asked] = _of(events, "tool.pre")
    [post] = _of(events, "tool.post")
    assert post["call_id"] == asked["call_id"] and "taplog-ok" in str(post["result"])
    assert post["flags"] == []
    assert _of(events, "tool.denied") == _of(events, "tool.flagged") == []
    assert decisions == {}


@pytest.mark.parametrize("agent", AGENTS)
def test_a_flagged_rm_runs_and_is_recorded_as_flagged(fake, tmp_path, agent):
    run, tool, field = AGENTS[agent]
    sentinel = _sentinel(tmp_path)
    with _served(fake, tmp_path, _policy(tool, field, "flag", "watch-rm")) as served:
        answer = run(served.url, tmp_path, f"!shell_rm={sentinel}")
        decisions = until(lambda: _decisions(served), 10)
    assert not sentinel.exists()
    assert answer.startswith("Done:") and "watch-rm" not in answer, answer
    events = _tool_session(tmp_path / "data")
    [asked] = _of(events, "tool.pre")
    [flagged] = _of(events, "tool.flagged")
    assert (flagged["rule"], flagged["reason"], flagged["name"]) == ("watch-rm", REASON, tool)
    assert flagged["call_id"] == asked["call_id"]
    [post] = _of(events, "tool.post")
    assert post["call_id"] == asked["call_id"] and post["flags"] == []
    assert _of(events, "tool.denied") == []
    assert decisions == {("flag", "watch-rm"): 1.0}
