"""Gemini's answers read back: a stream folded into the answer `generateContent` gives, its
summary, its function calls and the results that answer them, and where a stream ends."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from taplog.recorder.events import now_ts
from taplog.recorder.toolevents import ToolLedger
from taplog.recorder.vendors.gemini import wire
from taplog.recorder.vendors.sse import MalformedEvent, SseSplitter, parse_block
from tests.fakes.vendor import Gemini, build_answer, parse_directives

MODEL = "gemini-2.5-flash"


def _answered(prompt: str) -> tuple[dict, list[bytes]]:
    """The fake Gemini's whole answer to `prompt` and the same answer streamed."""
    body = {"contents": [{"role": "user", "parts": [{"text": prompt}]}], "model": MODEL}
    raw = orjson.dumps(body)
    api = Gemini(stream=True)
    answer = build_answer(
        hashlib.sha256(raw).digest(), len(raw), api.transcript(body), parse_directives(prompt), True
    )
    return api.render(answer, body), api.events(answer, body)


def _events(stream: list[bytes]):
    splitter = SseSplitter()
    blocks = [block for chunk in stream for block in splitter.feed(chunk)]
    return [event for event in map(parse_block, blocks) if event is not None]


@pytest.mark.parametrize(
    "prompt",
    [
        "Hello there !events=4",
        "Think first !thinking !events=3",
        "Weather and time? !plan=get_weather+get_time !preamble",
        "Check it !plan=get_weather !thinking",
    ],
)
def test_a_stream_folds_into_the_answer_generate_content_gives(prompt):
    whole, stream = _answered(prompt)
    assert len(stream) > 1
    folded = wire.reassemble(_events(stream))
    assert folded.complete and folded.error is None and folded.unparsed == 0
    assert folded.body == whole


def test_a_signature_stays_on_the_part_it_came_on():
    """Google's rule: a signed part is never joined with another; a signature that comes
    last, on an empty text part, stays there."""
    chunks = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "lo"}]}}]},
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [{"text": "", "thoughtSignature": "c2ln"}],
                    },
                    "finishReason": "STOP",
                }
            ],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2},
        },
    ]
    stream = [b"data: " + orjson.dumps(chunk) + b"\r\n\r\n" for chunk in chunks]
    folded = wire.reassemble(_events(stream))
    assert folded.body["candidates"][0]["content"]["parts"] == [
        {"text": "Hello"},
        {"text": "", "thoughtSignature": "c2ln"},
    ]
    assert folded.body["usageMetadata"] == {"promptTokenCount": 3, "candidatesTokenCount": 2}


def test_the_summary_counts_thoughts_as_output_and_cached_tokens_as_input():
    body = {
        "candidates": [{"content": {"parts": [{"text": "ok"}]}, "finishReason": "MAX_TOKENS"}],
        "usageMetadata": {
            "promptTokenCount": 120,
            "cachedContentTokenCount": 100,
            "candidatesTokenCount": 7,
            "thoughtsTokenCount": 30,
            "totalTokenCount": 157,
        },
        "modelVersion": MODEL,
        "responseId": "r-1",
    }
    found = wire.summarize(body)
    assert (found.input_tokens, found.cached_tokens) == (120, 100)
    assert (found.output_tokens, found.reasoning_tokens) == (37, 30)
    assert (found.finish_reason, found.model, found.response_id) == ("MAX_TOKENS", MODEL, "r-1")
    assert wire.summarize({}).output_tokens is None


def _turn(*parts: dict, role: str = "model") -> dict:
    return {"role": role, "parts": list(parts)}


def _call(name: str, path: str, **given: str) -> dict:
    return {"functionCall": {**given, "name": name, "args": {"path": path}}}


def _result(name: str, output: str, **given: str) -> dict:
    return {"functionResponse": {**given, "name": name, "response": {"output": output}}}


def test_each_result_pairs_with_the_call_it_answers_whatever_ids_the_client_gives():
    """Calls without ids (older models), a result id the client made up for one (the Gemini
    CLI), results without ids (an SDK user), ids the API gave: each result is posted once,
    against its call, however often the history is resent."""
    tools, session = ToolLedger(), "s"

    def answer(exchange: str, *parts: dict) -> tuple[dict, list]:
        body = {"candidates": [{"content": _turn(*parts)}], "responseId": f"resp-{exchange}"}
        event = {"type": "llm.response", "session": session, "exchange": exchange, "ts": now_ts()}
        return _turn(*parts), tools.asked(event, wire.tool_calls(body), wire.NORMAL_STOPS)

    def request(exchange: str, contents: list) -> list:
        event = {"type": "llm.request", "session": session, "exchange": exchange, "ts": now_ts()}
        return tools.results(event, wire.tool_results({"contents": contents}))

    prompt = _turn({"text": "read a and b, then run"}, role="user")
    _, pres = answer("ex1", _call("read_file", "a"), _call("read_file", "b"))
    kept = _turn(  # as the CLI keeps it: with the ids it made up
        _call("read_file", "a", id="read_file_17_0"), _call("read_file", "b", id="read_file_17_1")
    )
    results = _turn(
        _result("read_file", "A", id="read_file_17_0"), _result("read_file", "B"), role="user"
    )
    posts = request("ex2", [prompt, kept, results])
    assert (
        [p["call_id"] for p in posts]
        == [p["call_id"] for p in pres]
        == ["call_resp-ex1_0", "call_resp-ex1_1"]
    )
    assert [p["result"] for p in posts] == [{"output": "A"}, {"output": "B"}]
    assert posts[0]["result_id"] == "read_file_17_0" and "result_id" in posts[1]

    second, more = answer("ex3", _call("run", "x", id="call-7"))
    ran = _turn(_result("run", "ran", id="call-7"), role="user")
    posts = request("ex4", [prompt, kept, results, second, ran])  # the history resent
    assert [p["call_id"] for p in posts] == [more[0]["call_id"]] == ["call-7"]
    assert "result_id" not in posts[0]
    assert request("ex5", [prompt, kept, results, second, ran]) == []
    assert tools.pending == {}


def test_a_stream_ends_with_its_finish_reason_and_fails_on_an_error():
    progress = wire.Progress()
    progress.see(None, b'{"candidates": [{"content": {"parts": [{"text": "a"}]}, "index": 0}]}')
    assert not progress.ended
    progress.see(None, b'{"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]}')
    assert progress.ended and progress.finished and progress.error is None

    blocked = wire.Progress()
    blocked.see(None, b'{"promptFeedback": {"blockReason": "SAFETY"}}')
    assert blocked.ended

    failing = wire.Progress()
    failing.see(None, b'{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}')
    assert failing.error["error"]["code"] == 503 and not failing.ended
    with pytest.raises(MalformedEvent):
        wire.Progress().see(None, b"{not json")
