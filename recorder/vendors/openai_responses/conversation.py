"""A Responses request's conversation: its instructions and input items, where a note goes,
how an answer and a next prompt join it; and an answer's text
(`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.anthropic import conversation as neutral
from taplog.recorder.vendors.openai_chat import conversation as chat
from taplog.recorder.vendors.openai_responses import chaining
from taplog.recorder.vendors.openai_responses.answers import responses_answer_to_messages
from taplog.recorder.vendors.openai_responses.wire import tool_calls
from taplog.recorder.vendors.transcripts import note_before

__all__ = [
    "PER_RUN",
    "STREAMING",
    "TURNS",
    "answer_text",
    "transcript",
    "with_answer",
    "with_note",
    "with_prompt",
]

TURNS = "input"  # the request field that holds the turns (when it is a list)
PER_RUN = chat.PER_RUN | {"client_metadata"}  # and Codex's ids of its turn and window
STREAMING = chat.STREAMING


def transcript(body: dict[str, Any]) -> tuple[Any, Any]:
    """The instructions and the input items (a string is one user message)."""
    items = body.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    return body.get("instructions"), items


def with_note(body: dict[str, Any], note: str) -> dict[str, Any]:
    """The request with `note` at the very top of its instructions."""
    return {**body, "instructions": note_before(note, body.get("instructions"), "input_text")}


def with_answer(body: dict[str, Any], answer: dict[str, Any], calls: bool = True) -> dict[str, Any]:
    """The request with the answer's output items as its next input items. `calls` False
    leaves out the calls of tools the client runs (they never ran); hosted tools ran, and
    stay. Nothing but reasoning left is no turn."""
    asked = set() if calls else {c.call_id for c in tool_calls(answer) if not c.server}
    output = [
        chaining.as_input(item)
        for item in chaining.output_items(answer)
        if not (isinstance(item, dict) and item.get("call_id") in asked)
    ]
    if all(isinstance(item, dict) and item.get("type") == "reasoning" for item in output):
        return body
    return {**body, "input": chaining.conversation([], body, output)}


def with_prompt(body: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The request with `prompt` as the user's next input item."""
    turn = {"type": "message", "role": "user", "content": prompt}
    return {**body, "input": [*chaining.input_items(body), turn]}


def answer_text(answer: dict[str, Any]) -> str:
    return neutral.answer_text(responses_answer_to_messages(answer))
