"""The item history behind every Responses answer taplog has seen, for `previous_response_id`.

A Responses client that chains with `previous_response_id` sends only its new
items; the earlier ones live at OpenAI. When such a call fails over, the other
vendor needs the whole conversation, so taplog keeps it: for each answer id,
the items so far (earlier history, then this call's input, then its output).
It learns them when each answer ends, on the event loop, so the agent's very
next call finds them: from the answers it passes on and the ones it translates
(`recorder.vendors.openai_responses.chaining`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from taplog.recorder.vendors.openai_responses.chaining import conversation, previous_answer


class ResponsesHistory:
    """Answer id -> the conversation's items up to and including that answer (bounded)."""

    def __init__(self, max_answers: int = 10_000) -> None:
        self._items: OrderedDict[str, list[Any]] = OrderedDict()
        self._max = max_answers

    def items_before(self, body: dict[str, Any]) -> list[Any] | None:
        """The earlier items a request chains to; None when it names an answer not seen."""
        previous = previous_answer(body)
        if not previous:
            return []
        return self._items.get(previous)

    def remember(self, response_id: str, request: dict[str, Any], output: list[Any]) -> None:
        self._put(response_id, conversation(self.items_before(request) or [], request, output))

    def _put(self, key: str, value: list[Any]) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._max:
            self._items.popitem(last=False)
