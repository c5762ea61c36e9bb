"""Non-streaming answers between Gemini (`GenerateContentResponse`) and Anthropic Messages.

Gemini answer (its first candidate) -> Anthropic message, part by part (`part_blocks`), with
the signature rules of `thoughts`:

==============================  ===============================================================
Gemini part                     Anthropic block(s)
==============================  ===============================================================
``{text, thought: true}``       ``thinking {thinking: text, signature: tagged(S)}`` (an
                                unsigned empty thought makes none)
``text``                        ``text`` (none for ""), after a signature block if signed
``functionCall{id?, name,       ``tool_use {id, name (the client's), input: args}``, after a
args}``                         signature block if signed; an id-less call gets one minted
                                (`vocab.tool_use_id`)
any other part                  nothing, signature included (inline data, code execution:
                                taplog never asks for what makes them)
``promptFeedback.blockReason``  no content, ``stop_reason: refusal``
==============================  ===============================================================

(a signature block: ``thinking {thinking: "", signature: tagged(S)}``). Each part makes its
own blocks: two text parts are two text blocks, as a streamed answer folded by `wire`
keeps a signed part apart from the text around it.

Anthropic message -> Gemini answer, block by block:

==============================  ===============================================================
Anthropic block                 Gemini part
==============================  ===============================================================
``text``                        ``{text}``
``tool_use``                    ``{functionCall {id, name (the client's), args: input}}``
``thinking`` tagged Gemini's    ``{text, thought: true, thoughtSignature: S}``, or with no
                                text, S on the next part (`Signing`)
Claude's ``thinking``           ``{text, thought: true}`` when the request asked for thoughts
                                (``includeThoughts``); never its signature, which means
                                nothing to Gemini
redacted thinking, server       nothing
tools
==============================  ===============================================================

Adjacent unsigned text parts of one kind (thought or not) are joined, as Gemini's own
reassembly joins a stream's pieces (`wire.reassemble`), so an answer equals its streamed
twin; an answer with no part gets one empty text part, as Gemini ends a stream (the SDK's
chat keeps a turn with no parts out of its history). Finish reasons, usage and ids are
`vocab`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from taplog.recorder.vendors.gemini.thoughts import gemini_signature, tagged
from taplog.recorder.vendors.gemini.vocab import (
    answer_key,
    anthropic_usage,
    asks_for_thoughts,
    finish_reason,
    first_candidate,
    gemini_usage,
    message_id,
    response_id,
    stop_reason,
    tool_use_id,
)
from taplog.recorder.vendors.naming import ClientTools, client_name
from taplog.recorder.vendors.openai_chat.vocab import anthropic_message
from taplog.recorder.vendors.sse import as_list, as_str, dig

__all__ = [
    "Signing",
    "function_call",
    "gemini_answer_to_messages",
    "joined",
    "messages_answer_to_gemini",
    "part_blocks",
    "thinking_block",
]


# ------------------------------------------------------------- Gemini -> Anthropic client


def gemini_answer_to_messages(
    answer: dict, *, model: str, tools: ClientTools | None = None
) -> dict:
    """A `GenerateContentResponse` (its first candidate) as the message an Anthropic
    client expects; `model` names the model when the answer does not."""
    candidate = first_candidate(answer)
    key = answer_key(answer.get("responseId"))
    content: list[dict] = []
    calls = 0
    for part in as_list(dig(candidate, "content", "parts")):
        if isinstance(part, dict):
            content += part_blocks(part, key=key, calls=calls, tools=tools)
            calls += isinstance(part.get("functionCall"), dict)
    if not candidate and dig(answer, "promptFeedback", "blockReason"):
        stop = "refusal"
    else:
        stop = stop_reason(candidate.get("finishReason"), called=calls > 0)
    usage = anthropic_usage(answer.get("usageMetadata"))
    served = as_str(answer.get("modelVersion")) or model
    return anthropic_message(message_id(key), served, content, stop, usage)


def part_blocks(part: dict, *, key: str, calls: int, tools: ClientTools | None) -> list[dict]:
    """The Anthropic blocks one Gemini part becomes. `key` and `calls` (the function calls
    before this part in its answer) name a call that came without an id."""
    signature = as_str(part.get("thoughtSignature")) or None
    text = as_str(part.get("text"))
    call = part.get("functionCall")
    if text is not None and part.get("thought") is True:
        return [thinking_block(text, signature)] if text or signature else []
    if isinstance(call, dict):
        args = call.get("args")
        own = [
            {
                "type": "tool_use",
                "id": tool_use_id(call.get("id"), key, calls),
                "name": client_name(as_str(call.get("name")) or "", tools),
                "input": args if isinstance(args, dict) else {},
            }
        ]
    elif text is not None:
        own = [{"type": "text", "text": text}] if text else []
    else:
        return []
    return [thinking_block("", signature), *own] if signature else own


def thinking_block(text: str, signature: str | None) -> dict:
    """A Gemini thought, or a signature alone, as a tagged thinking block."""
    return {"type": "thinking", "thinking": text, "signature": tagged(signature)}


# ------------------------------------------------------------- Anthropic -> Gemini client


def messages_answer_to_gemini(
    answer: dict,
    *,
    request: Mapping[str, Any],
    model: str,
    tools: ClientTools | None = None,
) -> dict:
    """An Anthropic message as the `GenerateContentResponse` a Gemini client expects;
    `request` is the client's (does it ask for thoughts?), `model` names the model when
    the message does not."""
    thoughts = asks_for_thoughts(request)
    signing = Signing()
    parts: list[dict] = []
    for block in as_list(answer.get("content")):
        if isinstance(block, dict):
            parts += _block_parts(block, signing, thoughts, tools)
    parts += signing.end()
    candidate = {
        "content": {"role": "model", "parts": joined(parts) or [{"text": ""}]},
        "finishReason": finish_reason(answer.get("stop_reason")),
        "index": 0,
    }
    return {
        "candidates": [candidate],
        "usageMetadata": gemini_usage(answer.get("usage")),
        "modelVersion": as_str(answer.get("model")) or model,
        "responseId": response_id(answer.get("id")),
    }


def _block_parts(
    block: dict, signing: Signing, thoughts: bool, tools: ClientTools | None
) -> list[dict]:
    kind = block.get("type")
    if kind == "text" and (text := as_str(block.get("text"))):
        return signing.parts({"text": text})
    if kind == "tool_use":
        call = function_call(block.get("id"), block.get("name"), block.get("input"), tools)
        return signing.parts(call)
    if kind == "thinking":
        text = as_str(block.get("thinking")) or ""
        signature = gemini_signature(block.get("signature"))
        if signature is not None:
            return signing.thinking(text, signature)
        if thoughts and text:
            return signing.parts({"text": text, "thought": True})
    return []


def function_call(call_id: Any, name: Any, args: Any, tools: ClientTools | None) -> dict:
    """A tool call as a `functionCall` part: the tool by the client's name, the id as it
    came (none when there is none), args an object."""
    call: dict[str, Any] = {"id": call_id} if as_str(call_id) else {}
    call["name"] = client_name(as_str(name) or "", tools)
    call["args"] = args if isinstance(args, dict) else {}
    return {"functionCall": call}


class Signing:
    """Puts the Gemini signatures that Anthropic thinking blocks carry back on their parts,
    in one answer: a tagged block with text is a thought part signed S; one without text
    signs the next part made (`parts`), or, when none takes it, an empty text part of its
    own (`end`), as Gemini sends it."""

    __slots__ = ("pending",)

    def __init__(self) -> None:
        self.pending: str | None = None  # a signature for the next part

    def parts(self, part: dict) -> list[dict]:
        """`part` as it goes out, signed with the pending signature (a part already signed
        gets it on an empty text part before it)."""
        if self.pending is None:
            return [part]
        pending, self.pending = self.pending, None
        if "thoughtSignature" in part:
            return [{"text": "", "thoughtSignature": pending}, part]
        return [{**part, "thoughtSignature": pending}]

    def thinking(self, text: str, signature: str) -> list[dict]:
        """A Gemini-tagged thinking block (`signature` "" for an unsigned thought)."""
        if text:
            part: dict[str, Any] = {"text": text, "thought": True}
            if signature:
                part["thoughtSignature"] = signature
            return self.parts(part)
        if not signature:
            return []
        out = self.end()
        self.pending = signature
        return out

    def end(self) -> list[dict]:
        """The signature no part took, on an empty text part."""
        if self.pending is None:
            return []
        pending, self.pending = self.pending, None
        return [{"text": "", "thoughtSignature": pending}]


def joined(parts: list[dict]) -> list[dict]:
    """Adjacent unsigned text parts of one kind joined, as `wire.reassemble` joins them."""
    out: list[dict] = []
    for part in parts:
        last = out[-1] if out else None
        if (
            last is not None
            and _plain(last)
            and _plain(part)
            and bool(last.get("thought")) == bool(part.get("thought"))
        ):
            out[-1] = {**last, "text": last["text"] + part["text"]}
        else:
            out.append(part)
    return out


def _plain(part: dict) -> bool:
    return isinstance(part.get("text"), str) and set(part) <= {"text", "thought"}
