"""OpenAI Chat Completions request -> Anthropic Messages request (docs/protocols.md 5.2).

Contracts: pure (the client's body is never changed); only keys Anthropic accepts leave
(5.8.7), every other key is named in `Translated.dropped`; `Untranslatable` when the
request needs what Anthropic cannot do: several choices, log probabilities, audio, legacy
``functions``, custom tools, files held by OpenAI, a trailing assistant turn (5.8.5). The
messages themselves are converted by `turns_to_neutral`.

Choices where docs/protocols.md leaves room:

* ``reasoning_effort`` (minimal..max): with ``thinking_style="adaptive"`` (Claude 4.6+,
  required from Opus 4.7) ``thinking: adaptive`` plus ``output_config.effort`` (minimal ->
  low; xhigh and max kept); with ``"budget"`` (older models) ``budget_tokens`` of 1024 /
  2048 / 8192 / 16384 / 32768 / 32768, capped to leave 1024 answer tokens under the client's
  max, or added to the default max when the client set none. ``none`` sends nothing.
  Thinking stays off, and the drop is recorded, when a tool is forced (Anthropic refuses
  that) or the current tool turn has no thinking block to replay (5.8.8).
* ``max_completion_tokens`` / ``max_tokens`` -> ``max_tokens``, else `default_max_tokens`.
* ``temperature``/``top_p`` go only with ``sampling=True`` (newer Claude models refuse
  them) and never with thinking; temperature is clamped to 0-1 and ``top_p`` dropped next to
  it, as models refuse both together (5.8.14).
* ``response_format: json_object`` has no twin (5.8.6): a system instruction asks for one
  JSON object instead. ``json_schema`` -> ``output_config.format``.
* ``tool_choice: allowed_tools`` narrows the tool list and becomes auto/any.
* ``safety_identifier`` (else ``user``) -> ``metadata.user_id`` unless it looks like an
  e-mail address; longer than 256 characters, it is sent as its sha256.
"""

from __future__ import annotations

from typing import Any, Literal

from taplog.recorder.vendors.anthropic.thinking import unthought_tool_turn
from taplog.recorder.vendors.naming import ANTHROPIC_ID_LIMIT, ANTHROPIC_NAME_LIMIT, Renames
from taplog.recorder.vendors.openai_chat.turns_to_neutral import conversation
from taplog.recorder.vendors.sse import as_int, as_list, as_str, dig
from taplog.recorder.vendors.translation import (
    RequestTranslation,
    Translated,
    Untranslatable,
    looks_like_email,
    stable_identifier,
)

__all__ = ["ThinkingStyle", "chat_to_messages"]

ThinkingStyle = Literal["adaptive", "budget"]

_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768}
_BUDGETS["max"] = _BUDGETS["xhigh"]
_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
_EFFORTS |= {"xhigh": "xhigh", "max": "max"}
_ANSWER_ROOM = 1024  # tokens a thinking budget leaves for the answer itself
_JSON_OBJECT = "Respond with one valid JSON object and nothing else."
_HANDLED = frozenset(
    {
        *("model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream"),
        *("stream_options", "max_completion_tokens", "max_tokens", "stop", "temperature"),
        *("top_p", "user", "safety_identifier", "reasoning_effort", "response_format", "n"),
        *("logprobs", "top_logprobs", "modalities", "audio"),
    }
)


