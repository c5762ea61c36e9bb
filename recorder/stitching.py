"""Conversation fingerprints for stitching stateless multi-turn chats.

Clients of stateless APIs resend the whole transcript every turn, so a call
continues an earlier one when its messages start with the earlier call's
messages. Each message is reduced to what a client resends unchanged (role,
texts, tool-call ids: `recorder.vendors.transcripts`), ignoring decorations
that move between turns; the digests of the growing prefixes are compared.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from taplog.recorder.vendors.apis import conversation
from taplog.recorder.vendors.transcripts import is_user_turn, turn_key


def _transcript(api: str, body: dict[str, Any]) -> tuple[Any, Any] | None:
    """The system prompt and message list of a call, per API."""
    module = conversation(api)
    return module.transcript(body) if module is not None else None


def conversation_prefixes(api: str, body: Any, seed: bytes) -> list[bytes]:
    """Digests of the transcript's prefixes, from the first user message to the whole."""
    found = _transcript(api, body) if isinstance(body, dict) else None
    if found is None or not isinstance(found[1], list):
        return []
    system, messages = found
    hasher = hashlib.blake2b(seed + orjson.dumps(system), digest_size=16)
    digests: list[bytes] = []
    seen_user = False
    for message in messages:
        hasher.update(turn_key(message))
        seen_user = seen_user or is_user_turn(message)
        if seen_user:
            digests.append(hasher.copy().digest())
    return digests


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
