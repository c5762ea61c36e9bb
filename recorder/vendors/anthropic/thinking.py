"""Anthropic's thinking-replay rule, for requests taplog builds or forwards (protocols.md 5.8.8).

With thinking on, Anthropic wants the assistant turn of an unfinished tool loop to start
with the thinking block it produced, replayed unchanged (signature included, same model
family); otherwise the request fails with 400. A tool turn that a fallback OpenAI model
produced has no such block, and neither does any history an OpenAI client sends. Forging or
moving a block gives ``Invalid signature in thinking block``, so the only safe repair is to
switch thinking off for that one request: the next user turn starts a fresh loop and may
think again.
"""

from __future__ import annotations

import copy

from taplog.recorder.vendors.sse import as_list, dig
from taplog.recorder.vendors.translation import Translated

__all__ = ["disable_thinking", "thinking_conflict", "unthought_tool_turn"]

_THINKING_ON = frozenset({"enabled", "adaptive"})
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})


def unthought_tool_turn(messages: list) -> bool:
    """True when the last assistant message calls tools but does not open with thinking.

    Signature-only blocks (empty ``thinking`` text) count as thinking: they are valid
    replays and must be kept.
    """
    for message in reversed(messages):
        if dig(message, "role") != "assistant":
            continue
        blocks = [b for b in as_list(dig(message, "content")) if isinstance(b, dict)]
        calls = any(b.get("type") == "tool_use" for b in blocks)
        return calls and (not blocks or blocks[0].get("type") not in _THINKING_BLOCKS)
    return False


def thinking_conflict(body: dict) -> bool:
    """True when this Anthropic request enables thinking and Anthropic would refuse it."""
    mode = dig(body, "thinking", "type")
    return mode in _THINKING_ON and unthought_tool_turn(as_list(body.get("messages")))


def disable_thinking(body: dict) -> Translated:
    """The same Anthropic request without ``thinking``; messages are left exactly as sent.

    For the pass-through path after a fallback turn: call it when `thinking_conflict` holds.
    Earlier thinking blocks stay in place; Anthropic ignores them when thinking is off.
    """
    out = copy.copy(body)
    out.pop("thinking", None)
    return Translated(out, ["thinking (the current tool turn has no thinking block to replay)"])
