"""Outages that end: a silent vendor is left at once, and a vendor that is back gets calls
again within seconds, even after every circuit of the chain opened.

Both fake vendors serve one OpenAI client through a rule `gpt-* -> anthropic`, with the
rule's defaults (retries 2, timeout_retries 0) and short timeouts.
"""

from __future__ import annotations

import re
import time

import openai
import orjson
import pytest

from taplog.proxy.failover.breaker import COOL_DOWN, SharedBreakers, create_shared_breakers
from taplog.proxy.keys import BREAKERS
from taplog.proxy.observe.log_lines import TextFormatter
from tests.builders import HELLO
from tests.fakes.clients import gemini_at, sql_rows
from tests.fakes.harness import FALLBACK_TTFB, model_requests
from tests.fakes.keys import OPENAI_KEY


def _ask(client) -> str:
    return (
        client.chat.completions.create(model="gpt-4.1", messages=HELLO).choices[0].message.content
    )


def test_a_silent_vendor_is_left_after_one_timeout(vendors, fallback_client):
    vendors.openai.down = {"hang": ""}
    started = time.monotonic()
    assert _ask(fallback_client) == "Echo: hello"
    assert time.monotonic() - started < 2 * FALLBACK_TTFB  # not three timeouts in a row
    assert len(model_requests(vendors.openai)) == 1
    assert len(model_requests(vendors.anthropic)) == 1


@pytest.mark.slow
def test_after_every_vendor_failed_the_first_one_back_is_used_within_seconds(
    vendors, fallback_proxy, fallback_client, caplog
):
    caplog.set_level("INFO", logger="taplog.failover")
    vendors.openai.down = vendors.anthropic.down = {"status": "500"}
    with pytest.raises(openai.InternalServerError) as first:
        _ask(fallback_client)
    assert first.value.body["message"].startswith("Error 500 scripted")  # OpenAI's own
    states = fallback_proxy.app[BREAKERS].states()
    assert set(states.values()) == {"open"}  # both circuits opened

    vendors.anthropic.down = {}  # the fallback is back; OpenAI is not
    with pytest.raises(openai.InternalServerError):
        _ask(fallback_client)  # the circuit that opened first is tried, not nothing at all
    deadline = time.monotonic() + COOL_DOWN + 3
    while True:
        try:
            answer = _ask(fallback_client)
            break
        except openai.InternalServerError:
            assert time.monotonic() < deadline, "the vendor that was back got no calls"
            time.sleep(0.5)
    assert answer == "Echo: hello"
    served = [e for e in fallback_proxy.events("llm.response") if e["status"] == 200]
    assert [e["provider"] for e in served] == ["anthropic"]
    circuits = [line for line in _lines(caplog) if ": circuit " in line]
    assert circuits == [
        'WARNING taplog.failover: circuit open target=openai:gpt-4.1 rule="gpt-*"',
        'WARNING taplog.failover: circuit open target=anthropic:claude-sonnet-4-6 rule="gpt-*"',
        'INFO taplog.failover: circuit closed target=anthropic:claude-sonnet-4-6 rule="gpt-*"',
    ]


def test_when_every_vendor_is_down_the_client_gets_its_own_vendors_error(
    vendors, fallback_proxy, fallback_client
):
    vendors.openai.down = {"status": "503"}
    vendors.anthropic.down = {"status": "529"}
    with pytest.raises(openai.InternalServerError) as caught:
        _ask(fallback_client)
    assert (
        caught.value.status_code == 503 and "x-taplog-fallback" not in caught.value.response.headers
    )
    answers = fallback_proxy.events("llm.response")
    assert [(e["provider"], e["status"]) for e in answers] == [("openai", 503)] * 3 + [
        ("anthropic", 529)
    ] * 3
    assert all(e["outcome"] == "upstream_error" for e in answers)
    (failover,) = fallback_proxy.events("failover")
    assert (failover["from_provider"], failover["to_provider"]) == ("openai", "anthropic")


def test_a_prompt_too_long_for_its_model_goes_to_one_with_a_larger_window(
    servers, vendors, tmp_path
):
    # gpt-4o takes no more than gpt-4o-mini (128k tokens): skipped; gpt-4.1 takes 1M.
    rule = {"model": "gpt-4o-mini", "to": ["openai:gpt-4o", "openai:gpt-4.1"]}
    proxy = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})
    vendors.openai.next_faults = [{"status": "400", "code": "context_length_exceeded"}]
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)

    answer = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)

    assert (answer.model, answer.choices[0].message.content) == ("gpt-4.1", "Echo: hello")
    sent = [orjson.loads(r.body)["model"] for r in model_requests(vendors.openai)]
    assert sent == ["gpt-4o-mini", "gpt-4.1"]
    (failover,) = proxy.events("failover")
    assert failover["reason"] == "the prompt is too long for openai:gpt-4o-mini"
    assert (failover["to_provider"], failover["to_model"]) == ("openai", "gpt-4.1")


