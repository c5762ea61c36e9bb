"""What `taplog resume` sends and shows: the exported conversation with a note, the answer's text.

The request is the session's whole conversation as `recorder.tools.export` gives it in
the target API's shape (the same translation as failover, what it left out named),
with a short note at the very top of the system prompt: the conversation continues an
earlier session (named) and the tool results in its history are real, so the new
model neither redoes the work nor doubts it.

When the session ends with the model's answer, the request goes on with a user turn
(`prompt`, `DEFAULT_PROMPT` unless one is given): a request that ended with the
assistant's turn would be a prefill to Anthropic, and a finished chat to OpenAI. The
tools that answer asked for never ran, so their calls are left out (a call without its
result is refused everywhere) and the model asks again if it still needs them. When the
last request got no answer, it is sent again (with the prompt after it, when one is
given).

    anthropic     `system` (text, or a first text block)
    openai-chat   the first system/developer message, or a new system message
    responses     `instructions`

(each API's `conversation.with_note`). The old run's own ids (a user, metadata, a
cache key, a client's turn metadata: `PER_RUN_FIELDS`) are left out, as `export` leaves
them out: the new session is another run, and would otherwise be taken for the old one.
The note says with which models the session was held when that is not the model it goes
to.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from taplog.recorder.events import LLM_RESPONSE, Event
from taplog.recorder.tools.export import API_FORMATS, Exported, as_request, conversation_through
from taplog.recorder.vendors.apis import conversation

DEFAULT_PROMPT = "Continue from where you left off."

NOTE = (
    "This conversation continues an earlier session ({session}), recorded by taplog{held}. "
    "The tool calls and tool results in the history are real: those tools ran and returned "
    "those results. Continue from where it left off."
)


def resume_note(events: list[Event], session: str, model: str) -> str:
    """The note on top: the session it continues, and the models that held it when `model`
    is not the only one."""
    models = sorted({e["model"] for e in events if e["type"] == LLM_RESPONSE and e.get("model")})
    held = f" and held with {', '.join(models)} until now" if models and models != [model] else ""
    return NOTE.format(session=session, held=held)


def resume_body(
    events: list[Event], session: str, fmt: str, model: str, prompt: str | None = None
) -> Exported:
    """The session's conversation as a request for `model` in `fmt`, the note on top; after
    the model's last answer, the user's next turn (`prompt`, else `DEFAULT_PROMPT`)."""
    through = conversation_through(events)
    if prompt is None and through.answer is not None:
        prompt = DEFAULT_PROMPT
    exported = as_request(through, fmt, model, prompt)  # without the old run's ids
    api = next(api for api, name in API_FORMATS.items() if name == fmt)
    noted = _conversation(api).with_note(exported.body, resume_note(events, session, model))
    return replace(exported, body=noted)


def feature_headers(events: list[Event], api: str) -> dict[str, str]:
    """The headers that switched on the features of the body it resends (`anthropic-beta`),
    from the session's last request when that one was in `api` (a translated body has none
    of those fields)."""
    through = conversation_through(events)
    return through.headers if through.api == api else {}


def answer_text(api: str, answer: Any) -> str:
    """An answer's text, tool calls shown as `[tool call: name {arguments}]`."""
    if not isinstance(answer, dict):
        return ""
    return _conversation(api).answer_text(answer)


def _conversation(api: str) -> Any:
    module = conversation(api)
    assert module is not None, api  # resumed only to an LLM API
    return module
