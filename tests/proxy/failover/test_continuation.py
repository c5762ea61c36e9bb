"""A rescue that cannot lie: a continuation never hands the client a passage twice.

The client's own vendor cuts its stream after a few events; the rule continues
it on the other vendor (`midstream = "continue"`). A fallback that continues
properly gives one whole answer; one that starts the answer again is trimmed
exactly; one that starts again in other words ends the stream with an error
event. Every test checks the text the client received.
"""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest

from taplog.proxy.failover.continuation import INSTRUCTION, Restarted, opening
from tests.fakes.clients import (
    OTHER_VENDOR,
    OWN_VENDOR,
    STORY_ANSWER,
    STORY_PROMPT,
    VENDOR_MODEL,
    ask_sdk,
)
from tests.fakes.harness import model_requests
from tests.fakes.keys import OPENAI_KEY
from tests.fakes.vendor import token_count

CUT = {"cut": "4"}  # the role event, then three of the six text deltas


def _continuing_proxy(servers, vendors, tmp_path, prefill=None, to=None):
    target = {"openai": "anthropic:claude-sonnet-4-6", "anthropic": "openai:gpt-4.1"}
    rules = []
    for model, own in (("gpt-*", "openai"), ("claude-*", "anthropic")):
        goes_to = to or target[own]
        entry = goes_to if prefill is None else {"target": goes_to, "prefill": prefill}
        rules.append({"model": model, "to": [entry], "retries": 0, "midstream": "continue"})
    return vendors.proxy(servers, tmp_path / "data", {"fallback": rules})


def _continuation_of(proxy):
    return [e for e in proxy.events("llm.response") if "rescue" in e]


def _no_passage_twice(text: str) -> None:
    assert STORY_ANSWER.startswith(text), f"the client received {text!r}"


@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages"])
@pytest.mark.parametrize("prefill", [False, True], ids=["instruction", "prefill"])
def test_a_proper_continuation_gives_one_whole_answer(servers, vendors, tmp_path, api, prefill):
    proxy = _continuing_proxy(servers, vendors, tmp_path, prefill=prefill)
    getattr(vendors, OWN_VENDOR[api]).down = CUT

    got = ask_sdk(proxy.url, api, stream=True)

    assert (got.error, got.text) == (None, STORY_ANSWER)
    assert got.usage >= token_count(STORY_ANSWER)  # the usage covers all the client received
    (request,) = model_requests(getattr(vendors, OTHER_VENDOR[OWN_VENDOR[api]]))
    sent = orjson.loads(request.body)
    last = sent["messages"][-1]
    assert last["role"] == ("assistant" if prefill else "user")
    if not prefill:
        assert INSTRUCTION in str(last["content"])
    (continued,) = _continuation_of(proxy)
    assert continued["rescue"]["verdict"] == "continued"
    assert continued["rescue"]["prefill"] is prefill


@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages"])
@pytest.mark.parametrize("prefill", [False, True], ids=["instruction", "prefill"])
def test_a_continuation_that_restarts_the_answer_is_trimmed_exactly(
    servers, vendors, tmp_path, api, prefill
):
    proxy = _continuing_proxy(servers, vendors, tmp_path, prefill=prefill)
    getattr(vendors, OWN_VENDOR[api]).down = CUT
    getattr(vendors, OTHER_VENDOR[OWN_VENDOR[api]]).down = {"continues": "restart"}

    got = ask_sdk(proxy.url, api, stream=True)

    assert (got.error, got.text) == (None, STORY_ANSWER)  # not the start twice
    (continued,) = _continuation_of(proxy)
    rescue = continued["rescue"]
    assert rescue["verdict"] == "trimmed" and rescue["trimmed_chars"] == rescue["sent_chars"] > 0
    assert got.usage >= token_count(STORY_ANSWER)


@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages"])
def test_a_continuation_that_restarts_in_other_words_ends_with_an_error(
    servers, vendors, tmp_path, api
):
    proxy = _continuing_proxy(servers, vendors, tmp_path)
    getattr(vendors, OWN_VENDOR[api]).down = CUT
    getattr(vendors, OTHER_VENDOR[OWN_VENDOR[api]]).down = {"continues": "reword"}

    got = ask_sdk(proxy.url, api, stream=True)

    assert got.error is not None and "not continued" in str(got.error)
    _no_passage_twice(got.text)
    assert got.text  # the part before the cut, and nothing of the restart
    (continued,) = _continuation_of(proxy)
    assert continued["outcome"] == "restarted"


