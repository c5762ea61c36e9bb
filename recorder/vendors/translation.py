"""The request translators' result and refusal types, and small helpers both directions use."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.vendors.naming import ClientTool, Renames

__all__ = [
    "RequestTranslation",
    "Translated",
    "Untranslatable",
    "compact_json",
    "data_url",
    "looks_like_email",
    "parse_object",
    "stable_identifier",
]


class Untranslatable(ValueError):
    """The request needs something the target API cannot give; the message says what and why.

    taplog then does not fail over: the client gets the original vendor's error, which is
    more honest than an answer that silently lacks what it asked for.
    """


@dataclass(slots=True)
class Translated:
    """A request body for the other vendor, and what translating it lost or renamed."""

    body: dict
    dropped: list[str] = field(default_factory=list)  # keys/parts dropped on purpose (logged)
    tools: dict[str, ClientTool] = field(default_factory=dict)  # wire name -> client's tool
    tool_ids: dict[str, str] = field(default_factory=dict)  # wire id -> client's id


@dataclass(slots=True)
class RequestTranslation:
    """What one request translation accumulates: renamed tools and ids, dropped parts."""

    renames: Renames
    dropped: list[str] = field(default_factory=list)

    def drop(self, what: str) -> None:
        """Record a drop once: a long transcript repeats the same kind of block many times."""
        if what not in self.dropped:
            self.dropped.append(what)

    def result(self, body: dict) -> Translated:
        return Translated(body, self.dropped, self.renames.names, self.renames.ids)


def compact_json(value: Any) -> str:
    """Tool arguments as OpenAI sends them: compact JSON text."""
    return orjson.dumps(value).decode()


def parse_object(raw: Any) -> dict | None:
    """Tool arguments as an Anthropic ``input`` object; blank means ``{}``, else None if not one."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return None
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)((?:;[^;,]*)*?);base64,(.*)", re.S)


def data_url(url: str) -> tuple[str, str] | None:
    """``data:<type>;base64,<data>`` -> (media type, data); None for anything else."""
    match = _DATA_URL.fullmatch(url)
    return (match.group(1).lower(), match.group(3)) if match else None


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def looks_like_email(value: str) -> bool:
    """Anthropic asks for opaque user ids: an e-mail address must not be forwarded."""
    return _EMAIL.search(value) is not None


def stable_identifier(value: str, limit: int) -> str:
    """`value` if short enough, else its sha256 hex (64 chars): stable, and opaque anyway."""
    return value if len(value) <= limit else hashlib.sha256(value.encode()).hexdigest()[:limit]
