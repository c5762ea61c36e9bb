"""A Messages request's conversation: its system prompt and turns, where a note goes; and
an answer's text (`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.transcripts import note_before, parts

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
