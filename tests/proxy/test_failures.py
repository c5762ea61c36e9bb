"""Failures are recorded, not hidden, and the proxy keeps serving everyone else."""

from __future__ import annotations

import re
import socket
import threading
import time

import anthropic
import httpx
import openai
import pytest

from tests.builders import HELLO
from tests.fakes.harness import start_on_fake, start_taplog
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY


def _last_response(taplog, count=1):
    sessions = taplog.wait_responses(count)
    answers = [e for evs in sessions.values() for e in evs if e["type"] == "llm.response"]
    return max(answers, key=lambda e: e["ts"])


def _assert_still_serving(taplog):
    assert httpx.get(f"{taplog.url}/healthz").json() == {"status": "ok"}
    client = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    answer = client.chat.completions.create(model="gpt-4.1", messages=HELLO)
    assert answer.choices[0].message.content == "Echo: hello"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_client_disconnect_mid_stream_closes_upstream_and_keeps_the_partial_answer(
    oai, fake, taplog
):
    stream = oai.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "long story !events=30 !delay=0.1"}],
        stream=True,
    )
    received = [next(stream) for _ in range(3)]
    stream.close()
    assert received[0].choices[0].delta.role == "assistant"

    response = _last_response(taplog)
    assert response["outcome"] == "client_disconnected"
    assert 3 <= len(response["sse"]) < 30
    assert response["stream_complete"] is False
    partial = response["body"]["choices"][0]["message"]["content"]
    assert partial and "Echo: long story".startswith(partial)
    deadline = time.monotonic() + 5
    while fake.active and time.monotonic() < deadline:  # the vendor call was closed
        time.sleep(0.05)
    assert fake.active == 0
    assert b"[DONE]" not in fake.sent[0]
    _assert_still_serving(taplog)


def test_upstream_error_passes_through_unchanged_and_is_recorded(oai, oai_direct, fake, taplog):
    messages = [{"role": "user", "content": "boom !status=500 !retry_after=7"}]
    with pytest.raises(openai.InternalServerError) as direct:
        oai_direct.chat.completions.create(model="gpt-4.1", messages=messages)
    with pytest.raises(openai.InternalServerError) as through:
        oai.chat.completions.create(model="gpt-4.1", messages=messages)
    assert through.value.body == direct.value.body
    assert through.value.response.headers["retry-after"] == "7"

    response = _last_response(taplog)
    assert (response["status"], response["outcome"]) == (500, "upstream_error")
    assert response["body"]["error"]["message"] == direct.value.body["message"]
    _assert_still_serving(taplog)


def test_anthropic_overload_passes_through(ant, taplog):
    with pytest.raises(anthropic.APIStatusError) as caught:
        ant.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=5,
            messages=[{"role": "user", "content": "!status=529"}],
        )
    assert caught.value.status_code == 529
    assert caught.value.body["error"]["type"] == "overloaded_error"
    assert _last_response(taplog)["outcome"] == "upstream_error"


def test_unreachable_vendor_gives_502_in_each_api_shape(servers, tmp_path):
    dead = f"http://127.0.0.1:{_free_port()}"
    taplog = start_taplog(servers, tmp_path / "data", openai_base=f"{dead}/v1", anthropic_base=dead)
    oai = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        oai.chat.completions.create(model="gpt-4.1", messages=HELLO)
    assert caught.value.status_code == 502
    assert "cannot reach the vendor" in caught.value.body["message"]
    ant = anthropic.Anthropic(base_url=taplog.url, api_key=ANTHROPIC_KEY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        ant.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=HELLO)
    assert caught.value.status_code == 502
    assert caught.value.body["error"]["type"] == "api_error"

    response = _last_response(taplog, 2)
    # No vendor answered: no status, the outcome and the reason the client heard.
    assert (response["status"], response["outcome"]) == (None, "unreachable")
    assert response["error"] == "cannot reach the vendor"
    assert response["ttfb_ms"] is None
    assert httpx.get(f"{taplog.url}/healthz").status_code == 200


def test_silent_vendor_times_out_with_504(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", read_timeout=0.5)
    oai = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        oai.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "!hang"}]
        )
    assert caught.value.status_code == 504
    said = "the vendor did not answer within 0.5 s (--read-timeout)"
    assert said in caught.value.message
    response = _last_response(taplog)
    assert (response["status"], response["outcome"], response["error"]) == (None, "timeout", said)
    assert 400 < response["latency_ms"] < 5000
    _assert_still_serving(taplog)


