"""Files stay home: a symbolic link planted where taplog writes is never followed
(issue 18, item 4). The call is still recorded, in a new file, with an `error` event
that names the link; the link itself goes to `quarantine/`.
"""

from __future__ import annotations

import os

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.store.reader import read_session
from tests.disk import log_of
from tests.fakes.harness import start_on_fake
from tests.fakes.ui_traffic import ask


@pytest.mark.parametrize("name", ["planted.jsonl.zst", "planted.jsonl"])
def test_a_symlink_planted_as_a_session_log_is_never_followed(servers, fake, tmp_path, name):
    proxy = start_on_fake(servers, fake, tmp_path / "data")
    sessions = proxy.data_dir / "sessions"
    sessions.mkdir(parents=True, exist_ok=True)
    outside = tmp_path / "outside.jsonl"
    (sessions / name).symlink_to(outside)  # dangling: following it creates it

    assert ask(proxy, "planted", "hello") == "Echo: hello"
    proxy.flush()

    assert not outside.exists()  # nothing was written through the link
    log = sessions / "planted.jsonl.zst"
    assert log.is_file() and not log.is_symlink() and not (sessions / "planted.jsonl").exists()
    events = read_session(proxy.data_dir, "planted")
    errors = [e for e in events if e["type"] == "error"]
    assert f"{name} was a symbolic link, which taplog never follows" in errors[0]["reason"]
    assert [e["type"] for e in events if e["type"].startswith("llm.")] == [
        "llm.request",
        "llm.response",
    ]
    (moved,) = (proxy.data_dir / "quarantine").glob("planted.*.symlink")
    assert moved.is_symlink() and os.readlink(moved) == str(outside)


def test_a_symlink_planted_where_compaction_writes_is_not_written_through(servers, fake, tmp_path):
    from taplog.recorder.query.compaction import compact

    proxy = start_on_fake(servers, fake, tmp_path / "data")
    assert ask(proxy, "compacted", "hello") == "Echo: hello"
    proxy.flush()
    folder = proxy.data_dir / "compacted"
    folder.mkdir(exist_ok=True)
    outside = tmp_path / "outside.json"
    (folder / "manifest.json.partial").symlink_to(outside)
    assert compact(proxy.data_dir, 0) == ["compacted"]
    assert not outside.exists()


def test_a_symlinked_session_log_is_named_and_skipped_by_every_query(servers, fake, tmp_path):
    proxy = start_on_fake(servers, fake, tmp_path / "data")
    assert ask(proxy, "real", "hello") == "Echo: hello"
    proxy.flush()
    secret = tmp_path / "elsewhere.jsonl"
    secret.write_text('{"not": "a taplog log"}\n')
    log_of(proxy.data_dir, "linked").symlink_to(secret)
    result = CliRunner().invoke(
        main,
        [
            "sql",
            "SELECT session FROM sessions",
            "--data-dir",
            str(proxy.data_dir),
            "--format",
            "csv",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.split() == ["session", "real"]  # the rest is still read
    assert "linked.jsonl.zst is a symbolic link; it is not read" in result.stderr
