"""Anthropic Messages request -> OpenAI Chat Completions request (docs/protocols.md 5.3).

Contracts: pure; only Chat Completions keys leave, every Anthropic key without an OpenAI
meaning (``top_k``, ``container``, ``service_tier``, ``cache_control``, ``mcp_servers``, ...)
is named in `Translated.dropped`; `Untranslatable` for what OpenAI cannot take. The
messages themselves are converted by `turns_from_neutral`.

Choices where docs/protocols.md leaves room (``reasoning_model`` says whether the OpenAI target is
a reasoning model, which decides three things OpenAI checks):

* system role ``developer`` for reasoning models, ``system`` otherwise;
* ``output_config.effort`` -> ``reasoning_effort`` (low/medium/high kept, xhigh and max ->
  high, the highest level every reasoning model takes); without an effort, a thinking
  ``budget_tokens`` picks a bucket: < 4096 low, < 16384 medium, else high. Adaptive thinking
  without an effort and disabled thinking leave the model's default. Non-reasoning models
  get no ``reasoning_effort`` (they refuse it);
* ``temperature``/``top_p`` are passed (Anthropic's 0-1 fits OpenAI's 0-2) except to
  reasoning models, which refuse them (5.8.14).
* ``max_tokens`` -> ``max_completion_tokens`` (reasoning models refuse ``max_tokens``);
  ``stop_sequences`` -> ``stop``, the first four (OpenAI's limit; the rest recorded).
* ``metadata.user_id`` -> ``safety_identifier``, as its sha256 hex when over 64 chars.
* ``output_config.format`` -> ``response_format`` json_schema with ``strict: false``:
  strict mode would refuse schemas Anthropic accepts (optional properties).
* Server tools and Anthropic-defined tools (typed, e.g. ``web_search_*``, ``bash_*``) are
  dropped: OpenAI has no way to run them; ``disable_parallel_tool_use`` ->
  ``parallel_tool_calls: false``.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.naming import OPENAI_ID_LIMIT, OPENAI_NAME_LIMIT, Renames
from taplog.recorder.vendors.openai_chat.turns_from_neutral import conversation
from taplog.recorder.vendors.sse import as_int, as_list, as_str, dig
from taplog.recorder.vendors.translation import (
    RequestTranslation,
    Translated,
    Untranslatable,
    stable_identifier,
)

__all__ = ["left_out_tool", "messages_to_chat"]

_HANDLED = frozenset(
    {
        *("model", "messages", "system", "max_tokens", "tools", "tool_choice", "stream"),
        *("stop_sequences", "metadata", "thinking", "output_config", "temperature", "top_p"),
    }
)
_EFFORTS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
_STOP_LIMIT = 4


def messages_to_chat(
    body: dict,
    *,
    model: str,
    reasoning_model: bool = True,
    allow_prefill: bool = False,
    answered: bool = False,
) -> Translated:
    """Translate an Anthropic request for OpenAI Chat; `model` is the OpenAI model.
    `answered`: its last assistant message is the model's answer, not a prefill."""
    ctx = RequestTranslation(Renames(OPENAI_NAME_LIMIT, OPENAI_ID_LIMIT))
    ctx.dropped.extend(key for key in body if key not in _HANDLED)
    role = "developer" if reasoning_model else "system"
    turns = conversation(body, ctx, role, allow_prefill, answered)
    out: dict[str, Any] = {"model": model, "messages": turns}
    max_tokens = as_int(body.get("max_tokens"))
    if max_tokens is not None and max_tokens < 1:
        raise Untranslatable("max_tokens 0 (cache pre-warming) has no OpenAI equivalent")
    if max_tokens is not None:
        out["max_completion_tokens"] = max_tokens
    _tools(body, out, ctx)
    if stop := _stop(body, ctx):
        out["stop"] = stop
    _metadata(body, out, ctx)
    if effort := _effort(body, reasoning_model, ctx):
        out["reasoning_effort"] = effort
    _output_format(body, out, ctx)
    _sampling(body, out, reasoning_model, ctx)
    if body.get("stream") is True:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    elif body.get("stream") is False:
        out["stream"] = False
    return ctx.result(out)


