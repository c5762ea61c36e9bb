"""The tool gate of Gemini's generateContent (`recorder.vendors.holding`): refused
`functionCall` parts become text parts.

Gemini sends each function call whole in one part of one chunk, so nothing is held: a
stream's chunk (`data:` events, `alt=sse`) or a whole answer has each refused call's part
replaced by `{"text": <refusal>}`, keeping the `thoughtSignature` the call carried (Gemini
checks it when the turn comes back). `finishReason` stays: Gemini's `STOP` ends an answer
with or without calls. A stream sent as one JSON array (no `alt=sse`) is not a run of
events: its body, read whole as a list of chunks, goes through `gate_answer`.
"""

from __future__ import annotations

from typing import Any

import orjson

from taplog.recorder.vendors.holding import AskedCall, Refuse, payload, rebuilt
from taplog.recorder.vendors.sse import as_list, as_str, dig


class GenerateGate:
    """A Gemini SSE stream, its refused calls replaced chunk by chunk."""

    def __init__(self, refuse: Refuse) -> None:
        self.changed = False
        self._refuse = refuse

    def feed(self, blocks: list[bytes]) -> list[bytes]:
        return [self._gated(block) if b'"functionCall"' in block else block for block in blocks]

    def finish(self) -> list[bytes]:
        return []  # nothing is ever held

    def _gated(self, block: bytes) -> bytes:
        chunk = payload(block)
        if chunk is None or not _gate_chunk(chunk, self._refuse):
            return block
        self.changed = True
        return rebuilt(block, chunk)


def gate_answer(answer: dict | list, refuse: Refuse) -> None:
    """A whole answer, or a JSON-array stream's chunks: refused calls become text parts."""
    for chunk in answer if isinstance(answer, list) else [answer]:
        if isinstance(chunk, dict):
            _gate_chunk(chunk, refuse)


def _gate_chunk(chunk: dict, refuse: Refuse) -> bool:
    """Replace the refused calls of every candidate of `chunk`: whether one was."""
    replaced = False
    for candidate in as_list(chunk.get("candidates")):
        parts = as_list(dig(candidate, "content", "parts"))
        for position, part in enumerate(parts):
            call = dig(part, "functionCall")
            if not isinstance(call, dict):
                continue
            refusal = refuse(_asked(call))
            if refusal is not None:
                parts[position] = _text_part(part, refusal)
                replaced = True
    return replaced


def _asked(call: dict) -> AskedCall:
    arguments = call.get("args")
    return AskedCall(
        as_str(call.get("name")) or "",
        orjson.dumps(arguments if arguments is not None else {}).decode(),
        as_str(call.get("id")) or "",
    )


def _text_part(part: Any, text: str) -> dict:
    signature = part.get("thoughtSignature")
    return {"text": text, "thoughtSignature": signature} if signature else {"text": text}
