"""`/metrics` after real SDK traffic: families, label sets, and counters that agree with the log."""

from __future__ import annotations

import random
import string
import threading

import anthropic
import httpx
import openai
import pytest

from taplog.proxy.keys import BREAKERS
from taplog.proxy.observe.labels import MAX_TOOLS, OTHER, Bounded
from taplog.proxy.observe.observer import failover_reason
from tests.builders import HELLO
from tests.disk import logs
from tests.fakes.agents import anthropic_agent
from tests.fakes.clients import Scrape, scrape
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

CALL_LABELS = {"api", "provider", "model", "status", "outcome"}


def test_sdk_traffic_moves_the_counters_by_the_right_amounts(taplog, oai, ant):
    before = scrape(taplog)
    assert before.content_type.startswith("text/plain; version=")
    assert before.value("taplog_calls_total") == 0
    assert before.value("taplog_info", version=before.label_values("taplog_info", "version").pop())

    plain = oai.chat.completions.create(model="gpt-4.1", messages=HELLO)
    chunks = list(
        oai.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "streamed !events=4"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "!status=500"}]
        )
    anthropic_agent(ant, stream=False)  # a tool loop: parallel tools, then a failing one
    taplog.wait_responses(3 + 8)
    after = scrape(taplog)
    answers = taplog.events("llm.response")

    ok = dict(api="openai.chat", provider="openai", model="gpt-4.1", status="2xx", outcome="ok")
    assert after.value("taplog_calls_total", **ok) == 2
    failed = {**ok, "status": "5xx", "outcome": "upstream_error"}
    assert after.value("taplog_calls_total", **failed) == 1
    claude = dict(api="anthropic.messages", provider="anthropic", model="claude-sonnet-4-6")
    loop = [a for a in answers if a["api"] == "anthropic.messages"]
    assert after.value("taplog_calls_total", **claude, status="2xx", outcome="ok") == len(loop)
    assert after.value("taplog_calls_total") == len(answers)
    assert after.label_names("taplog_calls") == CALL_LABELS

    # tokens and cost, as the SDK saw them and as the log priced them
    streamed_usage = chunks[-1].usage
    openai_input = plain.usage.prompt_tokens + streamed_usage.prompt_tokens
    tokens = dict(provider="openai", model="gpt-4.1")
    assert after.value("taplog_tokens_total", **tokens, type="input") == openai_input
    openai_output = plain.usage.completion_tokens + streamed_usage.completion_tokens
    assert after.value("taplog_tokens_total", **tokens, type="output") == openai_output
    logged_cost = sum(a.get("cost_usd") or 0 for a in answers)
    assert logged_cost > 0
    assert after.value("taplog_cost_usd_total") == pytest.approx(logged_cost)
    assert after.label_names("taplog_tokens") == {"provider", "model", "type"}

    # latency histograms: one observation per call, buckets that resolve milliseconds
    count = after.value("taplog_call_duration_seconds_count", api="openai.chat")
    assert count == 3
    bounds = after.label_values("taplog_call_duration_seconds_bucket", "le")
    assert {"0.001", "0.0025", "0.005", "0.01", "+Inf"} <= bounds
    inf = after.value("taplog_call_duration_seconds_bucket", api="openai.chat", le="+Inf")
    assert inf == count
    ttfb = after.value("taplog_call_time_to_first_byte_seconds_count", api="openai.chat")
    assert ttfb == 3
    overhead = after.value("taplog_call_overhead_seconds_count")
    assert overhead == len(answers)  # every forwarded call says what taplog itself took
    assert after.value("taplog_call_overhead_seconds_sum") < 5

    # tools: three asked for, read_file failed
    for tool in ("get_weather", "get_time", "read_file"):
        assert after.value("taplog_tool_calls_total", tool=tool) == 1
    assert after.value("taplog_tool_errors_total", tool="read_file") == 1
    assert after.value("taplog_tool_errors_total") == 1
    tool_time = after.value(
        "gen_ai_execute_tool_duration_seconds_count", gen_ai_tool_name="read_file"
    )
    assert tool_time == 1

    # OpenTelemetry GenAI client metrics
    gen_ai = dict(
        gen_ai_operation_name="chat",
        gen_ai_provider_name="openai",
        gen_ai_request_model="gpt-4.1",
        gen_ai_response_model="gpt-4.1",
    )
    duration = "gen_ai_client_operation_duration_seconds_count"
    assert after.value(duration, **gen_ai, error_type="") == 2
    assert after.value(duration, **gen_ai, error_type="500") == 1
    usage = "gen_ai_client_token_usage_sum"
    assert after.value(usage, **gen_ai, gen_ai_token_type="input") == openai_input
    first_chunk = "gen_ai_client_operation_time_to_first_chunk_seconds_count"
    assert after.value(first_chunk, **gen_ai) == 1  # the stream
    assert after.label_names("gen_ai_client_token_usage") == {*gen_ai, "gen_ai_token_type"}

    # the recorder and the sessions, against the files on disk
    sessions = taplog.sessions()
    events = sum(len(e) for e in sessions.values())
    written = sum(p.stat().st_size for p in logs(taplog.data_dir))
    final = scrape(taplog)
    assert final.value("taplog_recorder_events_written_total") == events
    assert final.value("taplog_recorder_written_bytes_total") == written
    assert final.value("taplog_recorder_fsync_duration_seconds_count") >= 1
    assert final.value("taplog_recorder_write_errors_total") == 0
    assert final.value("taplog_recorder_accepting") == 1
    assert final.value("taplog_recorder_queue_records") == 0
    assert final.value("taplog_sessions_started_total") == len(sessions)
    assert final.value("taplog_sessions_active") == len(sessions)
    assert final.value("taplog_calls_in_flight") == 0
    assert final.value("taplog_open_streams") == 0
    assert final.value("taplog_recorder_observer_errors_total") == 0
    assert final.value("process_resident_memory_bytes") > 0


