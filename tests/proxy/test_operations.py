"""Running taplog for real: readiness, call logs, secrets, restarts, SIGTERM, the Docker entry."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from taplog.recorder.store.reader import read_all, read_session
from tests import ROOT
from tests.builders import HELLO
from tests.fakes.clients import Scrape, scrape
from tests.fakes.harness import TaplogProcess, serve_on_fake, taplog_env
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

PLANTED_KEY = "sk-planted-3f9a7c1e5b2d4f6a8c0e1d2c"
PROMPT = "the words of a private prompt"


def _client(
    served: TaplogProcess, session: str | None = None, key: str = OPENAI_KEY
) -> openai.OpenAI:
    headers = {"x-taplog-session": session} if session else None
    return openai.OpenAI(
        base_url=served.openai_base, api_key=key, max_retries=0, default_headers=headers
    )


# -- readiness -------------------------------------------------------------------------


def _wait_status(url: str, status: int, timeout: float = 10) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while (response := httpx.get(url)).status_code != status and time.monotonic() < deadline:
        time.sleep(0.02)
    return response


def test_readiness_flips_when_the_data_dir_is_not_writable_and_back(taplog, fake):
    client = openai.OpenAI(base_url=f"{taplog.url}/s/before/v1", api_key=OPENAI_KEY, max_retries=0)
    client.chat.completions.create(model="gpt-4.1", messages=HELLO)
    taplog.wait_responses(1)
    ready = httpx.get(f"{taplog.url}/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True

    sessions_dir = taplog.data_dir / "sessions"
    sessions_dir.rename(taplog.data_dir / "moved")
    sessions_dir.write_text("not a directory")  # root ignores chmod; this stops root too
    not_ready = _wait_status(f"{taplog.url}/readyz", 503)
    assert not_ready.status_code == 503
    assert not_ready.json()["ready"] is False
    assert "cannot write" in not_ready.json()["reason"]
    # A call to a new session cannot be written: the recorder stops accepting, new calls are
    # refused before any vendor, and the metrics say so.
    during = openai.OpenAI(base_url=f"{taplog.url}/s/during/v1", api_key=OPENAI_KEY, max_retries=0)
    during.chat.completions.create(model="gpt-4.1", messages=HELLO)
    deadline = time.monotonic() + 5
    while Scrape(taplog.url).value("taplog_recorder_accepting") == 1:
        assert time.monotonic() < deadline, "the recorder never noticed the failing disk"
        time.sleep(0.02)
    with pytest.raises(openai.InternalServerError, match="not recording"):
        during.chat.completions.create(model="gpt-4.1", messages=HELLO)
    failing = Scrape(taplog.url)
    assert failing.value("taplog_calls_refused_total", reason="recorder_unavailable") == 1
    assert failing.value("taplog_recorder_write_errors_total") >= 1
    assert failing.value("taplog_recorder_accepting") == 0

    sessions_dir.unlink()
    (taplog.data_dir / "moved").rename(sessions_dir)
    back = _wait_status(f"{taplog.url}/readyz", 200)
    assert back.status_code == 200 and back.json()["reason"] is None
    recovered = scrape(taplog)
    assert recovered.value("taplog_recorder_accepting") == 1
    assert recovered.value("taplog_recorder_queue_records") == 0
    assert [e["type"] for e in read_session(taplog.data_dir, "during")] == [
        "session.started",
        "llm.request",
        "llm.response",
        "call.answered",
    ]


def test_health_answers_reveal_no_configuration(taplog, fake):
    health = httpx.get(f"{taplog.url}/healthz")
    ready = httpx.get(f"{taplog.url}/readyz")
    assert health.headers["content-type"].startswith("application/json")
    assert health.json() == {"status": "ok"}
    assert set(ready.json()) == {"ready", "accepting", "reason", "queued_records", "queued_bytes"}
    port = fake.url.rsplit(":", 1)[1]
    for text in (health.text, ready.text):
        assert str(taplog.data_dir) not in text and port not in text and "http" not in text


def test_a_probe_of_the_base_url_is_answered_by_taplog_and_goes_nowhere(taplog, fake):
    """Claude Code sends `HEAD /` to its base URL first: no vendor, no session for it."""
    assert httpx.head(f"{taplog.url}/").status_code == 200
    assert httpx.get(f"{taplog.url}/").json() == {"service": "taplog"}
    assert fake.requests == []
    assert taplog.sessions() == {}


# -- logs, secrets ---------------------------------------------------------------------


def test_one_json_line_per_call_on_stderr_and_no_secrets_anywhere(fake, tmp_path):
    served = serve_on_fake(fake, tmp_path / "data", "--log-format", "json")
    try:
        client = _client(served, "logged", key=PLANTED_KEY)
        client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": PROMPT}]
        )
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": f"{PROMPT} !status=500"}]
            )
        httpx.post(
            f"{served.url}/v1/messages?api_key={PLANTED_KEY}",
            headers={"x-api-key": PLANTED_KEY, "anthropic-version": "2023-06-01"},
            json={"model": "claude-sonnet-4-6", "max_tokens": 9, "messages": HELLO},
        )
        deadline = time.monotonic() + 5
        while (metrics := httpx.get(f"{served.url}/metrics").text).count("outcome=") < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        code, err = served.stop()
    assert code == 0, err
    lines = [json.loads(line) for line in err.splitlines()]  # every line is JSON
    assert lines[-1]["message"] == "stopping; finishing calls in flight"
    calls = [line for line in lines if line["message"] == "call"]
    assert [(c["api"], c["status"], c["outcome"], c["level"]) for c in calls] == [
        ("openai.chat", 200, "ok", "info"),
        ("openai.chat", 500, "upstream_error", "warning"),
        ("anthropic.messages", 200, "ok", "info"),
    ]
    first = calls[0]
    assert first["session"] == "logged" and first["model"] == "gpt-4.1"
    assert first["latency_ms"] > 0 and first["logger"] == "taplog.calls"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["time"])
    for text in (err, metrics):
        assert PLANTED_KEY not in text and PLANTED_KEY[:12] not in text
        assert ANTHROPIC_KEY not in text and PROMPT not in text
        assert "authorization" not in text.lower()


def test_text_call_lines_cannot_be_forged_by_a_model_name(fake, tmp_path):
    served = serve_on_fake(fake, tmp_path / "data", "--log-level", "info")
    try:
        client = _client(served, "plain")
        client.chat.completions.create(model="gpt-4.1", messages=HELLO)
        client.chat.completions.create(model="x\n2026-01-01 INFO forged", messages=HELLO)
        deadline = time.monotonic() + 5
        while httpx.get(f"{served.url}/metrics").text.count('outcome="ok"') < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        code, err = served.stop()
    assert code == 0, err
    calls = [line for line in err.splitlines() if "taplog.calls: call " in line]
    assert len(calls) == 2
    assert re.search(
        r" INFO taplog\.calls: call session=plain exchange=\S+ api=openai\.chat "
        r"provider=openai model=gpt-4\.1 .*status=200 outcome=ok latency_ms=",
        calls[0],
    )
    assert not any(line.startswith("2026-01-01 INFO forged") for line in err.splitlines())
    assert 'model="x\\n2026-01-01 INFO forged"' in calls[1]


def test_log_level_warning_keeps_only_failed_calls(fake, tmp_path):
    served = serve_on_fake(fake, tmp_path / "data", env=taplog_env(TAPLOG_LOG_LEVEL="warning"))
    try:
        client = _client(served)
        client.chat.completions.create(model="gpt-4.1", messages=HELLO)
        with pytest.raises(openai.InternalServerError):
            client.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "!status=503"}]
            )
        deadline = time.monotonic() + 5
        while httpx.get(f"{served.url}/metrics").text.count("outcome=") < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        _, err = served.stop()
    calls = [line for line in err.splitlines() if "taplog.calls" in line]
    assert len(calls) == 1 and "status=503" in calls[0] and "WARNING" in calls[0]


# -- lifecycle -------------------------------------------------------------------------


def test_a_restart_on_the_same_data_dir_continues_sessions_with_the_next_seq(fake, tmp_path):
    data = tmp_path / "data"
    for run in range(2):
        served = serve_on_fake(fake, data)
        try:
            answer = _client(served, "long-run").chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": f"run {run}"}]
            )
            assert answer.choices[0].message.content == f"Echo: run {run}"
        finally:
            assert served.stop()[0] == 0
    (events,) = read_all(data).values()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert all(later["prev"] == earlier["h"] for earlier, later in itertools.pairwise(events))
    answers = [e for e in events if e["type"] == "llm.response"]
    assert len(answers) == 2 and all(a["outcome"] == "ok" for a in answers)
    assert [e["type"] for e in events].count("session.started") == 1  # one session, one start


def test_sigterm_during_concurrent_streams_loses_nothing(fake, tmp_path):
    served = serve_on_fake(fake, tmp_path / "data")
    count, texts, started = 5, {}, threading.Barrier(6)

    def stream(n: int) -> None:
        chunks = _client(served, f"stream-{n}").chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": f"stream {n} !events=10 !delay=0.1"}],
            stream=True,
        )
        parts = [next(chunks).choices[0].delta.content or ""]
        started.wait(10)
        parts += [c.choices[0].delta.content or "" for c in chunks if c.choices]
        texts[n] = "".join(parts)

    threads = [threading.Thread(target=stream, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    started.wait(10)  # every stream has started
    served.process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(20)
    _, err = served.process.communicate(timeout=20)
    assert served.process.returncode == 0, err
    assert texts == {n: f"Echo: stream {n}" for n in range(count)}
    sessions = read_all(tmp_path / "data")
    assert sorted(sessions) == sorted(f"stream-{n}" for n in range(count))
    for events in sessions.values():
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        (answer,) = [e for e in events if e["type"] == "llm.response"]
        assert answer["outcome"] == "ok" and answer["stream_complete"] is True


# -- the Docker image ------------------------------------------------------------------


def _dockerfile_text() -> str:
    return (ROOT / "Dockerfile").read_text()


def _dockerfile() -> dict[str, list[str]]:
    """Instructions of the final stage, continuation lines joined: {"CMD": [...], ...}."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages = text.split("\nFROM ")
    found: dict[str, list[str]] = {"FROM": [line.split()[0] for line in stages[1:]]}
    for line in ("FROM " + stages[-1]).splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            found.setdefault(word, []).append(rest.strip())
    found["RUN_ALL"] = re.findall(r"^RUN (.*)$", text, re.M)
    return found


