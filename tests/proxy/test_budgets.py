"""Budgets per session and per API key, driven through the official SDKs against the fake
vendor: the call over a limit is refused before the vendor, in the client's own error
shape, not retried by the SDK, and recorded as a `call.refused` event."""

from __future__ import annotations

from pathlib import Path

import anthropic
import openai
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.proxy.config import ConfigError, load
from taplog.recorder.store.reader import read_all
from tests.fakes.clients import scrape
from tests.fakes.harness import Taplog, model_requests, serve_on_fake, start_on_fake
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY
from tests.fakes.servers import ServerThread
from tests.fakes.vendor import FakeVendor

PRICED, UNPRICED = "gpt-4.1", "taplog-unpriced-model"


def _openai(taplog_url: str, session: str, key: str = OPENAI_KEY) -> openai.OpenAI:
    """The SDK as an agent has it: its default retries on (they must not fire)."""
    return openai.OpenAI(base_url=f"{taplog_url}/s/{session}/v1", api_key=key, max_retries=2)


def _ask(client: openai.OpenAI, text: str = "hello", model: str = PRICED) -> None:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": text}])


def _refusals(data_dir: Path) -> list[dict]:
    return [
        e for events in read_all(data_dir).values() for e in events if e["type"] == "call.refused"
    ]


def _proxy(servers: ServerThread, fake: FakeVendor, tmp_path: Path, **limits) -> Taplog:
    return start_on_fake(servers, fake, tmp_path / "data", **limits)


def test_session_max_calls_refuses_the_next_call_unretried(servers, fake, tmp_path):
    taplog = _proxy(servers, fake, tmp_path, session_max_calls=2)
    client = _openai(taplog.url, "capped")
    _ask(client)
    _ask(client)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _ask(client)
    assert refused.value.status_code == 403
    message = refused.value.message
    assert "session 'capped' made 2 calls, and session_max_calls is 2" in message
    assert "--session-max-calls, TAPLOG_SESSION_MAX_CALLS or session_max_calls" in message
    assert len(model_requests(fake)) == 2  # the vendor never saw the third, nor a retry
    taplog.flush()
    (event,) = _refusals(taplog.data_dir)  # one refusal: the SDK did not try again
    assert (event["session"], event["reason"], event["limit"]) == (
        "capped",
        "budget",
        "session_max_calls",
    )
    assert (event["value"], event["used"], event["status"]) == (2, 2, 403)
    assert f"taplog: {event['error']}" in message
    assert scrape(taplog).value("taplog_calls_refused_total", reason="budget") == 1
    _ask(_openai(taplog.url, "another"))  # a session of its own has its own budget


def test_session_max_tokens_refuses_an_anthropic_client(servers, fake, tmp_path):
    taplog = _proxy(servers, fake, tmp_path, session_max_tokens=5)
    client = anthropic.Anthropic(
        base_url=f"{taplog.url}/s/wordy", api_key=ANTHROPIC_KEY, max_retries=2
    )

    def ask() -> anthropic.types.Message:
        return client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=100,
            messages=[{"role": "user", "content": "tell me a long story"}],
        )

    first = ask()
    used = first.usage.input_tokens + first.usage.output_tokens
    assert used >= 5
    with pytest.raises(anthropic.PermissionDeniedError) as refused:
        ask()
    assert f"session 'wordy' used {used} tokens, and session_max_tokens is 5" in str(refused.value)
    assert "TAPLOG_SESSION_MAX_TOKENS" in str(refused.value)
    assert len(model_requests(fake)) == 1
    taplog.flush()
    (event,) = _refusals(taplog.data_dir)
    assert (event["limit"], event["used"], event["api"]) == (
        "session_max_tokens",
        used,
        "anthropic.messages",
    )


def test_session_max_cost_counts_priced_calls(servers, fake, tmp_path):
    taplog = _proxy(servers, fake, tmp_path, session_max_cost_usd=0.000001)
    client = _openai(taplog.url, "spender")
    _ask(client)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _ask(client)
    assert "session 'spender' cost $0.0000" in refused.value.message
    assert "session_max_cost_usd is 1e-06" in refused.value.message
    assert "--session-max-cost-usd" in refused.value.message
    assert "no price" not in refused.value.message
    assert len(model_requests(fake)) == 1


def test_unpriced_calls_count_nothing_and_are_said(servers, fake, tmp_path):
    """A model with no price adds nothing to a cost limit; the refusal, the event and
    `taplog show` say how many calls had no price."""
    taplog = _proxy(servers, fake, tmp_path, session_max_cost_usd=0.000001)
    client = _openai(taplog.url, "mixed")
    for _ in range(3):  # unpriced: nothing counted, nothing refused
        _ask(client, model=UNPRICED)
    _ask(client)  # priced: over the limit now
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _ask(client, model=UNPRICED)
    assert "(3 calls had no price and count nothing)" in refused.value.message
    assert len(model_requests(fake)) == 4
    taplog.flush()
    (event,) = _refusals(taplog.data_dir)
    assert event["unpriced"] == 3
    shown = CliRunner().invoke(main, ["show", "mixed", "--data-dir", str(taplog.data_dir)])
    assert shown.exit_code == 0, shown.output
    assert "3 calls with no price" in shown.output
    assert "refused budget" in shown.output


