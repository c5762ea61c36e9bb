"""Gemini ``systemInstruction`` and ``contents`` -> Anthropic ``system`` and ``messages``.

* roles: ``model`` -> assistant; ``user``, none, or the old ``function`` -> user. A run of
  contents of one role is one message: the SDKs keep each streamed chunk of an answer as a
  model content of its own.
* text parts -> text blocks, never blank ones (Anthropic refuses them). Thought parts are
  Gemini's own reasoning, which Claude cannot take: left out (recorded). A
  ``thoughtSignature`` means nothing to Claude and is ignored.
* ``inlineData``: JPEG/PNG/GIF/WebP -> a base64 image, PDF -> a base64 document, plain text
  -> a text document (base64 in either alphabet: the Python SDK writes the URL-safe one);
  ``fileData`` naming an https image -> a URL image, unless the file is held by Google.
  Any other media, media in a model turn, code execution and Google-run tool parts ->
  `Untranslatable`, or left out with ``leave_out``.
* ``functionCall`` -> ``tool_use``, its id the call's, else ``call_<content>_<call>``.
  ``functionResponse`` -> ``tool_result`` for the call of the model turn just before it
  with its id, else the earliest one not yet answered of its name (the Gemini CLI answers a
  call that came without an id under an id of its own); results lead their user message.
  A response that answers no call there, and a call no response answers, are
  `Untranslatable` (left out with ``leave_out``): Anthropic pairs them strictly.
* a response ``{"output" | "result" | "content" | "error": "<text>"}`` -> that text, any
  other -> compact JSON; an ``error`` key -> ``is_error``; media in its ``parts`` go inside
  the result.
* a trailing model turn is a prefill for Anthropic (some models refuse it):
  `Untranslatable` unless the caller allows it or the turn is the model's answer.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from taplog.recorder.vendors.gemini.parts import IMAGE_TYPES, fields, no_twin
from taplog.recorder.vendors.sse import as_list, as_str
from taplog.recorder.vendors.translation import RequestTranslation, Untranslatable, compact_json

__all__ = ["conversation"]

_ROLES = {"user": "user", "function": "user", "model": "assistant"}
_CONTENT_KEYS = frozenset({"role", "parts"})
_FLAGS = frozenset({"thought", "thoughtSignature"})  # beside a part's payload, not dropped
_RESPONSE_KEYS = frozenset({"id", "name", "response", "parts"})
_TEXT_RESULTS = frozenset({"output", "result", "content", "error"})
_GOOGLE_RUN = {
    "executableCode": "code Gemini ran itself",
    "codeExecutionResult": "the result of code Gemini ran itself",
    "toolCall": "a call of a tool Google runs",
    "toolResponse": "the result of a tool Google runs",
}
_GOOGLE_FILES = "https://generativelanguage.googleapis.com/"
_THOUGHTS = "thought parts (Gemini's own reasoning: Claude cannot use it)"


def conversation(
    instruction: Any,
    contents: Any,
    ctx: RequestTranslation,
    *,
    allow_prefill: bool,
    answered: bool,
    leave_out: bool,
) -> tuple[list[dict], list[dict]]:
    """(system blocks, Anthropic messages) from a Gemini request's instruction and turns."""
    turns = _Turns(ctx, leave_out)
    for i, content in enumerate(as_list(contents)):
        turns.add(content, i)
    messages = turns.finish()
    _check_ending(messages, allow_prefill, answered)
    return _system(instruction), messages


def _system(instruction: Any) -> list[dict]:
    if isinstance(instruction, str):  # not the wire's shape, but some clients send it
        return _text_block(instruction)
    blocks = []
    for k, part in enumerate(as_list(fields(instruction).get("parts"))):
        text = fields(part).get("text")
        if not isinstance(text, str):
            raise Untranslatable(f"systemInstruction.parts[{k}]: only text has a Claude twin")
        blocks.extend(_text_block(text))
    return blocks


def _text_block(text: Any) -> list[dict]:
    """A text block, or none for empty or blank text (Anthropic refuses those)."""
    return [{"type": "text", "text": text}] if isinstance(text, str) and text.strip() else []


@dataclass(slots=True)
class _Call:
    given: str  # the id the client knows the call by (its own, or the one made up here)
    wire: str  # the tool_use id
    name: str
    where: str


