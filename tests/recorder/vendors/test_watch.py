"""The watch of a stream: whole events only, the end found exactly, in any chunking.

Real streams of the three APIs, fetched from the fake vendor, are cut at random and fed
to `StreamWatch` as taplog's relay does: it must see the end first in the chunk that
finishes the end-marker event and never before, pass on exactly the bytes it was fed
(whole events, in order), and see the answer finished once its stop reason went by.
"""

from __future__ import annotations

import random

import httpx
import pytest

from taplog.recorder.vendors.watch import StreamWatch
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

STREAMS = {
    "openai.chat": (
        "/v1/chat/completions",
        {"model": "gpt-4.1", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
        {"authorization": f"Bearer {OPENAI_KEY}"},
        b"data: [DONE]",
    ),
    "openai.responses": (
        "/v1/responses",
        {"model": "gpt-4.1", "stream": True, "input": "hi"},
        {"authorization": f"Bearer {OPENAI_KEY}"},
        b"event: response.completed",
    ),
    "anthropic.messages": (
        "/v1/messages",
        {
            "model": "claude-sonnet-4-6",
            "max_tokens": 50,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
        {"x-api-key": ANTHROPIC_KEY, "anthropic-version": "2023-06-01"},
        b"event: message_stop",
    ),
}


@pytest.mark.parametrize("api", sorted(STREAMS))
def test_the_chunk_that_finishes_the_end_marker_is_found_in_any_chunking(fake, api):
    path, body, headers, marker = STREAMS[api]
    text = "A story with a few events !events=8"
    if api == "openai.responses":
        body = {**body, "input": text}
    else:
        body = {**body, "messages": [{"role": "user", "content": text}]}
    reply = httpx.post(fake.url + path, json=body, headers=headers)
    reply.raise_for_status()
    raw = reply.content
    end = raw.index(b"\n\n", raw.index(marker)) + 2  # the end-marker event ends here
    rng = random.Random(api)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 30)))
        watch = StreamWatch(api, 16 * 1024 * 1024)
        found, passed = None, []
        for start, stop in zip([0, *cuts], [*cuts, len(raw)], strict=True):
            passed += watch.feed(raw[start:stop])
            if watch.ended and found is None:
                found = (start, stop)
        passed += watch.close()
        assert found is not None, "the end marker was never found"
        assert found[0] < end <= found[1]  # the chunk that finishes the end-marker event
        assert b"".join(passed) == raw  # whole events, every byte, in order
        assert watch.failure is None


@pytest.mark.parametrize("api", ["openai.chat", "anthropic.messages"])
def test_an_answer_is_finished_once_its_stop_reason_went_by(fake, api):
    path, body, headers, marker = STREAMS[api]
    body = {**body, "messages": [{"role": "user", "content": "hello !events=3"}]}
    raw = httpx.post(fake.url + path, json=body, headers=headers).content
    without_end = raw[: raw.index(marker)]
    watch = StreamWatch(api, 16 * 1024 * 1024)
    seen = []
    for event in without_end.split(b"\n\n")[:-1]:
        watch.feed(event + b"\n\n")
        seen.append(watch.finished)
    assert seen[-1] is True and seen[0] is False
    assert not watch.ended


@pytest.mark.parametrize("api", sorted(STREAMS))
def test_a_malformed_event_stops_the_watch_before_it(api):
    name = b"event: content_block_delta\n" if api == "anthropic.messages" else b""
    data = b'{"choices": []}' if api == "openai.chat" else b'{"type": "x"}'
    good = name + b"data: " + data + b"\n\n"
    watch = StreamWatch(api, 1024)
    passed = watch.feed(good + name + b"data: {not json\n\n" + good)
    assert passed == [good]
    assert watch.failure is not None and "malformed" in watch.failure
