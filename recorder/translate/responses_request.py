"""OpenAI Responses request -> Anthropic Messages request (PROTOCOLS 2, 5.2).

The request is put in a Chat request's envelope (items by `responses_items`, the top-level
keys here) and handed to `chat_to_messages`, so every Chat rule carries over unchanged:
max_tokens default, thinking by effort and style, sampling, structured output, user id,
tool-name and id fitting, prefill. Drops and refusals name the client's own keys.

=========================  ==================================================================
Responses                  Chat (then Anthropic as in 5.2)
=========================  ==================================================================
``instructions``, input    messages (`responses_items`); ``history`` first
function tools (flat)      ``tools[].function``; ``strict`` kept only when true
``tool_choice``            auto / none / required / ``{type: function, name}`` /
                           ``allowed_tools`` -> the Chat forms
``parallel_tool_calls``    the same
``max_output_tokens``      ``max_completion_tokens``
``reasoning.effort``       ``reasoning_effort`` (``summary`` dropped: no reasoning items come
                           back)
``text.format``            ``response_format`` (json_schema, json_object); ``verbosity``
                           dropped
temperature, top_p, user,  the same
safety_identifier, stream
=========================  ==================================================================

`Untranslatable` (taplog then does not fail over): ``background: true``, a ``conversation``,
a stored ``prompt`` template, ``previous_response_id`` without the rebuilt ``history``, ``n``
> 1, log probabilities, hosted or non-function tools and a ``tool_choice`` naming one,
encrypted reasoning. With ``drop_untranslatable`` the tools, tool items and encrypted
reasoning are left out instead and recorded; the rest is always refused. Every other key
(``store``, ``metadata``, ``include``, ``truncation``, ``prompt_cache_key``, ...) is dropped and
recorded; the answer translators echo the ones a client reads back.
"""

from __future__ import annotations

from typing import Any

from recorder.wire.sse import as_int, as_list, as_str, dig

from .base import Context, Translated, Untranslatable
from .chat_request import ThinkingStyle, chat_to_messages
from .naming import ANTHROPIC_ID_LIMIT, ANTHROPIC_NAME_LIMIT, Renames
from .responses_items import chat_messages

__all__ = ["responses_to_messages"]

_HANDLED = frozenset(
    {
        *("model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls"),
        *("max_output_tokens", "reasoning", "text", "temperature", "top_p", "user", "stream"),
        *("safety_identifier", "previous_response_id", "background", "conversation"),
        *("prompt", "n", "top_logprobs", "include"),
    }
)
_FUNCTION_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
_LOGPROBS = "message.output_text.logprobs"
# Chat words in `chat_to_messages` drops -> the Responses key the client sent
_CLIENT_WORDS = {
    "reasoning_effort": "reasoning.effort",
    "response_format": "text.format",
    "max_completion_tokens": "max_output_tokens",
}


def responses_to_messages(
    body: dict,
    *,
    model: str,
    history: list[dict] | None = None,
    default_max_tokens: int = 4096,
    allow_prefill: bool = False,
    thinking_style: ThinkingStyle = "adaptive",
    sampling: bool = False,
    drop_untranslatable: bool = False,
) -> Translated:
    """Translate a Responses request for Anthropic; `model` is the Anthropic model.

    `history` is the chain named by ``previous_response_id``, rebuilt by the caller from its
    log as Responses items (earlier inputs and outputs, in order); it goes before ``input``.
    """
    _refuse(body, history)
    ctx = Context(Renames(ANTHROPIC_NAME_LIMIT, ANTHROPIC_ID_LIMIT))
    ctx.dropped.extend(key for key in body if key not in _HANDLED)
    chat: dict[str, Any] = {"model": model}
    chat["messages"] = chat_messages(body, history, ctx, drop_untranslatable)
    _tools(body, chat, ctx, drop_untranslatable)
    _options(body, chat, ctx)
    _text_format(body, chat, ctx)
    for entry in as_list(body.get("include")):
        ctx.drop(f"include {entry!r} (nothing of that kind comes back)")
    translated = chat_to_messages(
        chat,
        model=model,
        default_max_tokens=default_max_tokens,
        thinking_style=thinking_style,
        sampling=sampling,
        allow_prefill=allow_prefill,
    )
    for entry in translated.dropped:
        ctx.drop(_client_words(entry))
    return Translated(translated.body, ctx.dropped, translated.tools, translated.tool_ids)