@dataclass(slots=True)
class _Turns:
    """The messages so far, and the calls of the last model turn still to be answered."""

    ctx: RequestTranslation
    leave_out: bool
    messages: list[dict] = field(default_factory=list)
    open: list[_Call] = field(default_factory=list)
    asking: dict | None = None  # the assistant message those calls are in

    def add(self, content: Any, i: int) -> None:
        where = f"contents[{i}]"
        if not isinstance(content, dict):
            raise Untranslatable(f"{where} is not an object")
        given = fields(content)
        role = _ROLES.get(as_str(given.get("role")) or "user")
        if role is None:
            raise Untranslatable(f"{where}: role {given['role']!r} is not user or model")
        for key in given:
            if key not in _CONTENT_KEYS:
                self.ctx.drop(f"contents[].{key}")
        if role == "assistant":
            self._model(as_list(given.get("parts")), where, i)
        else:
            self._user(as_list(given.get("parts")), where)

    def finish(self) -> list[dict]:
        if self.messages and self.messages[-1]["role"] == "user":
            self._unanswered()  # a trailing model turn's calls are `_check_ending`'s
        return _merged(self.messages)

    def _model(self, parts: list, where: str, i: int) -> None:
        blocks: list[dict] = []
        calls: list[_Call] = []
        for k, part in enumerate(parts):
            at = f"{where}.parts[{k}]"
            given = self._payload(part, at)
            if not given:
                continue
            if "functionCall" in given:
                minted = f"call_{i}_{len(calls)}"
                call, block = self._call(fields(given["functionCall"]), at, minted)
                calls.append(call)
                blocks.append(block)
            elif "text" in given:
                blocks.extend(self._text(given))
            elif "functionResponse" in given:
                raise Untranslatable(f"{at}: a functionResponse belongs in a user turn")
            else:  # inlineData, fileData: Claude's turns hold text and tool calls only
                no_twin(self.ctx, self.leave_out, at, "media in a model turn", _MODEL_MEDIA)
        if not blocks:
            return
        if not self.messages or self.messages[-1]["role"] != "assistant":
            if self.messages:
                self._unanswered()
            self.messages.append({"role": "assistant", "content": []})
            self.asking, self.open = self.messages[-1], []
        self.messages[-1]["content"].extend(blocks)
        self.open.extend(calls)

    def _user(self, parts: list, where: str) -> None:
        blocks: list[dict] = []
        for k, part in enumerate(parts):
            at = f"{where}.parts[{k}]"
            given = self._payload(part, at)
            if not given:
                continue
            if "text" in given:
                blocks.extend(self._text(given))
            elif "functionResponse" in given:
                blocks.extend(self._result(fields(given["functionResponse"]), at))
            elif "functionCall" in given:
                raise Untranslatable(f"{at}: a functionCall belongs in a model turn")
            else:
                blocks.extend(self._media(given, at))
        if not blocks:
            return
        if self.messages and self.messages[-1]["role"] == "user":
            self.messages[-1]["content"].extend(blocks)
        else:
            self.messages.append({"role": "user", "content": blocks})
        _results_first(self.messages[-1])

    def _payload(self, part: Any, at: str) -> dict:
        """The part's fields; {} when it holds nothing Claude can take (left out)."""
        if not isinstance(part, dict):
            raise Untranslatable(f"{at} is not an object")
        given = fields(part)
        for key in given:
            if key in _GOOGLE_RUN:
                no_twin(self.ctx, self.leave_out, at, _GOOGLE_RUN[key], "Claude cannot run it")
                return {}
        for key in given:
            if key not in _FLAGS and key not in _PAYLOADS:
                self.ctx.drop(f"parts' {key}")  # videoMetadata, partMetadata, ...
        return given if any(key in _PAYLOADS for key in given) else {}

    def _text(self, given: dict) -> list[dict]:
        if given.get("thought") is True:
            self.ctx.drop(_THOUGHTS)
            return []
        return _text_block(given["text"])

    def _call(self, call: dict, at: str, minted: str) -> tuple[_Call, dict]:
        """The call, and its ``tool_use`` block; arguments not an object become ``{}``."""
        name = as_str(call.get("name"))
        if not name:
            raise Untranslatable(f"{at}: a functionCall needs a name")
        given = as_str(call.get("id")) or minted
        found = _Call(given, self.ctx.renames.id(given), name, at)
        args = call.get("args")
        if not isinstance(args, dict):
            if args is not None:
                self.ctx.drop("functionCall.args that are not an object (sent as {})")
            args = {}
        block = {"type": "tool_use", "id": found.wire, "name": self.ctx.renames.name(name)}
        return found, {**block, "input": args}

    def _result(self, response: dict, at: str) -> list[dict]:
        name, given = as_str(response.get("name")), as_str(response.get("id"))
        call = self._answer(given, name)
        if call is None:
            why = "it answers no functionCall of the model turn before it"
            no_twin(self.ctx, self.leave_out, at, f"functionResponse {name!r}", why)
            return []
        for key in response:
            if key not in _RESPONSE_KEYS:
                self.ctx.drop(f"functionResponse.{key}")
        output = response.get("response")
        content = _text_block(_result_text(output))
        for k, part in enumerate(as_list(response.get("parts"))):
            content.extend(self._media(fields(part), f"{at}.functionResponse.parts[{k}]"))
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.wire}
        if len(content) == 1 and content[0]["type"] == "text":
            block["content"] = content[0]["text"]
        elif content:
            block["content"] = content
        if isinstance(output, dict) and "error" in output:
            block["is_error"] = True
        return [block]

    def _answer(self, given: str | None, name: str | None) -> _Call | None:
        """The open call a response answers: by id, else the earliest of its name."""
        found = next((c for c in self.open if given and c.given == given), None)
        found = found or next((c for c in self.open if c.name == name), None)
        if found is not None:
            self.open.remove(found)
        return found

    def _unanswered(self) -> None:
        """The last model turn's calls that no response answered: refused, or left out."""
        if not self.open or self.asking is None:
            return
        why = "Claude needs every call answered in the next user turn"
        for call in self.open:
            no_twin(self.ctx, self.leave_out, call.where, "a functionCall without a response", why)
        unanswered = {call.wire for call in self.open}
        self.asking["content"] = [
            b for b in self.asking["content"] if b.get("id") not in unanswered
        ]
        self.open = []

    def _media(self, given: dict, at: str) -> list[dict]:
        if isinstance(given.get("inlineData"), dict):
            return self._inline(fields(given["inlineData"]), at)
        if isinstance(given.get("fileData"), dict):
            return self._file(fields(given["fileData"]), at)
        raise Untranslatable(f"{at}: a part with no text or media")

    def _inline(self, data: dict, at: str) -> list[dict]:
        mime = (as_str(data.get("mimeType")) or "").lower()
        payload = _standard_base64(as_str(data.get("data")) or "")
        if mime in IMAGE_TYPES:
            source = {"type": "base64", "media_type": mime, "data": payload}
            return [{"type": "image", "source": source}]
        if mime == "application/pdf":
            source = {"type": "base64", "media_type": mime, "data": payload}
            return [{"type": "document", "source": source}]
        if mime == "text/plain":
            text = _decoded(payload, at)
            source = {"type": "text", "media_type": mime, "data": text}
            return [{"type": "document", "source": source}] if text.strip() else []
        why = "Claude reads JPEG, PNG, GIF and WebP images, PDFs and plain text"
        no_twin(self.ctx, self.leave_out, at, f"inlineData of type {mime!r}", why)
        return []

    def _file(self, data: dict, at: str) -> list[dict]:
        uri = as_str(data.get("fileUri")) or ""
        mime = (as_str(data.get("mimeType")) or "").lower()
        held = uri.startswith(_GOOGLE_FILES)
        if uri.startswith("https://") and not held and mime in IMAGE_TYPES:
            return [{"type": "image", "source": {"type": "url", "url": uri}}]
        why = "Claude fetches only https images, not files held by Google"
        no_twin(self.ctx, self.leave_out, at, f"fileData of type {mime!r}", why)
        return []


