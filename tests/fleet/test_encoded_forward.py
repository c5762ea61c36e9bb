"""A call sent with a Content-Encoding to an instance that does not own its session goes
on to the owner as the client sent it (`proxy.coordination.forward`): the owner decodes
its own copy, records it, and the vendor gets the client's bytes. Two `taplog serve`
instances and a real Redis."""

from __future__ import annotations

import openai

from taplog.recorder.store.reader import read_all
from tests.fakes.encoded import Encoding, encoding_sdk
from tests.fakes.engines import RedisServer
from tests.fakes.harness import model_requests, serve_on_fake
from tests.fakes.keys import OPENAI_KEY


def test_an_encoded_call_reaches_its_sessions_owner_and_the_vendor_as_sent(fake, tmp_path):
    messages = [{"role": "user", "content": "owned elsewhere"}]
    with RedisServer(tmp_path / "redis") as redis:
        fleet = ("--coordination", redis.url, "--fsync", "always")
        owner = serve_on_fake(fake, tmp_path / "owner", "--instance", "owner", *fleet)
        other = serve_on_fake(fake, tmp_path / "other", "--instance", "other", *fleet)
        try:
            session = {"X-Taplog-Session": "owned-1"}
            first = openai.OpenAI(
                base_url=owner.openai_base, api_key=OPENAI_KEY, default_headers=session
            )
            first.chat.completions.create(model="gpt-4.1", messages=messages)
            encoding = Encoding("gzip")
            sent_on = encoding_sdk("openai", other.url, encoding).with_options(
                default_headers=session
            )
            answer = sent_on.chat.completions.create(model="gpt-4.1", messages=messages)
        finally:
            for instance in (owner, other):
                code, err = instance.stop()
                assert code == 0, err
    assert answer.choices[0].message.content == "Echo: owned elsewhere"
    received = model_requests(fake)[-1]
    assert received.body == encoding.sent[-1] and received.headers["content-encoding"] == "gzip"
    (events,) = read_all(tmp_path / "owner").values()
    requests = [e for e in events if e["type"] == "llm.request"]
    assert [r.get("content_encoding") for r in requests] == [None, "gzip"]
    assert requests[1]["body"]["messages"] == messages
    assert read_all(tmp_path / "other") == {}
