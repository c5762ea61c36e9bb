"""`--otlp-endpoint`: calls, tool runs and failovers as OTLP spans, read back from a fake
collector (tests/fakes/otlp.py); a collector that is down or hangs costs no call."""

from __future__ import annotations

import json
import subprocess
import sys

import anthropic
import openai
import pytest

from taplog.proxy.config import ConfigError, load
from taplog.proxy.observe.otlp import traces_url
from tests.fakes.agents import anthropic_agent, chat_agent
from tests.fakes.clients import anthropic_at, openai_at, scrape
from tests.fakes.harness import FAILOVER_RULES, start_on_fake, until
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY
from tests.fakes.otlp import FakeCollector, dead_port, silent_port


@pytest.fixture(autouse=True)
def quick_exports(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches sent every 50 ms, and a collector given a second (the SDK reads these)."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")


@pytest.fixture
def collector(servers) -> FakeCollector:
    found = FakeCollector()
    found.url = servers.serve(found.app())
    return found


def test_each_call_is_a_chat_span_with_the_genai_attributes(servers, fake, collector, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", otlp_endpoint=collector.url)
    chat_agent(openai_at(taplog.url), stream=False)
    with anthropic_at(taplog.url).messages.stream(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    ) as stream:
        stream.get_final_message()
    answered = taplog.events("call.answered")
    chats = until(lambda: len(found := collector.named("chat ")) == len(answered) and found)
    gpt = [span for span in chats if span.attributes["gen_ai.provider.name"] == "openai"]
    first = gpt[0].attributes
    assert gpt[0].name == "chat gpt-4.1" and gpt[0].kind == 3  # CLIENT
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "gpt-4.1"
    assert first["gen_ai.response.model"]
    assert first["gen_ai.response.id"]
    assert first["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert first["gen_ai.usage.input_tokens"] > 0 and first["gen_ai.usage.output_tokens"] > 0
    assert first["server.address"] == "127.0.0.1" and first["server.port"] > 0
    sessions = {span.attributes["gen_ai.conversation.id"] for span in gpt}
    assert sessions == {span.attributes["session.id"] for span in gpt}
    assert len(sessions) == 1 and sessions <= {e["session"] for e in answered}
    assert len({span.trace_id for span in chats}) == len(chats)  # one trace per call
    claude = next(s for s in chats if s.attributes["gen_ai.provider.name"] == "anthropic")
    assert claude.name == "chat claude-sonnet-4-6"
    assert claude.attributes["gen_ai.request.stream"] is True
    assert claude.attributes["gen_ai.usage.output_tokens"] > 0
    assert claude.attributes["gen_ai.response.time_to_first_chunk"] > 0
    assert claude.resource["service.name"] == "taplog"
    assert claude.resource["service.instance.id"]
    latency = {e["exchange"]: e["latency_ms"] for e in answered}
    assert sorted(round((s.end_ns - s.start_ns) / 1000) for s in chats) == sorted(
        round(ms * 1000) for ms in latency.values()
    )


def test_tool_runs_are_execute_tool_spans_in_the_trace_of_the_call_that_asked(
    servers, fake, collector, tmp_path
):
    taplog = start_on_fake(servers, fake, tmp_path / "data", otlp_endpoint=collector.url)
    anthropic_agent(anthropic_at(taplog.url), stream=False)
    posts = taplog.events("tool.post")
    tools = until(lambda: len(found := collector.named("execute_tool ")) == len(posts) and found)
    chats = {span.span_id: span for span in until(lambda: collector.named("chat "))}
    assert {span.attributes["gen_ai.tool.name"] for span in tools} == {
        "get_weather",
        "get_time",
        "read_file",
    }
    for span in tools:
        asked = chats[span.parent]  # a child of the call whose answer asked for it
        assert span.trace_id == asked.trace_id and span.kind == 1  # INTERNAL
        assert span.attributes["gen_ai.operation.name"] == "execute_tool"
        assert span.attributes["gen_ai.tool.call.id"]
        assert span.start_ns >= asked.start_ns
        assert "gen_ai.tool.call.arguments" not in span.attributes
    failed = next(span for span in tools if span.attributes["gen_ai.tool.name"] == "read_file")
    assert failed.attributes["error.type"] == "error" and failed.status == 2
    post = next(e for e in posts if e["name"] == "get_weather")
    weather = next(s for s in tools if s.attributes["gen_ai.tool.call.id"] == post["call_id"])
    assert (weather.end_ns - weather.start_ns) / 1e6 == pytest.approx(post["duration_ms"], abs=1)


def test_no_content_unless_asked_and_never_a_key(servers, fake, collector, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", otlp_endpoint=collector.url)
    chat_agent(openai_at(taplog.url), stream=False)
    until(lambda: len(collector.named("chat ")) == len(taplog.events("call.answered")))
    names = {name for span in collector.spans for name in span.attributes}
    assert not {n for n in names if "messages" in n or "instructions" in n or "call.ar" in n}
    sent = b"".join(collector.bodies)
    assert b"Paris" not in sent and b"sunny" not in sent
    assert OPENAI_KEY.encode() not in sent


def test_content_on_demand_in_the_conventions_parts(servers, fake, collector, tmp_path):
    taplog = start_on_fake(
        servers, fake, tmp_path / "data", otlp_endpoint=collector.url, otlp_content=True
    )
    anthropic_agent(anthropic_at(taplog.url), stream=True)
    posts = taplog.events("tool.post")
    until(lambda: len(collector.named("execute_tool ")) == len(posts))
    first = min(collector.named("chat "), key=lambda span: span.start_ns).attributes
    asked = json.loads(first["gen_ai.input.messages"])
    assert asked[0]["role"] == "user" and "Paris" in asked[0]["parts"][0]["content"]
    answer = json.loads(first["gen_ai.output.messages"])[0]
    assert answer["role"] == "assistant" and answer["finish_reason"]
    assert {part["type"] for part in answer["parts"]} >= {"tool_call"}
    later = max(collector.named("chat "), key=lambda span: span.start_ns).attributes
    kinds = {p["type"] for m in json.loads(later["gen_ai.input.messages"]) for p in m["parts"]}
    assert "tool_call_response" in kinds
    weather = next(s for s in collector.named("execute_tool get_weather"))
    assert weather.attributes["gen_ai.tool.call.result"] == "sunny, 21°C"
    assert "gen_ai.tool.call.arguments" in weather.attributes
    sent = b"".join(collector.bodies)
    assert ANTHROPIC_KEY.encode() not in sent and b"x-api-key" not in sent.lower()


def test_a_failover_is_an_event_of_the_call_span(vendors, servers, collector, tmp_path):
    vendors.openai.down = {"status": "503"}
    taplog = vendors.proxy(servers, tmp_path / "data", FAILOVER_RULES, otlp_endpoint=collector.url)
    answer = openai_at(taplog.url).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}]
    )
    assert answer.choices[0].message.content
    (span,) = until(lambda: collector.named("chat "))
    assert span.attributes["gen_ai.request.model"] == "claude-sonnet-4-6"
    assert span.attributes["gen_ai.provider.name"] == "anthropic"
    assert "error.type" not in span.attributes
    (event,) = [event for event in span.events if event[0] == "failover"]
    assert event[1]["taplog.failover.from_provider"] == "openai"
    assert event[1]["taplog.failover.to_provider"] == "anthropic"