def test_a_refused_prefill_is_asked_again_with_an_instruction_and_never_shown(
    servers, vendors, tmp_path
):
    proxy = _continuing_proxy(
        servers, vendors, tmp_path, prefill=True, to="anthropic:claude-haiku-4-5"
    )
    vendors.anthropic.next_faults = [CUT, {"reject_prefill": ""}]

    got = ask_sdk(proxy.url, "anthropic.messages", stream=True)

    assert (got.error, got.text) == (None, STORY_ANSWER)
    sent = [orjson.loads(r.body) for r in model_requests(vendors.anthropic)]
    assert [s["model"] for s in sent] == ["claude-sonnet-4-6", *["claude-haiku-4-5"] * 2]
    assert [s["messages"][-1]["role"] for s in sent[1:]] == ["assistant", "user"]
    assert [e["status"] for e in proxy.events("llm.response")] == [200, 400, 200]


def test_a_continuation_that_breaks_too_ends_with_an_error_event(servers, vendors, tmp_path):
    proxy = _continuing_proxy(servers, vendors, tmp_path)
    vendors.openai.down = CUT
    vendors.anthropic.down = {"cut": "3"}
    got = ask_sdk(proxy.url, "openai.chat", stream=True)
    assert got.error is not None and "its continuation broke too" in str(got.error)
    _no_passage_twice(got.text)


def test_a_client_that_leaves_while_a_continuation_opens_leaves_it_recorded(
    servers, vendors, tmp_path
):
    """The fallback holds the continuation's opening (`!hang`) and the client gives up
    meanwhile: the continuation's try is in the log as the client left it, its request and
    then its answer, `client_disconnected` with no status. The call is what the client
    got: its own vendor's stream, cut."""
    proxy = _continuing_proxy(servers, vendors, tmp_path)
    vendors.openai.down = CUT
    vendors.anthropic.down = {"hang": ""}
    client = openai.OpenAI(
        base_url=f"{proxy.url}/v1", api_key=OPENAI_KEY, max_retries=0, timeout=2.0
    )
    stream = client.chat.completions.create(
        model=VENDOR_MODEL["openai"],
        messages=[{"role": "user", "content": STORY_PROMPT}],
        stream=True,
    )
    with pytest.raises((openai.APITimeoutError, httpx.ReadTimeout)):
        for _ in stream:
            pass

    def continuation_ended(sessions) -> bool:
        return any(e.get("provider") == "anthropic" for e in _of(sessions, "llm.response"))

    sessions = proxy.wait_for(continuation_ended)
    tries = [
        e for e in _of(sessions, "llm.request", "llm.response") if e["provider"] == "anthropic"
    ]
    assert [e["type"] for e in tries] == ["llm.request", "llm.response"]
    assert (tries[1]["outcome"], tries[1]["status"]) == ("client_disconnected", None)
    (answered,) = _of(proxy.wait_answers(1), "call.answered")
    assert (answered["outcome"], answered["status"], answered["attempt"]) == (
        "upstream_cut",
        200,
        1,
    )


def _of(sessions, *types: str) -> list[dict]:
    return [e for events in sessions.values() for e in events if e["type"] in types]


SENT = "The quick brown fox jumps over the"


@pytest.mark.parametrize(
    ("said", "dropped"),
    [
        (" lazy dog.", 0),  # a true continuation
        ("The quick brown fox jumps over the lazy dog.", len(SENT)),  # the whole again
        ("jumps over the lazy dog.", len("jumps over the")),  # its last words again
        ("", 0),  # nothing more to say
    ],
)
def test_the_opening_of_a_continuation_is_judged_against_the_sent_text(said, dropped):
    assert opening(SENT, said, final=True) == dropped


@pytest.mark.parametrize(
    "said",
    [
        "The quick brown cat leaps over the lazy dog.",  # the start again, in other words
        "The quick",  # only the start, then nothing
        "brown fox",  # a passage from the middle, then nothing
    ],
)
def test_a_restart_that_cannot_be_trimmed_is_refused(said):
    with pytest.raises(Restarted):
        opening(SENT, said, final=True)


def test_an_opening_that_may_still_turn_out_a_repeat_is_held():
    assert opening(SENT, "The quick bro", final=False) is None  # the start, so far
    assert opening(SENT, " over th", final=False) is None  # the end, so far
    assert opening(SENT, " lazy", final=False) == 0
