"""A Claude Code run, a Codex run and a Gemini CLI run, recorded through taplog, replayed
offline with the real CLIs: run again from another working directory and home, every
call is answered from the recording (the vendor hears nothing), in strict mode and in
record-missing, which then has nothing new to learn; a run recorded through an outage of
its vendor replays as its CLI got it."""

from __future__ import annotations

import pytest

from tests.fakes.clis import codex_answer, proxy_for, run_claude, run_codex, run_gemini
from tests.fakes.harness import serve_replay, start_taplog

pytestmark = pytest.mark.slow


def _claude(base_url: str, scratch) -> str:
    result = run_claude(base_url, scratch)
    assert result["is_error"] is False, result
    return result["result"]


def _codex(base_url: str, scratch) -> str:
    return codex_answer(run_codex(f"{base_url}/v1", scratch))


def _gemini(base_url: str, scratch) -> str:
    return run_gemini(base_url, scratch)["response"]


CLIENTS = {
    "claude-code": ("anthropic", _claude),
    "codex": ("openai", _codex),
    "gemini-cli": ("gemini", _gemini),
}
OUTAGE_RULES = {  # the docs' quick set-up: each CLI's vendor to another
    "claude-code": "claude-*=openai:gpt-4.1",
    "codex": "gpt-*=anthropic:claude-sonnet-4-5",
    "gemini-cli": "gemini-*=anthropic:claude-sonnet-4-6",
}


def _recorded(servers, vendors, tmp_path, client: str, *fallback: str):
    """A first run through taplog against the fake vendor: its data dir, its answer."""
    vendor, run = CLIENTS[client]
    proxy = proxy_for(servers, vendors, tmp_path / "data", *fallback)
    answer = run(proxy.url, tmp_path / "first")
    assert "taplog-ok" in answer
    proxy.wait_for(lambda s: any(e["type"] == "tool.post" for ev in s.values() for e in ev))
    return proxy.data_dir, answer, getattr(vendors, vendor)


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_real_cli_run_replays_offline_from_another_directory(
    servers, vendors, tmp_path, client, caplog
):
    data, answer, vendor = _recorded(servers, vendors, tmp_path, client)
    heard = len(vendor.requests)
    caplog.set_level("INFO", logger="taplog")

    replayed = CLIENTS[client][1](serve_replay(servers, data), tmp_path / "elsewhere")

    said = [r.getMessage() for r in caplog.records if r.name == "taplog"]
    assert not [m for m in said if m.startswith("replay miss")], said
    assert len([m for m in said if m.startswith("replay hit")]) >= 2  # the tool loop's calls
    assert replayed == answer and len(vendor.requests) == heard


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_record_missing_learns_nothing_new_from_a_rerun(servers, vendors, tmp_path, client):
    data, answer, vendor = _recorded(servers, vendors, tmp_path, client)
    heard = len(vendor.requests)
    cassette = start_taplog(
        servers,
        tmp_path / "cassette",
        openai_base=f"{vendors.openai.url}/v1",
        anthropic_base=vendors.anthropic.url,
        gemini_base=vendors.gemini.url,
        replay=str(data),
        replay_mode="record-missing",
        replay_speed=0.0,
    )

    assert CLIENTS[client][1](cassette.url, tmp_path / "rerun") == answer
    assert len(vendor.requests) == heard and cassette.sessions() == {}


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_run_recorded_through_an_outage_replays_as_the_cli_got_it(
    servers, vendors, tmp_path, client, caplog
):
    own = getattr(vendors, CLIENTS[client][0])
    own.down = {"status": "503"}
    data, answer, _ = _recorded(servers, vendors, tmp_path, client, OUTAGE_RULES[client])
    heard = [len(v.requests) for v in (vendors.openai, vendors.anthropic, vendors.gemini)]
    caplog.set_level("INFO", logger="taplog")

    replayed = CLIENTS[client][1](serve_replay(servers, data), tmp_path / "elsewhere")

    said = [r.getMessage() for r in caplog.records if r.name == "taplog"]
    assert not [m for m in said if m.startswith("replay miss")], said
    assert len([m for m in said if m.startswith("replay hit")]) >= 2
    assert replayed == answer
    assert [len(v.requests) for v in (vendors.openai, vendors.anthropic, vendors.gemini)] == heard
