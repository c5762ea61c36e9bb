"""Failover with the official SDKs: one vendor down, the other serves, the agent never notices."""

from __future__ import annotations

import re

import openai
import pytest

from taplog.proxy.keys import BREAKERS
from taplog.recorder.bodies import decode_body
from tests.fakes.agents import anthropic_agent, chat_agent
from tests.fakes.clients import anthropic_at
from tests.fakes.harness import model_requests
from tests.fakes.keys import ANTHROPIC_FALLBACK_KEY, OPENAI_FALLBACK_KEY

OUTAGES = {"503": {"status": "503"}, "reset": {"reset": ""}, "silent": {"hang": ""}}


@pytest.mark.parametrize("outage", sorted(OUTAGES))
@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_openai_agent_finishes_its_tool_loop_while_openai_is_down(
    vendors, failover_proxy, failover_oai, stream, outage
):
    vendors.openai.down = OUTAGES[outage]
    chat_agent(failover_oai, stream)

    served = model_requests(vendors.anthropic)
    assert len(served) == 8  # every call of the loop, served by Anthropic
    assert all(r.headers["x-api-key"] == ANTHROPIC_FALLBACK_KEY for r in served)
    assert all(r.headers["anthropic-version"] == "2023-06-01" for r in served)

    def served_all(sessions):
        answers = [e for evs in sessions.values() for e in evs if e["type"] == "llm.response"]
        return sum(a["outcome"] == "ok" for a in answers) == 8

    (events,) = failover_proxy.wait_for(served_all).values()
    originals = [e for e in events if e["type"] == "llm.request" and e["api"] == "openai.chat"]
    assert len({e["exchange"] for e in originals}) == 8  # what the client sent, every time
    failovers = [e for e in events if e["type"] == "failover"]
    assert failovers and all(
        (f["from_provider"], f["to_provider"], f["to_model"])
        == ("openai", "anthropic", "claude-sonnet-4-6")
        for f in failovers
    )
    translated = [e for e in events if e["type"] == "llm.request" and e.get("translated_from")]
    assert [decode_body(e) for e in translated] == [r.body for r in served]  # recorded as sent
    assert {(e["path"], e["upstream_url"].endswith(e["path"])) for e in translated} == {
        ("/v1/messages", True)
    }  # where it went, not where the client sent it
    pres = [e for e in events if e["type"] == "tool.pre"]
    posts = [e for e in events if e["type"] == "tool.post"]
    assert [p["name"] for p in pres] == ["get_weather", "get_time", "read_file"]
    assert sorted(p["call_id"] for p in posts) == sorted(p["call_id"] for p in pres)
    assert all(p["flags"] == [] for p in posts)


def test_breaker_sends_calls_straight_to_the_fallback_and_back(
    vendors, failover_proxy, failover_oai
):
    vendors.openai.down = {"status": "500"}

    def ask(text):
        return (
            failover_oai.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": text}]
            )
            .choices[0]
            .message.content
        )

    assert ask("one") == "Echo: one"
    tried_primary = len(model_requests(vendors.openai))
    assert tried_primary == 3  # one try and two retries, then the breaker is open
    assert ask("two") == "Echo: two"
    assert len(model_requests(vendors.openai)) == tried_primary  # skipped while open

    vendors.openai.down = {}
    failover_proxy.app[BREAKERS]["openai:gpt-4.1"].cool_down = 0.0
    assert ask("three") == "Echo: three"  # the probe goes to the recovered primary
    assert len(model_requests(vendors.openai)) == tried_primary + 1
    assert len(model_requests(vendors.anthropic)) == 2


@pytest.mark.parametrize("outage", ["529", "error_first", "reset"])
def test_anthropic_agent_fails_over_to_openai(vendors, failover_proxy, failover_ant, outage):
    vendors.anthropic.down = {"529": {"status": "529"}, "error_first": {"error_first": ""}}.get(
        outage, {"reset": ""}
    )
    anthropic_agent(failover_ant, stream=True)
    served = model_requests(vendors.openai)
    assert len(served) == 8
    assert all(r.headers["authorization"] == f"Bearer {OPENAI_FALLBACK_KEY}" for r in served)


