"""A Chat request's conversation: its turns (the system prompt is one), where a note goes,
how an answer and a next prompt join it, how a person reads it (`read_request`,
`read_answer`, in the neutral shape, never refusing); and an answer's text
(`recorder.vendors.transcripts`)."""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.anthropic import conversation as neutral
from taplog.recorder.vendors.openai_chat.answers import chat_answer_to_messages
from taplog.recorder.vendors.sse import as_list, dig
from taplog.recorder.vendors.tools import parsed_arguments
from taplog.recorder.vendors.transcripts import (
    Reading,
    item_block,
    leading_system,
    note_before,
    read_turn,
)

TURNS = "messages"  # the request field that holds the turns
PER_RUN = frozenset({"user", "metadata", "safety_identifier", "prompt_cache_key"})
STREAMING = frozenset({"stream", "stream_options"})
_SYSTEM = ("system", "developer")


def transcript(body: dict[str, Any]) -> tuple[Any, Any]:
    """No system prompt apart: it is among the turns."""
    return None, body.get("messages")


def with_note(body: dict[str, Any], note: str) -> dict[str, Any]:
    """The request with `note` at the very top of its first system (or developer) message,
    or in a new system message."""
    messages = list(body.get("messages") or [])
    if messages and isinstance(messages[0], dict) and messages[0].get("role") in _SYSTEM:
        content = note_before(note, messages[0].get("content"), "text")
        messages[0] = {**messages[0], "content": content}
    else:
        messages.insert(0, {"role": "system", "content": note})
    return {**body, "messages": messages}


def with_answer(body: dict[str, Any], answer: dict[str, Any], calls: bool = True) -> dict[str, Any]:
    """The request with the first choice's message as the assistant's next turn, cleaned
    to what a request takes (its text and tool calls: no nulls, annotations or refusal
    fields). `calls` False leaves out the tools it asked for (they never ran)."""
    choices = answer.get("choices") or [{}]
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    message = message if isinstance(message, dict) else {}
    turn: dict[str, Any] = {"role": "assistant"}
    if message.get("content"):
        turn["content"] = message["content"]
    asked = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)] if calls else []
    if asked:
        turn["tool_calls"] = [_call(call) for call in asked]
    if len(turn) == 1:
        return body
    return {**body, "messages": [*(body.get("messages") or []), turn]}


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") if isinstance(call.get("function"), dict) else {}
    named = {"name": function.get("name"), "arguments": function.get("arguments") or ""}
    return {"id": call.get("id"), "type": call.get("type") or "function", "function": named}


def with_prompt(body: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The request with `prompt` as the user's next turn."""
    turn = {"role": "user", "content": prompt}
    return {**body, "messages": [*(body.get("messages") or []), turn]}


def answer_text(answer: dict[str, Any]) -> str:
    return neutral.answer_text(chat_answer_to_messages(answer))


def read_request(body: dict[str, Any]) -> Reading:
    """The request for people to read, in the neutral shape; the system and developer
    messages before the first other one are its system prompt."""
    system, turns = leading_system([read_message(m) for m in as_list(body.get("messages"))])
    return Reading(system, turns)


def read_answer(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The turns an answer adds: its first choice's message (requests ask for one)."""
    choices = [c for c in as_list(answer.get("choices")) if isinstance(c, dict)]
    message = min(choices, key=lambda c: c.get("index") or 0).get("message") if choices else None
    return [read_message({**message, "role": "assistant"})] if isinstance(message, dict) else []


def read_message(message: Any) -> dict[str, Any]:
    """One Chat message as a neutral turn: a tool message is a user turn holding the
    result, an assistant's tool calls are `tool_use` blocks after its text."""
    if not isinstance(message, dict):
        return read_turn(None, [message])
    role = message.get("role")
    if role == "tool":
        result = {"type": "tool_result", "tool_use_id": message.get("tool_call_id")}
        return read_turn("user", [{**result, "content": message.get("content")}])
    turn = read_turn("system" if role in _SYSTEM else role, _read_parts(message.get("content")))
    if refusal := message.get("refusal"):
        turn["content"].append({"type": "text", "text": str(refusal)})
    turn["content"].extend(_read_call(call) for call in as_list(message.get("tool_calls")))
    return turn


def _read_parts(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    return [
        {"type": "text", "text": text}
        if isinstance(text := dig(part, "text") or dig(part, "refusal"), str)
        else item_block(dig(part, "type"))
        for part in content
    ]


def _read_call(call: Any) -> dict[str, Any]:
    if dig(call, "type") not in (None, "function"):
        return item_block(dig(call, "type"))
    raw = dig(call, "function", "arguments")
    value, error = parsed_arguments(raw)
    name, value = dig(call, "function", "name"), raw if error else value
    return {"type": "tool_use", "id": dig(call, "id"), "name": name, "input": value}
