"""Responses input items -> Chat messages, on the way to Anthropic (docs/protocols.md 2, 5.2).

A Responses request reaches Anthropic in two steps: this module and `request_to_neutral` put
it in a Chat request's envelope, and `chat_to_messages` does the Anthropic side, so both
OpenAI APIs follow the same rules (system collection, merged turns with results first, no
empty text, prefill, id and name fitting, thinking). Every item-level check happens here,
so refusals and drops name the client's own places (``input[3].content[0]``,
``history[0]``), never the intermediate messages.

==========================  ===============================================================
Responses item              Chat message
==========================  ===============================================================
``instructions``            the first ``system`` message
message system / developer  ``system`` message (text only)
message user                ``user``: input_text / input_image / input_file -> text /
                            image_url / file (inline base64 PDF); ``detail`` dropped
message assistant           ``assistant`` content: output_text and refusal text joined
``function_call``           a tool call on the assistant message before it (``call_id`` is
                            the id); arguments that are no JSON object -> ``{}``, recorded;
                            with a ``namespace``, named ``<namespace>__<name>`` as the tool
                            is (`tools`)
``custom_tool_call``        the same, with arguments ``{"input": <its input string>}``
``function_call_output``,   ``tool`` message; text, image and file outputs become parts
``custom_tool_call_output``
``web_search_call``         left out, recorded, never refused: what the search found is in
                            the assistant text that follows it
``reasoning``               left out, recorded: OpenAI's reasoning is never replayed to
                            another vendor (5.8.8); with ``encrypted_content`` it is
                            OpenAI-only state -> `Untranslatable` unless ``leave_out``
``item_reference``,         `Untranslatable`: they point at state held by OpenAI
``compaction``
any other item              `Untranslatable` (other hosted-tool calls, tool search, shell,
                            patch and computer calls and their outputs) unless ``leave_out``
==========================  ===============================================================

``history`` (the rebuilt ``previous_response_id`` chain) comes before ``input``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from taplog.recorder.vendors.naming import namespaced
from taplog.recorder.vendors.openai_chat.turns_to_neutral import _IMAGE_TYPES
from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import (
    RequestTranslation,
    Untranslatable,
    compact_json,
    data_url,
    parse_object,
)

__all__ = ["chat_messages"]

_STORED = frozenset({"item_reference", "compaction", "compaction_summary"})
_ASSISTANT_PARTS = {"output_text": "text", "input_text": "text", "refusal": "refusal"}


def chat_messages(
    body: dict, history: list | None, ctx: RequestTranslation, leave_out: bool
) -> list[dict]:
    """The Chat message list for a Responses request and its rebuilt history."""
    out: list[dict] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        out.append({"role": "system", "content": instructions})
    elif instructions is not None:
        raise Untranslatable("instructions: only a string has an Anthropic equivalent")
    items = 0
    for where, item in _items(body, history):
        items += 1
        _item(out, item, where, ctx, leave_out)
    if not items:
        raise Untranslatable("input: no input items to translate")
    return out


def _items(body: dict, history: list | None) -> Iterator[tuple[str, Any]]:
    for i, item in enumerate(as_list(history)):
        yield f"history[{i}]", item
    raw = body.get("input")
    if isinstance(raw, str):
        yield "input", {"role": "user", "content": raw}
    for i, item in enumerate(as_list(raw)):
        yield f"input[{i}]", item


def _item(out: list[dict], item: Any, where: str, ctx: RequestTranslation, leave_out: bool) -> None:
    if not isinstance(item, dict):
        raise Untranslatable(f"{where} is not an object")
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        out.append(_message(item, where, ctx))
    elif kind in ("function_call", "custom_tool_call"):
        _call(out, item, where, ctx)
    elif kind in ("function_call_output", "custom_tool_call_output"):
        out.append(_output(item, where, ctx))
    elif kind == "web_search_call":
        ctx.drop("web_search_call items (left out: their findings are in the text that follows)")
    elif kind == "reasoning":
        _reasoning(item, where, ctx, leave_out)
    elif kind in _STORED:
        raise Untranslatable(f"{where}: {kind} items point at state held by OpenAI")
    elif leave_out:
        ctx.drop(f"{kind} items (left out: no Anthropic equivalent)")
    else:
        raise Untranslatable(
            f"{where}: {kind!r} items have no Anthropic equivalent "
            "(only messages, function and custom tool calls and their outputs do)"
        )


def _message(item: dict, where: str, ctx: RequestTranslation) -> dict:
    role, content = item.get("role"), item.get("content")
    if "phase" in item:
        ctx.drop("phase (assistant message labels)")
    if role in ("system", "developer"):
        return {"role": "system", "content": _system_text(content, where)}
    if role == "user":
        return {"role": "user", "content": _parts(content, where, ctx)}
    if role == "assistant":
        return {"role": "assistant", "content": _assistant_text(content, where)}
    raise Untranslatable(f"{where}: role {role!r} has no Anthropic equivalent")


def _system_text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(as_list(content)):
        if dig(part, "type") != "input_text":
            raise Untranslatable(f"{where}.content[{j}]: a system message may only hold text")
        texts.append(as_str(part.get("text")) or "")
    return "\n".join(texts)


def _assistant_text(content: Any, where: str) -> str:
    """Replayed output: text and refusal parts as one text (a refusal was said, too)."""
    if isinstance(content, str):
        return content
    texts = []
    for j, part in enumerate(as_list(content)):
        field = _ASSISTANT_PARTS.get(dig(part, "type"))
        if field is None:
            kind = dig(part, "type")
            raise Untranslatable(f"{where}.content[{j}]: {kind!r} parts have no Anthropic twin")
        texts.append(as_str(part.get(field)) or "")
    return "".join(texts)


def _parts(
    content: Any, where: str, ctx: RequestTranslation, field: str = "content"
) -> str | list[dict]:
    """User content or a tool's output: a string, or text/image/file parts."""
    if isinstance(content, str):
        return content
    parts = []
    for j, part in enumerate(as_list(content)):
        at = f"{where}.{field}[{j}]"
        kind = dig(part, "type")
        if kind == "input_text":
            parts.append({"type": "text", "text": as_str(part.get("text")) or ""})
        elif kind == "input_image":
            parts.append(_image(part, at, ctx))
        elif kind == "input_file":
            parts.append(_file(part, at))
        else:
            raise Untranslatable(f"{at}: {kind!r} parts have no Anthropic equivalent")
    return parts