def test_a_request_is_in_the_log_once_sent_while_the_vendor_still_works(oai, fake, taplog):
    """A call's request is recorded once its body went out, not when its answer comes: a
    vendor that never answers leaves it in the log all the same, as sent, and once; the
    client giving up before any answer is what the try and the call came to."""
    question = "a question resent with a long history " * 3000 + "!hang"
    waiting = oai.with_options(timeout=3.0, max_retries=0)
    gave_up: list[Exception] = []

    def ask() -> None:
        try:
            waiting.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": question}]
            )
        except openai.APITimeoutError as exc:
            gave_up.append(exc)

    client = threading.Thread(target=ask)
    client.start()
    try:
        sessions = taplog.wait_for(lambda found: _events(found, "llm.request"))
        assert client.is_alive() and fake.active == 1  # the vendor still has the call
        assert not _events(sessions, "llm.response")
        (request,) = _events(sessions, "llm.request")
        assert request["body"]["messages"][0]["content"] == question
    finally:
        client.join(10)
    assert gave_up
    sessions = taplog.wait_for(lambda found: _events(found, "call.answered"))
    logged = _events(sessions, "llm.request", "llm.response", "call.answered")
    assert [e["type"] for e in logged] == ["llm.request", "llm.response", "call.answered"]
    assert [e["outcome"] for e in logged[1:]] == ["client_disconnected"] * 2
    assert logged[1]["status"] is None and logged[2]["provider"] == "openai"


def _events(sessions, *types: str) -> list[dict]:
    return [e for evs in sessions.values() for e in evs if e["type"] in types]


def test_stream_cut_by_the_vendor_is_cut_for_the_client_too(oai, taplog):
    stream = oai.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "story !events=10 !cut=4"}],
        stream=True,
    )
    with pytest.raises((httpx.HTTPError, openai.APIError)):
        for _ in stream:
            pass
    response = _last_response(taplog)
    assert response["outcome"] == "upstream_cut"
    assert response["stream_complete"] is False
    assert len(response["sse"]) == 4
    _assert_still_serving(taplog)


def test_body_over_the_limit_gets_413_in_the_client_shape(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", max_body_mb=0.01)
    huge = [{"role": "user", "content": "x" * 20_000}]
    oai = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.APIStatusError) as caught:
        oai.chat.completions.create(model="gpt-4.1", messages=huge)
    assert caught.value.status_code == 413
    assert "MiB limit" in caught.value.body["message"]
    ant = anthropic.Anthropic(base_url=taplog.url, api_key=ANTHROPIC_KEY, max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as caught:
        ant.messages.create(model="claude-sonnet-4-6", max_tokens=5, messages=huge)
    assert caught.value.body["error"]["type"] == "request_too_large"
    assert fake.requests == []
    _assert_still_serving(taplog)


def test_a_failing_disk_refuses_new_calls_before_the_vendor_and_recovers(oai, fake, taplog):
    named = lambda name: openai.OpenAI(  # noqa: E731
        base_url=f"{taplog.url}/s/{name}/v1", api_key=OPENAI_KEY, max_retries=0
    )
    named("before").chat.completions.create(model="gpt-4.1", messages=HELLO)
    taplog.wait_responses(1)
    sessions_dir = taplog.data_dir / "sessions"
    sessions_dir.rename(taplog.data_dir / "moved")
    sessions_dir.write_text("not a directory")  # every new session file now fails to open

    named("during").chat.completions.create(model="gpt-4.1", messages=HELLO)
    deadline = time.monotonic() + 5
    while httpx.get(f"{taplog.url}/readyz").status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    ready = httpx.get(f"{taplog.url}/readyz")
    assert ready.status_code == 503 and "cannot write" in ready.json()["reason"]
    forwarded = len(fake.requests)
    with pytest.raises(openai.InternalServerError, match="not recording"):
        named("refused").chat.completions.create(model="gpt-4.1", messages=HELLO)
    assert len(fake.requests) == forwarded  # refused before any vendor was called

    sessions_dir.unlink()
    (taplog.data_dir / "moved").rename(sessions_dir)
    while httpx.get(f"{taplog.url}/readyz").status_code != 200 and time.monotonic() < deadline + 5:
        time.sleep(0.05)
    sessions = taplog.sessions()
    assert sorted(sessions) == ["before", "during"]
    assert [e["type"] for e in sessions["during"]] == [
        "session.started",
        "llm.request",
        "llm.response",
        "call.answered",
    ]
    _assert_still_serving(taplog)


def test_a_client_that_leaves_at_the_end_marker_got_the_whole_answer(oai, fake, taplog):
    """SDKs stop reading at `[DONE]` / `message_stop` and close, often before the vendor's EOF."""
    with oai.chat.completions.stream(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "bye !plan=get_weather !linger=2"}],
        tools=[{"type": "function", "function": {"name": "get_weather"}}],
    ) as stream:
        assert stream.get_final_completion().choices[0].finish_reason == "tool_calls"
    response = _last_response(taplog)
    assert response["outcome"] == "ok" and response["stream_complete"] is True
    assert [e["name"] for e in taplog.events("tool.pre")] == ["get_weather"]


