"""OpenAI Chat messages -> Anthropic ``system`` and ``messages`` (docs/protocols.md 5.2, 5.8).

* system/developer messages anywhere become ``system`` text blocks, one each, in order
  (5.8.3);
* consecutive same-role messages merge, so a run of ``tool`` messages and the user text
  after it form one user message, results first (5.8.12);
* empty or blank text is never sent: Anthropic refuses empty text blocks (5.8.1);
* images: data URLs -> base64 source, http(s) -> url source (``detail`` dropped); inline PDF
  files -> ``document``; anything else -> `Untranslatable`;
* tool arguments that are not a JSON object become ``{}`` (recorded); ids and names are
  fitted by the context's `Renames` (5.8.17);
* a trailing assistant message is a finished turn for OpenAI but a prefill for Anthropic,
  which some models refuse (5.8.4): `Untranslatable` unless prefill is allowed.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import (
    RequestTranslation,
    Untranslatable,
    data_url,
    parse_object,
)

__all__ = ["conversation"]

_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id", "refusal"})


def conversation(
    messages: list, ctx: RequestTranslation, allow_prefill: bool, answered: bool = False
) -> tuple[list, list]:
    """(system blocks, Anthropic messages) from the OpenAI message list."""
    system: list[dict] = []
    turns: list[dict] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise Untranslatable(f"{where} is not an object")
        role = msg.get("role")
        if role in ("system", "developer"):
            if text := _system_text(msg.get("content"), where):
                system.append({"type": "text", "text": text})
        elif role == "user":
            _add(turns, "user", _parts(msg.get("content"), where, ctx))
        elif role == "assistant":
            _add(turns, "assistant", _assistant(msg, where, ctx))
        elif role == "tool":
            _add(turns, "user", [_tool_result(msg, where, ctx)])
        else:
            raise Untranslatable(f"{where}: role {role!r} has no Anthropic equivalent")
        ctx.dropped.extend(f"{where}.{key}" for key in msg if key not in _MESSAGE_KEYS)
    _check_ending(turns, allow_prefill, answered)
    return system, turns


def _add(turns: list[dict], role: str, blocks: list[dict]) -> None:
    """Append, merging into the previous message of the same role."""
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})
    if role == "user":  # tool results lead their user message (5.8.12); the sort is stable
        turns[-1]["content"].sort(key=lambda block: block["type"] != "tool_result")


def _system_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content if content.strip() else ""
    texts = []
    for part in as_list(content):
        if dig(part, "type") != "text":
            raise Untranslatable(f"{where}: a system message may only hold text")
        texts.append(as_str(part.get("text")) or "")
    text = "\n".join(texts)
    return text if text.strip() else ""


def _text_block(text: Any) -> list[dict]:
    """A text block, or none for empty/blank text (Anthropic refuses those)."""
    return [{"type": "text", "text": text}] if isinstance(text, str) and text.strip() else []


def _parts(content: Any, where: str, ctx: RequestTranslation) -> list[dict]:
    """User (or tool) content: a string or text/image/file parts."""
    if not isinstance(content, list):
        return _text_block(content)
    blocks: list[dict] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        kind = dig(part, "type")
        if kind == "text":
            blocks.extend(_text_block(part.get("text")))
        elif kind == "image_url":
            blocks.append(_image(part.get("image_url"), at, ctx))
        elif kind == "file":
            blocks.append(_document(part.get("file"), at))
        else:
            raise Untranslatable(f"{at}: content part {kind!r} has no Anthropic equivalent")
    return blocks


def _image(spec: Any, where: str, ctx: RequestTranslation) -> dict:
    url = spec if isinstance(spec, str) else as_str(dig(spec, "url")) or ""
    if dig(spec, "detail") not in (None, "auto"):
        ctx.dropped.append(f"{where}.image_url.detail")
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    parsed = data_url(url)
    if parsed is None or parsed[0] not in _IMAGE_TYPES:
        raise Untranslatable(f"{where}: image must be http(s) or base64 JPEG/PNG/GIF/WebP")
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": parsed[0], "data": parsed[1]},
    }


def _document(spec: Any, where: str) -> dict:
    parsed = data_url(as_str(dig(spec, "file_data")) or "")
    if parsed is None or parsed[0] != "application/pdf":
        raise Untranslatable(f"{where}: only inline base64 PDFs reach Anthropic (not file ids)")
    source = {"type": "base64", "media_type": parsed[0], "data": parsed[1]}
    block: dict[str, Any] = {"type": "document", "source": source}
    if title := as_str(dig(spec, "filename")):
        block["title"] = title
    return block


def _assistant(msg: dict, where: str, ctx: RequestTranslation) -> list[dict]:
    """Text blocks (never empty ones, 5.8.1), then one tool_use per tool call."""
    content = msg.get("content")
    texts = [content] if isinstance(content, str) else []
    for part in as_list(content):
        texts.append(as_str(dig(part, "text")) or as_str(dig(part, "refusal")) or "")
    if not any(t.strip() for t in texts) and isinstance(msg.get("refusal"), str):
        texts.append(msg["refusal"])
    blocks = [block for text in texts for block in _text_block(text)]
    for j, call in enumerate(as_list(msg.get("tool_calls"))):
        blocks.append(_tool_use(call, f"{where}.tool_calls[{j}]", ctx))
    return blocks


def _tool_use(call: Any, where: str, ctx: RequestTranslation) -> dict:
    if not isinstance(call, dict) or call.get("type", "function") != "function":
        raise Untranslatable(f"{where}: custom tool calls have no Anthropic equivalent")
    call_id, name = as_str(call.get("id")), as_str(dig(call, "function", "name"))
    if not call_id or not name:
        raise Untranslatable(f"{where}: a tool call needs an id and a name")
    value = parse_object(dig(call, "function", "arguments"))
    if value is None:
        ctx.dropped.append(f"{where}.function.arguments (not a JSON object, sent as {{}})")
        value = {}
    return {
        "type": "tool_use",
        "id": ctx.renames.id(call_id),
        "name": ctx.renames.name(name),
        "input": value,
    }


def _tool_result(msg: dict, where: str, ctx: RequestTranslation) -> dict:
    call_id = as_str(msg.get("tool_call_id"))
    if not call_id:
        raise Untranslatable(f"{where}: a tool message needs a tool_call_id")
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": ctx.renames.id(call_id)}
    content = msg.get("content")
    if isinstance(content, str):
        if content:
            block["content"] = content
    elif blocks := _parts(content, where, ctx):
        block["content"] = blocks
    return block


def _check_ending(turns: list[dict], allow_prefill: bool, answered: bool) -> None:
    """A trailing assistant turn is a prefill on Anthropic (5.8.4), unless it is the
    model's answer (`answered`: the conversation as it stands, tool calls and all)."""
    if not turns:
        raise Untranslatable("messages: nothing but system messages")
    last = turns[-1]
    if last["role"] != "assistant":
        return
    if answered:
        return  # the record as it stands: sent on, it needs a user turn after it anyway
    if any(block["type"] == "tool_use" for block in last["content"]):
        raise Untranslatable("the last message calls tools whose results are missing")
    if not allow_prefill:
        raise Untranslatable(
            "the last message is the assistant's: OpenAI answers it with a new turn, "
            "Anthropic would continue it as a prefill (which some models refuse)"
        )
    final = last["content"][-1]
    final["text"] = final["text"].rstrip()  # Anthropic refuses trailing whitespace there
    if not final["text"]:
        last["content"].pop()
        if not last["content"]:
            turns.pop()
