"""The chunk that completes an answer is the one held back: found exactly, in any chunking.

Real streams of the three APIs, fetched from the fake vendor, are cut at random and fed to
`EndGuard` as taplog's forwarding loop does: it must answer True first for the chunk that
finishes the end-marker event, and never before (a byte test skips parsing most events).
"""

from __future__ import annotations

import random

import httpx
import pytest
from multidict import CIMultiDict

from proxy.durable import EndGuard
from tests.conftest import ANTHROPIC_KEY, OPENAI_KEY

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
    content_type = CIMultiDict({"content-type": reply.headers["content-type"]})
    rng = random.Random(api)
    for _ in range(200):
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, 30)))
        guard = EndGuard(api, content_type, 16 * 1024 * 1024)
        found = None
        for start, stop in zip([0, *cuts], [*cuts, len(raw)], strict=True):
            if guard.completes(raw[start:stop]):
                found = stop
                break
        assert found is not None, "the end marker was never found"
        assert start < end <= found  # the chunk that finishes the end-marker event
