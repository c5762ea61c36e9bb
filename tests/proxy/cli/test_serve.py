"""`taplog serve` as a user runs it: a real process, real signals, real config errors."""

from __future__ import annotations

import signal
import subprocess
import threading

import httpx
import openai
import pytest

from taplog.recorder.store.reader import read_all
from tests.fakes.harness import TAPLOG, TaplogProcess, serve_on_fake, taplog_env
from tests.fakes.keys import OPENAI_KEY


@pytest.fixture
def served(fake, tmp_path):
    server = serve_on_fake(fake, tmp_path / "data")
    yield server
    if server.process.poll() is None:
        server.stop()


def test_serve_prints_what_to_export_and_answers_health(served, tmp_path):
    assert served.banner[0].startswith("taplog ")
    assert str((tmp_path / "data").resolve()) in served.banner[0]
    assert served.openai_base.startswith("http://127.0.0.1:")
    assert any(f"ANTHROPIC_BASE_URL={served.url}\n" in line for line in served.banner)
    assert httpx.get(f"{served.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{served.url}/readyz").json()["accepting"] is True


def test_sigterm_lets_streams_in_flight_finish_then_flushes_and_exits_0(served, tmp_path):
    client = openai.OpenAI(base_url=served.openai_base, api_key=OPENAI_KEY, max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "slow !events=8 !delay=0.1"}],
        stream=True,
    )
    first = next(stream)
    stopper = threading.Timer(0.1, served.process.send_signal, (signal.SIGTERM,))
    stopper.start()
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert (first.choices[0].delta.content or "") + text == "Echo: slow"
    _, err = served.process.communicate(timeout=20)
    assert served.process.returncode == 0, err
    (events,) = read_all(tmp_path / "data").values()
    answer = next(e for e in events if e["type"] == "llm.response")
    assert answer["outcome"] == "ok" and answer["stream_complete"] is True


def test_a_second_serve_on_the_same_data_dir_is_refused(served, tmp_path):
    second = subprocess.run(
        [TAPLOG, "serve", "--port", "0", "--data-dir", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=20,
        env=taplog_env(),
    )
    assert second.returncode == 1
    assert "another taplog serve" in second.stderr and str(served.process.pid) in second.stderr


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--port", "70000"], {}, "--port"),
        (["--port", "http"], {}, "'--port'"),
        ([], {"TAPLOG_FSYNC": "sometimes"}, "TAPLOG_FSYNC"),
        ([], {"TAPLOG_READ_TIMEOUT": "-1"}, "TAPLOG_READ_TIMEOUT"),
        (["--openai-base", "ftp://example.com"], {}, "--openai-base"),
        (["--anthropic-base", "https://user:pw@example.com"], {}, "--anthropic-base"),
        (["--openai-base", "http://169.254.169.254/v1"], {}, "--openai-base"),
        # checked whole: what passes would fail on every call (issue 18, item 6)
        (["--openai-base", "http://127.0.0.1:99999/v1"], {}, "--openai-base"),
        (["--openai-base", "http://api.openai.com\n/v1"], {}, "--openai-base"),
        ([], {"TAPLOG_ANTHROPIC_BASE": "https://api.anthropic.com/#x"}, "TAPLOG_ANTHROPIC_BASE"),
        (["--host", "127.0.0.1\nx"], {}, "--host"),
        (["--replay-ignore", "tools,messages["], {}, "--replay-ignore"),
        # a round every few milliseconds would burn a core idle (issue 33, item 4)
        (["--ship-after-minutes", "0.0001"], {}, "--ship-after-minutes"),
    ],
)
def test_bad_settings_are_refused_naming_the_option(tmp_path, args, env, named):
    result = subprocess.run(
        [TAPLOG, "serve", "--data-dir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=20,
        env=taplog_env(**env),
    )
    assert result.returncode == 2
    assert named in result.stderr
    assert not (tmp_path / "sessions").exists()


def test_config_file_values_and_precedence(tmp_path, fake):
    config = tmp_path / "taplog.toml"
    config.write_text(f'openai_base = "{fake.url}/v1"\nport = 1\nfsync = "always"\n')
    server = TaplogProcess("--config", str(config), "--data-dir", str(tmp_path / "d"))
    try:
        client = openai.OpenAI(base_url=server.openai_base, api_key=OPENAI_KEY, max_retries=0)
        reply = client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "from config"}]
        )
        assert reply.choices[0].message.content == "Echo: from config"
    finally:
        assert server.stop()[0] == 0


def test_config_file_unknown_key_is_named(tmp_path):
    config = tmp_path / "taplog.toml"
    config.write_text("prot = 9000\n")
    result = subprocess.run(
        [TAPLOG, "serve", "--config", str(config)], capture_output=True, text=True, env=taplog_env()
    )
    assert result.returncode == 2 and "unknown setting 'prot'" in result.stderr


def test_port_in_use_is_a_clear_error(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [TAPLOG, "serve", "--port", str(port), "--data-dir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=20,
            env=taplog_env(),
        )
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
