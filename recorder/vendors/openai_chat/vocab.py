"""Shared answer vocabulary: stop reasons, usage and response ids in both directions.

The answer translators (`answers`) and the stream translators (`stream_from_neutral`,
`stream_to_neutral`) use these same functions, so a streamed answer and the same answer
without streaming always translate to the same reasons, usage and ids (the property tests
hold them to that).

Usage (protocols.md 5.4, 5.8.15): OpenAI's ``prompt_tokens`` INCLUDES cached tokens, Anthropic's
``input_tokens`` EXCLUDES cache reads and writes. So ``prompt_tokens = input + cache_read +
cache_creation`` one way and ``input_tokens = prompt_tokens - cached - cache_write`` the
other; cache reads, cache writes and reasoning/thinking tokens map one to one.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.sse import as_int, as_str, dig

__all__ = [
    "chat_response_id",
    "chat_usage",
    "finish_reason",
    "message_response_id",
    "messages_usage",
    "stop_reason",
    "translated_stop_reason",
]

_FINISH_FROM_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "length",  # no true equivalent: the turn is unfinished
}

_STOP_FROM_FINISH = {
    "stop": "end_turn",  # stop_sequence stays null: OpenAI does not say which one matched
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def finish_reason(stop: Any) -> str:
    """Anthropic ``stop_reason`` -> OpenAI ``finish_reason``; unknown or missing -> stop."""
    return _FINISH_FROM_STOP.get(stop, "stop") if isinstance(stop, str) else "stop"


def stop_reason(finish: Any) -> str:
    """OpenAI ``finish_reason`` -> Anthropic ``stop_reason``; unknown or missing -> end_turn."""
    return _STOP_FROM_FINISH.get(finish, "end_turn") if isinstance(finish, str) else "end_turn"


def translated_stop_reason(finish: Any, *, refused: bool, called: bool) -> str:
    """The stop_reason of a translated OpenAI answer, given what reached the client.

    An OpenAI refusal ends with ``stop``; Anthropic calls that ``refusal``. A ``tool_calls``
    finish whose calls were all left out (arguments not an object) is no tool turn.
    """
    stop = stop_reason(finish)
    if refused and stop == "end_turn":
        return "refusal"
    if stop == "tool_use" and not called:
        return "end_turn"
    return stop


def chat_response_id(message_id: Any) -> str:
    """``msg_X`` -> ``chatcmpl-X``: derived, so the log can pair the two ids."""
    text = as_str(message_id) or "taplog"
    return "chatcmpl-" + text.removeprefix("msg_")


def message_response_id(chat_id: Any) -> str:
    """``chatcmpl-X`` -> ``msg_X``."""
    text = as_str(chat_id) or "taplog"
    return "msg_" + text.removeprefix("chatcmpl-")


def count(usage: Any, *path: str) -> int:
    """A token count, 0 when absent or odd."""
    return as_int(dig(usage, *path)) or 0


def chat_usage(usage: Any) -> dict:
    """Anthropic usage -> OpenAI usage (cache tokens folded into ``prompt_tokens``)."""
    read = count(usage, "cache_read_input_tokens")
    write = count(usage, "cache_creation_input_tokens")
    prompt = count(usage, "input_tokens") + read + write
    completion = count(usage, "output_tokens")
    result: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": read, "cache_write_tokens": write},
    }
    thinking = as_int(dig(usage, "output_tokens_details", "thinking_tokens"))
    if thinking is not None:
        result["completion_tokens_details"] = {"reasoning_tokens": thinking}
    return result


def messages_usage(
    usage: Any,
    names: tuple[str, str, str, str] = (
        "prompt",
        "completion",
        "prompt_tokens_details",
        "completion_tokens_details",
    ),
) -> dict:
    """OpenAI usage -> Anthropic usage (cache tokens taken out of ``input_tokens``).

    `names` are the OpenAI API's field stems: Chat's by default; Responses passes its own
    (``input``, ``output``, ``input_tokens_details``, ``output_tokens_details``).
    """
    prompt, completion, prompt_details, completion_details = names
    cached = count(usage, prompt_details, "cached_tokens")
    written = count(usage, prompt_details, "cache_write_tokens")
    result: dict[str, Any] = {
        "input_tokens": max(count(usage, f"{prompt}_tokens") - cached - written, 0),
        "output_tokens": count(usage, f"{completion}_tokens"),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": written,
    }
    reasoning = as_int(dig(usage, completion_details, "reasoning_tokens"))
    if reasoning is not None:
        result["output_tokens_details"] = {"thinking_tokens": reasoning}
    return result


def anthropic_message(
    message_id: str, model: Any, content: list[dict], stop: str | None, usage: dict
) -> dict:
    """A whole Anthropic message in the shape the SDK parses."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": as_str(model) or "",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