def _exec_form(value: str) -> list[str]:
    parsed = json.loads(value)
    assert isinstance(parsed, list), "use the exec (JSON) form so signals reach taplog"
    return parsed


def test_the_dockerfile_builds_a_small_non_root_image_installed_like_ci():
    docker = _dockerfile()
    assert set(docker["FROM"]) == {"${BASE}"}  # python:3.11-slim unless built with another
    assert docker["USER"] == ["taplog"]
    assert docker["VOLUME"] == ['["/data"]'] and docker["EXPOSE"] == ["8787"]
    assert "/healthz" in docker["HEALTHCHECK"][0]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install -e '.[test]'" in ci
    (install,) = [r for r in docker["RUN_ALL"] if "pip install" in r]
    assert install.startswith("python3 -m venv /opt/taplog && /opt/taplog/bin/pip install")
    assert install.endswith(' ".[${EXTRAS}]"')  # the project and its extras, no test extra
    # by default with uvloop; config/compose.yaml's fleet adds `fleet`
    assert re.findall(r"^ARG (.*)$", _dockerfile_text(), re.M) == [
        "BASE=python:3.11-slim",
        "EXTRAS=fast",
    ]
    dockerfile = _dockerfile_text()
    assert not re.search(r"(?i)(api_key|token|secret|password)\s*=", dockerfile)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "taplog-data", ".env"} <= set(ignored)