def test_a_prompt_too_long_for_gemini_goes_to_a_model_with_a_larger_window(
    servers, vendors, tmp_path
):
    """Gemini says it in words alone. gemini-2.5-flash takes 1,048,576 tokens, Claude
    Sonnet 4.6 fewer (skipped), gpt-5.5 1,050,000 (litellm's catalogue)."""
    rule = {"model": "gemini-2.5-flash", "to": ["anthropic:claude-sonnet-4-6", "openai:gpt-5.5"]}
    proxy = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})
    vendors.gemini.next_faults = [{"status": "400", "code": "context_length_exceeded"}]

    client = gemini_at(proxy.url)
    answer = client.models.generate_content(model="gemini-2.5-flash", contents="hello")

    assert answer.text == "Echo: hello"
    assert len(model_requests(vendors.gemini)) == 1 and model_requests(vendors.anthropic) == []
    (sent,) = [orjson.loads(r.body) for r in model_requests(vendors.openai)]
    assert sent["model"] == "gpt-5.5"
    (failover,) = proxy.events("failover")
    assert failover["reason"] == "the prompt is too long for gemini:gemini-2.5-flash"
    assert (failover["to_provider"], failover["to_model"]) == ("openai", "gpt-5.5")


def test_a_prompt_too_long_for_every_window_gets_its_vendors_refusal(servers, vendors, tmp_path):
    rule = {"model": "gpt-4.1", "to": ["anthropic:claude-haiku-4-5"]}
    proxy = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})
    vendors.openai.down = {"status": "400", "code": "context_length_exceeded"}
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="gpt-4.1", messages=HELLO)
    assert refused.value.code == "context_length_exceeded"  # OpenAI's own answer
    assert "context window is not larger" in refused.value.response.headers["x-taplog-fallback"]
    assert model_requests(vendors.anthropic) == []


def test_after_a_refusal_for_length_a_window_no_one_knows_is_tried_after_the_larger_ones(
    servers, vendors, tmp_path
):
    """gpt-4o is not larger than gpt-4o-mini (skipped); `claude-house-model` is in no
    catalogue (tried last); gpt-4.1 takes 1M (first). Both larger ones refuse too here."""
    rule = {
        "model": "gpt-4o-mini",
        "to": ["anthropic:claude-house-model", "openai:gpt-4o", "openai:gpt-4.1"],
    }
    proxy = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})
    vendors.openai.down = {"status": "400", "code": "context_length_exceeded"}
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)

    answer = client.chat.completions.create(model="gpt-4o-mini", messages=HELLO)

    assert (answer.model, answer.choices[0].message.content) == (
        "claude-house-model",
        "Echo: hello",
    )
    sent = [orjson.loads(r.body)["model"] for r in model_requests(vendors.openai)]
    assert sent == ["gpt-4o-mini", "gpt-4.1"]
    first, second = proxy.events("failover")
    assert (first["to_model"], second["to_model"]) == ("gpt-4.1", "claude-house-model")
    assert second["reason"] == (
        "the prompt is too long for openai:gpt-4.1; tried though its context window is "
        "unknown (anthropic:claude-house-model)"
    )
    (answered,) = proxy.events("call.answered")
    assert any("gpt-4o was skipped" in s for s in answered["skipped"])


def test_the_workers_breakers_are_one_with_one_probe_among_them(tmp_path):
    """Two workers' tables on one file (`serve --workers N`): what one saw, the other acts on."""
    create_shared_breakers(tmp_path / "breakers")
    one, other = (SharedBreakers(tmp_path / "breakers", cool_down=0.2) for _ in range(2))
    target = "openai:gpt-4.1"
    for _ in range(3):
        one[target].failed()
    assert other[target].state == "open" and not other[target].allows()
    time.sleep(0.25)
    assert other[target].allows()  # the probe
    assert not one[target].allows()  # while it is out, no other
    other[target].succeeded()
    assert one[target].allows()
    assert one.states() == other.states() == {target: "closed"}


def _lines(caplog) -> list[str]:
    """taplog's failover lines as stderr shows them."""
    return [
        TextFormatter().format(r).split(" ", 1)[1]
        for r in caplog.records
        if r.name == "taplog.failover"
    ]


def test_a_primary_skipped_by_its_open_circuit_counts_no_attempt_and_stderr_says_why(
    vendors, fallback_proxy, fallback_client, caplog
):
    caplog.set_level("INFO", logger="taplog.failover")
    vendors.openai.down = {"status": "500"}
    assert _ask(fallback_client) == "Echo: hello"  # three failures open OpenAI's circuit
    assert fallback_proxy.app[BREAKERS].states()["openai:gpt-4.1"] == "open"
    assert _ask(fallback_client) == "Echo: hello"  # straight to the fallback
    fallback_proxy.flush()
    opened, first, second = _lines(caplog)
    assert opened == 'WARNING taplog.failover: circuit open target=openai:gpt-4.1 rule="gpt-*"'
    assert re.fullmatch(
        r"WARNING taplog\.failover: failover session=\S+ exchange=\S+ rule=\"gpt-\*\" "
        r"from=openai:gpt-4\.1 to=anthropic:claude-sonnet-4-6 reason=\"HTTP 500.*\"",
        first,
    ), first
    assert second.endswith('reason="circuit open for openai:gpt-4.1"'), second
    calls = sql_rows(
        fallback_proxy.data_dir,
        "SELECT c.attempts, c.failovers, a.data->>'tries' AS tries FROM llm_calls c "
        "JOIN events a ON a.type = 'call.answered' AND a.exchange = c.exchange "
        "ORDER BY c.started_at",
    )
    assert calls == [
        {"attempts": 4, "failovers": 1, "tries": "4"},
        {"attempts": 1, "failovers": 1, "tries": "1"},
    ]
    skipped = [e for e in fallback_proxy.events("llm.request") if e["attempt"] == 0]
    assert [(e["provider"], e["sent"]) for e in skipped] == [("openai", False)]
