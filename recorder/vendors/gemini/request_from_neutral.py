"""Anthropic Messages request -> Gemini ``generateContent`` request.

Also the second half of an OpenAI client's request for Gemini: the existing translators
bring it to Anthropic's shape first.

Contracts: pure; the body has no ``model`` and no ``stream`` (both go in Gemini's URL, the
caller's business: they are not "dropped"); only Gemini keys leave, in camelCase, and every
Anthropic key without a Gemini meaning (``metadata``, ``service_tier``, ``cache_control``,
``output_config.effort``, ...) is named in `Translated.dropped`. `Untranslatable`, or with
``leave_out`` left out and recorded: ``mcp_servers``, a ``container``, Anthropic-run
(server) tools, and the blocks `turns_from_neutral` names. The messages themselves are
converted there.

Choices where the wire leaves room (`model` is the Gemini model):

* ``tools`` -> one ``functionDeclarations`` tool, ``input_schema`` as
  ``parametersJsonSchema`` (the field that takes JSON Schema as it is); names fitted to
  Gemini's 64 characters.
* ``tool_choice`` auto / any / none -> AUTO / ANY / NONE, a named tool -> ANY with that one
  name allowed; ``disable_parallel_tool_use`` has no twin (recorded).
* ``thinking`` enabled -> ``thinkingBudget`` of its ``budget_tokens`` capped to what every
  Gemini model of the family takes (32768 for Pro models, else 24576; a larger budget is
  refused), adaptive -> dynamic (-1), both with ``includeThoughts`` unless the client asks
  for ``display: omitted``; disabled -> nothing (some Gemini models cannot stop thinking).
  ``output_config.effort`` has no twin that every model takes (recorded).
* ``max_tokens`` -> ``maxOutputTokens``, capped to 65536 (today's Gemini models' limit;
  Gemini refuses more); ``stop_sequences`` -> ``stopSequences``, the first five (Gemini's
  limit). ``temperature``, ``top_p``, ``top_k`` -> the same (Anthropic's 0-1 temperature
  fits Gemini's 0-2).
* ``output_config.format`` json_schema -> ``responseMimeType: application/json`` with
  ``responseJsonSchema``.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.gemini.parts import GEMINI_NAME_LIMIT, no_twin
from taplog.recorder.vendors.gemini.turns_from_neutral import conversation, strip_cache
from taplog.recorder.vendors.naming import ANTHROPIC_ID_LIMIT, Renames
from taplog.recorder.vendors.sse import as_int, as_list, as_str, dig
from taplog.recorder.vendors.translation import RequestTranslation, Translated, Untranslatable

__all__ = ["messages_to_gemini"]

_HANDLED = frozenset(
    {
        *("model", "stream", "messages", "system", "max_tokens", "tools", "tool_choice"),
        *("stop_sequences", "temperature", "top_p", "top_k", "thinking", "output_config"),
        *("mcp_servers", "container"),
    }
)
_TOOL_KEYS = frozenset({"type", "name", "description", "input_schema", "cache_control"})
_SAMPLING = (("temperature", "temperature"), ("top_p", "topP"), ("top_k", "topK"))
_MAX_OUTPUT = 65536
_STOP_LIMIT = 5
_PRO_BUDGET, _BUDGET = 32768, 24576
_DYNAMIC = -1


def messages_to_gemini(
    body: dict,
    *,
    model: str,
    allow_prefill: bool = False,
    answered: bool = False,
    leave_out: bool = False,
) -> Translated:
    """Translate an Anthropic request for Gemini; `model` (for the URL) is the Gemini model.
    `answered`: its last assistant message is the model's answer, not a prefill."""
    ctx = RequestTranslation(Renames(GEMINI_NAME_LIMIT, ANTHROPIC_ID_LIMIT))
    ctx.dropped.extend(key for key in body if key not in _HANDLED)
    _refuse(body, ctx, leave_out)
    system, contents = conversation(
        body, ctx, allow_prefill=allow_prefill, answered=answered, leave_out=leave_out
    )
    out: dict[str, Any] = {"contents": contents}
    if system:
        out["systemInstruction"] = {"parts": system}
    _tools(body, out, ctx, leave_out)
    config: dict[str, Any] = {}
    _limits(body, config, ctx)
    for key, wire in _SAMPLING:
        if body.get(key) is not None:
            config[wire] = body[key]
    _thinking(body, config, model, ctx)
    _output_format(body, config, ctx)
    if config:
        out["generationConfig"] = config
    return ctx.result(out)


