"""A request's conversation in any API, reduced to what identifies each turn.

Clients of stateless APIs resend the whole transcript every turn. Each API's
`conversation` module says where it sits in a request (`transcript`: the system prompt
and the turns); `turn_key` reduces a turn of any API to what a client resends unchanged
(role, texts, tool-call ids), ignoring decorations that move between turns such as
Anthropic's `cache_control`, so that turns compare across APIs (a call that failed over
to another API continues the same conversation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

_ID_KEYS = ("id", "call_id", "tool_call_id", "tool_use_id")


@dataclass(frozen=True, slots=True)
class Reading:
    """A request's conversation as a person reads it, in the neutral (Messages) shape:
    the system prompt's texts, then turns of a role and content blocks. Reading never
    refuses: what an API's reader cannot read is a block of only its `type`."""

    system: list[str]
    turns: list[dict[str, Any]]
    chained_to: str | None = None  # the earlier answer whose conversation this continues


@dataclass(frozen=True, slots=True)
class Said:
    """One thing a neutral turn holds, as a chat shows it: `text`, a `tool_call` (its
    arguments in `value`), a `tool_result` (its content in `value`), or an `item` not read
    (its type in `text`)."""

    kind: str
    text: str | None = None
    call_id: str | None = None
    name: str | None = None
    value: Any = None
    is_error: bool | None = None


_CALLS = frozenset({"tool_use", "server_tool_use"})


def said(turn: dict[str, Any]) -> list[Said]:
    """What a neutral turn (`Reading.turns`) holds, in order."""
    found = []
    for block in turn["content"]:
        kind = block.get("type")
        if kind == "text":
            found.append(Said("text", str(block.get("text", ""))))
        elif kind in _CALLS:
            found.append(
                Said("tool_call", None, block.get("id"), block.get("name"), block.get("input"))
            )
        elif kind == "tool_result":
            error = block.get("is_error")
            found.append(
                Said(
                    "tool_result", None, block.get("tool_use_id"), None, block.get("content"), error
                )
            )
        else:
            found.append(Said("item", str(kind)))
    return found


def result_text(content: Any) -> Any:
    """A tool result's content as its text when it is all text parts, else as it is."""
    if isinstance(content, list) and content and all(_is_text(p) for p in content):
        return "\n".join(part["text"] for part in content)
    return content


def _is_text(part: Any) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def item_block(kind: Any) -> dict[str, Any]:
    """A block that stands for something unread: shown by its type."""
    return {"type": str(kind or "item")}


def read_turn(role: Any, content: Any) -> dict[str, Any]:
    """A neutral turn: text is a text block, anything not an object a block by its type."""
    if isinstance(content, str):
        blocks = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        blocks = [b if isinstance(b, dict) else item_block(type(b).__name__) for b in content]
    else:
        blocks = []
    return {"role": str(role or "item"), "content": blocks}


def leading_system(turns: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """The system turns before the first other turn, as the system prompt's texts, and the
    turns after them (a system turn later on is context the client added midway)."""
    system: list[str] = []
    for index, turn in enumerate(turns):
        if turn["role"] != "system":
            return system, turns[index:]
        system.extend(b["text"] for b in turn["content"] if isinstance(b.get("text"), str))
    return system, []


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
        role, content = message.get("role"), turn_content(message)
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


def turn_content(message: dict[str, Any]) -> Any:
    """A turn's text or blocks: its `content`, or a Gemini turn's `parts`."""
    return message.get("content", message.get("parts"))


def is_user_turn(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "user"


def note_before(note: str, prompt: Any, part_type: str) -> Any:
    """`note` ahead of a prompt given as text or as a list of text parts (of `part_type`)."""
    if isinstance(prompt, list):
        return [{"type": part_type, "text": note}, *prompt]
    if isinstance(prompt, str) and prompt:
        return f"{note}\n\n{prompt}"
    return note
