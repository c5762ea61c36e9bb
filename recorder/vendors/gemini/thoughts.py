"""Gemini's thought signatures carried through the neutral shape (Anthropic Messages).

Gemini signs its reasoning with a `thoughtSignature` on the part it belongs to (a thought
summary, a text part, the first `functionCall` of a step) and wants it back on that same
part: Gemini 3 refuses a tool turn whose first call lost it (400 INVALID_ARGUMENT). An
Anthropic client keeps and resends its thinking blocks, so a signature travels as one:

    Gemini part                                    Anthropic block(s)
    {text, thought: true, thoughtSignature: S}     thinking {thinking: text, signature: tag(S)}
    any other part signed S                        thinking {thinking: "", signature: tag(S)},
                                                   then the part's own block

and back: a tagged thinking block with text is a thought part; an empty one signs the
part the next block becomes (or, last in its turn, an empty text part, as Gemini sends
it). The tag keeps these blocks apart from Claude's own: Claude refuses a signature it
did not make (`anthropic.thinking.without_foreign_thinking`), and Gemini cannot use
Claude's.

A call that reaches Gemini without its signature (a turn another vendor served, or a
client with no place to keep one: OpenAI's) carries the stand-in Google documents for
history from other models, which skips the check (ai.google.dev/gemini-api/docs/
thought-signatures, FAQ).
"""

from __future__ import annotations

import base64

__all__ = ["SKIP_VALIDATION", "gemini_signature", "tagged"]

TAG = "gemini."
# base64 of `skip_thought_signature_validator`: the field is bytes on the wire.
SKIP_VALIDATION = base64.b64encode(b"skip_thought_signature_validator").decode()


def tagged(signature: str | None) -> str:
    """A Gemini signature as an Anthropic thinking block's `signature` ("" for none)."""
    return TAG + (signature or "")


def gemini_signature(signature: object) -> str | None:
    """The Gemini signature a thinking block's `signature` carries ("" for an unsigned
    thought), or None when the block is not Gemini's."""
    if isinstance(signature, str) and signature.startswith(TAG):
        return signature[len(TAG) :]
    return None
