"""`taplog snapshot --git`: one commit per changed session, none when nothing changed."""

from __future__ import annotations

import subprocess

import orjson
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from tests.fakes.agents import chat_agent


def snapshot(taplog, repo):
    args = ["snapshot", "--git", str(repo), "--data-dir", str(taplog.data_dir)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.output


def log(repo) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True)
    return out.stdout.decode().splitlines()


def test_snapshot_twice_gives_one_commit_and_a_change_gives_one_more(taplog, oai, tmp_path):
    chat_agent(oai, stream=False)
    ((session, events),) = taplog.wait_responses(8).items()
    repo = tmp_path / "history"

    assert snapshot(taplog, repo).endswith("1 of 1 sessions changed\n")
    assert log(repo) == [f"{session}: conversation through seq {events[-1]['seq']}"]
    saved = orjson.loads((repo / f"{session}.json").read_bytes())
    last = [e for e in events if e["type"] == "llm.request"][-1]["body"]
    answer = [e for e in events if e["type"] == "llm.response"][-1]["body"]["choices"][0]
    said = {"role": "assistant", "content": answer["message"]["content"]}
    assert saved == {**last, "messages": [*last["messages"], said]}  # the last answer too

    assert snapshot(taplog, repo).endswith("0 of 1 sessions changed\n")
    assert len(log(repo)) == 1

    oai.chat.completions.create(
        model="gpt-4.1",
        messages=[*saved["messages"], {"role": "user", "content": "And Rome?"}],
        extra_headers={"X-Taplog-Session": session},
    )
    taplog.wait_responses(9)
    other = oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Unrelated"}]
    )
    assert other.choices
    sessions = taplog.wait_responses(10)
    output = snapshot(taplog, repo)
    assert output.endswith("2 of 2 sessions changed\n")
    assert len(log(repo)) == 3
    assert all(name in output for name in sessions)
    saved = orjson.loads((repo / f"{session}.json").read_bytes())
    assert saved["messages"][-2] == {"role": "user", "content": "And Rome?"}
    assert saved["messages"][-1]["role"] == "assistant"


def test_a_session_that_cannot_be_written_is_named_and_the_others_are_committed(
    taplog, oai, tmp_path
):
    hello = [{"role": "user", "content": "Hello"}]
    oai.chat.completions.create(
        model="gpt-4.1", messages=hello, extra_headers={"x-taplog-session": "plain"}
    )
    oai.chat.completions.create(  # Anthropic has no log probabilities: not translatable
        model="gpt-4.1",
        messages=hello,
        logprobs=True,
        extra_headers={"x-taplog-session": "with-logprobs"},
    )
    taplog.wait_responses(2)
    repo = tmp_path / "history"
    args = ["snapshot", "--git", str(repo), "--format", "anthropic"]
    result = CliRunner().invoke(main, [*args, "--data-dir", str(taplog.data_dir)])

    assert result.exit_code == 1
    assert "committed plain (through seq" in result.stdout
    assert "1 of 1 sessions changed" in result.stdout
    assert "not written: with-logprobs: " in result.stderr and "logprobs" in result.stderr
    assert "1 session(s) could not be written as anthropic" in result.stderr
    assert sorted(p.name for p in repo.glob("*.json")) == ["plain.json"]
    assert log(repo) == [log(repo)[0]] and log(repo)[0].startswith("plain: ")