def _refuse(body: dict, history: list | None) -> None:
    """What Anthropic cannot serve at all, whatever the configuration."""
    if body.get("background") is True:
        raise Untranslatable("background: true: OpenAI keeps such responses for polling")
    if body.get("conversation") is not None:
        raise Untranslatable("conversation: the conversation is held by OpenAI")
    if body.get("prompt") is not None:
        raise Untranslatable("prompt: stored prompt templates are held by OpenAI")
    if body.get("previous_response_id") is not None and history is None:
        raise Untranslatable(
            "previous_response_id: the earlier responses of this chain are not in the log, "
            "so their history cannot be rebuilt"
        )
    if body.get("n") not in (None, 1):
        raise Untranslatable(f"n={body['n']!r}: Anthropic returns one answer per request")
    if (as_int(body.get("top_logprobs")) or 0) > 0 or _LOGPROBS in as_list(body.get("include")):
        raise Untranslatable("logprobs: Anthropic returns no token log probabilities")


def _tools(body: dict, chat: dict, ctx: Context, leave_out: bool) -> None:
    tools = []
    for k, tool in enumerate(as_list(body.get("tools"))):
        kind = dig(tool, "type")
        if kind == "function":
            tools.append(_function(tool, f"tools[{k}]", ctx))
        elif leave_out:
            ctx.drop(f"tools[{k}] ({kind}: left out, Anthropic cannot run it)")
        else:
            raise Untranslatable(f"tools[{k}]: {kind!r} tools have no Anthropic equivalent")
    if tools:
        chat["tools"] = tools
    if (choice := _choice(body.get("tool_choice"), ctx, leave_out)) is not None:
        chat["tool_choice"] = choice
    if isinstance(body.get("parallel_tool_calls"), bool):
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]


def _function(tool: dict, where: str, ctx: Context) -> dict:
    if not as_str(tool.get("name")):
        raise Untranslatable(f"{where}: a function tool needs a name")
    function = {key: tool[key] for key in ("name", "description", "parameters") if key in tool}
    if tool.get("strict") is True:
        function["strict"] = True
    for key in tool:
        if key not in _FUNCTION_KEYS:
            ctx.drop(f"{where}.{key}")
    return {"type": "function", "function": function}


def _choice(choice: Any, ctx: Context, leave_out: bool) -> Any:
    """Responses ``tool_choice`` in Chat's shape."""
    kind = dig(choice, "type")
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if kind == "function" and as_str(choice.get("name")):
        return {"type": "function", "function": {"name": choice["name"]}}
    if kind == "allowed_tools":
        names = [t["name"] for t in as_list(choice.get("tools")) if dig(t, "type") == "function"]
        tools = [{"type": "function", "function": {"name": name}} for name in names]
        mode = "required" if choice.get("mode") == "required" else "auto"
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}
    if leave_out:
        ctx.drop(f"tool_choice ({kind}: left out, its tool cannot run on Anthropic)")
        return None
    raise Untranslatable(f"tool_choice {choice!r} has no Anthropic equivalent")


def _options(body: dict, chat: dict, ctx: Context) -> None:
    """Token limit, effort, sampling, user ids and streaming: same meaning, Chat names."""
    if (limit := as_int(body.get("max_output_tokens"))) is not None:
        chat["max_completion_tokens"] = limit
    reasoning = body.get("reasoning")
    for key in reasoning if isinstance(reasoning, dict) else ():
        if key == "effort":
            chat["reasoning_effort"] = reasoning["effort"]
        elif reasoning[key] is not None:
            ctx.drop(f"reasoning.{key} (no reasoning items come back)")
    for key in ("temperature", "top_p", "user", "safety_identifier", "stream"):
        if body.get(key) is not None:
            chat[key] = body[key]


def _text_format(body: dict, chat: dict, ctx: Context) -> None:
    text = body.get("text")
    for key in text if isinstance(text, dict) else ():
        if key != "format" and text[key] is not None:
            ctx.drop(f"text.{key}")
    fmt = dig(text, "format")
    kind = dig(fmt, "type")
    if fmt is None or kind == "text":
        return
    if kind == "json_schema":
        if not isinstance(fmt.get("schema"), dict):
            raise Untranslatable("text.format json_schema without a schema")
        spec = {"name": as_str(fmt.get("name")) or "output", "schema": fmt["schema"]}
        chat["response_format"] = {"type": "json_schema", "json_schema": spec}
    elif kind == "json_object":
        chat["response_format"] = {"type": "json_object"}
    else:
        raise Untranslatable(f"text.format {kind!r} has no Anthropic equivalent")


def _client_words(entry: str) -> str:
    for chat_word, client_word in _CLIENT_WORDS.items():
        if entry.startswith(chat_word):
            return client_word + entry.removeprefix(chat_word)
    return entry
