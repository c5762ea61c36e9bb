"""Anthropic ``system`` and ``messages`` -> OpenAI Chat messages (docs/protocols.md 5.3, 5.8).

* ``system`` becomes the first message (role ``system``, or ``developer`` for reasoning
  models); several text blocks stay separate text parts. A system message in the middle of
  ``messages`` (Claude Code's list of agent types, beta ``mid-conversation-system``) becomes
  such a message at the same place: OpenAI takes them anywhere.
* A user message's ``tool_result`` blocks become one ``tool`` message each, before the rest
  of that message (OpenAI wants results right after the calls) (5.8.12).
* ``is_error`` has no OpenAI field (5.8.2): the result text gets an ``Error:`` prefix; the
  original request, flag included, is in the log.
* Images (and documents) cannot be tool content (5.8.13): they move into a user message
  right after the tool messages, introduced by a line that names the call.
* Assistant text blocks are joined; ``tool_use`` -> ``tool_calls`` with the input as compact
  JSON; thinking blocks are dropped, never replayed to another vendor (5.8.8); blocks of
  Anthropic-run server tools are dropped. All drops are recorded.
* ``cache_control`` is stripped (OpenAI caches on its own).
* A trailing assistant message is a prefill for Anthropic but a finished turn for OpenAI
  (5.8.4): `Untranslatable` unless prefill is allowed, then sent as a finished turn.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import RequestTranslation, Untranslatable, compact_json

__all__ = ["conversation"]

_THINKING = frozenset({"thinking", "redacted_thinking"})
_SERVER_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use", "mcp_tool_result"})


def conversation(
    body: dict, ctx: RequestTranslation, system_role: str, allow_prefill: bool, answered: bool
) -> list[dict]:
    """The OpenAI message list for an Anthropic request body."""
    out: list[dict] = []
    if system := _system(body.get("system"), ctx):
        out.append({"role": system_role, "content": system})
    messages = as_list(body.get("messages"))
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        role = dig(msg, "role")
        if role == "user":
            out.extend(_user(msg.get("content"), where, ctx))
        elif role == "assistant":
            if turn := _assistant(msg.get("content"), where, ctx):
                out.append(turn)
        elif role == "system":  # mid-conversation (Claude Code's agent list): stays in place
            if text := _system(msg.get("content"), ctx, where):
                out.append({"role": system_role, "content": text})
        else:
            raise Untranslatable(f"{where}: role {role!r} is not user, assistant or system")
    if not messages:
        raise Untranslatable("messages: no messages to translate")
    if dig(messages, -1, "role") == "assistant" and not answered:
        if not allow_prefill:
            raise Untranslatable(
                "the last message is an assistant prefill: Anthropic continues it, "
                "OpenAI would take it as a finished turn"
            )
        ctx.drop("prefill (sent as a finished assistant turn)")
    return out


def _simplest(parts: list[dict]) -> str | list[dict]:
    """A lone text part as a plain string, the shape every OpenAI-compatible server takes."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    return parts


def _system(system: Any, ctx: RequestTranslation, where: str = "system") -> str | list[dict] | None:
    if isinstance(system, str):
        return system or None
    parts = []
    for k, block in enumerate(as_list(system)):
        if dig(block, "type") != "text":
            raise Untranslatable(f"{where}[{k}]: only text blocks have an OpenAI equivalent")
        _strip_cache(block, ctx)
        parts.append({"type": "text", "text": as_str(block.get("text")) or ""})
    return _simplest(parts) if parts else None


def _strip_cache(block: dict, ctx: RequestTranslation) -> None:
    if "cache_control" in block:
        ctx.drop("cache_control (OpenAI caches prompts by itself)")