# -- answers over taplog's limits: cut off, told why, recorded -----------------------------


def _read_anthropic_stream(ant, prompt: str) -> None:
    messages = [{"role": "user", "content": prompt}]
    with ant.messages.stream(model="claude-sonnet-4-6", max_tokens=100, messages=messages) as s:
        for _ in s:
            pass


def _limited(servers, fake, tmp_path, **limits):
    return start_on_fake(servers, fake, tmp_path / "data", **limits)


def test_a_stream_event_over_the_limit_ends_the_stream_with_an_error_in_each_api(
    servers, fake, tmp_path
):
    taplog = _limited(servers, fake, tmp_path, max_sse_event_mb=0.01)
    oai = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    ant = anthropic.Anthropic(base_url=taplog.url, api_key=ANTHROPIC_KEY, max_retries=0)
    said = "a stream event is over 0.01 MiB (--max-sse-event-mb)"
    with pytest.raises(openai.APIError, match=re.escape(said)):
        for _ in oai.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "!big=40000 !trickle=2000"}],
            stream=True,
        ):
            pass
    with pytest.raises(anthropic.APIStatusError, match=re.escape(said)):
        _read_anthropic_stream(ant, "!big=40000 !trickle=2000")
    taplog.wait_responses(2)
    for response in taplog.events("llm.response"):
        assert (response["outcome"], response["error"]) == ("too_large", said)
    _assert_still_serving(taplog)


def test_an_answer_over_the_limit_is_cut_off_and_recorded_as_too_large(servers, fake, tmp_path):
    taplog = _limited(servers, fake, tmp_path, max_answer_mb=0.01)
    oai = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    ant = anthropic.Anthropic(base_url=taplog.url, api_key=ANTHROPIC_KEY, max_retries=0)
    said = "the answer streamed over 0.01 MiB (--max-answer-mb)"
    with pytest.raises(openai.APIConnectionError):
        oai.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "!big=40000"}]
        )
    # A stream crosses the limit in the middle of an event: the error event still starts
    # at an event boundary, so the SDK raises the limit, never a JSON decode error.
    prompt = "!big=40000 !events=20 !trickle=700"
    with pytest.raises(openai.APIError, match=re.escape(said)):
        for _ in oai.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": prompt}], stream=True
        ):
            pass
    with pytest.raises(anthropic.APIStatusError, match=re.escape(said)):
        _read_anthropic_stream(ant, prompt)
    taplog.wait_responses(3)
    for response in taplog.events("llm.response"):
        assert (response["outcome"], response["error"]) == ("too_large", said)
    _assert_still_serving(taplog)


def test_a_call_over_the_total_timeout_is_cut_off_even_while_the_vendor_keeps_talking(
    servers, fake, tmp_path
):
    taplog = _limited(servers, fake, tmp_path, total_timeout=0.5)
    oai = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    said = "the call took over 0.5 s (--total-timeout)"
    started = time.monotonic()
    with pytest.raises(openai.APIError, match=re.escape(said)):
        for _ in oai.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "!events=40 !delay=0.1"}],
            stream=True,
        ):
            pass
    assert time.monotonic() - started < 3  # not the 4 s the vendor would have taken
    with pytest.raises(openai.InternalServerError, match=re.escape(said)):
        oai.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "!ttfb=2"}]
        )
    taplog.wait_responses(2)
    streamed, silent = sorted(taplog.events("llm.response"), key=lambda r: r["status"] or 0)[::-1]
    assert (streamed["status"], streamed["outcome"], streamed["error"]) == (200, "timeout", said)
    assert (silent["status"], silent["outcome"], silent["error"]) == (None, "timeout", said)
    _assert_still_serving(taplog)