def chat_to_messages(
    body: dict,
    *,
    model: str,
    default_max_tokens: int = 4096,
    thinking_style: ThinkingStyle = "adaptive",
    sampling: bool = False,
    allow_prefill: bool = False,
    answered: bool = False,
) -> Translated:
    """Translate an OpenAI Chat request for Anthropic; `model` is the Anthropic model.
    `answered`: its last assistant message is the model's answer, kept as it is (tool calls
    and all), not refused as a prefill."""
    _refuse(body)
    ctx = RequestTranslation(Renames(ANTHROPIC_NAME_LIMIT, ANTHROPIC_ID_LIMIT))
    ctx.dropped.extend(key for key in body if key not in _HANDLED)
    system, messages = conversation(body["messages"], ctx, allow_prefill, answered)
    max_tokens, explicit = _max_tokens(body, default_max_tokens)
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    tools, choice = _tools(body, ctx)
    if tools:
        out["tools"] = tools
    if choice:
        out["tool_choice"] = choice
    _response_format(body, out, system, ctx)
    if system:
        out["system"] = system
    if stop := _stop(body, ctx):
        out["stop_sequences"] = stop
    if user_id := _user_id(body, ctx):
        out["metadata"] = {"user_id": user_id}
    thinking = _thinking(body, out, thinking_style, explicit, ctx)
    _sampling(body, out, sampling and not thinking, ctx)
    if isinstance(body.get("stream"), bool):
        out["stream"] = body["stream"]
    return ctx.result(out)


def _refuse(body: dict) -> None:
    """What Anthropic cannot serve at all (5.8.5)."""
    if body.get("n") not in (None, 1):
        raise Untranslatable(f"n={body['n']!r}: Anthropic returns one answer per request")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise Untranslatable("logprobs/top_logprobs: Anthropic returns no token log probabilities")
    if body.get("audio") is not None or any(m != "text" for m in as_list(body.get("modalities"))):
        raise Untranslatable("audio output: Anthropic answers in text only")
    if body.get("functions") or body.get("function_call"):
        raise Untranslatable("legacy functions/function_call: the answer would need that shape")
    if not as_list(body.get("messages")):
        raise Untranslatable("messages: no messages to translate")


def _max_tokens(body: dict, default: int) -> tuple[int, bool]:
    """(max_tokens, whether the client set it)."""
    for key in ("max_completion_tokens", "max_tokens"):
        value = as_int(body.get(key))
        if value is not None and value > 0:
            return value, True
    return default, False


def _tools(body: dict, ctx: RequestTranslation) -> tuple[list[dict], dict | None]:
    """Tool definitions and tool_choice; ``allowed_tools`` narrows the tool list."""
    choice = body.get("tool_choice")
    allowed: set[str] | None = None
    if dig(choice, "type") == "allowed_tools":
        spec = choice.get("allowed_tools")
        allowed = {as_str(dig(t, "function", "name")) or "" for t in as_list(dig(spec, "tools"))}
        choice = "required" if dig(spec, "mode") == "required" else "auto"
    tools = []
    for k, tool in enumerate(as_list(body.get("tools"))):
        if allowed is None or dig(tool, "function", "name") in allowed:
            tools.append(_tool(tool, f"tools[{k}]", ctx))
    return tools, _choice(choice, body.get("parallel_tool_calls"), bool(tools), ctx)


def _tool(tool: Any, where: str, ctx: RequestTranslation) -> dict:
    if dig(tool, "type") != "function":
        raise Untranslatable(f"{where}: only function tools have an Anthropic equivalent")
    fn = tool.get("function")
    name = as_str(dig(fn, "name"))
    if not name:
        raise Untranslatable(f"{where}: a function tool needs a name")
    schema = dig(fn, "parameters")
    schema = schema if isinstance(schema, dict) else {}
    out: dict[str, Any] = {
        "name": ctx.renames.name(name),
        "input_schema": {"type": "object", **schema},
    }
    if description := as_str(fn.get("description")):
        out["description"] = description
    if fn.get("strict") is True:
        out["strict"] = True
    return out


