"""Stitching's edges, on the resolver itself: what a client adds to one call alone, a call
sent again, and which of a request's ids names its session.

The real clients these come from run in tests/e2e/test_real_opencode_aider.py; here the
requests are written out, so each rule is seen with nothing else around it.
"""

from __future__ import annotations

import pytest

from taplog.recorder.sessions import CallClues, SessionResolver

REMINDER = "# Rules:\n\nAnswer in SEARCH/REPLACE blocks."
EXAMPLES = [
    {"role": "user", "content": "Rename f to g."},
    {"role": "assistant", "content": "Here is the change."},
]


def _session(resolver: SessionResolver, messages: list[dict], retry: bool = False) -> str:
    body = {"model": "gpt-4.1", "messages": messages}
    headers = {"user-agent": "litellm/1.110.2"}
    return resolver.resolve(CallClues("openai.chat", headers, body, "key:1", retry=retry)).session


def _chat(prompts: tuple[str, ...], closing: str) -> list[dict]:
    """A chat's request after `prompts` (each answered but the last), closed by the client's
    reminder: after the last prompt (`user`), or as a last system message."""
    turns = [t for p in prompts for t in (p, f"Echo: {p}")][:-1]
    messages = [
        {"role": "assistant" if n % 2 else "user", "content": text} for n, text in enumerate(turns)
    ]
    if closing == "system":
        return [*messages, {"role": "system", "content": REMINDER}]
    return [*messages[:-1], {"role": "user", "content": f"{prompts[-1]}\n\n{REMINDER}"}]


@pytest.mark.parametrize("closing", ["user", "system"])
def test_a_reminder_that_closes_each_call_alone_does_not_split_the_chat(closing):
    """As aider sends them; the next call resends the turn without it."""
    resolver = SessionResolver()
    first = _session(resolver, _chat(("hello there",), closing))
    assert _session(resolver, _chat(("hello there", "second question"), closing)) == first
    assert _session(resolver, _chat(("hello there", "second question", "third"), closing)) == first
    assert _session(resolver, _chat(("hello again",), closing)) != first  # another chat


def test_the_same_call_again_is_a_retry_once_the_model_has_spoken_in_it():
    resolver = SessionResolver()
    opening = [{"role": "user", "content": "Plan a trip."}]
    assert _session(resolver, opening) != _session(resolver, opening)  # two runs, maybe
    first = _session(resolver, opening)
    assert _session(resolver, opening, retry=True) == first  # the SDK says it is a retry
    under_way = [*EXAMPLES, {"role": "user", "content": "Rename h to i."}]
    assert _session(resolver, under_way) == _session(resolver, under_way)  # aider's retry


def test_opencode_s_session_header_wins_and_its_sub_agent_joins_its_parent():
    resolver = SessionResolver()
    body = {"model": "gpt-4.1", "input": "hi"}
    sent = {"x-session-affinity": "ses_parent", "session-id": "ses_parent", "user-agent": "x"}
    found = resolver.resolve(CallClues("openai.responses", sent, body))
    assert (found.session, found.source) == ("ses_parent", "client:opencode")
    sub_agent = {"x-session-affinity": "ses_child", "x-parent-session-id": "ses_parent"}
    found = resolver.resolve(CallClues("openai.responses", sub_agent, body))
    assert (found.session, found.source, found.first_seen) == (
        "ses_parent",
        "client:opencode",
        False,
    )
