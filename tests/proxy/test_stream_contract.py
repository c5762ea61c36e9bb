"""A broken answer is never passed off as a complete one: every cut, four APIs, three SDKs.

The vendor breaks an answer after its first bytes: it closes or resets the
connection, ends the body cleanly without the end marker, stalls, sends its
answer delimited only by the connection closing, sends a malformed event or
its own error event. Through taplog, with or without a fallback rule, the
official SDK must raise (or, with `midstream = "continue"`, get one whole
answer), the text it received before must be a clean prefix of the answer,
and the log must say why. Each test checks what the client received, not
taplog's flags.
"""

from __future__ import annotations

import itertools

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.clients import (
    OTHER_VENDOR,
    OWN_VENDOR,
    STORY_ANSWER,
    STORY_PROMPT,
    ask_sdk,
    sql_rows,
)
from tests.fakes.harness import start_on_fake
from tests.fakes.keys import OPENAI_KEY

SHORT = 0.5  # seconds of silence that count as a stall here


def answers(proxy, provider: str | None = None) -> list[dict]:
    proxy.flush()
    found = [e for e in proxy.events("llm.response") if provider in (None, e["provider"])]
    return sorted(found, key=lambda e: e["seq"])


@pytest.fixture
def rules_for(servers, vendors, tmp_path):
    """taplog in front of both fake vendors, with a fallback rule to the other one (or none)."""

    data_dirs = itertools.count()

    def start(mode: str | None, **overrides):
        data = tmp_path / f"data{next(data_dirs)}"  # each proxy owns a data dir of its own
        if mode is None:
            return vendors.proxy(servers, data, {}, read_timeout=SHORT, **overrides)
        limits = {"retries": 1, "ttfb_timeout": 2, "idle_timeout": SHORT, "midstream": mode}
        rules = {
            "fallback": [
                {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], **limits},
                {"model": "claude-*", "to": ["openai:gpt-4.1"], **limits},
                {"model": "gemini-*", "to": ["anthropic:claude-sonnet-4-6"], **limits},
            ]
        }
        return vendors.proxy(servers, data, rules, **overrides)

    return start


# -- streams broken after their first bytes ---------------------------------------------

STREAM_CUTS = {
    "close": ({"cut": "3"}, "upstream_cut", "the vendor's answer broke off"),
    "reset": ({"cut": "3", "cut_how": "reset"}, "upstream_cut", "the vendor's answer broke off"),
    "eof": ({"cut": "3", "cut_how": "eof"}, "upstream_cut", "ended before its end marker"),
    "stall": ({"cut": "3", "cut_how": "stall"}, "timeout", "the vendor sent nothing for 0.5 s"),
    "unframed": ({"cut": "3", "unframed": ""}, "upstream_cut", "ended before its end marker"),
    "malformed": ({"malformed": "3"}, "upstream_cut", "the vendor sent a malformed event"),
    "error_event": ({"inband_error": ""}, "upstream_error", "the vendor sent an error mid-stream"),
}
APIS = sorted(OWN_VENDOR)


@pytest.mark.parametrize("mode", [None, "error"], ids=["no-rule", "rule-midstream-error"])
@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("cut", sorted(STREAM_CUTS))
def test_a_broken_stream_makes_the_sdk_raise_and_the_log_says_why(
    vendors, rules_for, cut, api, mode
):
    fault, outcome, why = STREAM_CUTS[cut]
    proxy = rules_for(mode)
    own = OWN_VENDOR[api]
    getattr(vendors, own).down = fault

    got = ask_sdk(proxy.url, api, stream=True)

    assert got.error is not None, f"the SDK took a broken stream for whole: {got.text!r}"
    assert STORY_ANSWER.startswith(got.text)  # whole events only: a clean prefix, nothing glued
    (broken,) = answers(proxy, own)
    if cut == "malformed" and mode is None and api != "gemini.generate":
        # Without a rule nothing could be done about it: it went on as the vendor sent
        # it, and the client's own SDK failed on it as it would have without taplog.
        # (A Gemini stream ends in a chunk's data, not an event's name: taplog reads
        # every chunk, so it ends the stream with its own error, as with a rule.)
        assert isinstance(got.error, ValueError)  # a JSON decode error, from the SDK
        assert broken["malformed_events"] == 1
        assert broken["outcome"] in ("upstream_error", "client_disconnected")  # it left
    else:
        assert broken["outcome"] == outcome and why in broken["error"]
        assert broken["stream_complete"] is False
    assert answers(proxy, OTHER_VENDOR[own]) == []  # bytes had reached the client: no failover