def test_errors_that_no_vendor_can_fix_are_not_failed_over(vendors, failover_proxy, failover_oai):
    vendors.openai.next_faults = [{"status": "400"}]
    with pytest.raises(openai.BadRequestError) as caught:
        failover_oai.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "x"}]
        )
    assert "fake" in caught.value.message
    assert model_requests(vendors.anthropic) == []
    assert len(model_requests(vendors.openai)) == 1


def test_a_rate_limit_with_a_short_retry_after_is_retried_on_the_same_vendor(
    vendors, failover_proxy, failover_oai
):
    vendors.openai.next_faults = [{"status": "429", "retry_after": "0"}]
    answer = failover_oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "x"}]
    )
    assert answer.model == "gpt-4.1"
    assert len(model_requests(vendors.openai)) == 2 and model_requests(vendors.anthropic) == []


def test_an_error_event_opening_a_stream_fails_over(vendors, failover_proxy, failover_oai):
    vendors.openai.down = {"inband_error": "", "cut": "0"}
    with failover_oai.chat.completions.stream(
        model="gpt-4.1", messages=[{"role": "user", "content": "hello"}]
    ) as stream:
        assert stream.get_final_completion().choices[0].message.content == "Echo: hello"
    assert len(model_requests(vendors.anthropic)) == 1


def test_untranslatable_requests_get_the_original_error(vendors, failover_proxy, failover_oai):
    vendors.openai.down = {"status": "503"}
    with pytest.raises(openai.InternalServerError) as caught:
        failover_oai.chat.completions.create(
            model="gpt-4.1", n=2, messages=[{"role": "user", "content": "x"}]
        )
    assert "fake" in caught.value.message  # the vendor's own error, not a translation failure
    assert model_requests(vendors.anthropic) == []
    assert failover_proxy.events("failover") == []  # nothing moved
    [answered] = failover_proxy.events("call.answered")
    assert answered["status"] == 503 and answered["outcome"] == "upstream_error"
    assert answered["provider"] == "openai" and answered["attempt"] == answered["tries"] == 3
    assert answered["skipped"][0].startswith(
        "anthropic:claude-sonnet-4-6 was skipped, not translatable: n=2"
    )


def test_a_stream_broken_after_bytes_reached_the_client_ends_with_an_error_event(
    vendors, failover_proxy, failover_oai
):
    vendors.openai.down = {"status": "503"}
    vendors.anthropic.down = {"cut": "4", "events": "10"}
    stream = failover_oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "long"}], stream=True
    )
    with pytest.raises(openai.APIError, match=r"ended before its end marker|broke off"):
        for _ in stream:
            pass
    answers = [e for e in failover_proxy.events("llm.response") if e["provider"] == "anthropic"]
    assert answers[-1]["outcome"] == "upstream_cut"


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_the_answer_names_the_model_that_served_it_and_is_priced_as_such(
    vendors, failover_proxy, failover_oai, stream
):
    vendors.openai.down = {"status": "503"}
    kwargs = dict(model="gpt-4.1", messages=[{"role": "user", "content": "who?"}])
    if stream:
        with failover_oai.chat.completions.stream(
            **kwargs, stream_options={"include_usage": True}
        ) as s:
            answer = s.get_final_completion()
    else:
        answer = failover_oai.chat.completions.create(**kwargs)
    assert answer.model == "claude-sonnet-4-6"
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0

    from taplog.recorder.query.connect import connect, query

    failover_proxy.wait_responses(4)
    (call,) = query(
        connect(failover_proxy.data_dir),
        "SELECT request_model, response_model, provider_name, input_tokens, cost_usd, "
        "attempts, failovers FROM llm_calls",
    ).fetchall()
    request_model, served, provider, tokens, cost, attempts, failovers = call
    assert (request_model, served, attempts, failovers) == ("gpt-4.1", "claude-sonnet-4-6", 4, 1)
    assert provider == "anthropic"  # the provider that served the call
    assert tokens == answer.usage.prompt_tokens
    assert cost == pytest.approx(tokens * 3e-6 + answer.usage.completion_tokens * 15e-6)


