"""A request's conversation in any API, reduced to what identifies each turn.

Clients of stateless APIs resend the whole transcript every turn. Each API's
`conversation` module says where it sits in a request (`transcript`: the system prompt
and the turns); `turn_key` reduces a turn of any API to what a client resends unchanged
(role, texts, tool-call ids), ignoring decorations that move between turns such as
Anthropic's `cache_control`, so that turns compare across APIs (a call that failed over
to another API continues the same conversation).
"""

from __future__ import annotations

from typing import Any

import orjson

_ID_KEYS = ("id", "call_id", "tool_call_id", "tool_use_id")


def parts(value: Any) -> list[Any]:
    """A content value (text or blocks) as the texts, types and ids that identify it."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        return []
    found: list[Any] = []
    for block in value:
        if isinstance(block, str):
            found.append(block)
        elif isinstance(block, dict):
            found.append(block.get("type"))
            found.extend(
                block[key] for key in ("text", *_ID_KEYS) if isinstance(block.get(key), str)
            )
    return found


def turn_key(message: Any) -> bytes:
    """What identifies a turn (role, texts, tool-call ids), as bytes that say where they end.

    Keys live only in this process's memory, so the encoding is taplog's own:
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
        found = parts(content)
        if (
            role
            and isinstance(role, str)
            and not ids
            and len(found) == 1
            and isinstance(found[0], str)
        ):
            return _text_message(role, found[0])
        encoded = orjson.dumps([role, found, ids])
    else:
        encoded = orjson.dumps(message)
    return b"j%d:%s" % (len(encoded), encoded)


def _text_message(role: str, text: str) -> bytes:
    role_bytes = role.encode("utf-8", "surrogatepass")
    text_bytes = text.encode("utf-8", "surrogatepass")
    return b"t%d:%s%d:%s" % (len(role_bytes), role_bytes, len(text_bytes), text_bytes)


def is_user_turn(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "user"


def note_before(note: str, prompt: Any, part_type: str) -> Any:
    """`note` ahead of a prompt given as text or as a list of text parts (of `part_type`)."""
    if isinstance(prompt, list):
        return [{"type": part_type, "text": note}, *prompt]
    if isinstance(prompt, str) and prompt:
        return f"{note}\n\n{prompt}"
    return note
