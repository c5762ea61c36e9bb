"""However the relay groups a stream's whole events into `feed` calls, and wherever the
hold limit falls, a gated stream comes out the same: the one the answer's parts say, its
refused call replaced and its passing call as it came."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taplog.proxy.tool_gate import stream_gate
from tests.proxy.tool_gate.answers import (
    Called,
    Rules,
    Said,
    anthropic_stream,
    chat_stream,
    feed,
    gemini_stream,
    responses_stream,
)

STREAMS = {
    "anthropic.messages": anthropic_stream,
    "openai.chat": chat_stream,
    "openai.responses": responses_stream,
    "gemini.generate": gemini_stream,
}
WORDS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)


@st.composite
def answers(draw: st.DrawFn, api: str) -> list:
    """Text, then a refused call and a passing one whose long arguments stream in many
    deltas (a freeform tool's input, for Responses, as often as not), in either order."""
    refused = Called(
        "call_rm",
        "exec_command",
        orjson.dumps({"cmd": "rm -rf " + draw(WORDS)}).decode(),
        pieces=draw(st.integers(1, 8)),
    )
    content = draw(WORDS) * draw(st.integers(10, 200))
    passing = Called(
        "call_write",
        "write_file",
        orjson.dumps({"path": draw(WORDS), "content": content}).decode(),
        pieces=draw(st.integers(10, 60)),
        custom=api == "openai.responses" and draw(st.booleans()),
    )
    calls = [refused, passing] if draw(st.booleans()) else [passing, refused]
    return [Said(draw(WORDS), pieces=draw(st.integers(1, 5))), *calls]


@pytest.mark.parametrize("api", list(STREAMS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_batching_and_any_hold_limit_give_the_expected_stream(api, data):
    parts = data.draw(answers(api))
    eol = data.draw(st.sampled_from([b"\n", b"\r\n"]))
    limit = data.draw(st.one_of(st.integers(1, 4000), st.just(1 << 20)))
    rules = Rules(deny=["exec_command"])
    vendor = STREAMS[api](parts, eol)
    batches = data.draw(st.lists(st.integers(0, 8), max_size=len(vendor)))

    at_once = stream_gate(api, rules, limit)
    whole = feed(at_once, vendor)
    batched = stream_gate(api, rules, limit)
    pieces = feed(batched, vendor, batches)

    assert b"".join(pieces) == b"".join(whole) == b"".join(STREAMS[api](rules.applied(parts), eol))
    assert batched.decisions == at_once.decisions
    assert [(d.action, d.call.name) for d in at_once.decisions] == [("deny", "exec_command")]
    assert batched.changed
