"""Anthropic ``system`` and ``messages`` -> Gemini ``systemInstruction`` and ``contents``.

* ``system`` (a string or text blocks) -> the instruction's text parts; a system message
  inside ``messages`` (Claude Code's list of agent types) joins them, recorded: Gemini
  has no system turn.
* roles: assistant -> ``model``, user -> ``user``; consecutive messages of one role merge.
* text -> text parts (empty ones left out); base64 images -> ``inlineData``; documents:
  base64 PDF -> ``inlineData``, plain text -> a text part, content blocks -> their parts.
  Images and documents by URL or held by Anthropic (Files API) -> `Untranslatable`, or
  left out with ``leave_out``: Gemini fetches no URL given this way.
* ``tool_use`` -> ``functionCall {id, name, args}``; ``tool_result`` -> ``functionResponse
  {id, name, response: {"output" | "error": text}}``, named after the ``tool_use`` it
  answers. Gemini refuses calls and responses interleaved (FC1, FR1, FC2, FR2), so all
  responses lead their user content, then the images and documents the tools returned
  (Gemini 2.x reads no media inside a response), then the rest.
* thinking: a block Gemini signed (`thoughts`) goes back as the part it came from: a
  thought part with its text, or its signature on the part the next block becomes (an
  empty text part when none follows). Claude's own thinking is left out (recorded): its
  signatures mean nothing to Gemini. The first call of each model content that has no
  signature gets Google's stand-in for history from other models (`SKIP_VALIDATION`).
* blocks of Anthropic-run server tools are left out (recorded); ``cache_control`` is
  stripped (Gemini caches prompts by itself).
* a trailing assistant message is a prefill for Anthropic but a finished turn for Gemini:
  `Untranslatable` unless prefill is allowed or the turn is the model's answer.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.gemini.parts import no_twin
from taplog.recorder.vendors.gemini.thoughts import SKIP_VALIDATION, gemini_signature
from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import RequestTranslation, Untranslatable

__all__ = ["conversation", "strip_cache"]

_THINKING = frozenset({"thinking", "redacted_thinking"})
_SERVER_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use", "mcp_tool_result"})
_CLAUDE_THINKING = "thinking blocks (Claude's signatures mean nothing to Gemini)"
_IMAGE, _DOCUMENT = "image", "document"
_BY_URL = "Gemini fetches no URL given in a request, nor files held by Anthropic"


def conversation(
    body: dict, ctx: RequestTranslation, *, allow_prefill: bool, answered: bool, leave_out: bool
) -> tuple[list[dict], list[dict]]:
    """(systemInstruction parts, Gemini contents) for an Anthropic request body."""
    turns = _Turns(ctx, leave_out)
    system = _system(body.get("system"), "system", ctx)
    messages = as_list(body.get("messages"))
    if not messages:
        raise Untranslatable("messages: no messages to translate")
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        role = dig(msg, "role")
        if role == "user":
            _add(turns.contents, "user", turns.user(msg.get("content"), where))
        elif role == "assistant":
            _add(turns.contents, "model", turns.model(msg.get("content"), where))
        elif role == "system":
            system.extend(_system(msg.get("content"), where, ctx))
            ctx.drop("system messages inside messages (moved to systemInstruction)")
        else:
            raise Untranslatable(f"{where}: role {role!r} is not user, assistant or system")
        for key in msg:
            if key not in ("role", "content"):
                ctx.drop(f"messages[].{key}")
    if not turns.contents:
        raise Untranslatable("messages: nothing Gemini can read")
    if dig(messages, -1, "role") == "assistant" and not answered:
        if not allow_prefill:
            raise Untranslatable(
                "the last message is an assistant prefill: Anthropic continues it, "
                "Gemini would take it as a finished turn"
            )
        ctx.drop("prefill (sent as a finished model turn)")
    _sign_first_calls(turns.contents)
    return system, turns.contents


def strip_cache(block: Any, ctx: RequestTranslation) -> None:
    if isinstance(block, dict) and "cache_control" in block:
        ctx.drop("cache_control (Gemini caches prompts by itself)")


def _system(system: Any, where: str, ctx: RequestTranslation) -> list[dict]:
    if isinstance(system, str):
        return [{"text": system}] if system else []
    parts = []
    for k, block in enumerate(as_list(system)):
        if dig(block, "type") != "text":
            raise Untranslatable(f"{where}[{k}]: only text blocks have a Gemini equivalent")
        strip_cache(block, ctx)
        if text := as_str(block.get("text")):
            parts.append({"text": text})
    return parts


def _add(contents: list[dict], role: str, parts: list[dict]) -> None:
    """Append, merging into the previous content of the same role."""
    if not parts:
        return
    if contents and contents[-1]["role"] == role:
        contents[-1]["parts"].extend(parts)
    else:
        contents.append({"role": role, "parts": parts})
    if role == "user":  # responses lead their content; the sort is stable
        contents[-1]["parts"].sort(key=lambda part: "functionResponse" not in part)


def _sign_first_calls(contents: list[dict]) -> None:
    """Every model content's first call carries a signature: its own or the stand-in."""
    for content in contents:
        if content["role"] != "model":
            continue
        call = next((p for p in content["parts"] if "functionCall" in p), None)
        if call is not None and "thoughtSignature" not in call:
            call["thoughtSignature"] = SKIP_VALIDATION


