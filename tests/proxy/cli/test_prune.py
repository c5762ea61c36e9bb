"""Retention beside a real `taplog serve --retention-days 1`, driven by the official SDK.

An old session present at start goes in serve's first pass; a session that
keeps getting calls is never pruned and keeps every call; `taplog prune`
refuses while serve owns the data dir; `taplog verify` passes on what is left.
"""

from __future__ import annotations

import subprocess

import openai
import orjson
import pytest

from taplog.recorder.store.reader import read_all
from tests.builders import write_dated_sessions
from tests.fakes.harness import TAPLOG, serve_on_fake, taplog_env, until
from tests.fakes.keys import OPENAI_KEY


def _pruned(data_dir) -> list[dict]:
    record = data_dir / "pruned.jsonl"
    return (
        [orjson.loads(line) for line in record.read_bytes().splitlines()] if record.exists() else []
    )


def _taplog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TAPLOG, *args], capture_output=True, text=True, env=taplog_env(), timeout=60
    )


@pytest.mark.parametrize("workers", ["0", "2"])
def test_serve_prunes_old_sessions_and_never_a_live_one(fake, tmp_path, workers):
    data = tmp_path / "data"
    write_dated_sessions(data, {"ancient": ([45, 40], "old " * 400), "recent": ([3, 0.5], None)})
    served = serve_on_fake(fake, data, "--retention-days", "1", "--workers", workers)
    try:
        live = openai.OpenAI(
            base_url=served.openai_base.replace("/v1", "/s/live/v1"),
            api_key=OPENAI_KEY,
            max_retries=0,
        )
        asked = [{"role": "user", "content": "hello"}]
        live.chat.completions.create(model="gpt-4.1", messages=asked)
        record = until(lambda: _pruned(data))
        for _ in range(3):
            live.chat.completions.create(model="gpt-4.1", messages=asked)
        refused = _taplog("prune", "--data-dir", str(data), "--older-than", "1d")
        dry = _taplog("prune", "--data-dir", str(data), "--older-than", "1d", "--dry-run")
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert [(r["session"], r["lines"], r["by"]) for r in record] == [("ancient", 3, "serve")]
    assert refused.returncode == 1
    assert "let it prune on its own: taplog serve --retention-days N" in refused.stderr
    assert dry.returncode == 0 and dry.stdout.startswith("would prune 0 sessions")
    sessions = read_all(data)
    assert sorted(sessions) == ["live", "recent"]
    answers = [e for e in sessions["live"] if e["type"] == "llm.response"]
    assert len(answers) == 4 and sessions["live"][0]["type"] == "session.started"
    assert not list((data / "blobs").glob("*/*.json"))  # only ancient used one
    verified = _taplog("verify", "--data-dir", str(data))
    assert verified.returncode == 0, verified.stdout
    assert verified.stdout.startswith("checked 2 session logs")
    assert _pruned(data) == record  # one pass's line, once
