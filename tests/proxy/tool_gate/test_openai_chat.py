"""The gate on OpenAI Chat Completions answers: refused tool calls leave, their refusal
comes as content, the calls left are renumbered 0..n-1 and the finish reason fits; what
openai's `ChatCompletionStreamState` builds of the result."""

from __future__ import annotations

import itertools

import openai
import orjson

from taplog.proxy.tool_gate import gate_answer, stream_gate
from tests.proxy.tool_gate.answers import (
    USAGE_CHUNK,
    Called,
    Rules,
    Said,
    chat_chunks,
    chat_stream,
    chat_whole,
    chunk,
    feed,
    sse,
)
from tests.proxy.tool_gate.sdks import chat_completion

API = "openai.chat"
LIMIT = 1024 * 1024
RM = Called("call_rm", "exec_command", '{"cmd":"rm -rf ~/work"}')
LS = Called("call_ls", "list_files", '{"path":"/work","depth":2}', pieces=10)
DONE = b"data: [DONE]\n\n"


def test_a_refused_call_alone_becomes_content_and_the_choice_stops():
    parts = [Said("Cleaning up."), RM]
    rules = Rules(deny=["exec_command"])
    gate = stream_gate(API, rules, LIMIT)

    out = feed(gate, chat_stream(parts))

    assert out == chat_stream(rules.applied(parts))
    message = chat_completion(out)["choices"][0]
    assert message["finish_reason"] == "stop"
    assert "tool_calls" not in message["message"]
    assert message["message"]["content"].startswith("Cleaning up.\n\ntaplog's tool policy refused")
    assert [(d.action, d.call.arguments, d.call.call_id) for d in gate.decisions] == [
        ("deny", RM.arguments, "call_rm")
    ]
    assert gate.changed


def test_the_calls_after_a_refused_one_are_renumbered_and_pass_otherwise_unchanged():
    parts = [Said("Two."), RM, LS]
    rules = Rules(deny=["exec_command"])

    out = feed(stream_gate(API, rules, LIMIT), chat_stream(parts))

    assert out == chat_stream(rules.applied(parts))
    choice = chat_completion(out)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert (call["id"], call["function"]["arguments"]) == ("call_ls", LS.arguments)


def test_a_call_before_the_refused_one_passes_byte_for_byte():
    parts = [LS, RM]
    vendor = chat_stream(parts)
    rules = Rules(deny=["exec_command"])

    out = feed(stream_gate(API, rules, LIMIT), vendor)

    assert out == chat_stream(rules.applied(parts))
    ls_chunks = [b for b in vendor if b'"tool_calls":[{"index":0,' in b]
    assert len(ls_chunks) > 5 and all(b in out for b in ls_chunks)


def test_a_flagged_call_changes_nothing_but_is_recorded():
    vendor = chat_stream([Said("Listing."), LS])
    gate = stream_gate(API, Rules(flag=["list_files"]), LIMIT)

    assert feed(gate, vendor) == vendor
    assert [(d.action, d.call.name) for d in gate.decisions] == [("flag", "list_files")]
    assert not gate.changed


def test_without_a_refusal_a_crlf_stream_passes_byte_for_byte():
    vendor = chat_stream([Said("Hi."), RM, LS], eol=b"\r\n")
    gate = stream_gate(API, Rules(deny=["write_file"]), LIMIT)

    assert feed(gate, vendor, batches=[1] * len(vendor)) == vendor
    assert not gate.changed and gate.decisions == []


def test_a_call_over_the_hold_limit_is_judged_on_what_came_and_streams_on():
    huge = Called("call_big", "write_file", orjson.dumps({"text": "z" * 50_000}).decode(), 50)
    vendor = chat_stream([huge])
    rules = Rules()
    gate = stream_gate(API, rules, 6_000)

    first = gate.feed(vendor[:20])

    assert rules.seen[0].partial and first == vendor[:20]
    assert first + gate.feed(vendor[20:]) + gate.finish() == vendor


