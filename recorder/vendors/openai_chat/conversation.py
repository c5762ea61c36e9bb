"""A Chat request's conversation: its turns (the system prompt is one), where a note goes;
and an answer's text (`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.anthropic import conversation as neutral
from taplog.recorder.vendors.openai_chat.answers import chat_answer_to_messages
from taplog.recorder.vendors.transcripts import note_before

TURNS = "messages"  # the request field that holds the turns
PER_RUN = frozenset({"user", "metadata", "safety_identifier", "prompt_cache_key"})
STREAMING = frozenset({"stream", "stream_options"})
_SYSTEM = ("system", "developer")


def transcript(body: dict[str, Any]) -> tuple[Any, Any]:
    """No system prompt apart: it is among the turns."""
    return None, body.get("messages")


def with_note(body: dict[str, Any], note: str) -> dict[str, Any]:
    """The request with `note` at the very top of its first system (or developer) message,
    or in a new system message."""
    messages = list(body.get("messages") or [])
    if messages and isinstance(messages[0], dict) and messages[0].get("role") in _SYSTEM:
        content = note_before(note, messages[0].get("content"), "text")
        messages[0] = {**messages[0], "content": content}
    else:
        messages.insert(0, {"role": "system", "content": note})
    return {**body, "messages": messages}


def answer_text(answer: dict[str, Any]) -> str:
    return neutral.answer_text(chat_answer_to_messages(answer))
