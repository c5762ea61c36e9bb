"""The neutral vocabulary of tool calls, shared by every API module.

Each API module turns its own shapes into these: `tool_calls(answer_body)`
for what a model asked for (and, for server-side tools, what they returned),
`tool_results(request_body)` for the results a client sends back, and
`NORMAL_STOPS` for the finish reasons that claim an answer ended normally.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from taplog.recorder.vendors.sse import Text


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str
    name: str | None
    arguments: Any
    arguments_raw: str | None = None  # the API sent a string (JSON or free text)
    arguments_error: str | None = None  # the string did not parse
    server: bool = False  # executed by the vendor; its result is in the same answer
    result: Any = None
    is_error: bool | None = None


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    result: Any
    is_error: bool | None = None  # None: the API has no error flag (its client may say)
    # Gemini's: its id may be one the client made up for a call that came without one, so
    # when it is none of the open calls', the result answers the oldest open call of `name`
    name: str | None = None
    by_name: bool = False


def parsed_arguments(raw: Any) -> tuple[Any, str | None]:
    """Arguments sent as a JSON string: (parsed, error). An empty string means no arguments."""
    if not isinstance(raw, str):
        return raw, None
    if not raw.strip():
        return {}, None
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as exc:
        return None, f"arguments are not valid JSON: {exc}"


def call_from_string(call_id: str, name: str | None, raw: Any, **extra: Any) -> ToolCall:
    if isinstance(raw, Text):  # a tool's arguments are needed whole, however long
        raw = "".join(raw.parts)
    arguments, error = parsed_arguments(raw)
    text = raw if isinstance(raw, str) else None
    return ToolCall(call_id, name, arguments, text, error, **extra)
