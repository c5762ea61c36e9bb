"""`taplog resume`: a recorded SDK tool session continued on the other vendor.

An agent's session is recorded through taplog (its own server thread, stopped
before resuming, as a user stops `taplog serve`). `taplog resume` then sends the
conversation to the other fake vendor: the vendor must receive the exported
conversation in its own API with the continuation note on top and taplog's key
for it; the new session links back to the old one and reads like any other.
"""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.store.reader import read_all
from taplog.recorder.tools.export import export_conversation
from taplog.recorder.tools.resume_request import DEFAULT_PROMPT, resume_note
from tests.disk import log_of, readable
from tests.fakes.agents import AGENTS, gemini_agent
from tests.fakes.clients import gemini_at, sdk_client
from tests.fakes.harness import model_requests
from tests.fakes.keys import ANTHROPIC_FALLBACK_KEY, GEMINI_FALLBACK_KEY, OPENAI_FALLBACK_KEY
from tests.fakes.servers import ServerThread


@pytest.fixture
def record_run(vendors, tmp_path, monkeypatch):
    """Record one agent run per API (stopped afterwards); returns a function api -> session."""
    data = tmp_path / "data"
    monkeypatch.setenv("TAPLOG_OPENAI_BASE", f"{vendors.openai.url}/v1")
    monkeypatch.setenv("TAPLOG_ANTHROPIC_BASE", vendors.anthropic.url)
    monkeypatch.setenv("TAPLOG_GEMINI_BASE", vendors.gemini.url)
    monkeypatch.setenv("TAPLOG_DATA_DIR", str(data))

    def record(api: str) -> tuple[str, list[dict]]:
        thread = ServerThread()
        try:
            proxy = vendors.proxy(thread, data, {})
            before = set(read_all(data)) if data.exists() else set()
            if api == "gemini":
                gemini_agent(gemini_at(proxy.url), stream=False)
            else:
                AGENTS[api][0](sdk_client(api, proxy.url), False)
            sessions = proxy.wait_responses(8)
        finally:
            thread.stop()
        (session,) = set(sessions) - before
        return session, sessions[session]

    return record


def resume(*args: str):
    return CliRunner().invoke(main, ["resume", *args])


def new_session(output: str) -> str:
    line = next(line for line in output.splitlines() if line.startswith("session "))
    return line.split()[1]


def test_resume_chat_session_on_anthropic(vendors, record_run, tmp_path):
    session, events = record_run("chat")
    result = resume(session, "--to", "anthropic:claude-opus-4-1")
    assert result.exit_code == 0, result.output

    (sent,) = model_requests(vendors.anthropic)
    body = orjson.loads(sent.body)
    exported = export_conversation(
        events, "anthropic", model="claude-opus-4-1", prompt=DEFAULT_PROMPT
    ).body
    note = resume_note(events, session, "claude-opus-4-1")
    assert "held with gpt-4.1 until now" in note  # the model the session had
    assert body["system"] == (f"{note}\n\n{exported['system']}" if "system" in exported else note)
    assert {k: v for k, v in body.items() if k != "system"} == {
        k: v for k, v in exported.items() if k != "system"
    }
    assert sent.headers["x-api-key"] == ANTHROPIC_FALLBACK_KEY
    answer = orjson.loads(vendors.anthropic.sent[-1])
    assert result.stdout.startswith(answer["content"][0]["text"] + "\n")

    new = new_session(result.output)
    assert f"/s/{new}" in result.output and f"resumes {session}" in result.output
    events = read_all(tmp_path / "data")[new]
    started, request, *history, response = events
    # The results in the history were asked for in the old session: orphans here.
    assert {(e["type"], *e["flags"]) for e in history} == {("tool.post", "orphan_result")}
    assert started["type"] == "session.started" and started["source"] == "resumed"
    assert started["resumed_from"] == session
    origin_last = read_all(tmp_path / "data")[session][-1]
    assert (started["at"], started["origin_hash"]) == (origin_last["seq"], origin_last["h"])
    assert request["provider"] == "anthropic" and request["body"] == body
    assert response["status"] == 200 and response["body"] == answer
    raw = readable(log_of(tmp_path / "data", new))
    assert ANTHROPIC_FALLBACK_KEY.encode() not in raw
    assert ANTHROPIC_FALLBACK_KEY not in result.output

    shown = CliRunner().invoke(main, ["show", new])
    assert shown.exit_code == 0 and f"resumed from {session}" in shown.output.splitlines()[0]
    assert "orphan_result" not in shown.output  # the carried results are the origin's runs
    assert "1 calls · 0 tool calls (0 failed)" in shown.output
    verified = CliRunner().invoke(main, ["verify"])
    assert verified.exit_code == 0, verified.output
    query = (
        "SELECT source, count(*) AS calls FROM llm_calls JOIN sessions USING (session) "
        f"WHERE session = '{new}' GROUP BY source"
    )
    rows = CliRunner().invoke(main, ["sql", query, "--format", "json"])
    assert rows.exit_code == 0, rows.output
    assert orjson.loads(rows.output) == [{"source": "resumed", "calls": 1}]


