"""Anthropic Messages request -> OpenAI Responses request, for an OpenAI model reached through
the Responses API (docs/protocols.md 2, 5.3).

The mirror of `request_to_neutral`: `messages_to_chat` applies every 5.3 rule (tool results
before the rest of their message, ``is_error`` as a prefix, tool images moved to a user
message, thinking and server tools dropped, efforts bucketed, prefill), and this module
moves its Chat request into the Responses envelope:

=========================  ==================================================================
Chat                       Responses
=========================  ==================================================================
first system/developer     ``instructions`` (text parts joined by newlines)
user                       ``message`` with input_text / input_image / input_file parts
assistant content          ``message`` (role assistant, text content)
``tool_calls``             one ``function_call`` item each (``call_id`` = the tool_use id)
``tool`` message           ``function_call_output`` (text)
tools                      flat function tools with ``strict: false`` unless the client
                           asked for strict (Responses is strict by default, and strict
                           mode refuses schemas Anthropic takes)
tool_choice                auto / none / required / ``{type: function, name}``
``max_completion_tokens``  ``max_output_tokens`` (raised to 16, the Responses minimum)
``reasoning_effort``       ``reasoning.effort``
``response_format``        ``text.format`` json_schema (not strict)
``stop``                   dropped and recorded: the Responses API has no stop sequences
=========================  ==================================================================

Claude's web search tool (``web_search_20250305`` and later versions, which the Chat
translation drops) becomes the hosted ``{type: web_search}``, the first one only:
``allowed_domains`` -> ``filters.allowed_domains``, ``user_location`` -> ``user_location``;
``blocked_domains`` and ``max_uses`` have no equivalent and are dropped and recorded, as
are other keys. ``include: ["web_search_call.action.sources"]`` asks for the urls the
answer translators give back as search results. Other Anthropic-run tools stay dropped.

``store: false`` is sent: an Anthropic client resends its whole history, so nothing needs
keeping at OpenAI. Ids and names are fitted to OpenAI's rules by `messages_to_chat`.
"""

from __future__ import annotations

import re
from typing import Any

from taplog.recorder.vendors.openai_chat.request_from_neutral import left_out_tool, messages_to_chat
from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import Translated, Untranslatable

__all__ = ["messages_to_responses"]

_MIN_OUTPUT_TOKENS = 16
_SAME_KEYS = ("parallel_tool_calls", "temperature", "top_p", "safety_identifier", "stream")
_WEB_SEARCH = re.compile(r"web_search_\d{8}")
_LOCATION_KEYS = ("city", "region", "country", "timezone")
_NO_SEARCH_EQUIVALENT = {
    "blocked_domains": "OpenAI's web search has no blocked domains",
    "max_uses": "OpenAI's web search has no limit on searches",
}


def messages_to_responses(
    body: dict,
    *,
    model: str,
    reasoning_model: bool = True,
    allow_prefill: bool = False,
    answered: bool = False,
) -> Translated:
    """Translate an Anthropic request for the Responses API; `model` is the OpenAI model.
    `answered`: its last assistant message is the model's answer, not a prefill."""
    chat = messages_to_chat(
        body,
        model=model,
        reasoning_model=reasoning_model,
        allow_prefill=allow_prefill,
        answered=answered,
    )
    dropped = list(chat.dropped)
    instructions, items = _input(chat.body["messages"])
    out: dict[str, Any] = {"model": model}
    if instructions is not None:
        out["instructions"] = instructions
    out["input"] = items
    _limits(chat.body, out, dropped)
    _tools(chat.body, out)
    _web_search(body, out, dropped)
    for key in _SAME_KEYS:
        if key in chat.body:
            out[key] = chat.body[key]
    if "stop" in chat.body:
        dropped.append("stop_sequences (the Responses API has no stop sequences)")
    out["store"] = False
    return Translated(out, dropped, chat.tools, chat.tool_ids)


