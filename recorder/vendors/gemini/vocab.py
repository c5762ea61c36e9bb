"""Shared Gemini answer vocabulary: finish and stop reasons, usage, ids, errors, both ways.

The answer translators (`answers`) and the stream translators (`stream_to_neutral`,
`stream_from_neutral`) use these same functions, so a streamed answer and the same answer
without streaming translate alike (the tests hold them to that).

Finish reason (Gemini) <-> stop reason (Anthropic):

    STOP                                   end_turn, or tool_use when the answer calls a tool
    MAX_TOKENS                             max_tokens
    SAFETY, RECITATION, BLOCKLIST,         refusal: Gemini stopped the answer rather than
    PROHIBITED_CONTENT, SPII, IMAGE_*,     finished it; end_turn would pass a cut answer off
    LANGUAGE, OTHER                        as a whole one
    anything else, none                    end_turn (MALFORMED_FUNCTION_CALL and the like:
                                           the call never reached the client)
    a blocked prompt (promptFeedback)      refusal, with no content

and back: end_turn, tool_use, stop_sequence, pause_turn -> STOP; max_tokens and
model_context_window_exceeded -> MAX_TOKENS; refusal -> SAFETY; anything else -> STOP.

Usage: Gemini's `promptTokenCount` counts the cached tokens, Anthropic's `input_tokens`
does not; `candidatesTokenCount` leaves the thoughts out (`thoughtsTokenCount`), Anthropic's
`output_tokens` counts them (and says how many in `output_tokens_details.thinking_tokens`).
So `input_tokens = prompt - cached`, `cache_read_input_tokens = cached` (when some),
`output_tokens = candidates + thoughts` one way, and `promptTokenCount = input + cache
reads + cache writes`, `cachedContentTokenCount = cache reads` (when some),
`candidatesTokenCount = output - thinking`, `thoughtsTokenCount = thinking` (when Claude
says) the other. `toolUsePromptTokenCount` (results of Google's own tools, which taplog
never asks for) is left out.

Ids: the Anthropic message for a Gemini answer is `msg_` + its `responseId`, and a Gemini
answer to an Anthropic message has that id without `msg_`. A function call without an id
gets `call_<answer key>_<k>` (k counts the answer's calls), the answer key being its
`responseId`, or random hex when it has none; ids are fitted to Anthropic's rule.

Errors: a Google error (`{code, message, status}`) is an Anthropic `rate_limit_error`
(RESOURCE_EXHAUSTED, 429), `overloaded_error` (UNAVAILABLE, 503), `invalid_request_error`
(INVALID_ARGUMENT, 400), else `api_error`; an Anthropic error goes the other way by its
kind (`errors.anthropic_error_kind`), in the body `endpoint.error_body` writes.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from taplog.recorder.vendors.errors import ErrorKind, anthropic_error_kind, error_message
from taplog.recorder.vendors.gemini.endpoint import error_body
from taplog.recorder.vendors.naming import ANTHROPIC_ID_LIMIT, fit
from taplog.recorder.vendors.openai_chat.vocab import count
from taplog.recorder.vendors.sse import as_int, as_list, as_str, dig

__all__ = [
    "answer_key",
    "anthropic_error",
    "anthropic_usage",
    "asks_for_thoughts",
    "finish_reason",
    "first_candidate",
    "gemini_error",
    "gemini_usage",
    "message_id",
    "response_id",
    "stop_reason",
    "tool_use_id",
]

_FINISH_FROM_STOP = {
    "max_tokens": "MAX_TOKENS",
    "model_context_window_exceeded": "MAX_TOKENS",
    "refusal": "SAFETY",
}
_REFUSALS = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "LANGUAGE", "OTHER"}
)
_ERROR_TYPES = {
    "RESOURCE_EXHAUSTED": "rate_limit_error",
    "UNAVAILABLE": "overloaded_error",
    "INVALID_ARGUMENT": "invalid_request_error",
}
_STATUS_OF_CODE = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 400: "INVALID_ARGUMENT"}
# ErrorKind -> the HTTP code Google would answer with (`error_body` names its status)
_GEMINI_CODES = {
    ErrorKind.INVALID: 400,
    ErrorKind.AUTH: 401,
    ErrorKind.PERMISSION: 403,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.TOO_LARGE: 400,  # Google refuses an oversized prompt with INVALID_ARGUMENT
    ErrorKind.BILLING: 429,
    ErrorKind.RATE_LIMIT: 429,
    ErrorKind.SERVER: 500,
    ErrorKind.TIMEOUT: 504,
    ErrorKind.OVERLOADED: 503,
}


def finish_reason(stop: Any) -> str:
    """Anthropic `stop_reason` -> Gemini `finishReason`; unknown or missing -> STOP."""
    return _FINISH_FROM_STOP.get(stop, "STOP") if isinstance(stop, str) else "STOP"


def stop_reason(finish: Any, *, called: bool) -> str:
    """Gemini `finishReason` -> Anthropic `stop_reason`; `called`: a tool call reached the
    client (Gemini ends a tool turn with STOP too)."""
    if finish == "STOP":
        return "tool_use" if called else "end_turn"
    if finish == "MAX_TOKENS":
        return "max_tokens"
    if finish in _REFUSALS or (isinstance(finish, str) and finish.startswith("IMAGE_")):
        return "refusal"
    return "end_turn"


def first_candidate(body: Any) -> dict:
    """Candidate 0 ({} when there is none): requests never ask for more."""
    for candidate in as_list(dig(body, "candidates")):
        if isinstance(candidate, dict) and candidate.get("index") in (0, None):
            return candidate
    return {}


def anthropic_usage(usage: Any) -> dict:
    """Gemini `usageMetadata` -> Anthropic usage."""
    cached = count(usage, "cachedContentTokenCount")
    thoughts = as_int(dig(usage, "thoughtsTokenCount"))
    result: dict[str, Any] = {
        "input_tokens": max(count(usage, "promptTokenCount") - cached, 0),
        "output_tokens": count(usage, "candidatesTokenCount") + (thoughts or 0),
    }
    if cached:
        result["cache_read_input_tokens"] = cached
    if thoughts is not None:
        result["output_tokens_details"] = {"thinking_tokens": thoughts}
    return result


def gemini_usage(usage: Any) -> dict:
    """Anthropic usage -> Gemini `usageMetadata`."""
    read = count(usage, "cache_read_input_tokens")
    prompt = count(usage, "input_tokens") + read + count(usage, "cache_creation_input_tokens")
    output = count(usage, "output_tokens")
    thinking = min(count(usage, "output_tokens_details", "thinking_tokens"), output)
    result = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output - thinking,
        "totalTokenCount": prompt + output,
    }
    if read:
        result["cachedContentTokenCount"] = read
    if thinking:
        result["thoughtsTokenCount"] = thinking
    return result


def answer_key(response_id: Any) -> str:
    """What names an answer's id-less calls: its `responseId`, else random hex."""
    return as_str(response_id) or secrets.token_hex(8)