def _tools(body: dict, out: dict, ctx: RequestTranslation) -> None:
    tools = []
    for k, tool in enumerate(as_list(body.get("tools"))):
        kind = dig(tool, "type")
        if kind not in (None, "custom"):
            ctx.drop(left_out_tool(k, kind))
            continue
        name = as_str(dig(tool, "name"))
        if not name:
            raise Untranslatable(f"tools[{k}]: a tool needs a name")
        schema = tool.get("input_schema")
        function: dict[str, Any] = {"name": ctx.renames.name(name)}
        if description := as_str(tool.get("description")):
            function["description"] = description
        function["parameters"] = schema if isinstance(schema, dict) else {"type": "object"}
        if tool.get("strict") is True:
            function["strict"] = True
        _strip_cache(tool, ctx)
        tools.append({"type": "function", "function": function})
    if tools:
        out["tools"] = tools
    _choice(body.get("tool_choice"), out, ctx)


def left_out_tool(k: int, kind: Any) -> str:
    """How an Anthropic-run tool the Chat API cannot run is recorded."""
    return f"tools[{k}] ({kind}: OpenAI cannot run it)"


def _strip_cache(block: dict, ctx: RequestTranslation) -> None:
    if "cache_control" in block:
        ctx.drop("cache_control (OpenAI caches prompts by itself)")


def _choice(choice: Any, out: dict, ctx: RequestTranslation) -> None:
    """tool_choice any / tool / none / auto -> required / named / none / auto."""
    if choice is None:
        return
    if "tools" not in out:  # OpenAI refuses tool_choice without tools
        ctx.drop("tool_choice (no tools)")
        return
    kind = dig(choice, "type")
    if kind in ("auto", "none"):
        out["tool_choice"] = kind
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "tool" and as_str(dig(choice, "name")):
        name = ctx.renames.name(choice["name"])
        out["tool_choice"] = {"type": "function", "function": {"name": name}}
    else:
        raise Untranslatable(f"tool_choice {choice!r} has no OpenAI equivalent")
    if dig(choice, "disable_parallel_tool_use") is True and kind != "none":
        out["parallel_tool_calls"] = False


def _stop(body: dict, ctx: RequestTranslation) -> list[str]:
    stops = [s for s in as_list(body.get("stop_sequences")) if isinstance(s, str)]
    if len(stops) > _STOP_LIMIT:
        ctx.drop(f"stop_sequences[{_STOP_LIMIT}:] (OpenAI takes at most {_STOP_LIMIT})")
    return stops[:_STOP_LIMIT]


def _metadata(body: dict, out: dict, ctx: RequestTranslation) -> None:
    metadata = body.get("metadata")
    if user_id := as_str(dig(metadata, "user_id")):
        out["safety_identifier"] = stable_identifier(user_id, 64)
    for key in metadata if isinstance(metadata, dict) else ():
        if key != "user_id":
            ctx.drop(f"metadata.{key}")


def _effort(body: dict, reasoning_model: bool, ctx: RequestTranslation) -> str | None:
    mode = dig(body, "thinking", "type")
    effort = dig(body, "output_config", "effort")
    if not reasoning_model:
        if mode in ("enabled", "adaptive") or effort is not None:
            ctx.drop("thinking/effort (the OpenAI model does not reason)")
        return None
    if isinstance(effort, str) and effort in _EFFORTS:
        return _EFFORTS[effort]
    budget = as_int(dig(body, "thinking", "budget_tokens"))
    if mode == "enabled" and budget is not None:
        return "low" if budget < 4096 else "medium" if budget < 16384 else "high"
    if mode == "disabled":
        ctx.drop("thinking disabled (OpenAI reasoning models always reason)")
    return None


def _output_format(body: dict, out: dict, ctx: RequestTranslation) -> None:
    config = body.get("output_config")
    for key in config if isinstance(config, dict) else ():
        if key not in ("effort", "format"):
            ctx.drop(f"output_config.{key}")
    fmt = dig(config, "format")
    if fmt is None:
        return
    schema = dig(fmt, "schema")
    if dig(fmt, "type") != "json_schema" or not isinstance(schema, dict):
        raise Untranslatable(f"output_config.format {fmt!r} has no OpenAI equivalent")
    spec = {"name": "output", "schema": schema, "strict": False}
    out["response_format"] = {"type": "json_schema", "json_schema": spec}


def _sampling(body: dict, out: dict, reasoning_model: bool, ctx: RequestTranslation) -> None:
    for key in ("temperature", "top_p"):
        if body.get(key) is None:
            continue
        if reasoning_model:
            ctx.drop(f"{key} (reasoning models refuse it)")
        else:
            out[key] = body[key]
