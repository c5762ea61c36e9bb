"""The gate on Anthropic Messages answers: refused `tool_use` blocks become text blocks at
their index, the turn ends when no call is left, the rest passes byte for byte; what the
anthropic SDK builds of the result."""

from __future__ import annotations

import anthropic
import orjson

from taplog.proxy.tool_gate import gate_answer, stream_gate
from tests.builders import block_start, block_stop, message_delta, message_start
from tests.proxy.tool_gate.answers import (
    Called,
    Rules,
    Said,
    anthropic_stream,
    anthropic_whole,
    feed,
    sse,
)
from tests.proxy.tool_gate.sdks import anthropic_message

API = "anthropic.messages"
LIMIT = 1024 * 1024
RM = Called("toolu_rm", "Bash", '{"command":"rm -rf ~/work"}')
READ = Called("toolu_read", "Read", '{"file_path":"/home/dev/notes.txt","limit":400}', pieces=12)


def test_a_refused_call_alone_becomes_text_and_the_turn_ends():
    parts = [Said("I will clean up."), RM]
    rules = Rules(deny=["Bash"])
    gate = stream_gate(API, rules, LIMIT)

    out = feed(gate, anthropic_stream(parts))

    assert out == anthropic_stream(rules.applied(parts))
    message = anthropic_message(out)
    assert [block["type"] for block in message["content"]] == ["text", "text"]
    assert "refused this call to Bash (rule no-Bash)" in message["content"][1]["text"]
    assert message["stop_reason"] == "end_turn"
    assert [(d.action, d.call.name, d.call.partial) for d in gate.decisions] == [
        ("deny", "Bash", False)
    ]
    assert gate.decisions[0].call.arguments == RM.arguments
    assert gate.decisions[0].call.call_id == "toolu_rm"
    assert gate.changed


def test_of_parallel_calls_the_refused_one_is_replaced_and_the_other_passes_as_it_came():
    parts = [Said("Two things."), RM, READ]
    rules = Rules(deny=["Bash"])
    vendor = anthropic_stream(parts)

    out = feed(stream_gate(API, rules, LIMIT), vendor)

    assert out == anthropic_stream(rules.applied(parts))
    read_events = [b for b in vendor if b'"index":2' in b]
    assert read_events and all(b in out for b in read_events)  # byte for byte
    message = anthropic_message(out)
    assert [block["type"] for block in message["content"]] == ["text", "text", "tool_use"]
    read = message["content"][2]
    assert (read["id"], read["name"]) == ("toolu_read", "Read")
    assert read["input"] == {"file_path": "/home/dev/notes.txt", "limit": 400}
    assert message["stop_reason"] == "tool_use"


def test_a_flagged_call_changes_nothing_but_is_recorded():
    vendor = anthropic_stream([Said("Reading."), READ])
    gate = stream_gate(API, Rules(flag=["Read"]), LIMIT)

    assert feed(gate, vendor) == vendor
    assert [(d.action, d.rule) for d in gate.decisions] == [("flag", "watch-Read")]
    assert not gate.changed


def test_without_a_refusal_a_crlf_stream_passes_byte_for_byte():
    vendor = anthropic_stream([Said("Hi."), RM, READ], eol=b"\r\n")
    gate = stream_gate(API, Rules(deny=["Write"]), LIMIT)

    assert feed(gate, vendor, batches=[1] * len(vendor)) == vendor
    assert not gate.changed and gate.decisions == []


def test_a_call_over_the_hold_limit_is_judged_on_what_came_and_passes_on_as_it_streams():
    huge = Called("toolu_big", "Write", orjson.dumps({"content": "x" * 60_000}).decode(), 60)
    vendor = anthropic_stream([Said("Writing."), huge])
    rules = Rules()
    gate = stream_gate(API, rules, 8_000)

    first = gate.feed(vendor[:20])  # the text, the call's start and its first 11 deltas

    assert rules.seen[0].partial and len(rules.seen[0].arguments) < len(huge.arguments)
    assert first == vendor[:20]  # released before its end came
    assert first + gate.feed(vendor[20:]) + gate.finish() == vendor


def test_a_refused_call_over_the_hold_limit_is_replaced_at_once_and_its_rest_dropped():
    huge = Called("toolu_big", "Bash", orjson.dumps({"command": "y" * 60_000}).decode(), 60)
    parts = [Said("Running."), huge]
    rules = Rules(deny=["Bash"])
    gate = stream_gate(API, rules, 8_000)
    vendor = anthropic_stream(parts)

    first = gate.feed(vendor[:20])

    assert b"refused this call to Bash" in b"".join(first)
    assert first + gate.feed(vendor[20:]) + gate.finish() == anthropic_stream(rules.applied(parts))
    assert gate.decisions[0].call.partial


def test_a_call_still_held_when_the_body_ends_is_judged_partial():
    parts = [Said("Hi."), RM]
    rules = Rules(deny=["Bash"])
    vendor = anthropic_stream(parts)
    gate = stream_gate(API, rules, LIMIT)

    assert gate.feed(vendor[:-3]) == vendor[:7]  # the text; the call, cut before its stop, held
    end = gate.finish()

    assert gate.decisions[0].call.partial
    assert end == anthropic_stream(rules.applied(parts))[7:11]  # its text block, the ping


def test_a_call_whose_input_came_whole_in_its_start_is_judged_on_that_input():
    start = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    events = [
        message_start(),
        block_start(0, start),
        block_stop(0),
        message_delta("tool_use"),
        {"type": "message_stop"},
    ]
    rules = Rules(flag=["Bash"])

    feed(stream_gate(API, rules, LIMIT), [sse(e["type"], e) for e in events])

    assert rules.seen[0].arguments == '{"command":"ls"}'


def test_server_tools_are_left_alone():
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    events = [message_start(), block_start(0, search), block_stop(0), message_delta("end_turn")]
    vendor = [sse(e["type"], e) for e in events]
    rules = Rules(deny=["web_search"])

    assert feed(stream_gate(API, rules, LIMIT), vendor) == vendor
    assert rules.seen == []


def test_whole_answers_lose_their_refused_calls_and_keep_the_rest():
    alone = anthropic_whole([Said("Cleaning."), RM])
    both = anthropic_whole([Said("Two."), RM, READ])
    flagged = anthropic_whole([READ])
    rules = Rules(deny=["Bash"], flag=["Read"])

    assert [d.action for d in gate_answer(API, alone, rules)] == ["deny"]
    assert [d.action for d in gate_answer(API, both, rules)] == ["deny", "flag"]
    unchanged = orjson.loads(orjson.dumps(flagged))
    assert [d.action for d in gate_answer(API, flagged, rules)] == ["flag"]

    assert alone == anthropic_whole(rules.applied([Said("Cleaning."), RM]))
    assert alone["stop_reason"] == "end_turn"
    assert both == anthropic_whole(rules.applied([Said("Two."), RM, READ]))
    assert both["stop_reason"] == "tool_use"
    assert flagged == unchanged
    for answer in (alone, both):
        anthropic.types.Message.model_validate(answer)
