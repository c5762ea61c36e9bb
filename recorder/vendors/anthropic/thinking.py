"""Anthropic's thinking-replay rule, for requests taplog builds or forwards (protocols.md 5.8.8).

With thinking on, Anthropic wants the assistant turn of an unfinished tool loop to start
with the thinking block it produced, replayed unchanged (signature included, same model
family); otherwise the request fails with 400. A tool turn that a fallback OpenAI model
produced has no such block, and neither does any history an OpenAI client sends. Forging or
moving a block gives ``Invalid signature in thinking block``, so the only safe repair is to
switch thinking off for that one request: the next user turn starts a fresh loop and may
think again.

A turn Gemini served carries its thought signatures in thinking blocks of its own
(`gemini.thoughts`), which Claude would refuse the same way: a request that goes back to
Claude leaves them out (`without_gemini_thinking`), and switches thinking off when the
current tool turn is then without one.
"""

from __future__ import annotations

import copy
from typing import Any

from taplog.recorder.vendors.gemini.thoughts import TAG, gemini_signature
from taplog.recorder.vendors.sse import as_list, dig
from taplog.recorder.vendors.translation import Translated

__all__ = [
    "carries_gemini_thinking",
    "disable_thinking",
    "thinking_conflict",
    "unthought_tool_turn",
    "without_gemini_thinking",
]

_THINKING_ON = frozenset({"enabled", "adaptive"})
_THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
_GEMINI_MARK = b'"' + TAG.encode()  # how a Gemini signature starts in a request's JSON


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


def carries_gemini_thinking(raw: bytes) -> bool:
    """Whether a request's bytes may hold Gemini's thinking blocks (a quick look: the
    parse decides, `without_gemini_thinking`)."""
    return _GEMINI_MARK in raw


def without_gemini_thinking(body: dict) -> dict:
    """The request without the thinking blocks that carry Gemini's signatures, and with
    thinking off when the current tool turn then has no thinking block; `body` itself
    when it has none."""
    messages = as_list(body.get("messages"))
    kept = [_without_gemini_blocks(message) for message in messages]
    if all(new is old for new, old in zip(kept, messages, strict=True)):
        return body
    out = {**body, "messages": kept}
    return disable_thinking(out).body if thinking_conflict(out) else out


def _without_gemini_blocks(message: Any) -> Any:
    blocks = dig(message, "content")
    if dig(message, "role") != "assistant" or not isinstance(blocks, list):
        return message
    kept = [b for b in blocks if not _gemini_thinking(b)]
    return message if len(kept) == len(blocks) else {**message, "content": kept}


def _gemini_thinking(block: Any) -> bool:
    return dig(block, "type") == "thinking" and gemini_signature(block.get("signature")) is not None