_PAYLOADS = frozenset({"text", "inlineData", "fileData", "functionCall", "functionResponse"})
_MODEL_MEDIA = "Claude's turns hold only text and tool calls"


def _result_text(output: Any) -> str:
    """A response's text: a lone text field's value, else the whole as compact JSON."""
    if output is None or output == {}:
        return ""
    if isinstance(output, dict) and len(output) == 1:
        ((key, value),) = output.items()
        if key in _TEXT_RESULTS and isinstance(value, str):
            return value
    return compact_json(output)


def _standard_base64(data: str) -> str:
    """Base64 in the standard alphabet, which is what Anthropic reads."""
    return data.replace("-", "+").replace("_", "/")


def _decoded(data: str, at: str) -> str:
    try:
        return base64.b64decode(data + "=" * (-len(data) % 4), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise Untranslatable(f"{at}: text/plain inlineData that is not UTF-8 base64") from exc


def _results_first(message: dict) -> None:
    """Tool results lead their user message (Anthropic's rule); the sort is stable."""
    message["content"].sort(key=lambda block: block["type"] != "tool_result")


def _merged(messages: list[dict]) -> list[dict]:
    """Messages emptied by leaving calls out are gone, and their neighbours joined."""
    out: list[dict] = []
    for message in messages:
        if not message["content"]:
            continue
        if out and out[-1]["role"] == message["role"]:
            out[-1]["content"].extend(message["content"])
            if message["role"] == "user":
                _results_first(out[-1])
        else:
            out.append(message)
    return out


def _check_ending(messages: list[dict], allow_prefill: bool, answered: bool) -> None:
    """A trailing model turn is a prefill on Anthropic, unless it is the model's answer
    (`answered`: the conversation as it stands, calls and all)."""
    if not messages:
        raise Untranslatable("contents: nothing Claude can read")
    last = messages[-1]
    if last["role"] != "assistant" or answered:
        return
    if any(block["type"] == "tool_use" for block in last["content"]):
        raise Untranslatable("the last content calls functions whose responses are missing")
    if not allow_prefill:
        raise Untranslatable(
            "the last content is the model's: Gemini answers it with a new turn, "
            "Anthropic would continue it as a prefill (which some models refuse)"
        )
    final = last["content"][-1]
    final["text"] = final["text"].rstrip()  # Anthropic refuses trailing whitespace there
    if not final["text"].strip():
        last["content"].pop()
        if not last["content"]:
            messages.pop()
