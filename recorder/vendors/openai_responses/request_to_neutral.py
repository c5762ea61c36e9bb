"""OpenAI Responses request -> Anthropic Messages request (docs/protocols.md 2, 5.2).

The request is put in a Chat request's envelope (items by `items`, the top-level
keys here) and handed to `chat_to_messages`, so every Chat rule carries over unchanged:
max_tokens default, thinking by effort and style, sampling, structured output, user id,
tool-name and id fitting, prefill. Drops and refusals name the client's own keys.

=========================  ==================================================================
Responses                  Chat (then Anthropic as in 5.2)
=========================  ==================================================================
``instructions``, input    messages (`items`); ``history`` first
``tools``                  function, namespace and custom tools -> Chat function tools,
                           hosted web search -> Claude's web search tool (`tools`)
``tool_choice``            auto / none / required / a named function or custom tool /
                           ``allowed_tools`` -> the Chat forms (`tools`)
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
> 1, log probabilities, tools without an Anthropic equivalent and a ``tool_choice`` naming
one, encrypted reasoning. With ``drop_untranslatable`` those tools, their items and
encrypted reasoning are left out instead and recorded; the rest is always refused. Every
other key (``store``, ``metadata``, ``truncation``, ``prompt_cache_key``, ...) is dropped
and recorded; the answer translators echo the ones a client reads back. ``include`` entries
are recorded too, except ``web_search_call.action.sources`` next to a web search that was
sent: those sources always come back.

`Translated.tools` holds the client's tool behind every wire name that says less: the
Chat translation's renamed names and the namespaced and freeform tools.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.naming import ANTHROPIC_ID_LIMIT, ANTHROPIC_NAME_LIMIT, Renames
from taplog.recorder.vendors.openai_chat.request_to_neutral import ThinkingStyle, chat_to_messages
from taplog.recorder.vendors.openai_responses.items import chat_messages
from taplog.recorder.vendors.openai_responses.tools import ResponsesTools
from taplog.recorder.vendors.sse import as_int, as_list, as_str, dig
from taplog.recorder.vendors.translation import RequestTranslation, Translated, Untranslatable

__all__ = ["responses_to_messages"]

_HANDLED = frozenset(
    {
        *("model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls"),
        *("max_output_tokens", "reasoning", "text", "temperature", "top_p", "user", "stream"),
        *("safety_identifier", "previous_response_id", "background", "conversation"),
        *("prompt", "n", "top_logprobs", "include"),
    }
)
_LOGPROBS = "message.output_text.logprobs"
_SOURCES = "web_search_call.action.sources"
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
    answered: bool = False,
) -> Translated:
    """Translate a Responses request for Anthropic; `model` is the Anthropic model;
    `answered`: its last assistant items are the model's answer, not a prefill.

    `history` is the chain named by ``previous_response_id``, rebuilt by the caller from its
    log as Responses items (earlier inputs and outputs, in order); it goes before ``input``.
    """
    _refuse(body, history)
    ctx = RequestTranslation(Renames(ANTHROPIC_NAME_LIMIT, ANTHROPIC_ID_LIMIT))
    ctx.dropped.extend(key for key in body if key not in _HANDLED)
    chat: dict[str, Any] = {"model": model}
    chat["messages"] = chat_messages(body, history, ctx, drop_untranslatable)
    tools = _tools(body, chat, ctx, drop_untranslatable)
    _options(body, chat, ctx)
    _text_format(body, chat, ctx)
    for entry in as_list(body.get("include")):
        if entry != _SOURCES or tools.web_search is None:
            ctx.drop(f"include {entry!r} (nothing of that kind comes back)")
    translated = chat_to_messages(
        chat,
        model=model,
        default_max_tokens=default_max_tokens,
        thinking_style=thinking_style,
        sampling=sampling,
        allow_prefill=allow_prefill,
        answered=answered,
    )
    for entry in translated.dropped:
        ctx.drop(_client_words(entry))
    if tools.web_search is not None:
        translated.body.setdefault("tools", []).append(tools.web_search)
    client_tools = {**translated.tools, **tools.client}
    return Translated(translated.body, ctx.dropped, client_tools, translated.tool_ids)


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


def _tools(body: dict, chat: dict, ctx: RequestTranslation, leave_out: bool) -> ResponsesTools:
    tools = ResponsesTools(ctx, leave_out)
    tools.read(body.get("tools"))
    if (choice := tools.choice(body.get("tool_choice"))) is not None:
        chat["tool_choice"] = choice
    if tools.chat:
        chat["tools"] = tools.chat
    if isinstance(body.get("parallel_tool_calls"), bool):
        chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    return tools


def _options(body: dict, chat: dict, ctx: RequestTranslation) -> None:
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


def _text_format(body: dict, chat: dict, ctx: RequestTranslation) -> None:
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
