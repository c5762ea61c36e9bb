"""Non-streaming answers translated back into the client's API (docs/protocols.md 5.4).

Anthropic message -> ``chat.completion``: text blocks joined into ``content`` (null when
there is none), ``tool_use`` -> ``tool_calls`` with the input as compact JSON, stop reason and
usage mapped by `vocab`. Thinking and server-tool blocks have no place in OpenAI's schema
and are left out (the upstream answer is in the log).

``chat.completion`` -> Anthropic message: ``content`` -> one text block, a ``refusal`` ->
a text block and stop reason ``refusal``, each tool call -> ``tool_use`` with ``input``
parsed from ``arguments``. Choices where docs/protocols.md leaves room:

* Arguments that are not a JSON object - typically cut short by the length limit (5.8.11)
  - cannot become an ``input``. That call is left out: the client then sees a truncated
  answer (``max_tokens``) and runs nothing half-specified; if no call is left a
  ``tool_calls`` finish becomes ``end_turn``.
* Non-standard ``reasoning_content`` is not turned into a thinking block: it would carry no
  valid signature and the client would replay it to Anthropic, which refuses it (5.8.8).

Both directions fit tool-call ids to the client's own vendor rules (the client sends them
there next turn) and give tools back the client's names (``tools`` is `Translated.tools`
of the translated request).
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.naming import (
    ANTHROPIC_ID_LIMIT,
    OPENAI_ID_LIMIT,
    ClientTools,
    client_name,
    fit,
)
from taplog.recorder.vendors.openai_chat.vocab import (
    anthropic_message,
    chat_response_id,
    chat_usage,
    finish_reason,
    message_response_id,
    messages_usage,
    translated_stop_reason,
)
from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import compact_json, parse_object

__all__ = ["chat_answer_to_messages", "messages_answer_to_chat"]


def messages_answer_to_chat(
    answer: dict, *, created: int, tools: ClientTools | None = None
) -> dict:
    """An Anthropic message as the ``chat.completion`` an OpenAI client expects."""
    texts: list[str] = []
    calls: list[dict] = []
    for block in as_list(answer.get("content")):
        kind = dig(block, "type")
        if kind == "text":
            texts.append(as_str(block.get("text")) or "")
        elif kind == "tool_use":
            calls.append(_chat_call(block, tools))
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": None,
    }
    if calls:
        message["tool_calls"] = calls
    choice = {
        "index": 0,
        "message": message,
        "finish_reason": finish_reason(answer.get("stop_reason")),
        "logprobs": None,
    }
    return {
        "id": chat_response_id(answer.get("id")),
        "object": "chat.completion",
        "created": created,
        "model": as_str(answer.get("model")) or "",
        "choices": [choice],
        "usage": chat_usage(answer.get("usage")),
        "system_fingerprint": None,
    }


def _chat_call(block: dict, tools: ClientTools | None) -> dict:
    """A ``tool_use`` block as an OpenAI tool call."""
    value = block.get("input")
    function = {
        "name": client_name(as_str(block.get("name")) or "", tools),
        "arguments": compact_json(value if value is not None else {}),
    }
    call_id = fit(as_str(block.get("id")) or "toolu", OPENAI_ID_LIMIT)
    return {"id": call_id, "type": "function", "function": function}


def chat_answer_to_messages(answer: dict, *, tools: ClientTools | None = None) -> dict:
    """A ``chat.completion`` (its first choice) as the message an Anthropic client expects."""
    choice = _first_choice(answer)
    message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
    content: list[dict] = []
    if text := _text(message.get("content")):
        content.append({"type": "text", "text": text})
    refusal = as_str(message.get("refusal"))
    if refusal:
        content.append({"type": "text", "text": refusal})
    calls = [_tool_use(call, tools) for call in as_list(message.get("tool_calls"))]
    content.extend(call for call in calls if call is not None)
    stop = translated_stop_reason(
        choice.get("finish_reason"),
        refused=bool(refusal),
        called=any(call is not None for call in calls),
    )
    message_id = message_response_id(answer.get("id"))
    usage = messages_usage(answer.get("usage"))
    return anthropic_message(message_id, answer.get("model"), content, stop, usage)


def _first_choice(answer: dict) -> dict:
    """Choice 0 (requests never ask for more: n>1 is untranslatable)."""
    choices = [c for c in as_list(answer.get("choices")) if isinstance(c, dict)]
    return min(choices, key=lambda c: c.get("index") or 0) if choices else {}


def _text(content: Any) -> str:
    """``content`` is a string; some compatible servers send text parts instead."""
    if isinstance(content, str):
        return content
    return "".join(as_str(dig(part, "text")) or "" for part in as_list(content))


def _tool_use(call: Any, tools: ClientTools | None) -> dict | None:
    """A tool call as ``tool_use``; None when its arguments are not an object (5.8.11)."""
    if dig(call, "type") not in (None, "function"):
        return None
    value = parse_object(dig(call, "function", "arguments"))
    if value is None:
        return None
    return {
        "type": "tool_use",
        "id": fit(as_str(call.get("id")) or "call", ANTHROPIC_ID_LIMIT),
        "name": client_name(as_str(dig(call, "function", "name")) or "", tools),
        "input": value,
    }