def _installed(program: str) -> str:
    """The image runs from its venv on PATH; here, this test's venv stands in."""
    return str(Path(sys.executable).with_name(program))


IMAGE_TOKEN = "image-token-0123456789abcdef"


def test_the_image_entry_command_serves_and_passes_its_healthcheck(tmp_path):
    docker = _dockerfile()
    entry = _exec_form(docker["ENTRYPOINT"][0]) + _exec_form(docker["CMD"][0])
    assert entry == ["taplog", "serve", "--host", "0.0.0.0", "--data-dir", "/data"]
    data = tmp_path / "data"
    data.mkdir()
    argv = [_installed(entry[0]), *(str(data) if a == "/data" else a for a in entry[1:])]
    # Without a token the container refuses to start, and says how to give it one.
    refused = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=taplog_env())
    assert refused.returncode == 1 and "TAPLOG_AUTH_TOKEN" in refused.stderr
    env = taplog_env(TAPLOG_PORT="0", TAPLOG_AUTH_TOKEN=IMAGE_TOKEN)  # any free port here
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        banner = [process.stdout.readline() for _ in range(4)]
        base = next(line for line in banner if "OPENAI_BASE_URL" in line).split("=", 1)[1].strip()
        assert base.endswith("/t/$TAPLOG_AUTH_TOKEN/v1")  # the banner never prints a token
        url = base.removesuffix("/t/$TAPLOG_AUTH_TOKEN/v1")
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{url}/metrics").status_code == 401
        assert httpx.get(f"{url}/t/{IMAGE_TOKEN}/metrics").status_code == 200
        health = _exec_form(re.sub(r"^.*?CMD\s+", "", docker["HEALTHCHECK"][0]))
        port = url.rsplit(":", 1)[1]
        check = subprocess.run(
            [_installed(health[0]), *health[1:]], env={**env, "TAPLOG_PORT": port}, timeout=20
        )
        assert check.returncode == 0, shlex.join(health)
        assert (data / "sessions").is_dir()
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert os.listdir(data / "sessions") == []