def _refuse(body: dict, ctx: RequestTranslation, leave_out: bool) -> None:
    if as_list(body.get("mcp_servers")):
        why = "Anthropic connects to them, Gemini cannot"
        no_twin(ctx, leave_out, "mcp_servers", "MCP servers", why)
    if body.get("container") is not None:
        why = "it is held by Anthropic"
        no_twin(ctx, leave_out, "container", "a code execution container", why)


def _tools(body: dict, out: dict, ctx: RequestTranslation, leave_out: bool) -> None:
    declarations = []
    for k, tool in enumerate(as_list(body.get("tools"))):
        kind = dig(tool, "type")
        if kind not in (None, "custom"):
            why = "Gemini cannot run Anthropic's tools"
            no_twin(ctx, leave_out, f"tools[{k}]", f"the {kind} tool", why)
            continue
        name = as_str(dig(tool, "name"))
        if not name:
            raise Untranslatable(f"tools[{k}]: a tool needs a name")
        declaration: dict[str, Any] = {"name": ctx.renames.name(name)}
        if description := as_str(tool.get("description")):
            declaration["description"] = description
        schema = tool.get("input_schema")
        declaration["parametersJsonSchema"] = schema if isinstance(schema, dict) else {}
        strip_cache(tool, ctx)
        for key in tool:
            if key not in _TOOL_KEYS:
                ctx.drop(f"tools[].{key}")
        declarations.append(declaration)
    if declarations:
        out["tools"] = [{"functionDeclarations": declarations}]
    _choice(body.get("tool_choice"), out, ctx)


def _choice(choice: Any, out: dict, ctx: RequestTranslation) -> None:
    """tool_choice auto / any / none / a tool -> AUTO / ANY / NONE / ANY with one name."""
    if choice is None:
        return
    if "tools" not in out:
        ctx.drop("tool_choice (no tools)")
        return
    kind = dig(choice, "type")
    if kind in ("auto", "any", "none"):
        calling: dict[str, Any] = {"mode": kind.upper()}
    elif kind == "tool" and as_str(dig(choice, "name")):
        calling = {"mode": "ANY", "allowedFunctionNames": [ctx.renames.name(choice["name"])]}
    else:
        raise Untranslatable(f"tool_choice {choice!r} has no Gemini equivalent")
    if dig(choice, "disable_parallel_tool_use") is True:
        ctx.drop("tool_choice.disable_parallel_tool_use (Gemini has no such switch)")
    out["toolConfig"] = {"functionCallingConfig": calling}


def _limits(body: dict, config: dict, ctx: RequestTranslation) -> None:
    max_tokens = as_int(body.get("max_tokens"))
    if max_tokens is not None and max_tokens > 0:
        if max_tokens > _MAX_OUTPUT:
            ctx.drop(f"max_tokens above {_MAX_OUTPUT} (Gemini's limit; sent as {_MAX_OUTPUT})")
        config["maxOutputTokens"] = min(max_tokens, _MAX_OUTPUT)
    stops = [s for s in as_list(body.get("stop_sequences")) if isinstance(s, str)]
    if len(stops) > _STOP_LIMIT:
        ctx.drop(f"stop_sequences[{_STOP_LIMIT}:] (Gemini takes at most {_STOP_LIMIT})")
    if stops:
        config["stopSequences"] = stops[:_STOP_LIMIT]


def _thinking(body: dict, config: dict, model: str, ctx: RequestTranslation) -> None:
    thinking = body.get("thinking")
    mode = dig(thinking, "type")
    if mode is None or mode == "disabled":
        return
    if mode == "enabled" and (budget := as_int(thinking.get("budget_tokens"))) is not None:
        cap = _PRO_BUDGET if "pro" in model.lower() else _BUDGET
        if budget > cap:
            ctx.drop(f"thinking.budget_tokens above {cap} (the model's limit; sent as {cap})")
        chosen = {"thinkingBudget": min(budget, cap)}
    elif mode in ("enabled", "adaptive"):
        chosen = {"thinkingBudget": _DYNAMIC}
    else:
        ctx.drop(f"thinking ({mode!r} is not a known mode)")
        return
    chosen["includeThoughts"] = thinking.get("display") != "omitted"
    config["thinkingConfig"] = chosen


def _output_format(body: dict, config: dict, ctx: RequestTranslation) -> None:
    output = body.get("output_config")
    for key in output if isinstance(output, dict) else ():
        if key != "format":
            ctx.drop(f"output_config.{key}")
    fmt = dig(output, "format")
    if fmt is None:
        return
    schema = dig(fmt, "schema")
    if dig(fmt, "type") != "json_schema" or not isinstance(schema, dict):
        raise Untranslatable(f"output_config.format {fmt!r} has no Gemini equivalent")
    config["responseMimeType"] = "application/json"
    config["responseJsonSchema"] = schema