class _Turns:
    """The contents so far, and the wire name of every call by its client id."""

    __slots__ = ("contents", "ctx", "leave_out", "names")

    def __init__(self, ctx: RequestTranslation, leave_out: bool) -> None:
        self.ctx = ctx
        self.leave_out = leave_out
        self.contents: list[dict] = []
        self.names: dict[str, str] = {}

    def model(self, content: Any, where: str) -> list[dict]:
        """Parts in order, Gemini's signatures back on the parts they came with."""
        if isinstance(content, str):
            return [{"text": content}] if content else []
        parts: list[dict] = []
        pending: str | None = None  # a signature for the part the next block becomes
        for j, block in enumerate(as_list(content)):
            at = f"{where}.content[{j}]"
            if not isinstance(block, dict):
                raise Untranslatable(f"{at} is not an object")
            strip_cache(block, self.ctx)
            kind = block.get("type")
            if kind in _THINKING:
                pending = self._thought(block, parts, pending)
                continue
            if kind == "text":
                part = {"text": block["text"]} if as_str(block.get("text")) else None
            elif kind == "tool_use":
                part = self._call(block, at)
            elif kind in _SERVER_BLOCKS or str(kind).endswith("_tool_result"):
                self.ctx.drop(f"{kind} blocks (run by Anthropic)")
                continue
            else:
                raise Untranslatable(f"{at}: {kind!r} blocks have no Gemini equivalent")
            if part is not None:
                if pending:
                    part["thoughtSignature"], pending = pending, None
                parts.append(part)
        if pending:
            parts.append({"text": "", "thoughtSignature": pending})
        return parts

    def _thought(self, block: dict, parts: list[dict], pending: str | None) -> str | None:
        """Add a thought Gemini signed; the signature still waiting for a part."""
        signature = gemini_signature(block.get("signature"))
        if block.get("type") != "thinking" or signature is None:
            self.ctx.drop(_CLAUDE_THINKING)
            return pending
        text = as_str(block.get("thinking")) or ""
        if not text:  # a signature alone: it signs the part the next block becomes
            if signature and pending:
                parts.append({"text": "", "thoughtSignature": pending})
            return signature or pending
        part: dict[str, Any] = {"text": text, "thought": True}
        if signature and pending:
            parts.append({"text": "", "thoughtSignature": pending})
            pending = None
        if signature or pending:
            part["thoughtSignature"] = signature or pending
        parts.append(part)
        return None

    def _call(self, block: dict, where: str) -> dict:
        call_id, name = as_str(block.get("id")), as_str(block.get("name"))
        if not call_id or not name:
            raise Untranslatable(f"{where}: a tool_use needs an id and a name")
        wire = self.ctx.renames.name(name)
        self.names[call_id] = wire
        args = block.get("input")
        if not isinstance(args, dict):
            if args is not None:
                self.ctx.drop("tool_use inputs that are not an object (sent as {})")
            args = {}
        return {"functionCall": {"id": self.ctx.renames.id(call_id), "name": wire, "args": args}}

    def user(self, content: Any, where: str) -> list[dict]:
        """Function responses first, then the media tools returned, then the rest."""
        if isinstance(content, str):
            return [{"text": content}] if content else []
        responses: list[dict] = []
        returned: list[dict] = []
        rest: list[dict] = []
        for j, block in enumerate(as_list(content)):
            at = f"{where}.content[{j}]"
            if not isinstance(block, dict):
                raise Untranslatable(f"{at} is not an object")
            strip_cache(block, self.ctx)
            if block.get("type") == "tool_result":
                responses.extend(self._response(block, at, returned))
            else:
                rest.extend(self._part(block, at))
        return responses + returned + rest

    def _response(self, block: dict, where: str, returned: list[dict]) -> list[dict]:
        call_id = as_str(block.get("tool_use_id"))
        if not call_id:
            raise Untranslatable(f"{where}: a tool_result needs a tool_use_id")
        name = self.names.get(call_id)
        if name is None:
            why = "it answers no tool_use earlier in the conversation, and Gemini needs its name"
            no_twin(self.ctx, self.leave_out, where, f"tool_result {call_id!r}", why)
            return []
        content = block.get("content")
        texts = [content] if isinstance(content, str) else []
        for k, item in enumerate(as_list(content)):
            if dig(item, "type") == "tool_reference":  # tool search: Gemini is sent every tool
                self.ctx.drop("tool_reference blocks (Gemini is sent every tool)")
                continue
            strip_cache(item, self.ctx)
            for part in self._part(item, f"{where}.content[{k}]"):
                if "text" in part:
                    texts.append(part["text"])
                else:
                    returned.append(part)
        key = "error" if block.get("is_error") is True else "output"
        output = {key: "\n".join(texts)}
        response = {"id": self.ctx.renames.id(call_id), "name": name, "response": output}
        return [{"functionResponse": response}]

    def _part(self, block: Any, where: str) -> list[dict]:
        """A user block (or one a tool returned) as Gemini parts."""
        kind = dig(block, "type")
        if kind == "text":
            text = as_str(block.get("text"))
            return [{"text": text}] if text else []
        if kind == "image":
            return self._media(block.get("source"), _IMAGE, where)
        if kind == "document":
            return self._document(block, where)
        raise Untranslatable(f"{where}: {kind!r} blocks have no Gemini equivalent")

    def _document(self, block: dict, where: str) -> list[dict]:
        source = block.get("source")
        kind = dig(source, "type")
        for key in ("title", "context", "citations"):
            if key in block:
                self.ctx.drop(f"document {key}")
        if kind == "text" and isinstance(dig(source, "data"), str):
            return [{"text": source["data"]}] if source["data"] else []
        if kind == "content":
            content = source.get("content")
            if isinstance(content, str):
                return [{"text": content}] if content else []
            parts = []
            for k, item in enumerate(as_list(content)):
                parts.extend(self._part(item, f"{where}.source.content[{k}]"))
            return parts
        return self._media(source, _DOCUMENT, where)

    def _media(self, source: Any, what: str, where: str) -> list[dict]:
        kind, media = dig(source, "type"), as_str(dig(source, "media_type"))
        readable = media is not None and (what == _IMAGE or media == "application/pdf")
        if kind == "base64" and readable and isinstance(dig(source, "data"), str):
            return [{"inlineData": {"mimeType": media, "data": source["data"]}}]
        if kind in ("url", "file"):
            no_twin(self.ctx, self.leave_out, where, f"{what}s by {kind}", _BY_URL)
            return []
        raise Untranslatable(f"{where}: {what} source {kind!r} has no Gemini equivalent")