def message_id(key: str) -> str:
    """An answer's key (`answer_key`) -> the Anthropic message id `msg_<key>`."""
    return "msg_" + key


def response_id(message: Any) -> str:
    """An Anthropic message id `msg_X` -> the Gemini `responseId` X (random when none)."""
    return answer_key(as_str(message) and message.removeprefix("msg_"))


def tool_use_id(given: Any, key: str, k: int) -> str:
    """A function call's id for an Anthropic client: its own, else one minted from the
    answer's key and k, the call's place among the answer's calls."""
    return fit(as_str(given) or f"call_{key}_{k}", ANTHROPIC_ID_LIMIT)


def asks_for_thoughts(request: Mapping[str, Any]) -> bool:
    """Whether a Gemini request asks for thought summaries (`includeThoughts`), in either
    key spelling."""
    config = _either(request, "generationConfig", "generation_config")
    thinking = _either(config, "thinkingConfig", "thinking_config")
    return _either(thinking, "includeThoughts", "include_thoughts") is True


def _either(obj: Any, camel: str, snake: str) -> Any:
    if not isinstance(obj, Mapping):
        return None
    return obj[camel] if camel in obj else obj.get(snake)


def anthropic_error(error: Any) -> dict:
    """A Google error object (`{code, message, status}`) as an Anthropic error object."""
    status = as_str(dig(error, "status")) or _STATUS_OF_CODE.get(as_int(dig(error, "code")) or 0)
    message = as_str(dig(error, "message")) or as_str(error)
    if not message:
        message = f"the upstream stream failed ({status or 'no status'})"
    return {"type": _ERROR_TYPES.get(status or "", "api_error"), "message": message}


def gemini_error(body: Any) -> dict:
    """An Anthropic error event or body as Google's error body (`{"error": {...}}`)."""
    kind = anthropic_error_kind(200, body)
    message = error_message(body) or "the upstream stream failed"
    code = as_str(dig(body, "error", "type")) or "api_error"
    return error_body(_GEMINI_CODES[kind], message, code)
