"""Gemini ``generateContent`` request -> Anthropic Messages request.

Contracts: pure (the client's body is never changed); keys are read in either spelling
(`parts.fields`); only keys Anthropic accepts leave, every other key is named in
`Translated.dropped` (``safetySettings``, ``seed``, penalties, ``speechConfig``, ...). The
model and the stream flag are in Gemini's URL, so the caller passes them. The turns are
converted by `turns_to_neutral`.

`Untranslatable` (taplog then does not fail over), or with ``leave_out`` left out and
recorded: ``cachedContent``, ``candidateCount`` > 1, log probabilities, answers other than
text (``responseModalities``), tools other than functions (Google Search, code execution,
URL context, ...), a ``responseMimeType`` other than text or JSON, and the parts
`turns_to_neutral` names.

Choices where the wire leaves room:

* ``maxOutputTokens`` -> ``max_tokens``, else `default_max_tokens`.
* ``thinkingConfig`` -> adaptive thinking: ``thinkingLevel`` minimal/low -> effort low,
  medium, high kept; else a ``thinkingBudget`` gives the effort by its size (< 4096 low,
  < 16384 medium, else high), -1 or none leaves Claude's default effort, 0 means no
  thinking. No ``thinkingConfig``, no thinking (Claude's default; Gemini's own default
  is to think, but its clients say how). Thinking stays off, and that is recorded, when
  a tool is forced (Anthropic refuses that) or the current tool turn has no thinking
  block to replay (`anthropic.thinking`): Gemini's thoughts never reach Claude, so inside
  a tool loop it never has one. ``includeThoughts`` is the answer translators' to read.
* ``temperature``/``topP`` go only with ``sampling=True`` (newer Claude models refuse
  them) and never with thinking; temperature (Gemini's 0-2) is clamped to 0-1 and ``topP``
  dropped next to it, as Anthropic refuses both together. ``topK`` is always dropped.
* ``responseMimeType: application/json`` with ``responseJsonSchema`` (or an OpenAPI-style
  ``responseSchema``, converted by `schema`) -> ``output_config.format``; without a schema
  a system instruction asks for JSON.
* function ``parametersJsonSchema`` is sent as it is, OpenAPI-style ``parameters``
  converted; ``response`` schemas and ``behavior`` are dropped.
* ``functionCallingConfig``: AUTO and VALIDATED (recorded) -> auto, ANY -> any, NONE ->
  none; ``allowedFunctionNames`` narrows the tools sent, and forces the one tool it names
  under ANY.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.anthropic.thinking import unthought_tool_turn
from taplog.recorder.vendors.gemini.parts import camel, fields, no_twin
from taplog.recorder.vendors.gemini.schema import json_schema
from taplog.recorder.vendors.gemini.turns_to_neutral import conversation
from taplog.recorder.vendors.naming import ANTHROPIC_ID_LIMIT, ANTHROPIC_NAME_LIMIT, Renames
from taplog.recorder.vendors.sse import as_int, as_list, as_str
from taplog.recorder.vendors.translation import RequestTranslation, Translated, Untranslatable

__all__ = ["gemini_to_messages"]

_HANDLED = frozenset(
    {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig", "cachedContent"}
)
_CONFIG_HANDLED = frozenset(
    {
        *("maxOutputTokens", "stopSequences", "temperature", "topP", "thinkingConfig"),
        *("candidateCount", "responseLogprobs", "logprobs", "responseModalities"),
        *("responseMimeType", "responseSchema", "responseJsonSchema"),
    }
)
_DECLARATION_KEYS = frozenset({"name", "description", "parameters", "parametersJsonSchema"})
_EFFORTS = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}
_JSON = "Respond with valid JSON and nothing else."
_MODES = {"AUTO": "auto", "MODE_UNSPECIFIED": "auto", "VALIDATED": "auto", "ANY": "any"}
_MODES |= {"NONE": "none"}


def gemini_to_messages(
    body: dict,
    *,
    model: str,
    stream: bool = False,
    allow_prefill: bool = False,
    answered: bool = False,
    leave_out: bool = False,
    default_max_tokens: int = 4096,
    sampling: bool = False,
) -> Translated:
    """Translate a Gemini request for Anthropic; `model` is the Anthropic model, `stream`
    whether the client called ``streamGenerateContent``. `answered`: its last model turn is
    the model's answer, kept as it is (calls and all), not refused as a prefill."""
    top = fields(body)
    config = fields(top.get("generationConfig"))
    ctx = RequestTranslation(Renames(ANTHROPIC_NAME_LIMIT, ANTHROPIC_ID_LIMIT))
    ctx.dropped.extend(key for key in body if camel(key) not in _HANDLED)
    ctx.dropped.extend(f"generationConfig.{key}" for key in config if key not in _CONFIG_HANDLED)
    _refuse(top, config, ctx, leave_out)
    system, messages = conversation(
        top.get("systemInstruction"),
        top.get("contents"),
        ctx,
        allow_prefill=allow_prefill,
        answered=answered,
        leave_out=leave_out,
    )
    max_tokens = as_int(config.get("maxOutputTokens"))
    max_tokens = max_tokens if max_tokens is not None and max_tokens > 0 else default_max_tokens
    out: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    tools, choice = _tools(top, ctx, leave_out)
    if tools:
        out["tools"] = tools
    if choice:
        out["tool_choice"] = choice
    _response_format(config, out, system, ctx, leave_out)
    if system:
        out["system"] = system
    if stop := _stop(config, ctx):
        out["stop_sequences"] = stop
    thinking = _thinking(config, out, ctx)
    _sampling(config, out, sampling and not thinking, ctx)
    if stream:
        out["stream"] = True
    return ctx.result(out)


