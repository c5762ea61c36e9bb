"""Conversation fingerprints for stitching stateless multi-turn chats.

Clients of stateless APIs resend the whole transcript every turn, so a call
continues an earlier one when its messages start with the earlier call's
messages. Each message is reduced to what a client resends unchanged (role,
texts, tool-call ids: `recorder.vendors.transcripts`), ignoring decorations
that move between turns; the digests of the growing prefixes are compared.

Some clients close each request with text of their own that the next request no
longer holds: aider ends it with a reminder, as a last system message (its OpenAI
route) or after the person's text in the last user turn (its Anthropic route). So a
call is known by more than one end (`Stitches.ends`): its whole transcript; without
a closing system or developer turn; and with its last user turn known by its first
paragraph only (the text before its first blank line, which a reminder added after
the person's text leaves as it was). A later call looks for its strict beginnings
among those ends, exact ones first.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import orjson

from taplog.recorder.vendors.apis import conversation
from taplog.recorder.vendors.transcripts import is_user_turn, turn_content, turn_key

_CLOSING_ROLES = frozenset({"system", "developer"})  # a client's own text, not a turn's
_MODEL_ROLES = frozenset({"assistant", "model"})
_MODEL_ITEMS = frozenset({"function_call", "reasoning"})  # Responses items the model made
_HEAD_CHARS = 4096  # of a first paragraph: enough to tell turns apart, cheap to hash again


@dataclass(frozen=True, slots=True)
class Stitches:
    """A call's transcript as stitching compares it, in digests from its first user turn
    on (nothing for a call with no transcript)."""

    ends: tuple[bytes, ...] = ()  # how a later call may resend this one: the whole first
    earlier: tuple[bytes, ...] = ()  # the ends this call may resend, likeliest first
    under_way: bool = False  # the model had turns in it already


def _transcript(api: str, body: dict[str, Any]) -> tuple[Any, Any] | None:
    """The system prompt and message list of a call, per API."""
    module = conversation(api)
    return module.transcript(body) if module is not None else None


def stitches(api: str, body: Any, seed: bytes) -> Stitches:
    """The digests a call is stitched by, `seed` (the key and client) in each."""
    found = _transcript(api, body) if isinstance(body, dict) else None
    if found is None or not isinstance(found[1], list) or not found[1]:
        return Stitches()
    system, messages = found
    hasher = hashlib.blake2b(seed + orjson.dumps(system), digest_size=16)
    exact: list[bytes] = []  # each beginning from the first user turn on
    loose: list[bytes] = []  # each beginning up to a user turn known by its first paragraph
    seen_user = under_way = False
    head = None
    for message in messages:
        head = _first_paragraph(message)
        if head is not None:
            retold = hasher.copy()
            retold.update(b"p%d:%s" % (len(head), head))
            loose.append(retold.digest())
        hasher.update(turn_key(message))
        seen_user = seen_user or is_user_turn(message)
        if seen_user:
            exact.append(hasher.copy().digest())
        under_way = under_way or (message is not messages[-1] and _by_model(message))
    if not exact:
        return Stitches()
    last = messages[-1]
    ends = [exact[-1]]
    if len(exact) > 1 and isinstance(last, dict) and last.get("role") in _CLOSING_ROLES:
        ends.append(exact[-2])
    if head is not None:  # the last turn's, known by its first paragraph
        ends.append(loose.pop())
    earlier = [*reversed(exact[:-1]), *reversed(loose)]
    return Stitches(tuple(ends), tuple(earlier), under_way)


def _first_paragraph(message: Any) -> bytes | None:
    """A user turn's text before its first blank line (None for a turn of another role,
    or one with no text, such as tool results)."""
    if not is_user_turn(message):
        return None
    content = turn_content(message)
    blocks = content if isinstance(content, list) else [content]
    for block in blocks:
        text = block.get("text") if isinstance(block, dict) else block
        if isinstance(text, str):
            end = text.find("\n\n", 0, _HEAD_CHARS + 1)
            return text[: _HEAD_CHARS if end < 0 else end].encode("utf-8", "surrogatepass")
    return None


def _by_model(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    return message.get("role") in _MODEL_ROLES or message.get("type") in _MODEL_ITEMS


def new_messages(
    api: str, body: Any, previous_api: str | None, previous_body: Any
) -> dict[str, Any]:
    """What a call sent that the previous call of its session had not: the messages after
    the transcript the two share, and whether the system prompt changed.

    Agents resend the whole history every turn; this is the part a person wants to read.
    """
    found = _transcript(api, body) if isinstance(body, dict) else None
    if found is None or not isinstance(found[1], list):
        return {"kept": 0, "new": [], "system_changed": False}
    system, messages = found
    before = None
    if previous_api is not None and isinstance(previous_body, dict):
        before = _transcript(previous_api, previous_body)
    earlier = before[1] if before is not None and isinstance(before[1], list) else []
    kept = 0
    for old, new in zip(earlier, messages, strict=False):
        if turn_key(old) != turn_key(new):
            break
        kept += 1
    system_changed = before is not None and orjson.dumps(before[0]) != orjson.dumps(system)
    return {"kept": kept, "new": messages[kept:], "system_changed": system_changed}
