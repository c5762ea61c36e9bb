"""Gemini's API through taplog: Google's `google-genai` SDK pointed at taplog (as
`GOOGLE_GEMINI_BASE_URL` points it) reaches Gemini with its key, byte for byte, and is
recorded; a Gemini key goes nowhere else. Three fake vendors, one per provider, so where a
call went is what each one received.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import orjson
import pytest
from google.genai import errors as genai_errors

from taplog.proxy.failover.rules import load_fallbacks
from taplog.recorder.secrets import fingerprint
from tests.disk import readable
from tests.fakes.agents import GEMINI_MODEL, gemini_agent
from tests.fakes.clients import gemini_at, sql_rows
from tests.fakes.harness import Taplog, Vendors, serve_fake, start_taplog
from tests.fakes.keys import GEMINI_KEY, key_traces
from tests.fakes.servers import ServerThread
from tests.fakes.vendor import FakeVendor

MODEL = "gemini-2.5-flash"
# Keys in the other vendors' real shapes (the tests' usual keys prove nothing by shape).
ANTHROPIC_KEY = "sk-ant-api03-" + "Zr8f" * 20
OPENAI_KEY = "sk-proj-" + "Qw3e" * 12 + "T3BlbkFJ" + "x9Yz" * 6


@pytest.fixture
def gemini(servers: ServerThread) -> FakeVendor:
    return serve_fake(servers)


@pytest.fixture
def three(servers: ServerThread, vendors: Vendors, gemini: FakeVendor, tmp_path: Path) -> Taplog:
    """taplog with each provider at its own fake vendor."""
    return start_taplog(
        servers,
        tmp_path,
        openai_base=f"{vendors.openai.url}/v1",
        anthropic_base=vendors.anthropic.url,
        gemini_base=gemini.url,
    )


def _on_disk(taplog: Taplog) -> bytes:
    """Every file of the data dir, logs as their lines (what a user would search)."""
    taplog.flush()
    return b"".join(readable(path) for path in taplog.data_dir.rglob("*") if path.is_file())


def _reached(fake: FakeVendor) -> list[str]:
    return [f"{r.method} {r.path}" + (f"?{r.query}" if r.query else "") for r in fake.requests]


def test_the_gemini_sdk_reaches_gemini_with_its_key_and_its_answers_come_back_whole(
    three, vendors, gemini
):
    client = gemini_at(three.url)
    answer = client.models.generate_content(model=MODEL, contents="Hello there")
    streamed = client.models.generate_content_stream(model=MODEL, contents="Hello again")
    pieces = [chunk.text for chunk in streamed]

    async def asynchronous() -> str:
        found = await client.aio.models.generate_content(model=MODEL, contents="And async")
        return found.text

    assert answer.text == "Echo: Hello there"
    assert "".join(pieces) == "Echo: Hello again" and len(pieces) > 1
    assert asyncio.run(asynchronous()) == "Echo: And async"
    assert _reached(gemini) == [
        f"POST /v1/models/{MODEL}:generateContent",
        f"POST /v1/models/{MODEL}:streamGenerateContent?alt=sse",
        f"POST /v1/models/{MODEL}:generateContent",
    ]
    assert all(r.headers["x-goog-api-key"] == GEMINI_KEY for r in gemini.requests)
    assert vendors.openai.requests == [] and vendors.anthropic.requests == []
    # byte for byte: the bodies the vendor got are the SDK's, its answers the client's
    three.wait_responses(3)
    responses = three.events("llm.response")
    assert [r["provider"] for r in three.events("llm.request")] == ["gemini"] * 3
    assert all(r["status"] == 200 for r in responses)
    assert not any(trace.encode() in _on_disk(three) for trace in key_traces(GEMINI_KEY))


def test_a_gemini_key_in_the_url_reaches_gemini_and_stays_out_of_the_log(three, gemini):
    """The REST examples' way (`?key=`): the key goes to Gemini alone, and nowhere on disk."""
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi from curl"}]}]}
    target = f"{three.url}/v1beta/models/{MODEL}:generateContent?key={GEMINI_KEY}"
    answer = httpx.post(target, json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["candidates"][0]["content"]["parts"] == [{"text": "Echo: Hi from curl"}]
    assert _reached(gemini) == [f"POST /v1beta/models/{MODEL}:generateContent?key={GEMINI_KEY}"]
    three.wait_responses(1)
    (request,) = three.events("llm.request")
    assert request["provider"] == "gemini" and GEMINI_KEY not in request["path"]
    assert request["key_fingerprint"] == fingerprint(GEMINI_KEY)  # as from x-goog-api-key
    assert not any(trace.encode() in _on_disk(three) for trace in key_traces(GEMINI_KEY))


@pytest.mark.parametrize("carried", ["header", "query"])
def test_a_gemini_key_never_goes_to_another_vendor(three, vendors, gemini, carried):
    """A call carrying an OpenAI key and a Gemini key would take one of them to the other
    vendor, whichever API it speaks: refused, and nothing is forwarded."""
    headers = {"authorization": f"Bearer {OPENAI_KEY}"}
    query = ""
    if carried == "header":
        headers["x-goog-api-key"] = GEMINI_KEY
    else:
        query = f"?key={GEMINI_KEY}"
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "hi"}]}
    refused = httpx.post(f"{three.url}/v1/chat/completions{query}", json=body, headers=headers)
    if carried == "header":  # Google's own header makes it a Gemini call: to Gemini it goes
        assert refused.status_code == 400 and "OpenAI key" in refused.text
    else:
        assert refused.status_code == 400 and "Gemini key" in refused.text
        assert refused.json()["error"]["code"] == "key_for_another_vendor"
    assert vendors.openai.requests == [] and vendors.anthropic.requests == []
    assert gemini.requests == []