def _refuse(top: dict, config: dict, ctx: RequestTranslation, leave_out: bool) -> None:
    """What Claude cannot serve: refused, or with `leave_out` left out and recorded."""
    if not as_list(top.get("contents")):
        raise Untranslatable("contents: no contents to translate")
    if top.get("cachedContent"):
        why = "the conversation's start is held by Google, out of Claude's reach"
        no_twin(ctx, leave_out, "cachedContent", "a cached content", why)
    if (count := config.get("candidateCount")) not in (None, 1):
        why = "Claude gives one answer per request"
        no_twin(ctx, leave_out, "generationConfig", f"candidateCount {count}", why)
    if config.get("responseLogprobs") or config.get("logprobs") is not None:
        why = "Claude returns no token log probabilities"
        no_twin(ctx, leave_out, "generationConfig", "logprobs", why)
    modalities = [str(m).upper() for m in as_list(config.get("responseModalities"))]
    if any(m != "TEXT" for m in modalities):
        why = "Claude answers in text only"
        no_twin(ctx, leave_out, "generationConfig", f"responseModalities {modalities}", why)


def _tools(top: dict, ctx: RequestTranslation, leave_out: bool) -> tuple[list[dict], dict | None]:
    """Function declarations as Anthropic tools, and the tool choice."""
    declared: list[tuple[dict, str]] = []
    for k, tool in enumerate(as_list(top.get("tools"))):
        for key, value in fields(tool).items():
            if key != "functionDeclarations":
                why = "Claude cannot run Google's tools"
                no_twin(ctx, leave_out, f"tools[{k}]", f"the {key} tool", why)
                continue
            for j, declaration in enumerate(as_list(value)):
                where = f"tools[{k}].functionDeclarations[{j}]"
                declared.append((fields(declaration), where))
    tool_config = fields(top.get("toolConfig"))
    for key in tool_config:
        if key != "functionCallingConfig":
            ctx.drop(f"toolConfig.{key}")
    calling = fields(tool_config.get("functionCallingConfig"))
    allowed = [n for n in as_list(calling.get("allowedFunctionNames")) if isinstance(n, str)]
    mode = (as_str(calling.get("mode")) or "AUTO").upper()
    if allowed and mode != "NONE":
        declared = [(d, where) for d, where in declared if d.get("name") in allowed]
    tools = [_tool(declaration, where, ctx) for declaration, where in declared]
    if not tools:
        if calling:
            ctx.drop("toolConfig (no tools)")
        return [], None
    return tools, _choice(calling, mode, allowed, ctx)


def _tool(declaration: dict, where: str, ctx: RequestTranslation) -> dict:
    name = as_str(declaration.get("name"))
    if not name:
        raise Untranslatable(f"{where}: a function declaration needs a name")
    schema = declaration.get("parametersJsonSchema")
    if not isinstance(schema, dict):
        schema = json_schema(declaration.get("parameters"))
    schema = schema if isinstance(schema, dict) else {}
    out: dict[str, Any] = {
        "name": ctx.renames.name(name),
        "input_schema": {"type": "object", **schema},
    }
    if description := as_str(declaration.get("description")):
        out["description"] = description
    for key in declaration:
        if key not in _DECLARATION_KEYS:
            ctx.drop(f"functionDeclarations[].{key}")
    return out