@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages"])
@pytest.mark.parametrize("cut", sorted(STREAM_CUTS))
def test_a_broken_stream_is_continued_into_one_whole_answer(vendors, rules_for, cut, api):
    fault, outcome, why = STREAM_CUTS[cut]
    proxy = rules_for("continue")
    own = OWN_VENDOR[api]
    getattr(vendors, own).down = fault

    got = ask_sdk(proxy.url, api, stream=True)

    assert got.error is None and got.text == STORY_ANSWER  # one answer, no passage twice
    broken, continued = answers(proxy)
    assert (broken["provider"], broken["outcome"]) == (own, outcome) and why in broken["error"]
    assert (continued["provider"], continued["outcome"]) == (OTHER_VENDOR[own], "ok")
    assert continued["rescue"]["verdict"] in ("continued", "trimmed")
    (failover,) = proxy.events("failover")
    assert failover["reason"].startswith("continuing a broken stream")


def test_a_broken_responses_stream_is_not_continued_it_ends_with_an_error(vendors, rules_for):
    proxy = rules_for("continue")
    vendors.openai.down = {"cut": "5"}
    got = ask_sdk(proxy.url, "openai.responses", stream=True)
    assert got.error is not None and STORY_ANSWER.startswith(got.text)
    assert answers(proxy, "anthropic") == []


@pytest.mark.parametrize("mode", [None, "error", "continue"], ids=["no-rule", "error", "continue"])
@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages"])
def test_an_answer_whose_end_marker_never_came_is_completed_and_says_so(
    vendors, rules_for, api, mode
):
    """The stop reason arrived, then the body ended: the answer is whole, only its marker
    is missing. taplog adds it, whatever `midstream` says."""
    proxy = rules_for(mode)
    getattr(vendors, OWN_VENDOR[api]).down = {"no_end": ""}
    got = ask_sdk(proxy.url, api, stream=True)
    assert (got.error, got.text) == (None, STORY_ANSWER)
    (answer,) = answers(proxy)
    assert (answer["outcome"], answer["end_marker_added"]) == ("ok", True)
    assert answer["stream_complete"] is False  # what the vendor sent lacked it


# -- bodies broken after their first bytes -------------------------------------------------

