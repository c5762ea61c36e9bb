"""What `taplog resume` sends and shows: the exported conversation with a note, the answer's text.

The request is the session's conversation as `recorder.tools.export` gives it in
the target API's shape (the same translation as failover), with a short note
at the very top of the system prompt: the conversation continues an earlier
session (named) and the tool results in its history are real, so the new
model neither redoes the work nor doubts it.

    anthropic     `system` (text, or a first text block)
    openai-chat   the first system/developer message, or a new system message
    responses     `instructions`

(each API's `conversation.with_note`).

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.events import Event
from taplog.recorder.tools.export import API_FORMATS, export_body
from taplog.recorder.vendors.apis import conversation

NOTE = (
    "This conversation continues an earlier session ({session}), recorded by taplog and held "
    "with another model until now. The tool calls and tool results in the history are real: "
    "those tools ran and returned those results. Continue from where it left off."
)


def resume_body(events: list[Event], session: str, fmt: str, model: str) -> dict[str, Any]:
    """The session's conversation as a request for `model` in `fmt`, the note on top."""
    body = export_body(events, fmt, model=model)
    api = next(api for api, name in API_FORMATS.items() if name == fmt)
    return _conversation(api).with_note(body, NOTE.format(session=session))


def answer_text(api: str, answer: Any) -> str:
    """An answer's text, tool calls shown as `[tool call: name {arguments}]`."""
    if not isinstance(answer, dict):
        return ""
    return _conversation(api).answer_text(answer)


def _conversation(api: str) -> Any:
    module = conversation(api)
    assert module is not None, api  # resumed only to an LLM API
    return module