def test_key_max_calls_spans_the_sessions_of_a_key(servers, fake, tmp_path):
    taplog = _proxy(servers, fake, tmp_path, key_max_calls=2)
    _ask(_openai(taplog.url, "first"))
    _ask(_openai(taplog.url, "second"))
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _ask(_openai(taplog.url, "third"))
    message = refused.value.message
    assert "the calls with this API key (key:" in message
    assert "made 2 calls, and key_max_calls is 2" in message
    assert "--key-max-calls, TAPLOG_KEY_MAX_CALLS or key_max_calls" in message
    _ask(_openai(taplog.url, "third", key="sk-test-another-agent"))  # another key: its own
    assert len(model_requests(fake)) == 3
    taplog.flush()
    (event,) = _refusals(taplog.data_dir)
    assert (event["session"], event["limit"]) == ("third", "key_max_calls")
    assert event["key_fingerprint"].startswith("key:")


def test_calls_per_minute(servers, fake, tmp_path):
    taplog = _proxy(servers, fake, tmp_path, session_max_calls_per_minute=3)
    client = _openai(taplog.url, "hasty")
    for _ in range(3):
        _ask(client)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _ask(client)
    assert "session 'hasty' made 3 calls in the last minute" in refused.value.message
    assert "session_max_calls_per_minute is 3" in refused.value.message
    assert len(model_requests(fake)) == 3


def test_key_calls_per_minute(servers, fake, tmp_path):
    taplog = _proxy(servers, fake, tmp_path, key_max_calls_per_minute=2)
    _ask(_openai(taplog.url, "a"))
    _ask(_openai(taplog.url, "b"))
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _ask(_openai(taplog.url, "c"))
    assert "made 2 calls in the last minute, and key_max_calls_per_minute is 2" in (
        refused.value.message
    )


def test_a_session_coming_back_after_a_restart_keeps_its_totals(servers, fake, tmp_path):
    """Restored from its log: the first call after the restart goes through on what is
    known (nothing yet), and the next one sees everything the log holds."""
    data = tmp_path / "data"
    with ServerThread() as before:
        first = start_on_fake(before, fake, data, session_max_calls=3)
        client = _openai(first.url, "long-lived")
        _ask(client)
        _ask(client)
        first.flush()
    taplog = start_on_fake(servers, fake, data, session_max_calls=3)
    client = _openai(taplog.url, "long-lived")
    _ask(client)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _ask(client)
    assert "session 'long-lived' made 3 calls" in refused.value.message


def test_no_limit_by_default(taplog, fake):
    client = _openai(taplog.url, "free")
    for _ in range(5):
        _ask(client)
    assert len(model_requests(fake)) == 5


@pytest.mark.parametrize(
    ("source", "value"),
    [("flag", "-1"), ("env", "-2"), ("file", "-0.5")],
)
def test_limits_are_checked_at_start(tmp_path, source, value):
    config = tmp_path / "taplog.toml"
    config.write_text(f"session_max_cost_usd = {value}\n")
    flags = {"session_max_cost_usd": value} if source == "flag" else {}
    env = {"TAPLOG_SESSION_MAX_COST_USD": value} if source == "env" else {}
    with pytest.raises(ConfigError, match="must be 0 or more"):
        load(flags, env, config if source == "file" else None)


def test_limits_from_the_config_file(tmp_path):
    config = tmp_path / "taplog.toml"
    config.write_text("key_max_tokens = 100000\nloop_guard = 4\n")
    settings = load({}, {}, config)
    assert (settings.key_max_tokens, settings.loop_guard) == (100000, 4)


@pytest.mark.slow
def test_a_limit_through_serve_workers(fake, tmp_path):
    """`taplog serve --workers 2`: every worker sees the totals the recorder process keeps,
    whichever worker served the calls before (each call on a connection of its own)."""
    served = serve_on_fake(fake, tmp_path / "data", "--workers", "2", "--session-max-calls", "3")
    try:
        for _ in range(3):
            with _openai(served.url, "shared") as client:
                _ask(client)
        for _ in range(2):  # refused whichever worker takes it
            with (
                _openai(served.url, "shared") as client,
                pytest.raises(openai.PermissionDeniedError, match="session_max_calls is 3"),
            ):
                _ask(client)
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert len(model_requests(fake)) == 3
    refusals = _refusals(tmp_path / "data")
    assert [e["used"] for e in refusals] == [3, 3]