BODY_CUTS = {
    "close": ({"cut": ""}, "upstream_cut"),
    "reset": ({"cut": "", "cut_how": "reset"}, "upstream_cut"),
    "stall": ({"cut": "", "cut_how": "stall"}, "timeout"),
    "unframed": ({"cut": "", "unframed": ""}, "upstream_cut"),
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("cut", sorted(BODY_CUTS))
def test_a_broken_body_makes_the_sdk_raise_or_is_served_by_the_fallback(
    vendors, rules_for, cut, api
):
    fault, outcome = BODY_CUTS[cut]
    own = OWN_VENDOR[api]
    plain = rules_for(None)
    getattr(vendors, own).down = fault
    got = ask_sdk(plain.url, api, stream=False)
    assert got.error is not None and got.text == ""
    (broken,) = answers(plain, own)
    assert broken["outcome"] == outcome

    with_rule = rules_for("error")
    got = ask_sdk(with_rule.url, api, stream=False)  # nothing reached the client: moved on
    assert (got.error, got.text) == (None, STORY_ANSWER)
    tries = 1 if outcome == "timeout" else 2  # a silent vendor is not waited on again
    assert [a["outcome"] for a in answers(with_rule, own)] == [outcome] * tries
    assert [a["outcome"] for a in answers(with_rule, OTHER_VENDOR[own])] == ["ok"]


# -- wherever the cut falls ---------------------------------------------------------------

_sessions = itertools.count()


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(at=st.floats(0, 1), how=st.sampled_from(["close", "reset", "eof", "unframed"]))
def test_wherever_a_stream_is_cut_the_client_gets_all_of_it_or_an_error(
    servers, fake, tmp_path_factory, at, how
):
    proxy = _plain_proxy(servers, fake, tmp_path_factory)
    fake.down = {}
    body = {
        "model": "gpt-4.1",
        "stream": True,
        "stream_options": {"include_usage": True},  # as `ask` sends it
        "messages": [{"role": "user", "content": STORY_PROMPT}],
    }
    whole = httpx.post(
        f"{fake.url}/v1/chat/completions",
        json=body,
        headers={"authorization": f"Bearer {OPENAI_KEY}"},
    ).content
    finish_end = whole.index(b"\n\n", whole.index(b'"finish_reason":"stop"')) + 2
    cut_at = round(at * len(whole))
    fake.down = {"cut_at": str(cut_at), **({"unframed": ""} if how == "unframed" else {})}
    fake.down |= {"cut_how": how} if how != "unframed" else {}
    session = f"cut-{next(_sessions)}"

    got = ask_sdk(
        proxy.url, "openai.chat", stream=True, extra_headers={"x-taplog-session": session}
    )

    (answer,) = [e for e in proxy.sessions()[session] if e["type"] == "llm.response"]
    if cut_at >= finish_end:  # the stop reason had come: the answer is whole
        assert (got.error, got.text) == (None, STORY_ANSWER)
        assert answer["outcome"] == "ok"
    else:
        assert got.error is not None and STORY_ANSWER.startswith(got.text)
        assert answer["outcome"] == "upstream_cut"


_proxies: dict[int, object] = {}


def _plain_proxy(servers, fake, tmp_path_factory):
    """One taplog per test run of the property (hypothesis reuses the fixtures)."""
    key = id(servers)
    if key not in _proxies:
        _proxies.clear()
        _proxies[key] = start_on_fake(servers, fake, tmp_path_factory.mktemp("cuts"))
    return _proxies[key]


# -- a client that leaves ------------------------------------------------------------------


def test_a_client_that_leaves_once_it_has_the_stop_reason_is_no_failure(taplog, monkeypatch):
    """litellm (the real one, taplog's own dependency) stops reading an Anthropic stream
    at `message_delta`, before `message_stop`, and closes it: the answer was whole."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its prices
    import litellm

    chunks = litellm.completion(
        model="anthropic/claude-sonnet-4-6",
        messages=[{"role": "user", "content": f"{STORY_PROMPT} !delay=0.3"}],
        stream=True,
        api_base=taplog.url,
        api_key="sk-ant-test-key",
        extra_headers={"X-Taplog-Session": "lite"},
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == STORY_ANSWER
    taplog.wait_for(lambda s: any(e["type"] == "call.answered" for e in s.get("lite", [])))
    (response,), (answer,) = taplog.events("llm.response"), taplog.events("call.answered")
    assert (response["outcome"], response["client_left_at_end"]) == ("ok", True)
    assert response["stream_complete"] is True  # the vendor's rest was read into the log
    assert answer["outcome"] == "ok"
    [row] = sql_rows(taplog.data_dir, "SELECT failed_calls FROM sessions")
    assert row == {"failed_calls": 0}


def test_a_client_that_leaves_before_the_stop_reason_is_recorded_as_gone(taplog):
    with httpx.stream(
        "POST",
        f"{taplog.url}/v1/messages",
        json={
            "model": "claude-sonnet-4-6",
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": f"{STORY_PROMPT} !delay=0.3"}],
        },
        headers={"x-api-key": "sk-ant-test-key", "anthropic-version": "2023-06-01"},
    ) as stream:
        next(stream.iter_bytes())  # the first events, then away
    taplog.wait_for(lambda s: any(e["type"] == "llm.response" for es in s.values() for e in es))
    (response,) = taplog.events("llm.response")
    assert response["outcome"] == "client_disconnected"
    assert "client_left_at_end" not in response
