"""What the agents and SDKs send of their own accord that taplog reads (docs/protocols.md §7).

session ids   Claude Code's header and `metadata.user_id`, Codex's and opencode's
              headers, a Responses `conversation`, `prompt_cache_key`,
              `metadata.session_id`: strongest signal first
retries       the official SDKs count a call's retries in `x-stainless-retry-count`
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

_CLAUDE_CODE_LEGACY = re.compile(r"_session_([0-9A-Za-z-]{8,64})$")


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _claude_code_metadata(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    user_id = _text(metadata.get("user_id")) if isinstance(metadata, dict) else None
    if user_id is None:
        return None
    if user_id.startswith("{"):
        try:
            return _text(orjson.loads(user_id).get("session_id"))
        except (orjson.JSONDecodeError, AttributeError):
            return None
    match = _CLAUDE_CODE_LEGACY.search(user_id)
    return match.group(1) if match else None


def session_hints(headers: Mapping[str, str], body: Any) -> list[tuple[str, str]]:
    """(source, session id) for each id the client already sends, strongest signal first
    (`headers` lower-cased)."""
    body = body if isinstance(body, dict) else {}
    hints = [
        ("claude-code", headers.get("x-claude-code-session-id")),
        ("claude-code", _claude_code_metadata(body)),
        ("codex", headers.get("session_id") or headers.get("session-id")),
        ("codex", headers.get("conversation_id")),
        ("opencode", headers.get("x-opencode-session") or headers.get("x-session-affinity")),
    ]
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    hints.append(("conversation", conversation))
    hints.append(("prompt_cache_key", body.get("prompt_cache_key")))
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        hints.append(("metadata", metadata.get("session_id")))
    return [(source, value) for source, v in hints if (value := _text(v)) is not None]


def retry_count(headers: Mapping[str, str]) -> int:
    """How many times the client's SDK has retried this call already (0: a first try)."""
    value = headers.get("x-stainless-retry-count", "0")
    return int(value) if value.isdigit() else 0