def _choice(calling: dict, mode: str, allowed: list[str], ctx: RequestTranslation) -> dict | None:
    for key in calling:
        if key not in ("mode", "allowedFunctionNames"):
            ctx.drop(f"toolConfig.functionCallingConfig.{key}")
    if mode not in _MODES:
        raise Untranslatable(f"functionCallingConfig mode {mode!r} has no Anthropic equivalent")
    if mode == "VALIDATED":
        ctx.drop("functionCallingConfig mode VALIDATED (sent as auto)")
    if not calling or (_MODES[mode] == "auto" and not allowed):
        return None  # Anthropic's default
    if mode == "ANY" and len(allowed) == 1:
        return {"type": "tool", "name": ctx.renames.name(allowed[0])}
    return {"type": _MODES[mode]}


def _response_format(
    config: dict, out: dict, system: list[dict], ctx: RequestTranslation, leave_out: bool
) -> None:
    mime = (as_str(config.get("responseMimeType")) or "text/plain").lower()
    schema = config.get("responseJsonSchema")
    if not isinstance(schema, dict):
        schema = json_schema(config.get("responseSchema"))
    if mime == "application/json" and isinstance(schema, dict):
        out.setdefault("output_config", {})["format"] = {"type": "json_schema", "schema": schema}
    elif mime == "application/json":
        system.append({"type": "text", "text": _JSON})
        ctx.drop("generationConfig.responseMimeType application/json (sent as an instruction)")
    elif mime != "text/plain":
        why = "Claude answers in text or JSON"
        no_twin(ctx, leave_out, "generationConfig", f"responseMimeType {mime!r}", why)
    elif schema is not None:
        ctx.drop("generationConfig.responseSchema (without responseMimeType application/json)")


def _stop(config: dict, ctx: RequestTranslation) -> list[str]:
    """Stop sequences; blank ones are refused by Anthropic."""
    values = [s for s in as_list(config.get("stopSequences")) if isinstance(s, str)]
    kept = [s for s in values if s.strip()]
    if len(kept) < len(values):
        ctx.drop("generationConfig.stopSequences (blank sequences)")
    return kept


def _thinking(config: dict, out: dict, ctx: RequestTranslation) -> bool:
    """Map ``thinkingConfig``; True when thinking was switched on."""
    raw = config.get("thinkingConfig")
    if raw is None:
        return False
    thinking = fields(raw)
    for key in thinking:
        if key not in ("includeThoughts", "thinkingBudget", "thinkingLevel"):
            ctx.drop(f"generationConfig.thinkingConfig.{key}")
    level = (as_str(thinking.get("thinkingLevel")) or "").lower()
    budget = as_int(thinking.get("thinkingBudget"))
    effort = _EFFORTS.get(level)
    if level and effort is None and level != "thinking_level_unspecified":
        ctx.drop(f"generationConfig.thinkingConfig.thinkingLevel ({level!r} is not known)")
    if effort is None and budget == 0:
        return False
    if effort is None and budget is not None and budget > 0:
        effort = "low" if budget < 4096 else "medium" if budget < 16384 else "high"
    if out.get("tool_choice", {}).get("type") in ("any", "tool"):
        ctx.drop("generationConfig.thinkingConfig (Claude cannot think while a tool is forced)")
        return False
    if unthought_tool_turn(out["messages"]):
        ctx.drop("generationConfig.thinkingConfig (the current tool turn has no thinking block)")
        return False
    out["thinking"] = {"type": "adaptive"}
    if effort is not None:
        out.setdefault("output_config", {})["effort"] = effort
    return True


def _sampling(config: dict, out: dict, allowed: bool, ctx: RequestTranslation) -> None:
    present = [key for key in ("temperature", "topP") if config.get(key) is not None]
    if not allowed:
        ctx.dropped.extend(f"generationConfig.{key}" for key in present)
        return
    if "temperature" in present and isinstance(config["temperature"], int | float):
        out["temperature"] = min(max(float(config["temperature"]), 0.0), 1.0)
        if "topP" in present:
            ctx.drop("generationConfig.topP (Anthropic refuses it next to temperature)")
    elif "topP" in present:
        out["top_p"] = config["topP"]