def test_resume_anthropic_session_on_openai_chat(vendors, record_run):
    session, events = record_run("anthropic")
    result = resume(session, "--to", "openai:gpt-4.1")
    assert result.exit_code == 0, result.output

    (sent,) = model_requests(vendors.openai)
    body = orjson.loads(sent.body)
    exported = export_conversation(
        events, "openai-chat", model="gpt-4.1", prompt=DEFAULT_PROMPT
    ).body
    assert exported["messages"][0]["role"] == "user"  # the agent has no system prompt: one is added
    assert body["messages"] == [
        {"role": "system", "content": resume_note(events, session, "gpt-4.1")},
        *exported["messages"],
    ]
    assert {k: v for k, v in body.items() if k != "messages"} == {
        k: v for k, v in exported.items() if k != "messages"
    }
    assert sent.headers["authorization"] == f"Bearer {OPENAI_FALLBACK_KEY}"
    answer = orjson.loads(vendors.openai.sent[-1])
    assert result.stdout.startswith(answer["choices"][0]["message"]["content"] + "\n")


def test_resume_through_a_configured_responses_provider(vendors, record_run, tmp_path, monkeypatch):
    session, events = record_run("chat")
    config = tmp_path / "taplog.toml"
    config.write_text(
        f'[providers.mine]\ntype = "openai"\nbase_url = "{vendors.openai.url}/v1"\n'
        'api_key_env = "MINE_KEY"\napi = "responses"\n'
    )
    monkeypatch.setenv("MINE_KEY", "sk-mine-0123456789abcdef")
    result = resume(session, "--to", "mine:gpt-5", "--config", str(config), "--as", "on-mine")
    assert result.exit_code == 0, result.output

    (sent,) = [r for r in vendors.openai.requests if r.path == "/v1/responses"]
    body = orjson.loads(sent.body)
    assert body["instructions"].startswith(resume_note(events, session, "gpt-5"))
    assert (
        body["model"] == "gpt-5"
        and sent.headers["authorization"] == "Bearer sk-mine-0123456789abcdef"
    )
    assert new_session(result.output) == "on-mine"
    assert "/s/on-mine/v1" in result.output


@pytest.mark.parametrize(
    ("api", "to", "reached"),
    [
        ("chat", "gemini:gemini-2.5-pro", "gemini"),
        ("anthropic", "gemini:gemini-2.5-pro", "gemini"),
        ("gemini", "anthropic:claude-sonnet-4-6", "anthropic"),
        ("gemini", "openai:gpt-4.1", "openai"),
    ],
)
def test_a_session_resumes_to_and_from_gemini(vendors, record_run, api, to, reached):
    """The conversation goes whole, tool calls paired with their results, the note first,
    with the target's own key; the answer is printed."""
    session, events = record_run(api)
    result = resume(session, "--to", to)
    assert result.exit_code == 0, result.output
    (sent,) = model_requests(getattr(vendors, reached))[-1:]
    body = orjson.loads(sent.body)
    note = resume_note(events, session, to.partition(":")[2])
    if reached == "gemini":
        assert sent.path == "/v1beta/models/gemini-2.5-pro:generateContent"
        assert sent.headers["x-goog-api-key"] == GEMINI_FALLBACK_KEY
        assert body["systemInstruction"]["parts"][0] == {"text": note}
        calls = [p for c in body["contents"] for p in c["parts"] if "functionCall" in p]
        results = [p for c in body["contents"] for p in c["parts"] if "functionResponse" in p]
        assert [c["functionCall"]["name"] for c in calls] == [
            "get_weather",
            "get_time",
            "read_file",
        ]
        assert [r["functionResponse"]["id"] for r in results] == [
            c["functionCall"]["id"] for c in calls
        ]
        assert body["contents"][-1] == {"role": "user", "parts": [{"text": DEFAULT_PROMPT}]}
    else:
        system = body["system"] if reached == "anthropic" else body["messages"][0]["content"]
        assert note in str(system)
        assert "get_weather" in sent.body.decode() and "sunny" in sent.body.decode()
    answer = orjson.loads(getattr(vendors, reached).sent[-1])
    text = (
        answer["candidates"][0]["content"]["parts"][0]["text"]
        if reached == "gemini"
        else answer["content"][0]["text"]
        if reached == "anthropic"
        else answer["choices"][0]["message"]["content"]
    )
    assert result.stdout.startswith(text + "\n")


