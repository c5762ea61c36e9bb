"""Shared OpenAI Responses vocabulary: status, usage, item ids and the ``response`` object.

The answer translators (`answers`) and the stream translators
(`stream_from_neutral`, `stream_to_neutral`) build everything from these functions, so
a streamed answer and the same answer without streaming translate alike (the property tests
hold them to that).

Status (Anthropic ``stop_reason`` -> Responses): end_turn, stop_sequence and tool_use are
``completed``; max_tokens, model_context_window_exceeded and pause_turn (an unfinished turn,
as in 5.4) are ``incomplete`` with reason ``max_output_tokens``; refusal is ``incomplete``
with reason ``content_filter``. Back: ``incomplete`` -> max_tokens (refusal for
content_filter); ``completed`` -> tool_use when a call reached the client, refusal when a
refusal part did, else end_turn.

Items are ``completed`` once their block or item ended, also in a cut answer: the response's
own status says the answer was cut, as it is what clients check.

Usage (5.4, 5.8.15): Responses ``input_tokens`` INCLUDES cache reads and writes, Anthropic's
EXCLUDES them; ``cached_tokens`` = cache reads, ``cache_write_tokens`` = cache writes,
``reasoning_tokens`` = thinking tokens (0 when the upstream does not say).

Ids: the caller picks the response id (``resp_X``), so a later ``previous_response_id`` can
name it; output items get ``msg_X_<n>`` / ``fc_X_<n>`` / ``ctc_X_<n>`` / ``ws_X_<n>`` (n =
output index), the Anthropic message for a Responses answer ``msg_X``.

Tool calls (`call_item`) take the shape of the client's tool (`naming.ClientTool`): a
``function_call``, with ``namespace`` for a tool of a namespace, or for a freeform tool a
``custom_tool_call`` whose ``input`` is the string Claude sent wrapped as ``{"input": ...}``
(`freeform_input`). A web search is one ``web_search_call`` (`web_search_item`): Claude's
query and the urls its result listed as ``action.sources``; ``completed``, ``failed`` when
the result is an error, ``incomplete`` when no result came.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.naming import ClientTool
from taplog.recorder.vendors.openai_chat.vocab import count, messages_usage
from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import compact_json

__all__ = [
    "anthropic_usage",
    "call_item",
    "freeform_input",
    "message_id",
    "message_item",
    "response_object",
    "response_status",
    "responses_usage",
    "stop_from_status",
    "text_part",
    "url_citations",
    "web_search_item",
]

_INCOMPLETE = {
    "max_tokens": "max_output_tokens",
    "model_context_window_exceeded": "max_output_tokens",
    "pause_turn": "max_output_tokens",
    "refusal": "content_filter",
}


def response_status(stop: Any) -> tuple[str, dict | None]:
    """Anthropic ``stop_reason`` -> (Responses status, ``incomplete_details``)."""
    reason = _INCOMPLETE.get(stop) if isinstance(stop, str) else None
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def stop_from_status(status: Any, reason: Any, *, refused: bool, called: bool) -> str:
    """Responses status and incomplete reason -> Anthropic ``stop_reason``."""
    if status == "incomplete":
        return "refusal" if reason == "content_filter" else "max_tokens"
    if called:
        return "tool_use"
    return "refusal" if refused else "end_turn"


def responses_usage(usage: Any) -> dict:
    """Anthropic usage -> Responses usage (cache tokens folded into ``input_tokens``)."""
    read = count(usage, "cache_read_input_tokens")
    write = count(usage, "cache_creation_input_tokens")
    prompt = count(usage, "input_tokens") + read + write
    output = count(usage, "output_tokens")
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
        "output_tokens": output,
        "output_tokens_details": {
            "reasoning_tokens": count(usage, "output_tokens_details", "thinking_tokens")
        },
        "total_tokens": prompt + output,
    }


RESPONSES_USAGE_NAMES = ("input", "output", "input_tokens_details", "output_tokens_details")


def anthropic_usage(usage: Any) -> dict:
    """Responses usage -> Anthropic usage (cache tokens taken out of ``input_tokens``)."""
    return messages_usage(usage, RESPONSES_USAGE_NAMES)


def message_id(response_id: Any) -> str:
    """``resp_X`` -> ``msg_X``: derived, so the log can pair the two ids."""
    return "msg_" + (as_str(response_id) or "taplog").removeprefix("resp_")


def _item_id(prefix: str, response_id: str, index: int) -> str:
    return f"{prefix}_{response_id.removeprefix('resp_')}_{index}"


def text_part(text: str, annotations: list[dict] | None = None) -> dict:
    """An ``output_text`` content part."""
    return {"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []}


def message_item(
    response_id: str, index: int, text: str | None, annotations: list[dict] | None = None
) -> dict:
    """An assistant ``message`` item: completed with one text part, or (None) just opened."""
    return {
        "id": _item_id("msg", response_id, index),
        "type": "message",
        "status": "in_progress" if text is None else "completed",
        "role": "assistant",
        "content": [] if text is None else [text_part(text, annotations)],
    }


def url_citations(text: str, citations: object) -> list[dict]:
    """A text block's web search citations as ``url_citation`` annotations over its whole
    text, one per url: Claude cuts a cited answer into blocks, each cited block being the
    claim its citations support, and each block is one message item here. Indexes count
    code points. Other citation kinds (documents, search results) are left out."""
    annotations: list[dict] = []
    for citation in as_list(citations):
        url = as_str(dig(citation, "url"))
        if dig(citation, "type") != "web_search_result_location" or not url:
            continue
        if all(known["url"] != url for known in annotations):
            title = as_str(citation.get("title")) or ""
            span = {"start_index": 0, "end_index": len(text)}
            annotations.append({"type": "url_citation", **span, "url": url, "title": title})
    return annotations


def call_item(
    response_id: str, index: int, call_id: str, tool: ClientTool, value: str | None
) -> dict:
    """A tool call as the client's tool is called: ``function_call`` with its ``arguments``
    or ``custom_tool_call`` with its ``input`` (`value`; None: just opened). Paired with its
    output by ``call_id``, never by ``id``."""
    custom = tool.freeform
    item = {
        "id": _item_id("ctc" if custom else "fc", response_id, index),
        "type": "custom_tool_call" if custom else "function_call",
        "status": "in_progress" if value is None else "completed",
        "input" if custom else "arguments": value or "",
        "call_id": call_id,
        "name": tool.name,
    }
    if tool.namespace:
        item["namespace"] = tool.namespace
    return item


def freeform_input(value: object) -> str:
    """A freeform tool's string from the ``{"input": ...}`` Claude sent; anything else whole,
    nothing as ``""``."""
    if isinstance(value, dict) and isinstance(value.get("input"), str):
        return value["input"]
    return compact_json(value) if value else ""


def web_search_item(
    response_id: str, index: int, query: str | None, result: object = None, *, done: bool = True
) -> dict:
    """A ``web_search_call`` for Claude's search of `query` and its result block's content
    (`done` False: just opened, nothing known yet)."""
    item: dict = {"id": _item_id("ws", response_id, index), "type": "web_search_call"}
    if not done:
        return {**item, "status": "in_progress", "action": {"type": "search"}}
    results = as_list(result)
    sources = [
        {"type": "url", "url": found["url"]}
        for found in results
        if dig(found, "type") == "web_search_result" and as_str(found.get("url"))
    ]
    failed = isinstance(result, dict)  # a web_search_tool_result_error
    status = "failed" if failed else "completed" if result is not None else "incomplete"
    action = {"type": "search", "query": query or "", "sources": sources}
    return {**item, "status": status, "action": action}


def _echo_tool(tool: Any) -> Any:
    """A function tool as the response lists it (``parameters``/``strict`` always present)."""
    if dig(tool, "type") != "function":
        return tool
    return {**tool, "parameters": tool.get("parameters"), "strict": tool.get("strict")}


def _echo(request: dict, key: str, kind: type | tuple[type, ...], default: Any = None) -> Any:
    """The request's value when it has the right type (a bool is no number here)."""
    value = request.get(key)
    if isinstance(value, bool) and kind is not bool:
        return default
    return value if isinstance(value, kind) else default


