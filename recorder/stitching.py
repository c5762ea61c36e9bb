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
from collections.abc import Iterator
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
    beginnings: tuple[bytes, ...] = ()  # its strict beginnings, the longest first
    # (the digest before each earlier user turn, the turn), the last first: each turn's
    # first paragraph is hashed only when no beginning matched (`earlier`)
    retold: tuple[tuple[Any, Any], ...] = ()
    under_way: bool = False  # the model had turns in it already

    def earlier(self) -> Iterator[bytes]:
        """The ends this call may resend, likeliest first: its strict beginnings, then
        those up to a user turn known by its first paragraph."""
        yield from self.beginnings
        for before, message in self.retold:
            if (digest := _retold(before, message)) is not None:
                yield digest


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
    retold: list[tuple[Any, Any]] = []  # before each user turn, the digest so far
    seen_user = under_way = False
    for message in messages:
        if is_user_turn(message):
            retold.append((hasher.copy(), message))
            seen_user = True
        hasher.update(turn_key(message))
        if seen_user:
            exact.append(hasher.copy().digest())
        under_way = under_way or (message is not messages[-1] and _by_model(message))
    if not exact:
        return Stitches()
    last = messages[-1]
    ends = [exact[-1]]
    if len(exact) > 1 and isinstance(last, dict) and last.get("role") in _CLOSING_ROLES:
        ends.append(exact[-2])
    # the last turn's, known by its first paragraph (a turn with no text has none)
    if retold and retold[-1][1] is last and (digest := _retold(*retold.pop())) is not None:
        ends.append(digest)
    return Stitches(tuple(ends), tuple(reversed(exact[:-1])), tuple(reversed(retold)), under_way)


def _retold(before: Any, message: Any) -> bytes | None:
    """The digest up to a user turn known by its first paragraph (None: it has no text)."""
    head = _first_paragraph(message)
    if head is None:
        return None
    retold = before.copy()
    retold.update(b"p%d:%s" % (len(head), head))
    return retold.digest()


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
