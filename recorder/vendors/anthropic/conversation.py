"""A Messages request's conversation: its system prompt and turns, where a note goes; and
an answer's text (`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.sse import as_list
from taplog.recorder.vendors.transcripts import Reading, note_before, parts, read_turn

TURNS = "messages"  # the request field that holds the turns
PER_RUN = frozenset({"metadata"})  # request fields that name the run, not what is asked
STREAMING = frozenset({"stream"})  # request fields that ask for a stream, and how


def transcript(body: dict[str, Any]) -> tuple[Any, Any]:
    """The system prompt (as its parts: `cache_control` moves between turns) and turns."""
    return parts(body.get("system")), body.get("messages")


def with_note(body: dict[str, Any], note: str) -> dict[str, Any]:
    """The request with `note` at the very top of its system prompt."""
    return {**body, "system": note_before(note, body.get("system"), "text")}


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