def test_an_anthropic_key_never_goes_to_gemini(three, vendors, gemini):
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    refused = httpx.post(
        f"{three.url}/v1beta/models/{MODEL}:generateContent",
        json=body,
        headers={"x-goog-api-key": ANTHROPIC_KEY},
    )
    assert refused.status_code == 400
    error = refused.json()["error"]  # Google's error shape, which its SDKs read
    assert error["status"] == "INVALID_ARGUMENT" and "Anthropic key" in error["message"]
    assert gemini.requests == [] and vendors.anthropic.requests == []


def test_gemini_errors_reach_the_sdk_as_google_wrote_them(three, gemini):
    client = gemini_at(three.url)
    with pytest.raises(genai_errors.ClientError) as raised:
        client.models.generate_content(model=MODEL, contents="fail !status=404")
    assert raised.value.code == 404 and "scripted" in str(raised.value.message)
    three.wait_responses(1)
    (response,) = three.events("llm.response")
    assert response["status"] == 404


def test_model_ids_with_colons_stay_with_openai(three, vendors, gemini):
    """Only Google's own model methods make a `/v1/models/…:…` path Gemini's: an OpenAI
    fine-tuned model's id holds colons too."""
    tuned = "ft:gpt-4o-mini-2024-07-18:acme:triage:9xYz"
    httpx.get(f"{three.url}/v1/models/{tuned}", headers={"authorization": f"Bearer {OPENAI_KEY}"})
    assert _reached(vendors.openai) == [f"GET /v1/models/{tuned}"]
    assert gemini.requests == []


def test_gemini_calls_join_the_session_the_base_url_names(three, gemini):
    """A run named by its base URL (`GOOGLE_GEMINI_BASE_URL=http://…/s/<session>`) is
    that session."""
    client = gemini_at(f"{three.url}/s/gemini-run")
    for prompt in ("first", "second"):
        client.models.generate_content(model=MODEL, contents=prompt)
    assert _reached(gemini) == [f"POST /v1/models/{MODEL}:generateContent"] * 2
    assert list(three.wait_responses(2)) == ["gemini-run"]


def test_two_gemini_chats_without_ids_are_two_sessions_each_growing_its_own(three, gemini):
    """Stitched by their turns' texts (in `parts`, where Gemini keeps them)."""
    client = gemini_at(three.url)
    trip = client.chats.create(model=MODEL)
    trip.send_message("Plan a trip to Lisbon.")
    client.chats.create(model=MODEL).send_message("Write a poem about the sea.")
    trip.send_message("Now book the hotel.")
    sessions = three.wait_responses(3)
    prompts = {
        session: [
            e["body"]["contents"][-1]["parts"][0]["text"]
            for e in events
            if e["type"] == "llm.request"
        ]
        for session, events in sessions.items()
    }
    assert sorted(prompts.values()) == [
        ["Plan a trip to Lisbon.", "Now book the hotel."],
        ["Write a poem about the sea."],
    ]