def response_object(
    request: dict,
    *,
    response_id: str,
    created_at: int,
    model: str,
    status: str,
    output: list[dict],
    usage: dict | None,
    incomplete: dict | None = None,
    error: dict | None = None,
) -> dict:
    """The ``response`` object, echoing the request fields a client reads back."""
    reasoning = request.get("reasoning") if isinstance(request.get("reasoning"), dict) else {}
    text = request.get("text") if isinstance(request.get("text"), dict) else {}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": _echo(request, "instructions", str),
        "max_output_tokens": _echo(request, "max_output_tokens", int),
        "max_tool_calls": _echo(request, "max_tool_calls", int),
        "model": model,
        "output": output,
        "parallel_tool_calls": _echo(request, "parallel_tool_calls", bool, True),
        "previous_response_id": _echo(request, "previous_response_id", str),
        "prompt_cache_key": _echo(request, "prompt_cache_key", str),
        "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
        "safety_identifier": _echo(request, "safety_identifier", str),
        "store": _echo(request, "store", bool, True),
        "temperature": _echo(request, "temperature", (int, float)),
        "text": {"format": {"type": "text"}, **text},
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": [_echo_tool(tool) for tool in as_list(request.get("tools"))],
        "top_p": _echo(request, "top_p", (int, float)),
        "truncation": _echo(request, "truncation", str, "disabled"),
        "usage": usage,
        "user": _echo(request, "user", str),
        "metadata": _echo(request, "metadata", dict, {}),
    }
