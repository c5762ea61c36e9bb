"""Real Claude Code and Codex sessions, recorded through taplog, carried whole: exported to every
API and sent there, resumed on the other vendor, snapshotted in every format.

Each CLI runs its one-tool loop against the fake vendor (`tests.fakes.clis`), which ends
with the final answer "Done: … taplog-ok". That answer must be the last turn of every export
(`taplog export`, as a user runs it), which the official SDK then sends to the fake vendor
of that API and gets a 200 for; `taplog resume` must send the conversation with that
answer and a user turn after it, with the headers its body needs and none of the old run's
ids, and record what it left out; `taplog snapshot` must write that answer in every format.
"""

from __future__ import annotations

import inspect
import json
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.store.reader import read_all
from taplog.recorder.tools.resume_request import DEFAULT_PROMPT
from taplog.recorder.vendors.apis import PER_RUN_FIELDS
from tests.fakes.clients import anthropic_at, openai_at
from tests.fakes.clis import proxy_for, run_claude, run_codex
from tests.fakes.harness import model_requests
from tests.fakes.servers import ServerThread

pytestmark = pytest.mark.slow

FORMATS = ("openai-chat", "anthropic", "responses")
NATIVE = {"claude": "anthropic", "codex": "responses"}
FINAL = "taplog-ok"  # in the fake vendor's final answer, "Done: <the tool's result>"


def record(vendors, data: Path, scratch: Path, cli: str) -> str:
    """Run the CLI through a taplog of its own (stopped afterwards, as a user stops serve);
    the session of its tool loop, once its final answer is logged."""
    scratch.mkdir()
    thread = ServerThread()
    try:
        proxy = proxy_for(thread, vendors, data)
        before = set(read_all(data)) if data.exists() else set()
        if cli == "claude":
            run_claude(proxy.url, scratch)
        else:
            run_codex(f"{proxy.url}/v1", scratch)

        def answered(sessions: dict[str, list[dict]]) -> bool:
            return any(
                e["type"] == "llm.response" and FINAL in json.dumps(e.get("body"))
                for name, events in sessions.items()
                if name not in before
                for e in events
            )

        sessions = proxy.wait_for(answered)
    finally:
        thread.stop()
    (session,) = [
        name
        for name, events in sessions.items()
        if name not in before and any(e["type"] == "tool.post" for e in events)
    ]
    return session


