"""The gate on OpenAI Responses answers: refused `function_call` and `custom_tool_call`
items become message items at their output index, in the stream and in its terminal
response alike, with sequence numbers kept consecutive; what openai's
`ResponseStreamState` builds of the result."""

from __future__ import annotations

import openai
import orjson

from taplog.proxy.tool_gate import gate_answer, stream_gate
from tests.builders import a_response
from tests.proxy.tool_gate.answers import (
    Called,
    Rules,
    Said,
    feed,
    output_items,
    responses_stream,
    responses_whole,
    sse,
)
from tests.proxy.tool_gate.sdks import responses_final

API = "openai.responses"
LIMIT = 1024 * 1024
RM = Called("call_rm", "exec_command", '{"cmd":"rm -rf ~/work","workdir":"/work"}', pieces=6)
LS = Called("call_ls", "exec_command", '{"cmd":"ls -la","workdir":"/work"}', pieces=8)
PATCH_TEXT = "*** Begin Patch\n*** Delete File: src/main.py\n*** End Patch\n"
PATCH = Called("call_patch", "apply_patch", PATCH_TEXT, pieces=5, custom=True)


def rm_rules() -> Rules:
    """Codex's shell tool refused for `rm -rf` only: by its arguments, as a real rule is."""
    return Rules(deny=["exec_command"], only="rm -rf")


def test_a_refused_call_alone_becomes_a_message_item():
    parts = [Said("Cleaning up."), RM]
    rules = rm_rules()
    gate = stream_gate(API, rules, LIMIT)

    out = feed(gate, responses_stream(parts))

    assert out == responses_stream(rules.applied(parts))
    response = responses_final(out)
    assert [item["type"] for item in response["output"]] == ["message", "message"]
    refusal = response["output"][1]
    assert refusal["id"] == "msg_call_rm"
    assert "refused this call to exec_command" in refusal["content"][0]["text"]
    assert [(d.action, d.call.call_id, d.call.arguments) for d in gate.decisions] == [
        ("deny", "call_rm", RM.arguments)
    ]
    assert gate.changed


def test_of_parallel_calls_the_refused_one_is_replaced_and_the_other_passes():
    parts = [Said("Two."), RM, LS]
    rules = rm_rules()

    out = feed(stream_gate(API, rules, LIMIT), responses_stream(parts))

    assert out == responses_stream(rules.applied(parts))  # LS renumbered, nothing else
    response = responses_final(out)
    assert [item["type"] for item in response["output"]] == ["message", "message", "function_call"]
    assert response["output"][2]["arguments"] == LS.arguments


def test_a_call_before_the_refused_one_passes_byte_for_byte():
    parts = [LS, RM]
    vendor = responses_stream(parts)
    rules = rm_rules()

    out = feed(stream_gate(API, rules, LIMIT), vendor)

    assert out == responses_stream(rules.applied(parts))
    ls_events = [b for b in vendor if b'"output_index":0' in b]
    assert len(ls_events) > 5 and all(b in out for b in ls_events)


def test_a_freeform_apply_patch_is_judged_on_its_raw_input_and_replaced():
    parts = [Said("Patching."), PATCH, LS]
    rules = Rules(deny=["apply_patch"])

    out = feed(stream_gate(API, rules, LIMIT), responses_stream(parts))

    assert out == responses_stream(rules.applied(parts))
    assert [(c.name, c.arguments) for c in rules.seen] == [
        ("apply_patch", PATCH_TEXT),
        ("exec_command", LS.arguments),
    ]
    output = responses_final(out)["output"]
    assert [item["type"] for item in output] == ["message", "message", "function_call"]


def test_a_passing_freeform_call_streams_as_it_came():
    vendor = responses_stream([PATCH])
    gate = stream_gate(API, Rules(flag=["apply_patch"]), LIMIT)

    assert feed(gate, vendor) == vendor
    assert [d.action for d in gate.decisions] == ["flag"] and not gate.changed
    assert responses_final(vendor)["output"][0]["input"] == PATCH_TEXT


def test_without_a_refusal_a_crlf_stream_passes_byte_for_byte():
    vendor = responses_stream([Said("Hi."), RM, PATCH, LS], eol=b"\r\n")
    gate = stream_gate(API, Rules(deny=["write_file"]), LIMIT)

    assert feed(gate, vendor, batches=[1] * len(vendor)) == vendor
    assert not gate.changed and gate.decisions == []


def test_a_call_over_the_hold_limit_is_judged_on_what_came_and_streams_on():
    huge = Called("call_big", "write_file", orjson.dumps({"text": "q" * 40_000}).decode(), 40)
    vendor = responses_stream([huge])
    rules = Rules()
    gate = stream_gate(API, rules, 5_000)

    first = gate.feed(vendor[:20])

    assert rules.seen[0].partial and first == vendor[:20]
    assert first + gate.feed(vendor[20:]) + gate.finish() == vendor


def test_a_refused_call_over_the_hold_limit_is_replaced_at_once():
    huge = Called("call_big", "write_file", orjson.dumps({"text": "q" * 40_000}).decode(), 40)
    parts = [Said("Writing."), huge, LS]
    rules = Rules(deny=["write_file"])
    gate = stream_gate(API, rules, 5_000)
    vendor = responses_stream(parts)

    first = gate.feed(vendor[:20])

    assert b"refused this call to write_file" in b"".join(first)
    out = first + gate.feed(vendor[20:]) + gate.finish()
    assert out == responses_stream(rules.applied(parts))
    responses_final(out)
    assert gate.decisions[0].call.partial


def test_an_incomplete_response_gets_the_same_replacement():
    parts = [Said("Out of room."), RM]
    rules = rm_rules()

    def incomplete(parts: list) -> list[bytes]:
        blocks = responses_stream(parts)
        last = orjson.loads(blocks[-1].split(b"data: ", 1)[1])
        response = a_response(*output_items(parts), status="incomplete", reason="max_output_tokens")
        ended = {**last, "type": "response.incomplete", "response": response}
        return [*blocks[:-1], sse("response.incomplete", ended)]

    out = feed(stream_gate(API, rules, LIMIT), incomplete(parts))

    assert out == incomplete(rules.applied(parts))


def test_whole_answers_lose_their_refused_calls_and_keep_the_rest():
    rules = rm_rules()
    for parts in ([Said("Cleaning."), RM], [RM, LS], [LS]):
        answer = responses_whole(parts)
        before = orjson.loads(orjson.dumps(answer))

        decisions = gate_answer(API, answer, rules)

        assert answer == responses_whole(rules.applied(parts))
        openai.types.responses.Response.model_validate(answer)
        assert (answer == before) == (RM not in parts)
        assert [d.call.call_id for d in decisions] == ["call_rm"] * (RM in parts)
    patched, rules = responses_whole([PATCH]), Rules(deny=["apply_patch"])
    gate_answer(API, patched, rules)
    assert rules.seen[0].arguments == PATCH_TEXT
    assert patched == responses_whole(rules.applied([PATCH]))
    assert patched["output"][0]["type"] == "message"
