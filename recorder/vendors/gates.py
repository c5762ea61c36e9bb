"""Each API's tool gate, by API name (`recorder.vendors.holding` says what a gate is).

    stream_gate(api, refuse, hold_limit)   a gate for a stream of `api`'s SSE events;
                                           None for an API with no tool calls to gate
    gate_answer(api, answer, refuse)       a whole answer, its refused calls replaced in
                                           place (for Gemini also a JSON-array stream, a list)

A new API's gate is one `gate` module beside its wire module and one line in `_GATES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from taplog.recorder.vendors.anthropic import gate as anthropic_gate
from taplog.recorder.vendors.gemini import gate as gemini_gate
from taplog.recorder.vendors.holding import Refuse
from taplog.recorder.vendors.openai_chat import gate as chat_gate
from taplog.recorder.vendors.openai_responses import gate as responses_gate


class Gate(Protocol):
    changed: bool  # the client's events differ from what came in

    def feed(self, blocks: list[bytes]) -> list[bytes]: ...

    def finish(self) -> list[bytes]: ...


@dataclass(frozen=True, slots=True)
class _Gates:
    stream: Callable[[Refuse, int], Gate]
    answer: Callable[[Any, Refuse], None]


_GATES = {
    "anthropic.messages": _Gates(anthropic_gate.MessagesGate, anthropic_gate.gate_answer),
    "openai.chat": _Gates(chat_gate.ChatGate, chat_gate.gate_answer),
    "openai.responses": _Gates(responses_gate.ResponsesGate, responses_gate.gate_answer),
    # Gemini's calls come whole in one chunk: it holds nothing, so it takes no limit.
    "gemini.generate": _Gates(
        lambda refuse, _: gemini_gate.GenerateGate(refuse), gemini_gate.gate_answer
    ),
}


def stream_gate(api: str, refuse: Refuse, hold_limit: int) -> Gate | None:
    found = _GATES.get(api)
    return found.stream(refuse, hold_limit) if found is not None else None


def gate_answer(api: str, answer: Any, refuse: Refuse) -> None:
    found = _GATES.get(api)
    if found is not None:
        found.answer(answer, refuse)
