"""opencode 1.18.33 and aider 0.86.2, the real ones, through taplog (`tests.fakes.opencode_aider`
runs them): each run is one session, named after the client that made it, as a user reads it
back with `taplog sessions`, `taplog show` and `taplog sql`.

opencode names its session on every call (`x-session-affinity`), and to OpenAI Codex's
`session-id` too; its sub-agent's calls name the session that started them. aider sends no
session id at all: its calls are stitched, though it closes each request with a reminder the
next one leaves out, and retries a failed call as it was.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from tests.fakes.clients import sql_rows
from tests.fakes.clis import proxy_for
from tests.fakes.opencode_aider import (
    OPENCODE_PROMPT,
    OPENCODE_SUB_AGENT_PROMPT,
    run_aider,
    run_opencode,
)

pytestmark = pytest.mark.slow


def _taplog(proxy, *args: str) -> list[str]:
    """A taplog command on the proxy's data dir, as a user types it; its output lines."""
    proxy.flush()
    done = CliRunner().invoke(main, [*args, "--data-dir", str(proxy.data_dir)])
    assert done.exit_code == 0, done.output
    return done.output.splitlines()


def _listed(proxy) -> list[dict]:
    """`taplog sessions`, one row a session."""
    return [json.loads(line) for line in _taplog(proxy, "sessions", "--format", "jsonl")]


def _opencode_session(events: list[dict]) -> str:
    """The session opencode ran (its own id, in every JSON event it prints)."""
    (session,) = {e["sessionID"] for e in events if "sessionID" in e}
    return session


def _said(events: list[dict]) -> str:
    return "".join(e["part"].get("text", "") for e in events if e.get("type") == "text")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_opencode_run_is_one_session_named_opencode(servers, vendors, tmp_path, provider):
    """To OpenAI, opencode's default plugin sends Codex's `session-id` too: still opencode's."""
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    events = run_opencode(proxy.url, tmp_path, provider)
    assert "taplog-ok" in _said(events)
    session = _opencode_session(events)
    proxy.wait_for(lambda s: any(e["type"] == "tool.post" for e in s.get(session, [])))
    if provider == "openai":
        sent = [e["headers"] for e in proxy.events("llm.request")]
        assert all(h["session-id"] == h["x-session-affinity"] == session for h in sent)

    (row,) = sql_rows(proxy.data_dir, "SELECT session, source, user_agent FROM sessions")
    assert (row["session"], row["source"]) == (session, "client:opencode")
    assert row["user_agent"].startswith("opencode/1.18.33 ")
    assert [(r["client"], r["prompt"]) for r in _listed(proxy)] == [("opencode", OPENCODE_PROMPT)]
    shown = _taplog(proxy, "show", session)
    assert shown[0].startswith(f"session {session} ")
    assert "(client:opencode, opencode/1.18.33 " in shown[0]


def test_opencode_s_sub_agent_reads_inside_the_task_call_that_started_it(
    servers, vendors, tmp_path
):
    """opencode's task tool runs its sub-agent in a session of opencode's own whose calls
    name their parent's: in taplog they are the parent's session, shown in the task call."""
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    events = run_opencode(proxy.url, tmp_path, "anthropic", OPENCODE_SUB_AGENT_PROMPT)
    assert "taplog-ok" in _said(events)
    session = _opencode_session(events)
    sessions = proxy.wait_for(
        lambda s: sum(e["type"] == "call.answered" for e in s.get(session, [])) >= 4
    )
    assert list(sessions) == [session]
    agents = {e["headers"].get("x-session-affinity") for e in proxy.events("llm.request")}
    (agent,) = agents - {session}  # the sub-agent's own id, beside its parent's

    (row,) = sql_rows(proxy.data_dir, "SELECT session, source, calls, tool_calls FROM sessions")
    assert row == {"session": session, "source": "client:opencode", "calls": 4, "tool_calls": 2}
    chat = _taplog(proxy, "show", session, "--messages")
    task = next(n for n, line in enumerate(chat) if line.startswith("tool       task {"))
    assert chat[task + 1] == f"  │ sub-agent {agent}"
    bash = next(n for n, line in enumerate(chat) if line.startswith("  │ tool       bash {"))
    assert chat[bash].endswith('{"command":"echo taplog-ok","description":"Print a word"}')
    assert chat[bash + 1] == "  │   → taplog-ok\\n"
    assert "  │ assistant  Done: taplog-ok" in chat
    result = next(n for n, line in enumerate(chat) if line.startswith("  → "))
    assert bash < result and chat[result].startswith(f'  → <task id="{agent}"')


@pytest.mark.parametrize(
    ("provider", "client"), [("anthropic", "litellm"), ("openai", "OpenAI Python SDK")]
)
def test_an_aider_chat_of_three_prompts_is_one_session(
    servers, vendors, tmp_path, provider, client
):
    """aider calls through litellm: to Anthropic with litellm's user agent, to OpenAI through
    the OpenAI SDK. Its reminder closes each request (after the prompt in the last user turn,
    or as a last system message) and is gone from the next."""
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    printed = run_aider(proxy.url, tmp_path, provider, "hello there", "second question", "third")
    assert "Echo: third" in printed
    proxy.wait_answers(3)

    rows = sql_rows(proxy.data_dir, "SELECT session, source, calls, failed_calls FROM sessions")
    assert [(r["source"], r["calls"], r["failed_calls"]) for r in rows] == [("new", 3, 0)]
    (row,) = _listed(proxy)
    assert row["client"] == client
    assert row["prompt"].partition("\n\n")[0] == "hello there"  # its reminder after it, or not


def test_aider_s_retries_stay_in_its_run_s_session(servers, vendors, tmp_path):
    """aider (not its SDK) retries a call the vendor refused, the same request again and
    nothing to say it is a retry: the tries are one session's calls, then the answer."""
    proxy = proxy_for(servers, vendors, tmp_path / "data")
    vendors.anthropic.next_faults = [{"status": "529"}, {"status": "529"}]
    printed = run_aider(proxy.url, tmp_path, "anthropic", "hello there", "second question")
    assert "Retrying in" in printed and "Echo: second question" in printed
    proxy.wait_answers(4)

    calls = sql_rows(proxy.data_dir, "SELECT session, status FROM llm_calls ORDER BY started_at")
    assert [c["status"] for c in calls] == [529, 529, 200, 200]
    assert len({c["session"] for c in calls}) == 1
    (row,) = _listed(proxy)
    assert (row["calls"], row["failed_calls"], row["client"]) == (4, 2, "litellm")
