"""A resent history is searched for secrets by the part, each part once per session (issue
31, item 3): what a whole-body search would find is found all the same, in every request
that resends it, read back whole; a part searched clean under one key is searched again
when the client's key changes.
"""

from __future__ import annotations

import json

import anthropic
import httpx
import orjson

from taplog.recorder.known_bodies import KnownBodies
from taplog.recorder.scrub_parts import CleanParts
from taplog.recorder.store.reader import read_session
from tests.disk import log_of, readable
from tests.fakes.harness import start_on_fake
from tests.fakes.keys import OPENAI_KEY

SECOND_KEY = "tk-7c1e93b0a4d25f68e0b1c3d5f7a9b2c4d6e8f0a1"  # no known shape: found by value
EMAIL = "dana.reyes@example.org"
# over `recorder.known_bodies.MIN_BYTES`: each request is parsed from where the last differs
SYSTEM = "You are a careful coding agent. Read the repository before you change it. " * 250


def test_every_resent_part_is_redacted_as_a_whole_body_search_would(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", redact="email")
    client = anthropic.Anthropic(
        base_url=f"{taplog.url}/s/parts", api_key="sk-ant-test-0123456789abcdef", max_retries=0
    )
    history: list = []
    turns = [
        f"Mail the report to {EMAIL} when the tests pass.",  # a detector finds it
        f"The deploy token is {SECOND_KEY}; keep it out of the code.",  # not yet a key
        "Now run the tests again.",
    ]
    for turn, text in enumerate(turns):
        history.append({"role": "user", "content": text})
        if turn == 2:  # the agent switches to the key it was shown: now a secret by value
            client = client.with_options(api_key=SECOND_KEY)
        answer = client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=64,
            system=SYSTEM,
            metadata={"user_id": f"user {EMAIL}"},  # a top-level field, searched with its name
            messages=history,
        )
        history.append({"role": "assistant", "content": answer.content[0].text})
    taplog.wait_responses(3)

    requests = [e for e in read_session(taplog.data_dir, "parts") if e["type"] == "llm.request"]
    assert len(requests) == 3
    for request in requests:  # the address, resent with every turn, is gone from each
        body = request["body"]
        assert EMAIL not in str(body)
        assert (
            body["messages"][0]["content"]
            == "Mail the report to [redacted:email] when the tests pass."
        )
        assert body["metadata"] == {"user_id": "user [redacted:email]"}
        assert body["system"] == SYSTEM
    # the token became the client's key: the turn that resends it under that key hides it
    assert SECOND_KEY not in str(requests[2]["body"])
    assert "[redacted]" in requests[2]["body"]["messages"][2]["content"]
    assert EMAIL.encode() not in readable(log_of(taplog.data_dir, "parts"))


def test_a_body_not_in_compact_json_is_searched_whole(servers, fake, tmp_path):
    """Bytes that are not orjson's compact form (a client's own spacing) are searched as one
    text: the secret is found there too, and the exact bytes are kept beside the body."""
    taplog = start_on_fake(servers, fake, tmp_path / "data")
    message = {"role": "user", "content": f"my key is {OPENAI_KEY}"}
    raw = json.dumps({"model": "gpt-4.1", "messages": [message]})  # with spaces after `:` `,`
    answer = httpx.post(
        f"{taplog.url}/s/spaced/v1/chat/completions",
        content=raw.encode(),
        headers={"authorization": f"Bearer {OPENAI_KEY}", "content-type": "application/json"},
    )
    assert answer.status_code == 200
    (events,) = taplog.wait_responses(1).values()
    (request,) = [e for e in events if e["type"] == "llm.request"]
    assert OPENAI_KEY not in str(request)
    assert request["body"]["messages"][0]["content"] == "my key is [redacted]"


def test_a_body_grown_from_a_clean_one_is_searched_only_where_it_is_new():
    known, clean, searched = KnownBodies(min_bytes=0), CleanParts(), []

    def search(raw: bytes, parsed: object) -> tuple[bytes, object]:
        searched.append(raw)
        return raw, parsed

    history = [{"role": "user", "content": f"turn {n}"} for n in range(5)]
    for turn in range(3):
        history.append({"role": "user", "content": f"new {turn}"})
        raw = orjson.dumps({"model": "m", "messages": history})
        parsed, layout = known.parse(raw, "anthropic.messages")
        searched.clear()
        assert clean.searched(raw, parsed, layout, (), search) == (raw, parsed)
        layout.chain()  # as the log's deltas do
    assert searched == [b'{"role":"user","content":"new 2"}']
