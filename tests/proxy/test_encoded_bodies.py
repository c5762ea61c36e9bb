"""Request bodies sent with a Content-Encoding: forwarded as they came, recorded decoded.

The official SDKs send through a transport that compresses their bodies (as an agent
configured so does) to a fake vendor that honours the header and decodes the body
itself: it answers only when the bytes are what the header says. The log holds the
decoded call under its API; what taplog cannot decode, or what decodes past
`--max-body-mb`, is refused in the client's own error shape before any vendor hears
of it. A body taplog rewrites (failover) goes as plain JSON with headers that say so.
"""

from __future__ import annotations

import anthropic
import httpx
import openai
import orjson
import pytest

from taplog.recorder.bodies import decode_body
from tests.fakes.clients import STORY_ANSWER, STORY_PROMPT, scrape
from tests.fakes.encoded import COMPRESS, Encoding, encoding_sdk
from tests.fakes.harness import FAILOVER_RULES, model_requests, serve_replay, start_on_fake
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY
from tests.fakes.vendor import decoded_request

CODINGS = ("gzip", "deflate", "br", "zstd")


def _requests(taplog, answers: int = 1) -> list[dict]:
    """Every llm.request logged, once `answers` calls are over."""
    sessions = taplog.wait_answers(answers)
    found = [e for events in sessions.values() for e in events if e["type"] == "llm.request"]
    return sorted(found, key=lambda e: (e["ts"], e["attempt"]))


