"""What `taplog resume` sends and shows: the exported conversation with a note, the answer's text.

The request is the session's conversation as `recorder.tools.export` gives it in
the target API's shape (the same translation as failover), with a short note
at the very top of the system prompt: the conversation continues an earlier
session (named) and the tool results in its history are real, so the new
model neither redoes the work nor doubts it.

    anthropic     `system` (text, or a first text block)
    openai-chat   the first system/developer message, or a new system message
    responses     `instructions`

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.events import Event
from taplog.recorder.tools.export import export_body
from taplog.recorder.vendors.openai_chat.answers import chat_answer_to_messages
from taplog.recorder.vendors.openai_responses.answers import responses_answer_to_messages

NOTE = (
    "This conversation continues an earlier session ({session}), recorded by taplog and held "
    "with another model until now. The tool calls and tool results in the history are real: "
    "those tools ran and returned those results. Continue from where it left off."
)


def resume_body(events: list[Event], session: str, fmt: str, model: str) -> dict[str, Any]:
    """The session's conversation as a request for `model` in `fmt`, the note on top."""
    body = export_body(events, fmt, model=model)
    note = NOTE.format(session=session)
    if fmt == "anthropic":
        return {**body, "system": _before(note, body.get("system"), "text")}
    if fmt == "responses":
        return {**body, "instructions": _before(note, body.get("instructions"), "input_text")}
    messages = list(body.get("messages") or [])
    if messages and isinstance(messages[0], dict) and messages[0].get("role") in _SYSTEM:
        messages[0] = {**messages[0], "content": _before(note, messages[0].get("content"), "text")}
    else:
        messages.insert(0, {"role": "system", "content": note})
    return {**body, "messages": messages}


_SYSTEM = ("system", "developer")


def _before(note: str, prompt: Any, part_type: str) -> Any:
    """`note` ahead of a prompt given as text or as a list of text parts."""
    if isinstance(prompt, list):
        return [{"type": part_type, "text": note}, *prompt]
    if isinstance(prompt, str) and prompt:
        return f"{note}\n\n{prompt}"
    return note


def answer_text(api: str, answer: Any) -> str:
    """An answer's text, tool calls shown as `[tool call: name {arguments}]`."""
    if not isinstance(answer, dict):
        return ""
    if api == "openai.chat":
        answer = chat_answer_to_messages(answer)
    elif api == "openai.responses":
        answer = responses_answer_to_messages(answer)
    lines = []
    for block in answer.get("content") or []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            lines.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            lines.append(f"[tool call: {block.get('name')} {block.get('input')}]")
    return "\n".join(lines)