# What a dashboard or an `absent()` alert can rely on from the first scrape on.
FAMILIES = {
    "taplog_calls_total": "counter",
    "taplog_call_duration_seconds": "histogram",
    "taplog_call_time_to_first_byte_seconds": "histogram",
    "taplog_call_overhead_seconds": "histogram",
    "taplog_tokens_total": "counter",
    "taplog_cost_usd_total": "counter",
    "taplog_unpriced_calls_total": "counter",
    "taplog_tool_calls_total": "counter",
    "taplog_tool_errors_total": "counter",
    "taplog_tool_anomalies_total": "counter",
    "taplog_retries_total": "counter",
    "taplog_failovers_total": "counter",
    "taplog_sessions_started_total": "counter",
    "taplog_error_events_total": "counter",
    "taplog_calls_in_flight": "gauge",
    "taplog_open_streams": "gauge",
    "taplog_calls_refused_total": "counter",
    "gen_ai_client_operation_duration_seconds": "histogram",
    "gen_ai_client_operation_time_to_first_chunk_seconds": "histogram",
    "gen_ai_client_token_usage": "histogram",
    "gen_ai_execute_tool_duration_seconds": "histogram",
}


def test_every_family_is_described_before_any_call(taplog):
    text = scrape(taplog).text
    for name, kind in FAMILIES.items():
        assert f"# TYPE {name} {kind}\n" in text
        assert f"# HELP {name} " in text
    assert "\ntaplog_sessions_started_total 0.0\n" in text
    assert "\ntaplog_error_events_total 0.0\n" in text