def _chat(text: str) -> dict:
    return {"model": "gpt-4.1", "messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize("coding", CODINGS)
def test_an_encoded_body_reaches_the_vendor_as_sent_and_is_logged_decoded(taplog, fake, coding):
    encoding = Encoding(coding)
    oai = encoding_sdk("openai", taplog.url, encoding)
    answer = oai.chat.completions.create(**_chat(f"squeezed with {coding}"))
    assert answer.choices[0].message.content == f"Echo: squeezed with {coding}"
    received = model_requests(fake)[-1]
    assert received.body == encoding.sent[-1]  # byte for byte, with its header
    assert received.headers["content-encoding"] == coding
    (request,) = _requests(taplog)
    assert request["api"] == "openai.chat" and request["model"] == "gpt-4.1"
    assert request["body"]["messages"] == _chat(f"squeezed with {coding}")["messages"]
    assert request["content_encoding"] == coding
    assert request["headers"]["content-encoding"] == coding
    assert decode_body(request) == decoded_request(received.body, coding)


def test_stacked_codings_are_undone_in_reverse(taplog, fake):
    encoding = Encoding("gzip, br")
    oai = encoding_sdk("openai", taplog.url, encoding)
    assert oai.chat.completions.create(**_chat("twice")).choices[0].message.content == "Echo: twice"
    assert model_requests(fake)[-1].body == encoding.sent[-1]
    (request,) = _requests(taplog)
    assert request["content_encoding"] == "gzip, br" and request["body"]["model"] == "gpt-4.1"


def test_an_encoded_stream_call_streams_and_is_logged_as_its_api(taplog, fake):
    encoding = Encoding("zstd")
    ant = encoding_sdk("anthropic", taplog.url, encoding)
    messages = [{"role": "user", "content": "a stream, squeezed !events=4"}]
    with ant.messages.stream(model="claude-sonnet-4-5", max_tokens=64, messages=messages) as s:
        text = "".join(s.text_stream)
    assert text == "Echo: a stream, squeezed"
    assert model_requests(fake)[-1].body == encoding.sent[-1]
    sessions = taplog.wait_answers(1)
    events = [e for found in sessions.values() for e in found]
    request = next(e for e in events if e["type"] == "llm.request")
    response = next(e for e in events if e["type"] == "llm.response")
    assert request["api"] == "anthropic.messages" and request["stream"] is True
    assert request["model"] == "claude-sonnet-4-5" and request["body"]["messages"] == messages
    assert response["stream"] is True and response["outcome"] == "ok"
    assert response["body"]["content"][0]["text"] == "Echo: a stream, squeezed"


def test_an_encoded_turn_joins_the_session_of_the_plain_one_before(taplog, oai):
    first = [{"role": "user", "content": "remember me"}]
    said = oai.chat.completions.create(model="gpt-4.1", messages=first).choices[0].message
    second = [
        *first,
        {"role": "assistant", "content": said.content},
        {"role": "user", "content": "and now?"},
    ]
    squeezed = encoding_sdk("openai", taplog.url, Encoding("gzip"))
    squeezed.chat.completions.create(model="gpt-4.1", messages=second)
    sessions = taplog.wait_answers(2)
    assert len(sessions) == 1, sorted(sessions)
    (events,) = sessions.values()
    requests = [e for e in events if e["type"] == "llm.request"]
    assert [r.get("content_encoding") for r in requests] == [None, "gzip"]
    assert requests[1]["body"]["messages"][-1]["content"] == "and now?"


def test_an_encoded_body_taplog_does_not_parse_passes_through_exactly(taplog, fake):
    blob = bytes(range(256)) * 8
    wire = COMPRESS["gzip"](blob)
    reply = httpx.post(
        f"{taplog.url}/v1/files",
        content=wire,
        headers={
            "authorization": f"Bearer {OPENAI_KEY}",
            "content-type": "application/octet-stream",
            "content-encoding": "gzip",
        },
    )
    assert reply.status_code == 404  # the fake has no files endpoint
    assert (
        fake.requests[-1].body == wire and fake.requests[-1].headers["content-encoding"] == "gzip"
    )
    (request,) = _requests(taplog)
    assert request["api"] == "passthrough" and request["content_encoding"] == "gzip"
    assert decode_body(request) == blob


def test_replay_answers_an_encoded_call_from_its_plain_recording(servers, taplog, oai, fake):
    recorded = oai.chat.completions.create(**_chat("once more"))
    taplog.wait_answers(1)
    asked = len(fake.requests)
    replay = encoding_sdk("openai", serve_replay(servers, taplog.data_dir), Encoding("zstd"))
    assert replay.chat.completions.create(**_chat("once more")) == recorded
    assert len(fake.requests) == asked  # answered from the recording


# -- refused: nothing reaches the vendor, the client hears why in its own shape ---------


@pytest.mark.parametrize("coding", CODINGS)
def test_a_body_over_the_limit_once_decoded_is_refused_413(servers, fake, tmp_path, coding):
    taplog = start_on_fake(servers, fake, tmp_path / "data", max_body_mb=1)
    encoding = Encoding(coding)
    oai = encoding_sdk("openai", taplog.url, encoding)
    with pytest.raises(openai.APIStatusError) as refused:
        oai.chat.completions.create(**_chat("a" * 3 * 2**20))  # 3 MiB of one letter
    assert len(encoding.sent[-1]) < 2**20 // 10  # well under the limit as sent
    assert refused.value.status_code == 413
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "request_too_large"
    assert error["message"].startswith(
        f"taplog: request body is over the 1 MiB limit (--max-body-mb) once decoded ({coding})"
    )
    assert fake.requests == [] and taplog.sessions() == {}


def test_a_body_not_in_its_coding_is_refused_400_in_the_anthropic_shape(taplog, fake):
    ant = anthropic.Anthropic(
        base_url=taplog.url,
        api_key=ANTHROPIC_KEY,
        max_retries=0,
        default_headers={"content-encoding": "gzip"},  # the SDK's JSON, not gzip at all
    )
    with pytest.raises(anthropic.BadRequestError) as refused:
        ant.messages.create(
            model="claude-sonnet-4-5", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    body = refused.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("taplog: the request body is not valid gzip data")
    assert refused.value.response.headers["x-taplog-error"] == "bad_content_encoding"
    assert fake.requests == [] and taplog.sessions() == {}
    assert scrape(taplog).value("taplog_calls_refused_total", reason="bad_content_encoding") == 1


@pytest.mark.parametrize("coding", ["compress", "gzip, gzip, gzip, gzip, gzip"])
def test_an_unknown_coding_is_refused_400_in_the_openai_shape(taplog, fake, coding):
    reply = httpx.post(
        f"{taplog.url}/v1/chat/completions",
        content=orjson.dumps(_chat("hi")),
        headers={
            "authorization": f"Bearer {OPENAI_KEY}",
            "content-type": "application/json",
            "content-encoding": coding,
        },
    )
    assert reply.status_code == 400
    assert reply.headers["x-taplog-error"] == "unsupported_content_encoding"
    error = reply.json()["error"]
    assert error["code"] == "unsupported_content_encoding"
    assert "nothing was sent to the vendor" in error["message"]
    assert fake.requests == [] and taplog.sessions() == {}


# -- a body taplog rewrites goes as what it now is ---------------------------------------


def _plain_json(received) -> dict:
    """A request the vendor got as plain JSON, its headers saying so."""
    assert "content-encoding" not in received.headers
    assert received.headers["content-type"] == "application/json"
    assert int(received.headers["content-length"]) == len(received.body)
    return orjson.loads(received.body)


def test_a_gzipped_call_failed_over_reaches_the_other_vendor_as_plain_json(
    servers, vendors, tmp_path
):
    taplog = vendors.proxy(servers, tmp_path / "data", FAILOVER_RULES)
    vendors.openai.down = {"status": "503"}
    encoding = Encoding("gzip")
    oai = encoding_sdk("openai", taplog.url, encoding)
    answer = oai.chat.completions.create(**_chat("over to Claude"))
    assert answer.choices[0].message.content == "Echo: over to Claude"
    tried = model_requests(vendors.openai)
    assert tried and all(r.body == encoding.sent[-1] for r in tried)
    served = _plain_json(model_requests(vendors.anthropic)[-1])
    assert served["model"] == "claude-sonnet-4-6"
    requests = _requests(taplog)
    assert {r.get("content_encoding") for r in requests if r["provider"] == "openai"} == {"gzip"}
    (translated,) = [r for r in requests if r["provider"] == "anthropic"]
    assert "content_encoding" not in translated and "content-encoding" not in translated["headers"]


def test_a_gzipped_call_failed_over_to_another_model_goes_as_plain_json(servers, vendors, tmp_path):
    rules = {"fallback": [{"model": "gpt-4.1", "to": ["openai:gpt-4.1-mini"], "retries": 0}]}
    taplog = vendors.proxy(servers, tmp_path / "data", rules)
    vendors.openai.next_faults = [{"status": "503"}]
    encoding = Encoding("br")
    oai = encoding_sdk("openai", taplog.url, encoding)
    assert oai.chat.completions.create(**_chat("smaller")).choices[0].message.content == (
        "Echo: smaller"
    )
    first, second = model_requests(vendors.openai)
    assert first.body == encoding.sent[-1] and first.headers["content-encoding"] == "br"
    assert _plain_json(second)["model"] == "gpt-4.1-mini"
    rewritten = _requests(taplog)[-1]
    assert rewritten["model"] == "gpt-4.1-mini" and "content_encoding" not in rewritten


def test_a_gzipped_stream_continued_after_a_cut_goes_on_as_plain_json(servers, vendors, tmp_path):
    rule = {"model": "gpt-4.1", "to": ["openai:gpt-4.1-mini"], "retries": 0}
    taplog = vendors.proxy(
        servers, tmp_path / "data", {"fallback": [{**rule, "midstream": "continue"}]}
    )
    vendors.openai.next_faults = [{"cut": "4"}]  # the role event, then three of six deltas
    oai = encoding_sdk("openai", taplog.url, Encoding("gzip"))
    chunks = oai.chat.completions.create(**_chat(STORY_PROMPT), stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == STORY_ANSWER
    cut, continued = model_requests(vendors.openai)
    assert cut.headers["content-encoding"] == "gzip"
    sent = _plain_json(continued)
    assert sent["model"] == "gpt-4.1-mini" and sent["stream"] is True