def taplog(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def turns(body: dict) -> list[dict]:
    return body["input"] if "input" in body else body["messages"]


def text_of(turn: dict) -> str:
    content = turn.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def send(vendors, fmt: str, body: dict) -> Any:
    """The body through the official SDK to the fake vendor of its API, as a user sends an
    export: the SDK's own parameters, anything else as `extra_body`; the raw answer."""
    if fmt == "anthropic":
        create = anthropic_at(vendors.anthropic.url).messages.with_raw_response.create
    elif fmt == "openai-chat":
        create = openai_at(vendors.openai.url).chat.completions.with_raw_response.create
    else:
        create = openai_at(vendors.openai.url).responses.with_raw_response.create
    known = inspect.signature(create).parameters
    given = {key: value for key, value in body.items() if key in known}
    extra = {key: value for key, value in body.items() if key not in known}
    return create(**given, extra_body=extra, timeout=60)  # long max_tokens: not a stream


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_real_session_exports_whole_to_every_api_and_each_is_accepted(
    servers, vendors, tmp_path, cli
):
    data = tmp_path / "data"
    session = record(vendors, data, tmp_path / cli, cli)
    for fmt in FORMATS:
        exported = taplog("export", session, "--format", fmt, "--data-dir", str(data))
        body = orjson.loads(exported.stdout)
        last = turns(body)[-1]
        assert last["role"] == "assistant" and FINAL in text_of(last), (fmt, last)
        assert text_of(last).startswith("Done:")
        if fmt != NATIVE[cli]:  # translated: what the other API cannot take is named
            assert "left out: " in exported.stderr, fmt
        assert send(vendors, fmt, body).status_code == 200, fmt

        args = ("--format", fmt, "--prompt", "What did it print?", "--data-dir", str(data))
        ready = orjson.loads(taplog("export", session, *args).stdout)
        assert turns(ready)[-1]["role"] == "user" and turns(ready)[-2] == last
        answer = send(vendors, fmt, ready)
        assert answer.status_code == 200, fmt
        assert answer.http_response.json()  # an answer in that API's JSON


def test_codex_s_hosted_tools_are_named_when_its_session_is_exported_for_anthropic(
    servers, vendors, tmp_path
):
    data = tmp_path / "data"
    session = record(vendors, data, tmp_path / "codex", "codex")
    exported = taplog("export", session, "--format", "anthropic", "--data-dir", str(data))
    left_out = exported.stderr.splitlines()
    assert any(line.startswith("left out: tools[") and "tool_search" in line for line in left_out)
    assert any("web_search" in line and "external_web_access" in line for line in left_out)


@pytest.fixture
def bases(vendors, monkeypatch):
    """`taplog resume` reaches the fake vendors through the settings' base URLs."""
    monkeypatch.setenv("TAPLOG_OPENAI_BASE", f"{vendors.openai.url}/v1")
    monkeypatch.setenv("TAPLOG_ANTHROPIC_BASE", vendors.anthropic.url)


def resumed(data: Path, session: str, to: str) -> tuple[Any, list[dict]]:
    """`taplog resume SESSION --to TO`: its output, and the new session's events."""
    before = set(read_all(data))
    result = taplog("resume", session, "--to", to, "--data-dir", str(data))
    (new,) = set(read_all(data)) - before
    assert f"session {new} (resumes {session})" in result.stdout
    return result, read_all(data)[new]


def sent_body(fake) -> tuple[dict, Any]:
    (request,) = model_requests(fake)[-1:]
    return orjson.loads(request.body), request.headers


def the_answer_then_the_prompt(body: dict) -> None:
    *_, answer, prompt = turns(body)
    assert answer["role"] == "assistant" and FINAL in text_of(answer)
    assert prompt["role"] == "user" and text_of(prompt) == DEFAULT_PROMPT
    assert not PER_RUN_FIELDS & body.keys()  # the old run's ids: none


def test_a_real_claude_code_session_resumes_on_openai_and_on_anthropic_in_its_own_api(
    servers, vendors, tmp_path, bases
):
    data = tmp_path / "data"
    session = record(vendors, data, tmp_path / "claude", "claude")
    recorded = [e for e in read_all(data)[session] if e["type"] == "llm.request"][-1]

    result, events = resumed(data, session, "openai:gpt-4.1")
    body, headers = sent_body(vendors.openai)
    the_answer_then_the_prompt(body)
    assert "anthropic-beta" not in headers
    started, request = events[0], next(e for e in events if e["type"] == "llm.request")
    assert started["left_out"] and "left out: " in result.stderr
    assert request["translated_from"] == "anthropic.messages"
    assert request["dropped"] == started["left_out"]
    answer = next(e for e in events if e["type"] == "llm.response")["body"]
    assert result.stdout.startswith(answer["choices"][0]["message"]["content"])

    result, events = resumed(data, session, "anthropic:claude-sonnet-4-6")
    body, headers = sent_body(vendors.anthropic)
    the_answer_then_the_prompt(body)
    assert headers["anthropic-beta"] == recorded["headers"]["anthropic-beta"]
    assert "x-claude-code-session-id" not in headers  # the old run's id stays behind
    request = next(e for e in events if e["type"] == "llm.request")
    assert "translated_from" not in request and events[0]["left_out"] == []
    answer = next(e for e in events if e["type"] == "llm.response")["body"]
    assert result.stdout.startswith(answer["content"][0]["text"])


def test_a_real_codex_session_resumes_on_anthropic(servers, vendors, tmp_path, bases):
    data = tmp_path / "data"
    session = record(vendors, data, tmp_path / "codex", "codex")
    result, events = resumed(data, session, "anthropic:claude-sonnet-4-5")
    body, headers = sent_body(vendors.anthropic)
    the_answer_then_the_prompt(body)
    assert not any(name.startswith("x-codex") for name in headers)
    request = next(e for e in events if e["type"] == "llm.request")
    assert request["translated_from"] == "openai.responses"
    assert any("tool_search" in what for what in request["dropped"])
    assert "tool_search" in result.stderr
    answer = next(e for e in events if e["type"] == "llm.response")["body"]
    assert result.stdout.startswith(answer["content"][0]["text"])


def test_snapshots_of_real_sessions_hold_the_last_answer_in_every_format(
    servers, vendors, tmp_path
):
    data = tmp_path / "data"
    sessions = [record(vendors, data, tmp_path / cli, cli) for cli in ("claude", "codex")]
    for fmt in (None, *FORMATS):
        repo = tmp_path / f"history-{fmt}"
        shape = ("--format", fmt) if fmt else ()
        taplog("snapshot", "--git", str(repo), *shape, "--data-dir", str(data))
        for session in sessions:
            body = orjson.loads((repo / f"{session}.json").read_bytes())
            last = turns(body)[-1]
            assert last["role"] == "assistant" and FINAL in text_of(last), (fmt, session)
        log = subprocess.run(
            ["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True
        )
        assert len(log.stdout.splitlines()) >= len(sessions)