def test_the_gemini_sdks_other_calls_reach_gemini_as_they_came(three, vendors, gemini):
    """Models, one model, token counts: passed through to Gemini with the key, recorded."""
    client = gemini_at(three.url, api_version="v1beta")
    listed = [model.name for model in client.models.list()]
    found = client.models.get(model=MODEL)
    counted = client.models.count_tokens(model=MODEL, contents="How many tokens is this?")
    assert listed == ["models/gemini-2.5-flash", "models/gemini-2.5-pro"]
    assert found.input_token_limit == 1048576 and counted.total_tokens > 0
    assert [path.split("?")[0] for path in _reached(gemini)] == [
        "GET /v1beta/models",
        f"GET /v1beta/models/{MODEL}",
        f"POST /v1beta/models/{MODEL}:countTokens",
    ]
    assert all(r.headers["x-goog-api-key"] == GEMINI_KEY for r in gemini.requests)
    assert vendors.openai.requests == [] and vendors.anthropic.requests == []
    three.wait_responses(3)
    assert {r["provider"] for r in three.events("llm.request")} == {"gemini"}


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_gemini_calls_are_read_as_llm_calls_with_tokens_and_cost(three, gemini, stream):
    client = gemini_at(three.url)
    prompt = "Think it over, then answer !thinking"
    if stream:
        text = "".join(
            c.text or ""
            for c in client.models.generate_content_stream(model=MODEL, contents=prompt)
        )
    else:
        text = client.models.generate_content(model=MODEL, contents=prompt).text
    assert text == "Echo: Think it over, then answer"
    three.wait_responses(1)
    sent = orjson.loads(gemini.sent[0]) if not stream else None
    (row,) = sql_rows(
        three.data_dir,
        "SELECT api, request_model, stream, finish_reason, input_tokens, output_tokens, "
        "reasoning_output_tokens AS reasoning, cost_usd FROM llm_calls",
    )
    assert (row["api"], row["request_model"], row["stream"], row["finish_reason"]) == (
        "gemini.generate",
        MODEL,
        stream,
        "STOP",
    )
    outputs, reasoning, cost = row["output_tokens"], row["reasoning"], row["cost_usd"]
    assert row["input_tokens"] > 0 and reasoning > 0 and outputs > reasoning
    assert cost > 0
    if sent is not None:  # what the vendor said is what was recorded
        usage = sent["usageMetadata"]
        assert outputs == usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]


@pytest.mark.parametrize("rule", [False, True], ids=["no-rule", "rule"])
def test_a_stream_without_alt_sse_is_the_json_array_gemini_sent_and_is_read_as_one_answer(
    servers, vendors, gemini, tmp_path, rule
):
    """Google's REST way (no `alt=sse`): one JSON array, sent on as it came (with a rule
    too: it is no broken SSE stream), recorded with its tokens and finish reason."""
    rules = {"fallback": [{"model": "gemini-*", "to": ["anthropic:claude-sonnet-4-6"]}]}
    taplog = start_taplog(
        servers,
        tmp_path / "data",
        load_fallbacks(
            f"{vendors.openai.url}/v1", vendors.anthropic.url, rules if rule else {}, (), gemini.url
        ),
        openai_base=f"{vendors.openai.url}/v1",
        anthropic_base=vendors.anthropic.url,
        gemini_base=gemini.url,
    )
    body = {"contents": [{"role": "user", "parts": [{"text": "In pieces !events=3 !thinking"}]}]}
    answer = httpx.post(
        f"{taplog.url}/v1beta/models/{MODEL}:streamGenerateContent",
        json=body,
        headers={"x-goog-api-key": GEMINI_KEY},
    )
    assert answer.status_code == 200 and answer.content == gemini.sent[-1]
    chunks = answer.json()
    assert len(chunks) > 3 and chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert vendors.anthropic.requests == []
    taplog.wait_responses(1)
    (row,) = sql_rows(
        taplog.data_dir,
        "SELECT api, stream, finish_reason, input_tokens, output_tokens, "
        "reasoning_output_tokens AS reasoning FROM llm_calls",
    )
    usage = chunks[-1]["usageMetadata"]
    assert (row["api"], row["finish_reason"], row["input_tokens"]) == (
        "gemini.generate",
        "STOP",
        usage["promptTokenCount"],
    )
    assert row["output_tokens"] == usage["candidatesTokenCount"] + usage["thoughtsTokenCount"]


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_sdk_s_tool_loop_reaches_gemini_as_it_came_and_is_recorded_paired(
    three, gemini, stream, asynchronous
):
    texts = gemini_agent(gemini_at(three.url), stream, asynchronous)
    assert texts[:3] == ["", "", "Echo: Plan my trip to Paris."]
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert {f"{r.path}?{r.query}".rstrip("?") for r in gemini.requests} == {
        f"/v1/models/{GEMINI_MODEL}:{method}"  # the Python SDK's own version
    }
    assert len(gemini.requests) == 8
    sessions = three.wait_responses(8)
    (events,) = sessions.values()
    pres = [e for e in events if e["type"] == "tool.pre"]
    posts = [e for e in events if e["type"] == "tool.post"]
    assert [p["name"] for p in pres] == ["get_weather", "get_time", "read_file"]
    assert {p["call_id"] for p in posts} == {p["call_id"] for p in pres}
    assert [p["is_error"] for p in posts] == [False, False, True]  # read_file failed
