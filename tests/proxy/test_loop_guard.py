"""`--loop-guard N`: a session whose model asked for the same tool with the same arguments
N times in a row has its next call refused, driven by an SDK tool loop against the fake
vendor's scripted plan."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from taplog.recorder.store.reader import read_all
from tests.fakes.clients import scrape
from tests.fakes.harness import model_requests, start_on_fake
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
    }
]


def _tool_loop(url: str, session: str, plan: str, turns: int) -> list[str]:
    """An agent's loop: run each tool the model asks for and send its result back, for
    at most `turns` calls; the tools it ran, by arguments."""
    client = openai.OpenAI(base_url=f"{url}/s/{session}/v1", api_key=OPENAI_KEY, max_retries=2)
    messages: list[dict] = [{"role": "user", "content": f"find it !plan={plan}"}]
    ran = []
    for _ in range(turns):
        answer = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=TOOLS)
        message = answer.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            ran.append(json.loads(call.function.arguments)["q"])
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "not found"})
    return ran


def _refusals(data_dir) -> list[dict]:
    return [
        e for events in read_all(data_dir).values() for e in events if e["type"] == "call.refused"
    ]


def test_the_call_after_n_repeats_is_refused(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", loop_guard=3)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _tool_loop(taplog.url, "stuck", ",".join(["lookup:same"] * 6), turns=6)
    message = refused.value.message
    assert "loop guard: in session 'stuck' the model asked for the tool 'lookup'" in message
    assert 'with the same arguments {"q":"same"} 3 times in a row, and loop_guard is 3' in message
    assert "--loop-guard, TAPLOG_LOOP_GUARD or loop_guard" in message
    assert len(model_requests(fake)) == 3  # the fourth never reached the vendor, nor a retry
    taplog.flush()
    (event,) = _refusals(taplog.data_dir)
    assert (event["reason"], event["limit"], event["value"], event["used"]) == (
        "loop_guard",
        "loop_guard",
        3,
        3,
    )
    assert (event["tool"], event["arguments"]) == ("lookup", '{"q":"same"}')
    assert scrape(taplog).value("taplog_calls_refused_total", reason="loop_guard") == 1


def test_a_different_argument_starts_the_count_again(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", loop_guard=3)
    plan = "lookup:a,lookup:a,lookup:b,lookup:b,lookup:b,lookup:b"
    with pytest.raises(openai.PermissionDeniedError, match="'lookup' with the same arguments"):
        _tool_loop(taplog.url, "wandering", plan, turns=7)
    assert len(model_requests(fake)) == 5  # a, a, then b three times: the sixth call refused


def test_long_arguments_are_clipped_in_the_refusal(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", loop_guard=2)
    long = "x" * 500
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _tool_loop(taplog.url, "verbose", f"lookup:{long},lookup:{long},lookup:{long}", turns=4)
    assert '{"q":"' + "x" * 194 + "…" in refused.value.message
    assert long not in refused.value.message


def test_anthropic_tool_loop_is_refused_in_its_own_shape(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", loop_guard=2)
    client = anthropic.Anthropic(base_url=f"{taplog.url}/s/claude-loop", api_key=ANTHROPIC_KEY)
    tools = [{"name": "lookup", "input_schema": {"type": "object"}}]
    messages: list[dict] = [{"role": "user", "content": "find it !plan=lookup:z,lookup:z,lookup:z"}]
    with pytest.raises(anthropic.PermissionDeniedError, match="loop guard"):
        for _ in range(4):
            answer = client.messages.create(
                model="claude-sonnet-4-6", max_tokens=100, messages=messages, tools=tools
            )
            messages.append({"role": "assistant", "content": answer.content})
            used = [block for block in answer.content if block.type == "tool_use"]
            results = [{"type": "tool_result", "tool_use_id": b.id, "content": "no"} for b in used]
            messages.append({"role": "user", "content": results})
    assert len(model_requests(fake)) == 2


def test_off_by_default(taplog, fake):
    ran = _tool_loop(taplog.url, "patient", ",".join(["lookup:same"] * 6), turns=8)
    assert ran == ["same"] * 6
    assert len(model_requests(fake)) == 7  # six tool turns and the final answer
