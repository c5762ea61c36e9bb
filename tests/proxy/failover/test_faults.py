"""Every vendor fault before the first byte, through the three SDKs, stream and non-stream.

Before the first byte reaches the client a fault moves the call along its
chain, and the client gets the fallback's complete answer. Attempt counts are
taken at the fake vendors. Faults after the first byte are in
`test_stream_contract.py` and `test_rescue.py`.
"""

from __future__ import annotations

import re
import time

import anthropic
import openai
import pytest

from tests.fakes.clients import gemini_at
from tests.fakes.harness import model_requests
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

TIMEOUT = 1.0  # generous: a loaded 2-core CI machine must not trip it on healthy calls
FAULT_LIMITS = {
    "retries": 1,
    "ttfb_timeout": TIMEOUT,
    "idle_timeout": TIMEOUT,
    "midstream": "error",
}
FAULT_RULES = {
    "fallback": [
        {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], **FAULT_LIMITS},
        {"model": "claude-*", "to": ["openai:gpt-4.1"], **FAULT_LIMITS},
        {"model": "gemini-*", "to": ["anthropic:claude-sonnet-4-6"], **FAULT_LIMITS},
    ]
}


@pytest.fixture
def faults_proxy(servers, vendors, tmp_path):
    return vendors.proxy(servers, tmp_path / "data", FAULT_RULES)


def ask_openai(proxy, stream: bool) -> str:
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    messages = [{"role": "user", "content": "tell me !events=4"}]
    if stream:
        with client.chat.completions.stream(model="gpt-4.1", messages=messages) as answer:
            return answer.get_final_completion().choices[0].message.content
    return (
        client.chat.completions.create(model="gpt-4.1", messages=messages)
        .choices[0]
        .message.content
    )


def ask_anthropic(proxy, stream: bool) -> str:
    client = anthropic.Anthropic(base_url=proxy.url, api_key=ANTHROPIC_KEY, max_retries=0)
    kwargs = dict(
        model="claude-sonnet-4-6",
        max_tokens=100,
        messages=[{"role": "user", "content": "tell me !events=4"}],
    )
    if stream:
        with client.messages.stream(**kwargs) as answer:
            return answer.get_final_message().content[0].text
    return client.messages.create(**kwargs).content[0].text


def ask_gemini(proxy, stream: bool) -> str:
    client = gemini_at(proxy.url)  # held: a client collected closes its connections
    models = client.models
    ask = {"model": "gemini-2.5-flash", "contents": "tell me !events=4"}
    if stream:
        return "".join(chunk.text or "" for chunk in models.generate_content_stream(**ask))
    return models.generate_content(**ask).text


CLIENTS = {
    "openai": (ask_openai, "openai", "anthropic"),
    "anthropic": (ask_anthropic, "anthropic", "openai"),
    "gemini": (ask_gemini, "gemini", "anthropic"),
}

# fault -> tries the broken vendor gets (retries: 1), or None where only streams apply
BEFORE_FIRST_BYTE = {
    "status=500": 2,
    "status=503": 2,
    "status=529": 2,
    "status=429 retry_after=30": 1,  # too long to wait: straight to the fallback
    "reset": 2,
    "hang": 1,  # a timeout moves on at once: a silent vendor is not waited on again
    "ttfb=2": 1,
    "cut=0": 2,
    "error_first": 2,
}


def _directives(text: str) -> dict[str, str]:
    return dict([*part.split("="), ""][:2] for part in text.split())


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("fault", sorted(BEFORE_FIRST_BYTE))
def test_faults_before_the_first_byte_are_served_by_the_fallback(
    vendors, faults_proxy, client, stream, fault
):
    ask, own, other = CLIENTS[client]
    if fault == "error_first" and not stream:
        pytest.skip("an in-band error exists only in streams")
    broken, healthy = getattr(vendors, own), getattr(vendors, other)
    broken.down = _directives(fault)
    started = time.monotonic()
    assert ask(faults_proxy, stream) == "Echo: tell me"
    assert len(model_requests(broken)) == BEFORE_FIRST_BYTE[fault]
    assert len(model_requests(healthy)) == 1
    assert time.monotonic() - started < 2 * (TIMEOUT + 0.5) + 1  # within the budget
    failovers = faults_proxy.events("failover")
    assert [(f["from_provider"], f["to_provider"]) for f in failovers] == [(own, other)]


@pytest.mark.parametrize("primary_down", [False, True], ids=["relayed", "translated"])
def test_a_stream_event_over_the_limit_breaks_a_failover_served_stream_too(
    servers, vendors, tmp_path, primary_down
):
    rule = {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], "midstream": "error"}
    proxy = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]}, max_sse_event_mb=0.01)
    vendors.openai.down = {"status": "503"} if primary_down else {}
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    said = "a stream event is over 0.01 MiB (--max-sse-event-mb)"
    with pytest.raises(openai.APIError, match=re.escape(said)):  # never a JSON decode error
        for _ in client.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "!big=40000 !events=2 !trickle=2000"}],
            stream=True,
        ):
            pass
    sessions = proxy.wait_responses(2 if primary_down else 1)
    (answered,) = [
        e
        for events in sessions.values()
        for e in events
        if e["type"] == "llm.response" and e["status"] == 200
    ]
    assert (answered["outcome"], answered["error"]) == ("too_large", said)
    assert (
        client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "hello"}]
        )
        .choices[0]
        .message.content
        == "Echo: hello"
    )
