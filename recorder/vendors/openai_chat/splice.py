"""A continuation fitted into a Chat client's open stream (`recorder.vendors.splice`).

The client keeps seeing its first chunk id; the continuation's opening chunk (a role and
nothing else) is dropped, and its usage counts what the client received before as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taplog.recorder.vendors.splice import ClientView, Held, event_data
from taplog.recorder.vendors.sse import SseEvent, as_list, event_bytes


@dataclass(frozen=True, slots=True)
class ChatView(ClientView):
    chat_id: str | None = None  # the chunk id to keep using


def client_view(body: dict, events: list[tuple[str | None, dict]]) -> ChatView:
    choice = (as_list(body.get("choices")) or [{}])[0]
    message = choice.get("message") or {}
    chat_id = next((d.get("id") for _, d in events if d.get("id")), None)
    text, calls = message.get("content") or "", bool(message.get("tool_calls"))
    return ChatView(text, calls, chat_id)


def with_answer(request: dict[str, Any], text: str, note: str | None) -> dict[str, Any]:
    """The request with the partial answer as the assistant's turn (a prefill without a
    `note`; with one, the note as the user's next turn)."""
    turns = [{"role": "assistant", "content": text}]
    if note is not None:
        turns.append({"role": "user", "content": note})
    return {**request, "messages": [*request.get("messages", []), *turns], "stream": True}


class Fitter:
    """Chunks of the continuation, in the client's stream."""

    def __init__(self, view: ChatView, added_tokens: int) -> None:
        self.view, self.added_tokens = view, added_tokens

    def fit(self, event: SseEvent) -> Held | None:
        chunk = event_data(event)
        if not isinstance(chunk, dict):
            return chunk
        text = None
        for choice in as_list(chunk.get("choices")):
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if isinstance(delta, dict):
                delta.pop("role", None)
                if not any(delta.values()) and not choice.get("finish_reason"):
                    return None  # an empty chunk, such as the continuation's opening one
                if isinstance(delta.get("content"), str):
                    text = delta["content"]
        if self.view.chat_id is not None and "id" in chunk:
            chunk["id"] = self.view.chat_id
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            for key in ("completion_tokens", "total_tokens"):
                if isinstance(usage.get(key), int):
                    usage[key] += self.added_tokens
        return Held(chunk, None, text or None)

    @staticmethod
    def ends_text(item: Held) -> bool:
        """Whether this chunk means the continuation's text (so far) is all it says."""
        choices = as_list((item.data or {}).get("choices"))
        return not choices or any(
            isinstance(c, dict)
            and (c.get("finish_reason") or (c.get("delta") or {}).get("tool_calls"))
            for c in choices
        )

    @staticmethod
    def set_text(item: Held) -> None:
        for choice in as_list((item.data or {}).get("choices")):
            if isinstance(choice, dict) and isinstance(choice.get("delta"), dict):
                choice["delta"]["content"] = item.text

    @staticmethod
    def encode(item: Held) -> bytes:
        return event_bytes(None, item.data)
