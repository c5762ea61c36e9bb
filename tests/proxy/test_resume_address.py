"""`taplog resume` names where to continue: the `taplog serve` of its data dir, or the config (#34).

A `taplog serve` process (in one process, and with a worker) listens on a port of its own
(`--port 0`, not the configured 8787) and records a call; the user stops it and resumes the
session. The base URL resume prints must be that serve's, and say so; started again on that
port, the serve takes the new session's calls at that URL. A data dir no serve has noted an
address in (taplog run in-process, as the tests run it) gets the configured address, and the
line says that instead.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.store.reader import read_all
from tests.fakes.clients import anthropic_at
from tests.fakes.harness import TaplogProcess, serve_on_fake, start_on_fake
from tests.fakes.keys import ANTHROPIC_FALLBACK_KEY
from tests.fakes.servers import ServerThread

MODEL = "claude-sonnet-4-6"


@pytest.fixture
def resuming(fake, monkeypatch):
    """`taplog resume` reaches the fake vendor with taplog's own key, as a user's would."""
    monkeypatch.setenv("TAPLOG_ANTHROPIC_BASE", fake.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_FALLBACK_KEY)


def ask(url: str, text: str = "Hello") -> str:
    answer = anthropic_at(url).messages.create(
        model=MODEL, max_tokens=100, messages=[{"role": "user", "content": text}]
    )
    return answer.content[0].text


def resume(data: Path, session: str) -> tuple[str, str]:
    """`taplog resume SESSION --to anthropic:MODEL`: the new session and the base URL line."""
    args = ["resume", session, "--to", f"anthropic:{MODEL}", "--data-dir", str(data)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    new = next(line for line in result.stdout.splitlines() if line.startswith("session "))
    (line,) = [line for line in result.stdout.splitlines() if "with the base URL" in line]
    return new.split()[1], line


def stopped(serve: TaplogProcess) -> None:
    code, err = serve.stop()
    assert code == 0, err


@pytest.mark.parametrize("workers", ["0", "1"])
def test_resume_prints_the_address_of_the_serve_that_records_into_its_data_dir(
    fake, tmp_path, resuming, workers
):
    data = tmp_path / "data"
    serve = serve_on_fake(fake, data, "--workers", workers)
    try:
        assert ask(serve.url) == "Echo: Hello"
    finally:
        stopped(serve)
    (session,) = read_all(data)

    new, line = resume(data, session)
    noted = f"the address taplog serve noted in {data} when it last listened"
    assert line == f"  with the base URL {serve.url}/s/{new} ({noted})"

    port = serve.url.rpartition(":")[2]
    again = serve_on_fake(fake, data, "--workers", workers, "--port", port)
    try:
        assert again.url == serve.url
        assert ask(f"{serve.url}/s/{new}", "And then?") == "Echo: And then?"
    finally:
        stopped(again)
    calls = [e for e in read_all(data)[new] if e["type"] == "llm.request"]
    assert len(calls) == 2  # resume's, then the call at the address it printed


def test_without_a_serve_s_address_resume_prints_the_configured_one_and_says_so(
    fake, tmp_path, resuming, monkeypatch
):
    data = tmp_path / "data"
    thread = ServerThread()  # taplog in-process, stopped before resuming: it notes no address
    try:
        taplog = start_on_fake(thread, fake, data)
        assert ask(taplog.url) == "Echo: Hello"
        (session,) = taplog.sessions()
    finally:
        thread.stop()

    monkeypatch.setenv("TAPLOG_PORT", "9123")
    new, line = resume(data, session)
    configured = f"the configured address: no taplog serve has noted its own in {data}"
    assert line == f"  with the base URL http://127.0.0.1:9123/s/{new} ({configured})"
