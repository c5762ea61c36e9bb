"""A continuation fitted into a Messages client's open stream (`recorder.vendors.splice`).

The continuation's `message_start` is dropped; its content blocks are renumbered after
the client's, and its first text block writes into the client's text block when that one
is still open. Its usage counts what the client received before as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from taplog.recorder.vendors.splice import ClientView, Held, event_data
from taplog.recorder.vendors.sse import SseEvent, as_list, dig, event_bytes


@dataclass(frozen=True, slots=True)
class MessagesView(ClientView):
    blocks: int = 0  # content blocks started so far
    open_text_block: int | None = None  # the index of a text block left open


def client_view(body: dict, events: list[tuple[str | None, dict]]) -> MessagesView:
    blocks = [b for b in as_list(body.get("content")) if isinstance(b, dict)]
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    kinds = [((name or d.get("type")), d) for name, d in events]
    started = [d for kind, d in kinds if kind == "content_block_start"]
    stopped = {d.get("index") for kind, d in kinds if kind == "content_block_stop"}
    last = started[-1] if started else {}
    is_open_text = (last.get("content_block") or {}).get("type") == "text" and (
        last.get("index") not in stopped
    )
    has_tools = any(b.get("type") == "tool_use" for b in blocks)
    open_index = last.get("index") if is_open_text else None
    return MessagesView(text, has_tools, len(started), open_index)


def with_answer(request: dict[str, Any], text: str, note: str | None) -> dict[str, Any]:
    """The request with the partial answer as the assistant's turn (a prefill without a
    `note`; with one, the note as the user's next turn)."""
    turns = [{"role": "assistant", "content": [{"type": "text", "text": text}]}]
    if note is not None:
        turns.append({"role": "user", "content": [{"type": "text", "text": note}]})
    return {**request, "messages": [*request.get("messages", []), *turns], "stream": True}


class Fitter:
    """Events of the continuation, in the client's stream."""

    def __init__(self, view: MessagesView, added_tokens: int) -> None:
        self.view, self.added_tokens = view, added_tokens
        self.index_map: dict[int, int] = {}  # its block index -> the client's
        self.new_blocks = 0

    def fit(self, event: SseEvent) -> Held | None:
        data = event_data(event)
        if not isinstance(data, dict):
            return data
        kind = event.event or data.get("type")
        if kind == "message_start":
            return None
        index = data.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            continuing = (
                not self.index_map
                and self.view.open_text_block is not None
                and (data.get("content_block") or {}).get("type") == "text"
            )
            if continuing:
                self.index_map[index] = self.view.open_text_block
                return None  # the client's text block is still open: write into it
            self.index_map[index] = self.view.blocks + self.new_blocks
            self.new_blocks += 1
        if isinstance(index, int) and index in self.index_map:
            data["index"] = self.index_map[index]
        usage = data.get("usage")
        if kind == "message_delta" and isinstance(dig(usage, "output_tokens"), int):
            usage["output_tokens"] += self.added_tokens
        delta = data.get("delta") if kind == "content_block_delta" else None
        is_text = isinstance(delta, dict) and delta.get("type") == "text_delta"
        text = delta.get("text") if is_text else None
        return Held(data, kind, text if isinstance(text, str) and text else None)

    @staticmethod
    def ends_text(item: Held) -> bool:
        """Whether this event means the continuation's text (so far) is all it says."""
        if item.name in ("message_delta", "message_stop"):
            return True
        block = (item.data or {}).get("content_block") or {}
        if item.name == "content_block_start":
            return block.get("type") not in ("thinking", "redacted_thinking")
        return False

    @staticmethod
    def set_text(item: Held) -> None:
        (item.data or {})["delta"]["text"] = item.text

    @staticmethod
    def encode(item: Held) -> bytes:
        return event_bytes(item.name, item.data)