def _user(content: Any, where: str, ctx: RequestTranslation) -> list[dict]:
    """Tool messages first, then one user message with moved tool images and the rest."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    tools: list[dict] = []
    moved: list[dict] = []
    parts: list[dict] = []
    for j, block in enumerate(as_list(content)):
        at = f"{where}.content[{j}]"
        if not isinstance(block, dict):
            raise Untranslatable(f"{at} is not an object")
        _strip_cache(block, ctx)
        if block.get("type") == "tool_result":
            message, images = _tool_message(block, at, ctx)
            tools.append(message)
            moved.extend(images)
        else:
            parts.extend(_part(block, at))
    if moved or parts:
        tools.append({"role": "user", "content": _simplest(moved + parts)})
    return tools


def _part(block: dict, where: str) -> list[dict]:
    """One user content block as OpenAI content parts."""
    kind = block.get("type")
    if kind == "text":
        text = as_str(block.get("text")) or ""
        return [{"type": "text", "text": text}] if text else []
    if kind == "image":
        return [_image(block.get("source"), where)]
    if kind == "document":
        return [_document(block, where)]
    raise Untranslatable(f"{where}: {kind!r} blocks have no OpenAI equivalent")


def _image(source: Any, where: str) -> dict:
    kind = dig(source, "type")
    if kind == "base64":
        url = f"data:{dig(source, 'media_type')};base64,{dig(source, 'data')}"
    elif kind == "url" and as_str(dig(source, "url")):
        url = source["url"]
    else:
        raise Untranslatable(f"{where}: image source {kind!r} has no OpenAI equivalent")
    return {"type": "image_url", "image_url": {"url": url}}


def _document(block: dict, where: str) -> dict:
    source = block.get("source")
    kind, media = dig(source, "type"), dig(source, "media_type")
    if kind == "text" and isinstance(dig(source, "data"), str):
        return {"type": "text", "text": source["data"]}
    if kind == "base64" and media == "application/pdf":
        name = as_str(block.get("title")) or "document.pdf"
        data = f"data:application/pdf;base64,{dig(source, 'data')}"
        return {"type": "file", "file": {"file_data": data, "filename": name}}
    raise Untranslatable(f"{where}: only inline PDF or text documents reach OpenAI")


def _tool_message(block: dict, where: str, ctx: RequestTranslation) -> tuple[dict, list[dict]]:
    """(the tool message, parts that must move to a user message)."""
    call_id = as_str(block.get("tool_use_id"))
    if not call_id:
        raise Untranslatable(f"{where}: a tool_result needs a tool_use_id")
    wire_id = ctx.renames.id(call_id)
    content = block.get("content")
    texts = [content] if isinstance(content, str) and content else []
    moved: list[dict] = []
    for k, item in enumerate(as_list(content)):
        if dig(item, "type") == "tool_reference":  # tool search: OpenAI sees every tool anyway
            ctx.drop("tool_reference blocks (OpenAI is sent every tool)")
            continue
        parts = _part(item, f"{where}.content[{k}]") if isinstance(item, dict) else []
        texts.extend(part["text"] for part in parts if part["type"] == "text")
        moved.extend(part for part in parts if part["type"] != "text")
    if moved:
        texts.append("(attachments follow in the next user message)")
        moved.insert(0, {"type": "text", "text": f"Attachments returned by tool call {wire_id}:"})
        ctx.drop(f"{where} attachments (moved to a user message)")
    if block.get("is_error") is True:
        texts = ["Error: " + texts[0], *texts[1:]] if texts else ["Error"]
        ctx.drop(f"{where}.is_error (sent as an 'Error: ' prefix)")
    parts = [{"type": "text", "text": text} for text in texts]
    return {"role": "tool", "tool_call_id": wire_id, "content": _simplest(parts) or ""}, moved


def _assistant(content: Any, where: str, ctx: RequestTranslation) -> dict | None:
    """Joined text plus tool calls; None when nothing OpenAI can take is left."""
    if isinstance(content, str):
        return {"role": "assistant", "content": content} if content else None
    texts: list[str] = []
    calls: list[dict] = []
    for j, block in enumerate(as_list(content)):
        at = f"{where}.content[{j}]"
        kind = dig(block, "type")
        if kind == "text":
            texts.append(as_str(block.get("text")) or "")
        elif kind == "tool_use":
            calls.append(_tool_call(block, at, ctx))
        elif kind in _THINKING:
            ctx.drop("thinking blocks (never replayed to another vendor)")
        elif kind in _SERVER_BLOCKS or str(kind).endswith("_tool_result"):
            ctx.drop(f"{at} ({kind}: run by Anthropic)")
        else:
            raise Untranslatable(f"{at}: {kind!r} blocks have no OpenAI equivalent")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        message["tool_calls"] = calls
    return message if message["content"] is not None or calls else None


def _tool_call(block: dict, where: str, ctx: RequestTranslation) -> dict:
    call_id, name = as_str(block.get("id")), as_str(block.get("name"))
    if not call_id or not name:
        raise Untranslatable(f"{where}: a tool_use needs an id and a name")
    arguments = compact_json(block.get("input") if block.get("input") is not None else {})
    function = {"name": ctx.renames.name(name), "arguments": arguments}
    return {"id": ctx.renames.id(call_id), "type": "function", "function": function}