def _provider(**fields):
    return {
        "providers": {
            "x": {"type": "openai", "base_url": "http://h/v1", "api_key_env": "K", **fields}
        }
    }


def _rule(**fields):
    return {"fallback": [{"model": "gpt-*", "to": ["anthropic:m"], **fields}]}


@pytest.mark.parametrize(
    ("table", "named"),
    [
        (_provider(base_url="http://169.254.169.254/v1"), "providers.x.base_url"),
        (_provider(base_url="https://h/v1#fragment"), "providers.x.base_url: must not have"),
        (_provider(base_url="https://h:70000/v1"), "providers.x.base_url: must have a port"),
        (_provider(base_url="https://h\n.example/v1"), "providers.x.base_url: must not contain"),
        (_provider(type="grpc"), "providers.x.type"),
        (_provider(api="assistants"), "providers.x.api"),
        (_rule(to=["nowhere:m"]), "fallback[0].to[0]"),
        (_rule(retries=-1), "fallback[0].retries"),
        (_rule(midstream="pray"), "fallback[0].midstream"),
        (_rule(tll=1), "unknown key 'tll'"),
        (_provider(prefill="yes"), "providers.x.prefill"),
        (_rule(to=[{"target": "anthropic:m", "prefill": 1}]), "fallback[0].to[0].prefill"),
        (_rule(to=[{"target": "anthropic:m", "prefil": True}]), "unknown key 'prefil'"),
        (_rule(to=[{"prefill": True}]), "fallback[0].to[0].target"),
    ],
)
def test_bad_failover_config_names_the_key(table, named):
    from taplog.proxy.config import ConfigError
    from taplog.proxy.failover.rules import load_fallbacks

    with pytest.raises(ConfigError, match=re.escape(named)):
        load_fallbacks("https://api.openai.com/v1", "https://api.anthropic.com", table, ())


def test_prefill_is_as_declared_on_the_target_then_its_provider_then_litellm():
    from taplog.proxy.failover.rules import load_fallbacks

    table = {
        **_provider(prefill=True),
        "fallback": [
            {
                "model": "gpt-*",
                "to": [
                    "x:some-model",
                    {"target": "x:other-model", "prefill": False},
                    "anthropic:claude-no-such-model",
                ],
            }
        ],
    }
    fallbacks = load_fallbacks("https://api.openai.com/v1", "https://api.anthropic.com", table, ())
    by_provider, by_target, unknown = fallbacks.rules[0].targets
    assert (by_provider.takes_prefill(), by_target.takes_prefill()) == (True, False)
    assert unknown.takes_prefill() is False  # litellm does not know it: no prefill


def test_a_body_failed_over_as_it_is_takes_its_beta_header_along(
    vendors, servers, tmp_path, monkeypatch
):
    """Another Anthropic-type provider gets the client's body untranslated, beta fields and
    all: without the `anthropic-beta` they need, it would refuse them."""
    rules = {
        "providers": {
            "backup": {"type": "anthropic", "base_url": vendors.openai.url, "api_key_env": "BK"}
        },
        "fallback": [{"model": "claude-*", "to": ["backup:claude-sonnet-4-6"]}],
    }
    monkeypatch.setenv("BK", "sk-ant-backup-0123456789abcdef")
    proxy = vendors.proxy(servers, tmp_path / "data", rules)
    vendors.anthropic.down = {"status": "529"}
    anthropic_at(proxy.url).messages.create(
        model="claude-sonnet-4-6",
        max_tokens=64,
        messages=[{"role": "user", "content": "Hello"}],
        extra_headers={"anthropic-beta": "context-management-2025-06-27"},
    )
    (served,) = model_requests(vendors.openai)  # the backup, at the other fake
    assert served.path == "/v1/messages" and served.headers["x-api-key"].startswith("sk-ant-b")
    assert served.headers["anthropic-beta"] == "context-management-2025-06-27"
