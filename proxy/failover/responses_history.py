"""The item history behind every Responses answer taplog has seen, for `previous_response_id`.

A Responses client that chains with `previous_response_id` sends only its new
items; the earlier ones live at OpenAI. When such a call fails over, the other
vendor needs the whole conversation, so taplog keeps it: for each answer id,
the items so far (earlier history, then this call's input, then its output).
It learns them when each answer ends, on the event loop, so the agent's very
next call finds them: from the answers it passes on and the ones it translates
(`recorder.vendors.openai_responses.chaining`).

With `--workers N` the next call may reach another worker. Each worker keeps its own
answers (`SharedHistory`) and hands every one to the recorder process (`KeptAnswers`),
which spells out a conversation when a worker asks: only for a call that must go
unchained and chains to an answer another worker served.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Protocol

from taplog.recorder.bodies import parse_json
from taplog.recorder.vendors.openai_responses.chaining import conversation, previous_answer


class ResponsesHistory:
    """Answer id -> the conversation's items up to and including that answer (bounded)."""

    def __init__(self, max_answers: int = 10_000) -> None:
        self._items: OrderedDict[str, list[Any]] = OrderedDict()
        self._max = max_answers

    def known(self, body: dict[str, Any]) -> list[Any] | None:
        """The earlier items a request chains to; None when it names an answer not seen."""
        previous = previous_answer(body)
        if not previous:
            return []
        return self._items.get(previous)

    async def items_before(self, body: dict[str, Any]) -> list[Any] | None:
        return self.known(body)

    def remember(
        self, response_id: str, request: dict[str, Any], raw: bytes, output: list[Any]
    ) -> None:
        """An answer to `request` (sent as `raw`); kept when the chain before it is known."""
        earlier = self.known(request)
        if earlier is not None:
            self._put(response_id, conversation(earlier, request, output))

    def _put(self, key: str, value: list[Any]) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._max:
            self._items.popitem(last=False)


class RecorderChannel(Protocol):
    def keep_answer(self, response_id: str, raw: bytes, output: list[Any]) -> None: ...

    async def ask(self, question: str, *args: Any) -> Any: ...


class SharedHistory(ResponsesHistory):
    """A worker's history: its own answers, and every other worker's through the recorder
    process (asked only when this worker has not seen the answer a call chains to)."""

    def __init__(self, recorder: RecorderChannel) -> None:
        super().__init__()
        self._recorder = recorder

    async def items_before(self, body: dict[str, Any]) -> list[Any] | None:
        found = self.known(body)
        if found is not None:
            return found
        try:
            return await self._recorder.ask("history", previous_answer(body))
        except ConnectionError:
            return None  # as if never seen: the call is refused where it needs the chain

    def remember(
        self, response_id: str, request: dict[str, Any], raw: bytes, output: list[Any]
    ) -> None:
        super().remember(response_id, request, raw, output)
        self._recorder.keep_answer(response_id, raw, output)


class KeptAnswers:
    """The recorder process's copy of every worker's Responses answers: each request as sent
    and the answer's output, at most `max_bytes` of requests. Requests are parsed only
    when a conversation is asked for, so keeping them costs no parse per call."""

    def __init__(self, max_bytes: int = 64 << 20) -> None:
        self._answers: OrderedDict[str, tuple[bytes, list[Any]]] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._lock = threading.Lock()  # one reader thread per worker keeps answers

    def keep(self, response_id: str, raw: bytes, output: list[Any]) -> None:
        with self._lock:
            replaced = self._answers.pop(response_id, None)
            if replaced is not None:
                self._bytes -= len(replaced[0])
            self._answers[response_id] = (raw, output)
            self._bytes += len(raw)
            while self._bytes > self._max_bytes and len(self._answers) > 1:
                _, (oldest, _) = self._answers.popitem(last=False)
                self._bytes -= len(oldest)

    def items_through(self, response_id: str) -> list[Any] | None:
        """The conversation up to and including that answer; None when any answer of its
        chain is not kept (or its request no longer parses)."""
        chain: list[tuple[dict[str, Any], list[Any]]] = []
        at: Any = response_id
        while at:
            kept = self._answers.get(at)
            if kept is None or len(chain) > len(self._answers):
                return None
            request = parse_json(kept[0])
            if not isinstance(request, dict):
                return None
            chain.append((request, kept[1]))
            at = previous if isinstance(previous := previous_answer(request), str) else None
        items: list[Any] = []
        for request, output in reversed(chain):
            items = conversation(items, request, output)
        return items