def test_scrapes_while_calls_are_recorded_agree_with_themselves(taplog, oai):
    """A scrape never sees a call counted in one family and not yet in another."""
    calls, threads = 60, 4

    def ask() -> None:
        for _ in range(calls // threads):
            oai.chat.completions.create(model="gpt-4.1", messages=HELLO)

    askers = [threading.Thread(target=ask) for _ in range(threads)]
    for thread in askers:
        thread.start()
    seen: list[float] = []
    while any(thread.is_alive() for thread in askers) or not seen or seen[-1] < calls:
        now = Scrape(taplog.url)
        counted = now.value("taplog_calls_total")
        assert now.value("taplog_call_duration_seconds_count") == counted
        assert now.value("taplog_call_overhead_seconds_count") == counted
        gen_ai = now.value("gen_ai_client_operation_duration_seconds_count")
        inputs = "gen_ai_client_token_usage_count"
        assert now.value(inputs, gen_ai_token_type="input") == gen_ai
        assert not seen or counted >= seen[-1]
        seen.append(counted)
    assert len(seen) > 1 and seen[-1] == calls


def test_open_streams_and_calls_in_flight_are_gauges(taplog, oai):
    stream = oai.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "slow !events=6 !delay=0.1"}],
        stream=True,
    )
    next(stream)
    during = Scrape(taplog.url)
    assert during.value("taplog_open_streams") == 1
    assert during.value("taplog_calls_in_flight") == 1
    list(stream)
    taplog.wait_responses(1)
    after = Scrape(taplog.url)
    assert after.value("taplog_open_streams") == 0
    assert after.value("taplog_calls_in_flight") == 0


def test_calls_refused_before_any_vendor_are_counted_by_reason(taplog):
    refused = httpx.post(
        f"{taplog.url}/v1/chat/completions",
        headers={"x-taplog-session": "../etc", "authorization": f"Bearer {OPENAI_KEY}"},
        json={"model": "gpt-4.1", "messages": HELLO},
    )
    assert refused.status_code == 400
    after = scrape(taplog)
    assert after.value("taplog_calls_refused_total", reason="invalid_session_id") == 1
    assert after.value("taplog_calls_total") == 0