def _choice(choice: Any, parallel: Any, has_tools: bool, ctx: RequestTranslation) -> dict | None:
    if not has_tools:
        pairs = (("tool_choice", choice), ("parallel_tool_calls", parallel))
        ctx.dropped.extend(f"{key} (no tools)" for key, value in pairs if value is not None)
        return None
    if choice is None and parallel is not False:
        return None
    if choice in (None, "auto"):
        out: dict[str, Any] = {"type": "auto"}
    elif choice in ("none", "required"):
        out = {"type": "none" if choice == "none" else "any"}
    elif dig(choice, "type") == "function" and as_str(dig(choice, "function", "name")):
        out = {"type": "tool", "name": ctx.renames.name(choice["function"]["name"])}
    else:
        raise Untranslatable(f"tool_choice {choice!r} has no Anthropic equivalent")
    if parallel is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _response_format(body: dict, out: dict, system: list[dict], ctx: RequestTranslation) -> None:
    fmt = body.get("response_format")
    kind = dig(fmt, "type")
    if fmt is None or kind == "text":
        return
    if kind == "json_schema":
        schema = dig(fmt, "json_schema", "schema")
        if not isinstance(schema, dict):
            raise Untranslatable("response_format json_schema without a schema")
        out.setdefault("output_config", {})["format"] = {"type": "json_schema", "schema": schema}
    elif kind == "json_object":
        system.append({"type": "text", "text": _JSON_OBJECT})
        ctx.dropped.append("response_format json_object (sent as a system instruction)")
    else:
        raise Untranslatable(f"response_format {kind!r} has no Anthropic equivalent")


def _stop(body: dict, ctx: RequestTranslation) -> list[str]:
    """``stop`` (string or list) -> a list; blank sequences are refused by Anthropic."""
    stop = body.get("stop")
    values = [stop] if isinstance(stop, str) else [s for s in as_list(stop) if isinstance(s, str)]
    kept = [s for s in values if s.strip()]
    if len(kept) < len(values):
        ctx.dropped.append("stop (blank sequences)")
    return kept


def _user_id(body: dict, ctx: RequestTranslation) -> str | None:
    for key in ("safety_identifier", "user"):
        value = as_str(body.get(key))
        if value and looks_like_email(value):
            ctx.dropped.append(f"{key} (looks like an e-mail address)")
        elif value:
            return stable_identifier(value, 256)
    return None


def _thinking(
    body: dict, out: dict, style: ThinkingStyle, explicit: bool, ctx: RequestTranslation
) -> bool:
    """Map ``reasoning_effort``; True when thinking was switched on."""
    effort = body.get("reasoning_effort")
    if effort in (None, "none"):
        return False
    if not isinstance(effort, str) or effort not in _BUDGETS:
        ctx.dropped.append(f"reasoning_effort ({effort!r} is not a known effort)")
        return False
    if dig(out, "tool_choice", "type") in ("any", "tool"):
        ctx.dropped.append("reasoning_effort (Anthropic cannot think while a tool is forced)")
        return False
    if unthought_tool_turn(out["messages"]):
        ctx.dropped.append("reasoning_effort (the current tool turn has no thinking block)")
        return False
    if style == "adaptive":
        out["thinking"] = {"type": "adaptive"}
        out.setdefault("output_config", {})["effort"] = _EFFORTS[effort]
        return True
    budget = _BUDGETS[effort]
    if explicit:
        budget = min(budget, out["max_tokens"] - _ANSWER_ROOM)
    if budget < 1024:  # Anthropic's minimum budget
        ctx.dropped.append("reasoning_effort (max tokens leave no room for a thinking budget)")
        return False
    if not explicit:
        out["max_tokens"] += budget
    out["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return True


def _sampling(body: dict, out: dict, allowed: bool, ctx: RequestTranslation) -> None:
    present = [key for key in ("temperature", "top_p") if body.get(key) is not None]
    if not allowed:
        ctx.dropped.extend(present)
        return
    if "temperature" in present and isinstance(body["temperature"], int | float):
        out["temperature"] = min(max(float(body["temperature"]), 0.0), 1.0)
        if "top_p" in present:
            ctx.dropped.append("top_p (Anthropic refuses it next to temperature)")
    elif "top_p" in present:
        out["top_p"] = body["top_p"]
