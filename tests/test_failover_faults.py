"""Every vendor fault, through both SDKs, stream and non-stream.

Before the first byte reaches the client a fault moves the call along its
chain, and the client gets the fallback's complete answer; after that, the
client's stream ends with an error in its own format, never looking complete.
Attempt counts are taken at the fake vendors.
"""

from __future__ import annotations

import re
import time

import anthropic
import openai
import orjson
import pytest

from proxy.continuation import INSTRUCTION
from tests.conftest import ANTHROPIC_KEY, OPENAI_KEY, model_requests

TIMEOUT = 1.0  # generous: a loaded 2-core CI machine must not trip it on healthy calls
LIMITS = {"retries": 1, "ttfb_timeout": TIMEOUT, "idle_timeout": TIMEOUT, "midstream": "error"}
RULES = {
    "fallback": [
        {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], **LIMITS},
        {"model": "claude-*", "to": ["openai:gpt-4.1"], **LIMITS},
    ]
}


@pytest.fixture
def proxy(servers, vendors, tmp_path):
    return vendors.proxy(servers, tmp_path / "data", RULES)


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


CLIENTS = {
    "openai": (ask_openai, "openai", "anthropic"),
    "anthropic": (ask_anthropic, "anthropic", "openai"),
}

# fault -> tries the broken vendor gets (retries: 1), or None where only streams apply
BEFORE_FIRST_BYTE = {
    "status=500": 2,
    "status=503": 2,
    "status=529": 2,
    "status=429 retry_after=30": 1,  # too long to wait: straight to the fallback
    "reset": 2,
    "hang": 2,
    "ttfb=2": 2,
    "cut=0": 2,
    "error_first": 2,
}


def _directives(text: str) -> dict[str, str]:
    return dict([*part.split("="), ""][:2] for part in text.split())


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("fault", sorted(BEFORE_FIRST_BYTE))
def test_faults_before_the_first_byte_are_served_by_the_fallback(
    vendors, proxy, client, stream, fault
):
    ask, own, other = CLIENTS[client]
    if fault == "error_first" and not stream:
        pytest.skip("an in-band error exists only in streams")
    broken, healthy = getattr(vendors, own), getattr(vendors, other)
    broken.down = _directives(fault)
    started = time.monotonic()
    assert ask(proxy, stream) == "Echo: tell me"
    assert len(model_requests(broken)) == BEFORE_FIRST_BYTE[fault]
    assert len(model_requests(healthy)) == 1
    assert time.monotonic() - started < 2 * (TIMEOUT + 0.5) + 1  # within the budget
    failovers = proxy.events("failover")
    assert [(f["from_provider"], f["to_provider"]) for f in failovers] == [(own, other)]


AFTER_FIRST_BYTE = ["cut=3", "delay=2", "no_end", "inband_error", "malformed=2"]


@pytest.mark.parametrize("translated", [False, True], ids=["own-vendor", "translated"])
@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("fault", AFTER_FIRST_BYTE)
def test_a_stream_broken_after_the_first_byte_never_looks_complete(
    vendors, proxy, client, fault, translated
):
    ask, own, other = CLIENTS[client]
    if translated:
        getattr(vendors, own).down = {"status": "503"}
        getattr(vendors, other).down = _directives(fault)
    else:
        getattr(vendors, own).down = _directives(fault)
    if fault.startswith("malformed") and not translated:
        pytest.skip("passed through as it came: the client's own SDK reads the vendor's bytes")
    if fault == "no_end" and translated and client == "anthropic":
        # OpenAI's usage chunk (asked for by taplog) already closes the translated message:
        # the answer is whole, with its stop reason and usage, so it is delivered as such.
        assert ask(proxy, stream=True) == "Echo: tell me"
        return
    with pytest.raises((openai.APIError, anthropic.APIError, ValueError)):
        ask(proxy, stream=True)
    served_by = other if translated else own
    answers = [e for e in proxy.events("llm.response") if e["provider"] == served_by]
    assert answers[-1]["outcome"] in ("upstream_cut", "timeout", "ok")
    assert answers[-1]["stream_complete"] is False


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("fault", ["cut=3", "delay=2", "no_end", "inband_error"])
def test_a_broken_stream_is_continued_on_the_fallback(servers, vendors, tmp_path, client, fault):
    rules = {"fallback": [{**rule, "midstream": "continue"} for rule in RULES["fallback"]]}
    proxy = vendors.proxy(servers, tmp_path / "data", rules)
    ask, own, other = CLIENTS[client]
    getattr(vendors, own).down = _directives(fault)

    text = ask(proxy, stream=True)

    if fault == "no_end":
        assert text == "Echo: tell me"  # only the end marker was missing: nothing to ask
        return
    (request,) = model_requests(getattr(vendors, other))
    messages = orjson.loads(request.body)["messages"]
    if messages[-1]["role"] == "user" and len(messages) == 1:
        assert text == "Echo: tell me"  # no text had reached the client: asked again, whole
    else:
        assert [m["role"] for m in messages[-2:]] == ["assistant", "user"]  # an instruction
        continuation = "Echo: " + INSTRUCTION
        assert text.endswith(continuation)
        partial = text.removesuffix(continuation)
        assert partial and "Echo: tell me".startswith(partial)  # what the client had, kept
    (failover,) = proxy.events("failover")
    assert failover["reason"].startswith("continuing a broken stream")


def test_a_refused_prefill_is_retried_as_an_instruction_and_never_shown(servers, vendors, tmp_path):
    rules = {
        "fallback": [
            {
                "model": "claude-sonnet-4-6",
                "to": ["anthropic:claude-haiku-4-5"],
                **LIMITS,
                "midstream": "continue",
            }
        ]
    }
    proxy = vendors.proxy(servers, tmp_path / "data", rules)
    vendors.anthropic.next_faults = [{"cut": "5"}, {"reject_prefill": ""}]

    text = ask_anthropic(proxy, stream=True)

    assert text.endswith("Echo: " + INSTRUCTION)
    sent = [orjson.loads(r.body) for r in model_requests(vendors.anthropic)]
    assert [s["model"] for s in sent] == [
        "claude-sonnet-4-6",
        "claude-haiku-4-5",
        "claude-haiku-4-5",
    ]
    assert sent[1]["messages"][-1]["role"] == "assistant"  # the prefill, refused
    assert sent[2]["messages"][-1]["role"] == "user"  # then the instruction
    statuses = [e["status"] for e in proxy.events("llm.response")]
    assert statuses == [200, 400, 200]


@pytest.mark.parametrize("primary_down", [False, True], ids=["relayed", "translated"])
def test_a_stream_event_over_the_limit_breaks_a_failover_served_stream_too(
    servers, vendors, tmp_path, primary_down
):
    rule = {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], "midstream": "error"}
    proxy = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]}, max_sse_event_mb=0.01)
    vendors.openai.down = {"status": "503"} if primary_down else {}
    client = openai.OpenAI(base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    said = "a stream event is over 0.01 MiB (--max-sse-event-mb)"
    with pytest.raises(openai.APIError, match=re.escape(said)):
        for _ in client.chat.completions.create(
            model="gpt-4.1",
            messages=[{"role": "user", "content": "!big=40000 !events=2"}],
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
    assert (answered["outcome"], answered["error"]) == ("upstream_cut", said)
    assert (
        client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "hello"}]
        )
        .choices[0]
        .message.content
        == "Echo: hello"
    )
