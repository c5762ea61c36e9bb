"""The item history behind every Responses answer taplog has seen, for `previous_response_id`.

A Responses client that chains with `previous_response_id` sends only its new
items; the earlier ones live at OpenAI. When such a call fails over, the other
vendor needs the whole conversation, so taplog keeps it: for each answer id,
the items so far (earlier history, then this call's input, then its output).
It learns them from the recorded events (an observer on the writer thread)
and from the answers it translates itself. `instructions` are not part of it:
the API does not carry them over a chain either.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from recorder.events import LLM_REQUEST, LLM_RESPONSE, Event

RESPONSES_API = "openai.responses"


def input_items(body: dict[str, Any]) -> list[Any]:
    items = body.get("input")
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return list(items) if isinstance(items, list) else []


class ResponsesHistory:
    """Answer id -> the conversation's items up to and including that answer (bounded)."""

    def __init__(self, max_answers: int = 10_000) -> None:
        self._items: OrderedDict[str, list[Any]] = OrderedDict()
        self._pending: OrderedDict[str, dict[str, Any]] = OrderedDict()  # exchange -> request
        self._max = max_answers

    def items_before(self, body: dict[str, Any]) -> list[Any] | None:
        """The earlier items a request chains to; None when it names an answer not seen."""
        previous = body.get("previous_response_id")
        if not previous:
            return []
        return self._items.get(previous)

    def remember(self, response_id: str, request: dict[str, Any], output: list[Any]) -> None:
        earlier = self.items_before(request) or []
        self._put(self._items, response_id, [*earlier, *input_items(request), *output])

    def __call__(self, event: Event) -> None:
        """Observer: learn from recorded Responses calls that went as the client sent them."""
        if event.get("api") != RESPONSES_API or event.get("translated_from"):
            return
        body = event.get("body")
        if event["type"] == LLM_REQUEST and isinstance(body, dict):
            self._put(self._pending, event["exchange"], body)
        elif (
            event["type"] == LLM_RESPONSE and isinstance(body, dict) and event.get("status") == 200
        ):
            request = self._pending.pop(event["exchange"], None)
            if request is not None and isinstance(body.get("id"), str):
                output = body.get("output") if isinstance(body.get("output"), list) else []
                self.remember(body["id"], request, output)

    def _put(self, store: OrderedDict, key: str, value: Any) -> None:
        store[key] = value
        store.move_to_end(key)
        if len(store) > self._max:
            store.popitem(last=False)