def _limits(chat: dict, out: dict, dropped: list[str]) -> None:
    """Token limit, effort and structured output."""
    if (limit := chat.get("max_completion_tokens")) is not None:
        if limit < _MIN_OUTPUT_TOKENS:
            dropped.append(f"max_tokens {limit} (raised to {_MIN_OUTPUT_TOKENS}, the minimum)")
        out["max_output_tokens"] = max(limit, _MIN_OUTPUT_TOKENS)
    if effort := chat.get("reasoning_effort"):
        out["reasoning"] = {"effort": effort}
    spec = dig(chat, "response_format", "json_schema")
    if isinstance(spec, dict):
        out["text"] = {"format": {"type": "json_schema", **spec}}


def _tools(chat: dict, out: dict) -> None:
    tools = []
    for tool in as_list(chat.get("tools")):
        function = tool["function"]
        flat = {"type": "function", "name": function["name"]}
        if "description" in function:
            flat["description"] = function["description"]
        flat["parameters"] = function.get("parameters")
        flat["strict"] = function.get("strict") is True
        tools.append(flat)
    if tools:
        out["tools"] = tools
    choice = chat.get("tool_choice")
    if isinstance(choice, dict):
        choice = {"type": "function", "name": choice["function"]["name"]}
    if choice is not None:
        out["tool_choice"] = choice


def _web_search(body: dict, out: dict, dropped: list[str]) -> None:
    """Claude's web search tool as OpenAI's hosted one, instead of its drop."""
    for k, tool in enumerate(as_list(body.get("tools"))):
        kind = dig(tool, "type")
        if not isinstance(kind, str) or not _WEB_SEARCH.fullmatch(kind):
            continue
        dropped.remove(left_out_tool(k, kind))
        search: dict[str, Any] = {"type": "web_search"}
        for key, value in tool.items():
            if key == "allowed_domains" and value:
                search["filters"] = {"allowed_domains": value}
            elif key == "user_location" and isinstance(value, dict):
                fields = {name: value[name] for name in _LOCATION_KEYS if value.get(name)}
                search["user_location"] = {"type": "approximate", **fields}
            elif key in _NO_SEARCH_EQUIVALENT and value is not None:
                dropped.append(f"tools[{k}].{key} ({_NO_SEARCH_EQUIVALENT[key]})")
            elif key not in ("type", "name") and value is not None:
                dropped.append(f"tools[{k}].{key}")
        out.setdefault("tools", []).append(search)
        out["include"] = ["web_search_call.action.sources"]
        return


def _input(messages: list[dict]) -> tuple[str | None, list[dict]]:
    """(instructions, input items) from the Chat messages `messages_to_chat` built."""
    instructions = None
    items: list[dict] = []
    for i, msg in enumerate(messages):
        role, content = msg["role"], msg.get("content")
        if role in ("system", "developer") and i == 0:
            instructions = _text(content)
        elif role in ("system", "developer"):  # one in mid-conversation stays in its place
            items.append({"type": "message", "role": role, "content": _parts(content)})
        elif role == "user":
            items.append({"type": "message", "role": "user", "content": _parts(content)})
        elif role == "assistant":
            if text := _text(content):
                items.append({"type": "message", "role": "assistant", "content": text})
            items.extend(_call(call) for call in as_list(msg.get("tool_calls")))
        elif role == "tool":
            item = {"type": "function_call_output", "call_id": msg["tool_call_id"]}
            items.append({**item, "output": _text(content)})
        else:
            raise Untranslatable(f"messages[{i}]: role {role!r} has no Responses equivalent")
    return instructions, items


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(as_str(dig(part, "text")) or "" for part in as_list(content))


def _parts(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts = []
    for part in as_list(content):
        kind = part["type"]
        if kind == "text":
            parts.append({"type": "input_text", "text": part["text"]})
        elif kind == "image_url":
            url = part["image_url"]["url"]
            parts.append({"type": "input_image", "image_url": url, "detail": "auto"})
        elif kind == "file":
            parts.append({"type": "input_file", **part["file"]})
    return parts


def _call(call: dict) -> dict:
    function = call["function"]
    return {
        "type": "function_call",
        "call_id": call["id"],
        "name": function["name"],
        "arguments": function["arguments"],
    }