def test_dry_run_prints_the_request_without_the_key_and_sends_nothing(
    vendors, record_run, tmp_path, monkeypatch
):
    session, events = record_run("chat")
    files = sorted((tmp_path / "data" / "sessions").iterdir())
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    result = resume(session, "--to", "anthropic:claude-sonnet-4-6", "--dry-run")
    assert result.exit_code == 0, result.output

    shown = orjson.loads(result.stdout)
    assert shown["url"] == f"{vendors.anthropic.url}/v1/messages"
    assert shown["headers"]["x-api-key"] == "$ANTHROPIC_API_KEY"
    assert shown["body"]["system"].startswith(resume_note(events, session, "claude-sonnet-4-6"))
    assert vendors.anthropic.requests == [] and vendors.openai.requests[-1].path != "/v1/messages"
    assert sorted((tmp_path / "data" / "sessions").iterdir()) == files

    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_FALLBACK_KEY)
    result = resume(session, "--to", "anthropic:claude-sonnet-4-6", "--dry-run")
    assert orjson.loads(result.stdout)["headers"]["x-api-key"] == "$ANTHROPIC_API_KEY"
    assert ANTHROPIC_FALLBACK_KEY not in result.output


def test_resume_refuses_clearly(vendors, record_run, tmp_path, monkeypatch, servers):
    session, _ = record_run("chat")
    unknown = resume(session, "--to", "nope:model")
    assert unknown.exit_code == 2
    assert "--to: unknown provider 'nope' (known: openai, anthropic, gemini)" in unknown.output
    assert resume(session, "--to", "anthropic").exit_code == 2
    missing = resume("not-a-session", "--to", "openai:gpt-4.1")
    assert missing.exit_code == 1 and "no session 'not-a-session'" in missing.output

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    no_key = resume(session, "--to", "anthropic:claude-sonnet-4-6")
    assert no_key.exit_code == 1 and "$ANTHROPIC_API_KEY is not set" in no_key.output

    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_FALLBACK_KEY)
    vendors.proxy(servers, tmp_path / "data", {})  # a serve holds the data dir
    busy = resume(session, "--to", "anthropic:claude-sonnet-4-6")
    assert busy.exit_code == 1 and "a taplog serve is recording into" in busy.output
    assert model_requests(vendors.anthropic) == []
    assert resume(session, "--to", "anthropic:claude-sonnet-4-6", "--dry-run").exit_code == 0


def test_a_resumed_session_continues_through_serve(vendors, record_run, tmp_path, servers):
    session, _ = record_run("chat")
    result = resume(session, "--to", "anthropic:claude-sonnet-4-6", "--as", "moved")
    assert result.exit_code == 0, result.output
    body = orjson.loads(model_requests(vendors.anthropic)[0].body)
    proxy = vendors.proxy(servers, tmp_path / "data", {})
    answer = orjson.loads(vendors.anthropic.sent[-1])
    messages = [
        *body["messages"],
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "And now?"},
    ]
    ant = sdk_client("anthropic", f"{proxy.url}/s/moved")
    ant.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=messages)
    events = proxy.wait_responses(2)["moved"]
    answers = [e for e in events if e["type"] == "llm.response"]
    assert events[0]["resumed_from"] == session and len(answers) == 2
    assert events[-1]["status"] == 200 and proxy.sessions().keys() == {session, "moved"}


BETA = "context-management-2025-06-27"


def test_a_same_vendor_resume_sends_the_body_s_beta_header_and_none_of_the_old_run_s_ids(
    vendors, tmp_path, monkeypatch
):
    monkeypatch.setenv("TAPLOG_ANTHROPIC_BASE", vendors.anthropic.url)
    monkeypatch.setenv("TAPLOG_DATA_DIR", str(tmp_path / "data"))
    with ServerThread() as thread:
        proxy = vendors.proxy(thread, tmp_path / "data", {})
        client = sdk_client("anthropic", proxy.url).with_options(
            default_headers={"anthropic-beta": BETA}
        )
        client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=64,
            messages=[{"role": "user", "content": "Hello"}],
            metadata={"user_id": "user_old-run_session_0123456789abcdef"},
            extra_headers={"x-taplog-session": "run-1"},
        )
        proxy.wait_responses(1)

    result = resume("run-1", "--to", "anthropic:claude-sonnet-4-6", "--as", "run-2")
    assert result.exit_code == 0, result.output
    (sent,) = model_requests(vendors.anthropic)[-1:]
    assert sent.headers["anthropic-beta"] == BETA  # the body it resends was sent with it
    body = orjson.loads(sent.body)
    assert "metadata" not in body  # the old run's ids would make it the old session again
    assert "earlier session (run-1), recorded by taplog. The tool calls" in body["system"]
    assert "another model" not in body["system"] and "held with" not in body["system"]

    result = resume("run-1", "--to", "openai:gpt-4.1", "--dry-run")  # translated: no such fields
    shown = orjson.loads(result.stdout)
    assert "anthropic-beta" not in shown["headers"]
    assert "held with claude-sonnet-4-6 until now" in shown["body"]["messages"][0]["content"]
