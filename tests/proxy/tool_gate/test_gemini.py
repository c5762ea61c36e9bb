"""The gate on Gemini answers: a refused `functionCall` part becomes a text part, its
thought signature kept; calls come whole in one chunk, so nothing is held; what
google-genai makes of the result."""

from __future__ import annotations

import orjson

from taplog.proxy.tool_gate import gate_answer, stream_gate
from tests.proxy.tool_gate.answers import (
    Called,
    Rules,
    Said,
    feed,
    gemini_chunk,
    gemini_parts,
    gemini_stream,
    gemini_whole,
    signature,
)
from tests.proxy.tool_gate.sdks import gemini_chunks

API = "gemini.generate"
LIMIT = 1024 * 1024
RM = Called("", "run_shell_command", '{"command":"rm -rf ~/work"}')
READ = Called("call_read", "read_file", '{"absolute_path":"/home/dev/notes.txt"}')


def test_a_refused_call_becomes_text_with_its_signature_and_the_finish_stays():
    parts = [Said("Cleaning up."), RM]
    rules = Rules(deny=["run_shell_command"])
    gate = stream_gate(API, rules, LIMIT)

    out = feed(gate, gemini_stream(parts))

    assert out == gemini_stream(rules.applied(parts))
    chunks = gemini_chunks(out)
    assert all(chunk.function_calls is None for chunk in chunks)
    [replaced] = chunks[-2].candidates[0].content.parts
    assert replaced.text.startswith("taplog's tool policy refused this call to run_shell_command")
    [part] = orjson.loads(out[-2].removeprefix(b"data: "))["candidates"][0]["content"]["parts"]
    assert part["thoughtSignature"] == signature("run_shell_command")
    assert chunks[-1].candidates[0].finish_reason == "STOP"
    assert [(d.action, d.call.arguments, d.call.call_id) for d in gate.decisions] == [
        ("deny", '{"command":"rm -rf ~/work"}', "")
    ]
    assert gate.changed


def test_of_parallel_calls_in_one_chunk_only_the_refused_one_is_replaced():
    parts = [Said("Two."), RM, READ]
    rules = Rules(deny=["run_shell_command"])

    out = feed(stream_gate(API, rules, LIMIT), gemini_stream(parts))

    assert out == gemini_stream(rules.applied(parts))
    [call] = gemini_chunks(out)[-2].function_calls
    assert (call.id, call.name, call.args) == (
        "call_read",
        "read_file",
        orjson.loads(READ.arguments),
    )


def test_a_flagged_call_changes_nothing_but_is_recorded():
    vendor = gemini_stream([Said("Reading."), READ])
    gate = stream_gate(API, Rules(flag=["read_file"]), LIMIT)

    assert feed(gate, vendor) == vendor
    assert [(d.action, d.call.call_id) for d in gate.decisions] == [("flag", "call_read")]
    assert not gate.changed


def test_without_a_refusal_a_stream_passes_byte_for_byte_in_either_framing():
    for eol in (b"\r\n", b"\n"):
        vendor = gemini_stream([Said("Hi."), RM, READ], eol=eol)
        gate = stream_gate(API, Rules(deny=["write_file"]), LIMIT)

        assert feed(gate, vendor, batches=[1] * len(vendor)) == vendor
        assert not gate.changed


def test_nothing_is_held_however_large_a_call():
    huge = Called("c", "write_file", orjson.dumps({"content": "w" * 100_000}).decode())
    vendor = gemini_stream([huge])
    gate = stream_gate(API, Rules(), 1_000)

    assert [gate.feed([block]) for block in vendor] == [[block] for block in vendor]
    assert gate.finish() == []


def test_whole_answers_and_json_array_streams_lose_their_refused_calls():
    rules = Rules(deny=["run_shell_command"])
    parts = [Said("Two."), RM, READ]
    answer = gemini_whole(parts)
    array = [gemini_chunk(p) for p in gemini_parts(parts)]  # a stream without alt=sse

    assert [d.action for d in gate_answer(API, answer, rules)] == ["deny"]
    assert [d.action for d in gate_answer(API, array, rules)] == ["deny"]

    assert answer == gemini_whole(rules.applied(parts))
    assert array == [gemini_chunk(p) for p in gemini_parts(rules.applied(parts))]
    flagged = gemini_whole([READ])
    assert [d.action for d in gate_answer(API, flagged, Rules(flag=["read_file"]))] == ["flag"]
    assert flagged == gemini_whole([READ])