@pytest.mark.parametrize("collector_state", ["down", "hung"])
def test_a_collector_down_or_hung_costs_no_call_and_drops_are_counted(
    servers, fake, tmp_path, collector_state
):
    listener, port = silent_port() if collector_state == "hung" else (None, dead_port())
    try:
        endpoint = f"http://127.0.0.1:{port}"
        taplog = start_on_fake(servers, fake, tmp_path / "data", otlp_endpoint=endpoint)
        client = openai_at(taplog.url)
        for n in range(5):
            answer = client.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": f"Hi {n}"}]
            )
            assert answer.choices[0].message.content == f"Echo: Hi {n}"
        assert len(taplog.events("call.answered")) == 5
        dropped = until(lambda: scrape(taplog).value("taplog_otlp_spans_dropped_total") or None)
        assert dropped == 5
        assert scrape(taplog).value("taplog_otlp_spans_exported_total") == 0
    finally:
        if listener is not None:
            listener.close()


def test_exported_spans_are_counted(servers, fake, collector, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", otlp_endpoint=collector.url)
    openai_at(taplog.url).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}]
    )
    until(lambda: scrape(taplog).value("taplog_otlp_spans_exported_total") == 1)
    assert scrape(taplog).value("taplog_otlp_spans_dropped_total") == 0


def test_the_endpoint_is_a_base_url_checked_at_start_up():
    assert traces_url("http://127.0.0.1:6006") == "http://127.0.0.1:6006/v1/traces"
    assert traces_url("https://otel.example/api/public/otel/") == (
        "https://otel.example/api/public/otel/v1/traces"
    )
    assert traces_url("http://c:4318/v1/traces") == "http://c:4318/v1/traces"
    with pytest.raises(ConfigError, match="otlp-endpoint"):
        load({"otlp_endpoint": "grpc://127.0.0.1:4317"}, {}, None)
    with pytest.raises(ConfigError, match="TAPLOG_OTLP_ENDPOINT"):
        load({}, {"TAPLOG_OTLP_ENDPOINT": "http://169.254.169.254/"}, None)
    assert load({}, {"TAPLOG_OTLP_CONTENT": "true"}, None).otlp_content is True


def test_opentelemetry_is_loaded_only_with_an_endpoint(tmp_path):
    program = (
        "import sys\nfrom pathlib import Path\n"
        "from taplog.proxy.config import Settings\n"
        "from taplog.proxy.app import create_app\n"
        "from tests.fakes.servers import ServerThread\n"
        "from taplog.proxy.runner import ProxyRunner\n"
        "with ServerThread() as servers:\n"
        f"    app = create_app(Settings(data_dir=Path('{tmp_path}'), otlp_endpoint=sys.argv[1]))\n"
        "    servers.serve(app, ProxyRunner, header_timeout=5, shutdown_timeout=1)\n"
        "    print(any(m.startswith('opentelemetry') for m in sys.modules))\n"
    )
    for endpoint, loaded in (("", "False"), ("http://127.0.0.1:9", "True")):
        done = subprocess.run(
            [sys.executable, "-c", program, endpoint], capture_output=True, text=True, timeout=60
        )
        assert done.stdout.strip() == loaded, done.stderr


def test_sdk_errors_still_reach_clients_and_are_error_spans(servers, fake, collector, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", otlp_endpoint=collector.url)
    with pytest.raises(anthropic.RateLimitError):
        anthropic_at(taplog.url).messages.create(
            model="claude-sonnet-4-6",
            max_tokens=16,
            messages=[{"role": "user", "content": "Hi !status=429"}],
        )
    with pytest.raises(openai.InternalServerError):
        openai_at(taplog.url).chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "Hi !status=500"}]
        )
    spans = until(lambda: len(found := collector.named("chat ")) == 2 and found)
    assert sorted(span.attributes["error.type"] for span in spans) == ["429", "500"]
    assert all(span.status == 2 for span in spans)
