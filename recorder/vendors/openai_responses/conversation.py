"""A Responses request's conversation: its instructions and input items, where a note goes;
and an answer's text (`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.anthropic import conversation as neutral
from taplog.recorder.vendors.openai_chat import conversation as chat
from taplog.recorder.vendors.openai_responses.answers import responses_answer_to_messages
from taplog.recorder.vendors.transcripts import note_before

__all__ = ["PER_RUN", "STREAMING", "TURNS", "answer_text", "transcript", "with_note"]

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


def answer_text(answer: dict[str, Any]) -> str:
    return neutral.answer_text(responses_answer_to_messages(answer))
