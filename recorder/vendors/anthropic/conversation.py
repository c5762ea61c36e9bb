"""A Messages request's conversation: its system prompt and turns, where a note goes, how an
answer and a next prompt join it, how a person reads it (`read_request`, `read_answer`:
the neutral shape as is); and an answer's text (`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.anthropic.wire import tool_calls
from taplog.recorder.vendors.sse import as_list
from taplog.recorder.vendors.transcripts import Reading, note_before, parts, read_turn

TURNS = "messages"  # the request field that holds the turns
PER_RUN = frozenset({"metadata"})  # request fields that name the run, not what is asked
STREAMING = frozenset({"stream"})  # request fields that ask for a stream, and how
_REASONING = frozenset({"thinking", "redacted_thinking"})  # not a turn on their own


def transcript(body: dict[str, Any]) -> tuple[Any, Any]:
    """The system prompt (as its parts: `cache_control` moves between turns) and turns."""
    return parts(body.get("system")), body.get("messages")


def with_note(body: dict[str, Any], note: str) -> dict[str, Any]:
    """The request with `note` at the very top of its system prompt."""
    return {**body, "system": note_before(note, body.get("system"), "text")}


def with_answer(body: dict[str, Any], answer: dict[str, Any], calls: bool = True) -> dict[str, Any]:
    """The request with `answer` as the assistant's next turn: its content blocks, without
    the nulls a request refuses. `calls` False leaves out the tools it asked the client to
    run (they never ran); a turn left with no more than reasoning is no turn."""
    asked = set() if calls else {c.call_id for c in tool_calls(answer) if not c.server}
    blocks = [
        {key: value for key, value in block.items() if value is not None}
        for block in answer.get("content") or []
        if isinstance(block, dict) and block.get("id") not in asked
    ]
    if all(block.get("type") in _REASONING for block in blocks):
        return body
    turn = {"role": "assistant", "content": blocks}
    return {**body, "messages": [*(body.get("messages") or []), turn]}


def with_prompt(body: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The request with `prompt` as the user's next turn (the API joins it to a user turn
    before it)."""
    turn = {"role": "user", "content": prompt}
    return {**body, "messages": [*(body.get("messages") or []), turn]}


def answer_text(answer: dict[str, Any]) -> str:
    """A message's text, tool calls shown as `[tool call: name {input}]`."""
    lines = []
    for block in answer.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            lines.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            lines.append(f"[tool call: {block.get('name')} {block.get('input')}]")
    return "\n".join(lines)


def read_request(body: dict[str, Any]) -> Reading:
    """The request for people to read: it is in the neutral shape already."""
    system = body.get("system")
    texts = [system] if isinstance(system, str) else [b.get("text") for b in as_list(system)]
    turns = [_read_message(message) for message in as_list(body.get("messages"))]
    return Reading([t for t in texts if isinstance(t, str)], turns)


def read_answer(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The turns an answer adds to the conversation: one assistant message."""
    return [read_turn("assistant", answer.get("content"))]


def _read_message(message: Any) -> dict[str, Any]:
    if not isinstance(message, dict):
        return read_turn(None, [message])
    return read_turn(message.get("role"), message.get("content"))
