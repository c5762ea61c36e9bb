"""`taplog serve --otlp-endpoint` into a real Arize Phoenix, driven by the official SDKs through
the fake vendor, the spans read back through Phoenix's own REST API; and calls unaffected
once Phoenix is gone."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from taplog.recorder.store.reader import read_all
from tests.fakes.agents import anthropic_agent, chat_agent
from tests.fakes.clients import Scrape, anthropic_at, openai_at
from tests.fakes.harness import serve_on_fake, taplog_env, until
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY
from tests.fakes.otlp import dead_port, silent_port
from tests.fakes.phoenix import Phoenix

pytestmark = pytest.mark.slow

QUICK = {"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2"}


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory) -> Iterator[Phoenix]:
    running = Phoenix(tmp_path_factory.mktemp("phoenix"))
    yield running
    running.stop()


def _drive(url: str) -> None:
    """Plain and streamed calls on both SDKs, and a tool loop with a failing tool."""
    oai = openai_at(url)
    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}])
    list(
        oai.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "Hi, streamed"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    chat_agent(oai, stream=True)
    anthropic_agent(anthropic_at(url), stream=False)


def _spans_of(phoenix: Phoenix, sessions: set[str], count: int) -> list[dict]:
    def arrived() -> list[dict]:
        spans = phoenix.spans()
        mine = [s for s in spans if s["attributes"].get("gen_ai.conversation.id") in sessions]
        return mine if len(mine) >= count else []

    return until(arrived, 60)


def test_phoenix_shows_calls_tools_and_sessions_without_content(phoenix, fake, tmp_path):
    served = serve_on_fake(
        fake,
        tmp_path / "data",
        "--workers",
        "2",
        "--otlp-endpoint",
        phoenix.url,
        env=taplog_env(**QUICK),
    )
    try:
        _drive(served.url)
    finally:
        served.stop()  # every call's events written, its spans handed to the exporter
    logs = read_all(tmp_path / "data")
    events = [e for session in logs.values() for e in session]
    answered = [e for e in events if e["type"] == "call.answered"]
    posts = [e for e in events if e["type"] == "tool.post"]
    spans = _spans_of(phoenix, set(logs), len(answered) + len(posts))
    chats = [s for s in spans if s["name"].startswith("chat ")]
    tools = [s for s in spans if s["name"].startswith("execute_tool ")]
    assert len(chats) == len(answered) and len(tools) == len(posts)
    assert all(s["span_kind"] == "LLM" and s["parent_id"] is None for s in chats)
    streamed = [s["attributes"] for s in chats if s["attributes"]["gen_ai.request.stream"]]
    assert any(a.get("gen_ai.usage.output_tokens", 0) > 0 for a in streamed)
    assert any("gen_ai.response.time_to_first_chunk" in a for a in streamed)
    for span in chats:
        attributes = span["attributes"]
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"] in ("openai", "anthropic")
        assert attributes["gen_ai.request.model"] in ("gpt-4.1", "claude-sonnet-4-6")
        assert attributes["gen_ai.response.model"] and attributes["gen_ai.response.id"]
        if not attributes["gen_ai.request.stream"]:  # streams without include_usage have none
            assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.response.finish_reasons"]
        assert attributes["server.address"] == "127.0.0.1"
        assert attributes["session.id"] == attributes["gen_ai.conversation.id"]
    by_span = {s["context"]["span_id"]: s for s in chats}
    for span in tools:
        assert span["span_kind"] == "TOOL"
        assert span["context"]["trace_id"] == by_span[span["parent_id"]]["context"]["trace_id"]
        assert span["attributes"]["gen_ai.tool.call.id"]
    failed = [s for s in tools if s["attributes"]["gen_ai.tool.name"] == "read_file"]
    # Anthropic's tool_result says is_error; an OpenAI Chat result carries no error flag
    assert any(s["status_code"] == "ERROR" for s in failed)
    grouped = phoenix.sessions()
    for session in {s["attributes"]["session.id"] for s in chats}:
        traces = {
            s["context"]["trace_id"] for s in chats if s["attributes"]["session.id"] == session
        }
        assert traces <= set(grouped[session])  # Phoenix's session holds the session's calls
    dump = json.dumps(spans)
    assert "Paris" not in dump and "sunny" not in dump  # no content unless asked
    assert OPENAI_KEY not in dump and ANTHROPIC_KEY not in dump
    assert not any("input.messages" in name for s in spans for name in s["attributes"])


def test_phoenix_gets_the_messages_with_otlp_content_and_never_a_key(phoenix, fake, tmp_path):
    served = serve_on_fake(
        fake,
        tmp_path / "data",
        "--otlp-endpoint",
        phoenix.url,
        "--otlp-content",
        env=taplog_env(**QUICK),
    )
    try:
        anthropic_agent(anthropic_at(served.url), stream=True)
    finally:
        served.stop()  # every call's events written, its spans handed to the exporter
    logs = read_all(tmp_path / "data")
    events = [e for session in logs.values() for e in session]
    count = sum(e["type"] in ("call.answered", "tool.post") for e in events)
    spans = _spans_of(phoenix, set(logs), count)
    first = min((s for s in spans if s["name"].startswith("chat ")), key=lambda s: s["start_time"])
    asked = json.loads(first["attributes"]["gen_ai.input.messages"])
    assert "Paris" in asked[0]["parts"][0]["content"]
    assert json.loads(first["attributes"]["gen_ai.output.messages"])[0]["role"] == "assistant"
    weather = next(s for s in spans if s["name"] == "execute_tool get_weather")
    assert weather["attributes"]["gen_ai.tool.call.result"] == "sunny, 21°C"
    dump = json.dumps(spans)
    assert ANTHROPIC_KEY not in dump and "x-api-key" not in dump.lower()


@pytest.mark.parametrize("collector", ["stopped", "never_listening", "never_answering"])
def test_calls_are_unaffected_when_the_collector_is_away(phoenix, fake, tmp_path, collector):
    listener = None
    if collector == "stopped":
        endpoint = phoenix.url
        phoenix.stop()  # the module's last use of it
    elif collector == "never_listening":
        endpoint = f"http://127.0.0.1:{dead_port()}"
    else:
        listener, port = silent_port()
        endpoint = f"http://127.0.0.1:{port}"
    served = serve_on_fake(
        fake, tmp_path / "data", "--otlp-endpoint", endpoint, env=taplog_env(**QUICK)
    )
    try:
        client = openai_at(served.url)
        for n in range(4):
            answer = client.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": f"Hi {n}"}]
            )
            assert answer.choices[0].message.content == f"Echo: Hi {n}"
        dropped = until(lambda: Scrape(served.url).value("taplog_otlp_spans_dropped_total") >= 4)
        assert dropped and Scrape(served.url).value("taplog_otlp_spans_exported_total") == 0
    finally:
        code, _ = served.stop()
        if listener is not None:
            listener.close()
    assert code == 0
    answered = [e for s in read_all(tmp_path / "data").values() for e in s]
    assert sum(e["type"] == "call.answered" for e in answered) == 4
    assert sum(e["type"] == "llm.response" and e["status"] == 200 for e in answered) == 4
