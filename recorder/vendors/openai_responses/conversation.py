"""A Responses request's conversation: its instructions and input items, where a note goes,
how an answer and a next prompt join it, how a person reads it (`read_request`,
`read_answer`, in the neutral shape, never refusing); and an answer's text
(`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.anthropic import conversation as neutral
from taplog.recorder.vendors.naming import Renames
from taplog.recorder.vendors.openai_chat import conversation as chat
from taplog.recorder.vendors.openai_responses import chaining
from taplog.recorder.vendors.openai_responses.answers import responses_answer_to_messages
from taplog.recorder.vendors.openai_responses.items import chat_messages
from taplog.recorder.vendors.openai_responses.wire import tool_calls
from taplog.recorder.vendors.transcripts import (
    Reading,
    item_block,
    leading_system,
    note_before,
    read_turn,
)
from taplog.recorder.vendors.translation import RequestTranslation, Untranslatable

__all__ = [
    "PER_RUN",
    "STREAMING",
    "TURNS",
    "answer_text",
    "read_answer",
    "read_request",
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
    output = [  # as they are: an output message's `status` is one its input type requires
        item
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


def read_request(body: dict[str, Any]) -> Reading:
    """The request for people to read, in the neutral shape; a chained request's turns are
    only its new items (`chained_to` names the answer whose conversation it continues)."""
    instructions = body.get("instructions")
    turns = [turn for item in chaining.input_items(body) for turn in _read_item(item)]
    system, turns = leading_system(turns)
    previous = chaining.previous_answer(body)
    return Reading(
        [instructions, *system] if isinstance(instructions, str) else system,
        turns,
        previous if isinstance(previous, str) else None,
    )


def read_answer(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The turns an answer adds: its output items, read as the input items they become."""
    return [turn for item in chaining.output_items(answer) for turn in _read_item(item)]


def _read_item(item: Any) -> list[dict[str, Any]]:
    """An item through the failover translation's own item rules (to Chat messages), but
    leaving out rather than refusing: an item it cannot translate, or leaves out (such as
    reasoning), is a block of its type."""
    unlimited = RequestTranslation(Renames(name_limit=1 << 30, id_limit=1 << 30))
    try:
        messages = chat_messages({"input": [item]}, None, unlimited, leave_out=True)
    except Untranslatable:
        messages = []
    if messages:
        return [chat.read_message(message) for message in messages]
    if not isinstance(item, dict):
        return [read_turn(None, [item_block(type(item).__name__)])]
    kind = item.get("type")
    client_said = str(kind).endswith("_output")  # a tool's output: the client sends it
    return [
        read_turn(item.get("role") or ("user" if client_said else "assistant"), [item_block(kind)])
    ]
