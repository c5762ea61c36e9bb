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

from taplog.recorder.vendors.clients import tool_run
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
    is_error: bool = False
    error_from: str | None = None  # how a failure was known: "is_error", "exit_code"
    exit_code: int | None = None  # the exit code the client's result states


def flagged_result(call_id: str, result: Any, is_error: bool) -> ToolResult:
    """A result whose API flags failures itself (Anthropic's `is_error`)."""
    return ToolResult(call_id, result, is_error, "is_error" if is_error else None)


def unflagged_result(call_id: str, result: Any) -> ToolResult:
    """A result of an API with no error flag: failed when the client's result states a
    non-zero exit code (`clients.tool_run`)."""
    code = tool_run(result).exit_code
    failed = code is not None and code != 0
    return ToolResult(call_id, result, failed, "exit_code" if failed else None, code)


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