def test_random_model_names_do_not_grow_the_series(taplog, oai):
    def ask(model: str) -> None:
        oai.chat.completions.create(model=model, messages=HELLO)

    ask("gpt-4.1")
    ask("made-up-0")
    taplog.wait_responses(2)
    first = scrape(taplog)
    names = ["".join(random.choices(string.ascii_lowercase, k=12)) for _ in range(50)]
    threads = [threading.Thread(target=ask, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taplog.wait_responses(52)
    after = scrape(taplog)
    assert after.value("taplog_calls_total", model=OTHER) == 51
    assert after.label_values("taplog_calls_total", "model") == {"gpt-4.1", OTHER}
    gen_ai_models = after.label_values(
        "gen_ai_client_operation_duration_seconds_count", "gen_ai_request_model"
    )
    assert gen_ai_models == {"gpt-4.1", OTHER}
    series = lambda s: {(x.name, tuple(sorted(x.labels.items()))) for x in s.samples}  # noqa: E731
    grown = {name for name, _ in series(after) - series(first)}
    assert grown <= {"taplog_recorder_fsync_duration_seconds_bucket"}  # nothing per model
    assert not any(name in after.text for name in names)


def test_tool_names_are_bounded():
    bounded = Bounded(["openai"], ["gpt-4.1"])
    names = [f"tool_{n}" for n in range(MAX_TOOLS + 20)]
    labelled = [bounded.tool(name) for name in names]
    assert labelled[:MAX_TOOLS] == names[:MAX_TOOLS]
    assert set(labelled[MAX_TOOLS:]) == {OTHER}
    assert bounded.tool("tool_3") == "tool_3"  # seen names stay
    assert bounded.tool("x" * 500) == OTHER
    assert bounded.model("claude-sonnet-4-6") == "claude-sonnet-4-6"  # from litellm's list
    assert bounded.model("my-private-finetune") == OTHER
    assert bounded.provider("evil.example.com") == OTHER


# -- failover, with the setup of tests/proxy/failover/test_failover.py --------------------


def test_retries_failovers_and_breaker_states(vendors, failover_proxy):
    client = openai.OpenAI(base_url=f"{failover_proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    vendors.openai.down = {"status": "500"}

    def ask(text: str) -> str:
        answer = client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": text}]
        )
        return answer.choices[0].message.content

    assert ask("one") == "Echo: one"  # tries openai, retries, fails over to anthropic
    assert ask("two") == "Echo: two"  # the open circuit sends it straight to anthropic
    failover_proxy.wait_responses(len(vendors.openai.requests) + 2)
    metrics = scrape(failover_proxy)

    openai_tries = len([r for r in vendors.openai.requests if r.path == "/v1/chat/completions"])
    assert openai_tries >= 2
    assert metrics.value("taplog_retries_total", provider="openai", model="gpt-4.1") == (
        openai_tries - 1
    )
    moved = dict(from_provider="openai", to_provider="anthropic")
    assert metrics.value("taplog_failovers_total", **moved, reason="server_error") == 1
    assert metrics.value("taplog_failovers_total", **moved, reason="circuit_open") == 1
    assert metrics.value("taplog_failovers_total") == 2
    primary = dict(api="openai.chat", provider="openai", model="gpt-4.1")
    assert metrics.value("taplog_calls_total", **primary, status="5xx") == openai_tries
    fallback = dict(api="anthropic.messages", provider="anthropic", model="claude-sonnet-4-6")
    assert metrics.value("taplog_calls_total", **fallback, status="2xx", outcome="ok") == 2
    states = failover_proxy.app[BREAKERS].states()
    assert states["openai:gpt-4.1"] == "open"
    breaker = "taplog_circuit_breaker_state"
    assert metrics.value(breaker, provider="openai", model="gpt-4.1", state="open") == 1
    assert metrics.value(breaker, provider="openai", model="gpt-4.1", state="closed") == 0
    target = dict(provider="anthropic", model="claude-sonnet-4-6")
    assert metrics.value(breaker, **target, state="closed") == 1
    assert metrics.label_names(breaker) == {"provider", "model", "state"}


def test_an_anthropic_client_served_by_openai_is_counted_per_try(vendors, failover_proxy):
    client = anthropic.Anthropic(base_url=failover_proxy.url, api_key=ANTHROPIC_KEY, max_retries=0)
    vendors.anthropic.down = {"status": "529"}
    answer = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.content[0].text == "Echo: hi"
    tries = len([r for r in vendors.anthropic.requests if r.path == "/v1/messages"])
    failover_proxy.wait_responses(tries + 1)
    metrics = scrape(failover_proxy)
    moved = dict(from_provider="anthropic", to_provider="openai", reason="server_error")
    assert metrics.value("taplog_failovers_total", **moved) == 1
    served = dict(api="openai.chat", provider="openai", model="gpt-4.1", outcome="ok")
    assert metrics.value("taplog_calls_total", **served) == 1


@pytest.mark.parametrize(
    ("reason", "status", "outcome", "expected"),
    [
        ("HTTP 503", 503, "upstream_error", "server_error"),
        ("HTTP 529", 529, "upstream_error", "server_error"),
        ("HTTP 429", 429, "upstream_error", "rate_limited"),
        ("error event at the start of the stream", 200, "upstream_error", "stream_error"),
        ("the vendor did not answer in time", None, "timeout", "timeout"),
        ("cannot reach the vendor", None, "unreachable", "unreachable"),
        ("not translatable: n > 1", None, None, "untranslatable"),
        ("continuing a broken stream (cut)", 200, "upstream_cut", "midstream"),
        ("something new", None, None, "other"),
    ],
)
def test_failover_reasons_are_classes_not_free_text(reason, status, outcome, expected):
    assert failover_reason(reason, status, outcome) == expected
