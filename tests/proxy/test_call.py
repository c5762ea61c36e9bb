"""One client-level answer per call in the log, whatever happened: what the client got
(status, outcome, error), how long it waited, who served it, and the finish reason in the
words of the client's own API; `failover` events only where a call really moved.

Both fake vendors serve one OpenAI client through a rule `gpt-* -> anthropic`.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.query.connect import connect, query
from tests.fakes.harness import FALLBACK_TTFB, model_requests
from tests.fakes.keys import OPENAI_KEY

WEATHER = [{"role": "user", "content": "weather? !plan=get_weather"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def _calls(proxy) -> list[dict]:
    cursor = query(
        connect(proxy.data_dir),
        "SELECT status, outcome, error, provider_name, response_model, finish_reason, "
        "latency_ms, attempts, failovers FROM llm_calls ORDER BY started_at",
    )
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _session(proxy) -> dict:
    cursor = query(connect(proxy.data_dir), "SELECT calls, failed_calls, providers FROM sessions")
    (row,) = cursor.fetchall()
    return dict(zip(("calls", "failed_calls", "providers"), row, strict=True))


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_a_failed_over_call_is_one_row_of_what_the_client_saw(
    vendors, fallback_proxy, fallback_client, stream
):
    vendors.openai.down = {"status": "503"}
    asked = dict(model="gpt-4.1", messages=WEATHER, tools=TOOLS)
    if stream:
        with fallback_client.chat.completions.stream(**asked) as events:
            answer = events.get_final_completion()
    else:
        answer = fallback_client.chat.completions.create(**asked)
    assert answer.choices[0].finish_reason == "tool_calls"

    events = fallback_proxy.wait_answers(1)
    tries = [e for ev in events.values() for e in ev if e["type"] == "llm.response"]
    assert [e["provider"] for e in tries] == ["openai"] * 3 + ["anthropic"]
    assert tries[-1]["finish_reason"] == "tool_use"  # Anthropic's own word, in its answer
    (call,) = _calls(fallback_proxy)
    assert call["status"] == 200 and call["outcome"] == "ok" and call["error"] is None
    assert call["provider_name"] == "anthropic" and call["response_model"] == "claude-sonnet-4-6"
    assert call["finish_reason"] == "tool_calls"  # the client's word for it
    assert (call["attempts"], call["failovers"]) == (4, 1)
    # the client waited for every try, not only the last one
    assert call["latency_ms"] >= sum(e["latency_ms"] for e in tries)


def test_a_responses_call_served_by_claude_finishes_in_responses_words(
    vendors, fallback_proxy, fallback_client
):
    vendors.openai.down = {"status": "503"}
    answer = fallback_client.responses.create(model="gpt-4.1", input="hello")
    assert answer.status == "completed" and answer.output_text == "Echo: hello"
    fallback_proxy.wait_answers(1)
    (call,) = _calls(fallback_proxy)
    assert (call["provider_name"], call["finish_reason"]) == ("anthropic", "completed")


def test_every_target_down_is_one_failed_call_with_taplogs_answer(
    vendors, fallback_proxy, fallback_client
):
    vendors.openai.down = {"hang": ""}  # a timeout: no error of the client's own vendor to pass on
    vendors.anthropic.down = {"status": "529"}
    with pytest.raises(openai.APIStatusError) as caught:
        fallback_client.chat.completions.create(model="gpt-4.1", messages=WEATHER)
    assert caught.value.status_code == 502
    assert "every vendor in the fallback chain failed" in caught.value.message

    fallback_proxy.wait_answers(1)
    (call,) = _calls(fallback_proxy)
    assert (call["status"], call["outcome"]) == (502, "all_targets_failed")
    assert caught.value.body["message"] == f"taplog: {call['error']}"  # what the client was told
    assert call["provider_name"] is None  # nobody served it
    assert call["latency_ms"] >= FALLBACK_TTFB * 1000  # the timeout it waited through
    assert _session(fallback_proxy) == {"calls": 1, "failed_calls": 1, "providers": None}
    (session,) = fallback_proxy.sessions()
    shown = CliRunner().invoke(main, ["show", session, "--data-dir", str(fallback_proxy.data_dir)])
    assert "502 all_targets_failed  ?→? tok" in shown.output  # no usage came: unknown, not 0
    assert "? in / ? out tokens · $?" in shown.output


def test_every_target_down_with_its_own_vendors_error_names_that_vendor(
    vendors, fallback_proxy, fallback_client
):
    vendors.openai.down = {"status": "503"}
    vendors.anthropic.down = {"status": "529"}
    with pytest.raises(openai.InternalServerError):
        fallback_client.chat.completions.create(model="gpt-4.1", messages=WEATHER)
    fallback_proxy.wait_answers(1)
    (call,) = _calls(fallback_proxy)
    assert (call["status"], call["outcome"], call["provider_name"]) == (
        503,
        "upstream_error",
        "openai",
    )  # what the client got: OpenAI's 503, not Anthropic's 529 that came last
    assert call["failovers"] == 1
    assert _session(fallback_proxy)["failed_calls"] == 1


def test_a_target_that_cannot_take_the_call_is_skipped_without_a_failover(
    vendors, fallback_proxy, fallback_client
):
    vendors.openai.down = {"status": "503"}
    with pytest.raises(openai.InternalServerError) as caught:
        fallback_client.chat.completions.create(model="gpt-4.1", messages=WEATHER, n=2)
    assert "not translatable: n=2" in caught.value.response.headers["x-taplog-fallback"]
    assert model_requests(vendors.anthropic) == []
    events = fallback_proxy.wait_answers(1)
    kinds = [e["type"] for ev in events.values() for e in ev]
    assert "failover" not in kinds  # nothing moved
    (answered,) = [e for ev in events.values() for e in ev if e["type"] == "call.answered"]
    assert answered["skipped"] == [
        "anthropic:claude-sonnet-4-6 was skipped, not translatable: "
        "n=2: Anthropic returns one answer per request"
    ]


def test_a_client_that_leaves_mid_stream_is_a_call_it_left(vendors, fallback_proxy):
    body = {
        "model": "gpt-4.1",
        "stream": True,
        "messages": [{"role": "user", "content": "slow !events=20 !delay=0.2"}],
    }
    headers = {"authorization": f"Bearer {OPENAI_KEY}"}
    with httpx.stream(
        "POST", f"{fallback_proxy.url}/v1/chat/completions", json=body, headers=headers
    ) as answer:
        next(answer.iter_raw())  # the first events, then away
    fallback_proxy.wait_answers(1)
    (call,) = _calls(fallback_proxy)
    assert (call["status"], call["outcome"]) == (200, "client_disconnected")
    assert call["provider_name"] == "openai" and call["finish_reason"] is None