def _image(part: dict, where: str, ctx: RequestTranslation) -> dict:
    if part.get("file_id"):
        raise Untranslatable(f"{where}: an image held by OpenAI (file_id) cannot reach Anthropic")
    url = as_str(part.get("image_url")) or ""
    if not url.startswith(("https://", "http://")):
        parsed = data_url(url)
        if parsed is None or parsed[0] not in _IMAGE_TYPES:
            raise Untranslatable(f"{where}: image must be http(s) or base64 JPEG/PNG/GIF/WebP")
    if part.get("detail") not in (None, "auto"):
        ctx.drop(f"{where}.detail")
    return {"type": "image_url", "image_url": {"url": url}}


def _file(part: dict, where: str) -> dict:
    parsed = data_url(as_str(part.get("file_data")) or "")
    if parsed is None or parsed[0] != "application/pdf":
        raise Untranslatable(
            f"{where}: only inline base64 PDFs reach Anthropic (not file ids or file URLs)"
        )
    spec = {"file_data": part["file_data"]}
    if filename := as_str(part.get("filename")):
        spec["filename"] = filename
    return {"type": "file", "file": spec}


def _call(out: list[dict], item: dict, where: str, ctx: RequestTranslation) -> None:
    """A tool call joins the assistant message before it, as Chat holds them."""
    call_id, name = as_str(item.get("call_id")), as_str(item.get("name"))
    if not call_id or not name:
        raise Untranslatable(f"{where}: a {item['type']} needs a call_id and a name")
    name = namespaced(name, as_str(item.get("namespace")))
    if item["type"] == "custom_tool_call":
        arguments = compact_json({"input": as_str(item.get("input")) or ""})
    elif parse_object(arguments := item.get("arguments")) is None:
        ctx.drop(f"{where}.arguments (not a JSON object, sent as {{}})")
        arguments = "{}"
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    if out and out[-1]["role"] == "assistant":
        out[-1].setdefault("tool_calls", []).append(call)
    else:
        out.append({"role": "assistant", "content": None, "tool_calls": [call]})


def _output(item: dict, where: str, ctx: RequestTranslation) -> dict:
    call_id = as_str(item.get("call_id"))
    if not call_id:
        raise Untranslatable(f"{where}: a {item['type']} needs a call_id")
    output = item.get("output")
    content = _parts(output, where, ctx, "output") if isinstance(output, list) else output
    return {"role": "tool", "tool_call_id": call_id, "content": content or ""}


def _reasoning(item: dict, where: str, ctx: RequestTranslation, leave_out: bool) -> None:
    if not item.get("encrypted_content"):
        ctx.drop("reasoning items (OpenAI's reasoning is never replayed to another vendor)")
    elif leave_out:
        ctx.drop("encrypted reasoning items (left out: only OpenAI can read them)")
    else:
        raise Untranslatable(
            f"{where}: encrypted reasoning is OpenAI's own state; Anthropic cannot read it"
        )
