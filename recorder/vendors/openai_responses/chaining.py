"""Responses chaining: a request that names an earlier answer (`previous_response_id`)
sends only its new items; the earlier ones live with the vendor that gave that answer.

taplog keeps each answer's conversation (`proxy.failover.responses_history` while it
serves, `recorder.tools.export` from the log) so that such a call can go where the chain
is unknown: to another provider, or after an answer taplog made itself (a translated one,
`resp_tl…`). It then goes unchained: the conversation spelled out as its input items,
not stored. `instructions` are not part of a chain: the API does not carry them over.
"""

from __future__ import annotations

from typing import Any

from taplog.recorder.vendors.translation import Untranslatable

TAPLOG_ANSWER_PREFIX = "resp_tl"
PREVIOUS_FIELD = "previous_response_id"  # also how a session found by it names its source


def is_taplog_answer(response_id: str) -> bool:
    """A Responses answer id that taplog made (the vendor never saw it)."""
    return response_id.startswith(TAPLOG_ANSWER_PREFIX)


def previous_answer(body: dict[str, Any]) -> Any:
    """The answer a request chains to, as it sent it (a string, or nothing)."""
    return body.get(PREVIOUS_FIELD)


def input_items(body: dict[str, Any]) -> list[Any]:
    """A request's input as items: a string is one user message."""
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return list(items) if isinstance(items, list) else []


def answer_id(answer: dict[str, Any]) -> str | None:
    answer_id = answer.get("id")
    return answer_id if isinstance(answer_id, str) else None


def output_items(answer: dict[str, Any]) -> list[Any]:
    output = answer.get("output")
    return output if isinstance(output, list) else []


def conversation(earlier: list[Any], request: dict[str, Any], output: list[Any]) -> list[Any]:
    """The items up to and including an answer: the chain before, the request's input,
    the answer's output."""
    return [*earlier, *input_items(request), *output]


def without_chain(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != PREVIOUS_FIELD}


def spelled_out(body: dict[str, Any], history: list[Any]) -> dict[str, Any]:
    """The request unchained: `history` ahead of its own input items, not stored."""
    return {**without_chain(body), "input": [*history, *input_items(body)], "store": False}


def needs_unchaining(body: dict[str, Any], same_provider: bool) -> bool:
    """A call chained to an answer this vendor never gave (taplog made it, or another
    provider did) must carry its history itself."""
    previous = previous_answer(body)
    return isinstance(previous, str) and (not same_provider or is_taplog_answer(previous))


def unchained(body: dict[str, Any], history: list[Any] | None) -> dict[str, Any]:
    """The call with its chain spelled out, for a vendor without it; `history` is None
    when taplog does not know the chain."""
    if history is None:
        raise Untranslatable(f"the answer named by {PREVIOUS_FIELD} is not in taplog's log")
    return spelled_out(body, history)
