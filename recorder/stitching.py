"""Conversation fingerprints for stitching stateless multi-turn chats.

Clients of stateless APIs resend the whole transcript every turn, so a call
continues an earlier one when its messages start with the earlier call's
messages. Each message is reduced to what a client resends unchanged (role,
texts, tool-call ids), ignoring decorations that move between turns such as
Anthropic's `cache_control`; the digests of the growing prefixes are compared.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

_ID_KEYS = ("id", "call_id", "tool_call_id", "tool_use_id")


def _parts(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        return []
    parts: list[Any] = []
    for block in value:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            parts.append(block.get("type"))
            parts.extend(
                block[key] for key in ("text", *_ID_KEYS) if isinstance(block.get(key), str)
            )
    return parts


def _canonical(message: Any) -> bytes:
    """What identifies a message (role, texts, tool-call ids), as bytes that say where they end.

    Digests live only in this process's memory, so the encoding is taplog's own:
    a role and one text (most of a long transcript) skip JSON, which gave
    stitching a large constant per message; anything else is JSON.
    """
    if isinstance(message, dict):
        role, content = message.get("role"), message.get("content")
        if len(message) == 2 and role and isinstance(role, str) and isinstance(content, str):
            return _text_message(role, content)  # the common case, decided in two lookups
        role = role or message.get("type")
        ids = [message[key] for key in _ID_KEYS if isinstance(message.get(key), str)]
        calls = message.get("tool_calls")
        if isinstance(calls, list):
            ids.extend(c.get("id") for c in calls if isinstance(c, dict))
        parts = _parts(content)
        if (
            role
            and isinstance(role, str)
            and not ids
            and len(parts) == 1
            and isinstance(parts[0], str)
        ):
            return _text_message(role, parts[0])
        encoded = orjson.dumps([role, parts, ids])
    else:
        encoded = orjson.dumps(message)
    return b"j%d:%s" % (len(encoded), encoded)


def _text_message(role: str, text: str) -> bytes:
    role_bytes = role.encode("utf-8", "surrogatepass")
    text_bytes = text.encode("utf-8", "surrogatepass")
    return b"t%d:%s%d:%s" % (len(role_bytes), role_bytes, len(text_bytes), text_bytes)


def _transcript(api: str, body: dict[str, Any]) -> tuple[Any, list[Any]] | None:
    """The system prompt and message list of a call, per API."""
    if api == "openai.chat":
        messages = body.get("messages")
        return None, messages
    if api == "anthropic.messages":
        return _parts(body.get("system")), body.get("messages")
    if api == "openai.responses":
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        return body.get("instructions"), items
    return None


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
        hasher.update(_canonical(message))
        seen_user = seen_user or (isinstance(message, dict) and message.get("role") == "user")
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
        if _canonical(old) != _canonical(new):
            break
        kept += 1
    system_changed = before is not None and orjson.dumps(before[0]) != orjson.dumps(system)
    return {"kept": kept, "new": messages[kept:], "system_changed": system_changed}