def test_a_refused_call_over_the_hold_limit_is_replaced_at_once():
    huge = Called("call_big", "exec_command", orjson.dumps({"cmd": "z" * 50_000}).decode(), 50)
    parts = [Said("Running."), huge]
    rules = Rules(deny=["exec_command"])
    gate = stream_gate(API, rules, 6_000)
    vendor = chat_stream(parts)

    first = gate.feed(vendor[:20])

    assert b"refused this call to exec_command" in b"".join(first)
    assert first + gate.feed(vendor[20:]) + gate.finish() == chat_stream(rules.applied(parts))
    assert gate.decisions[0].call.partial


def test_each_choice_is_gated_on_its_own_calls():
    first, second = chat_chunks([Said("A."), RM], 0), chat_chunks([Said("B."), LS], 1)
    mixed = [c for pair in itertools.zip_longest(first, second) for c in pair if c is not None]
    vendor = [sse(None, c) for c in [*mixed, USAGE_CHUNK]] + [DONE]
    rules = Rules(deny=["exec_command"])

    out = feed(stream_gate(API, rules, LIMIT), vendor)

    choices = chat_completion(out)["choices"]
    assert choices[0]["finish_reason"] == "stop" and "tool_calls" not in choices[0]["message"]
    assert "refused this call to exec_command" in choices[0]["message"]["content"]
    assert choices[1]["finish_reason"] == "tool_calls"
    assert choices[1]["message"]["tool_calls"][0]["function"]["arguments"] == LS.arguments
    second_blocks = [sse(None, c) for c in second]
    assert [b for b in out if b in second_blocks] == second_blocks  # all, in order, as they came


def test_a_whole_call_and_its_finish_in_one_chunk():
    whole = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "exec_command", "arguments": '{"cmd":"rm x"}'},
    }
    vendor = [
        sse(
            None, chunk({"role": "assistant", "content": None, "tool_calls": [whole]}, "tool_calls")
        ),
        DONE,
    ]

    out = feed(stream_gate(API, Rules(deny=["exec_command"]), LIMIT), vendor)

    [choice] = orjson.loads(out[0].removeprefix(b"data: "))["choices"]
    assert choice["finish_reason"] == "stop"
    assert choice["delta"]["content"].startswith("taplog's tool policy refused")
    assert "tool_calls" not in choice["delta"] and out[1] == DONE


def test_two_refusals_in_a_choice_are_two_paragraphs():
    parts = [RM, Called("call_rm2", "exec_command", '{"cmd":"rm -rf /"}')]
    rules = Rules(deny=["exec_command"])

    out = feed(stream_gate(API, rules, LIMIT), chat_stream(parts))

    content = chat_completion(out)["choices"][0]["message"]["content"]
    assert content.count("refused this call") == 2 and "run.\n\ntaplog" in content


def test_whole_answers_lose_their_refused_calls_and_keep_the_rest():
    rules = Rules(deny=["exec_command"], flag=["list_files"])
    cases = [[Said("Cleaning."), RM], [RM, LS], [Said("Listing."), LS]]
    for parts in cases:
        answer = chat_whole(parts)
        before = orjson.loads(orjson.dumps(answer))

        decisions = gate_answer(API, answer, rules)

        assert answer == chat_whole(rules.applied(parts))
        assert [d.call.name for d in decisions] == [p.name for p in parts if isinstance(p, Called)]
        openai.types.chat.ChatCompletion.model_validate(answer)
        if not any(d.action == "deny" for d in decisions):
            assert answer == before
    alone = chat_whole([Said("Cleaning."), RM])
    gate_answer(API, alone, rules)
    assert alone["choices"][0]["finish_reason"] == "stop"


def test_a_custom_tool_call_in_a_whole_answer_is_judged_on_its_input():
    custom = {"id": "call_c", "type": "custom", "custom": {"name": "apply_patch", "input": "*** x"}}
    answer = chat_whole([Said("Patching.")])
    answer["choices"][0]["message"]["tool_calls"] = [custom]
    answer["choices"][0]["finish_reason"] = "tool_calls"
    rules = Rules(deny=["apply_patch"])

    [decision] = gate_answer(API, answer, rules)

    assert (decision.call.name, decision.call.arguments) == ("apply_patch", "*** x")
    assert "tool_calls" not in answer["choices"][0]["message"]
    assert answer["choices"][0]["finish_reason"] == "stop"
