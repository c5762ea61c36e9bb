"""The tool policy's gate: refused tool calls taken out of the answers clients receive.

A `Judge` (`proxy.tool_policy`, with the call's session, key and model bound) decides each
tool call the model asks for. A `deny` takes the call out of what the client receives and
puts `refusal_text` in its place, in the client's API, keeping the answer valid for its
SDK (stop and finish reasons, indexes, sequence numbers); a `flag` changes nothing. Both
are kept in `decisions`, in order.

    stream_gate(api, judge, hold_limit)   a stream's gate: whole SSE events in, events out
                                          (`feed`), then what it still holds (`finish`);
                                          None for an API without tool calls to gate
    gate_answer(api, answer, judge)       a whole answer, rewritten in place (for Gemini
                                          also a JSON-array stream's chunks, a list)

The rewriting is each API's own (`recorder.vendors.gates`): a streamed call is held until
its arguments are whole, or its events pass `hold_limit` bytes, then released as it came
or replaced; everything else passes as it came, waiting only behind a held call. When
nothing is refused the client's bytes are the vendor's, byte for byte, and `changed`
stays False.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from taplog.proxy.tool_policy import Decision, GatedCall, refusal_text
from taplog.recorder.vendors import gates
from taplog.recorder.vendors.holding import AskedCall

Judge = Callable[[GatedCall], Decision | None]


class StreamGate(Protocol):
    @property
    def decisions(self) -> list[Decision]:
        """Every decision so far (deny and flag), in order."""
        ...

    @property
    def changed(self) -> bool:
        """Whether the client's bytes differ from what came in."""
        ...

    def feed(self, blocks: list[bytes]) -> list[bytes]:
        """Whole SSE events in (as the vendor framed them), the client's events out."""
        ...

    def finish(self) -> list[bytes]:
        """The stream's body ended: what is still held, judged on what it has."""
        ...


class _Judging:
    """A judge as the gates ask it (the text in a refused call's place, or None), keeping
    its decisions."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self.decisions: list[Decision] = []

    def __call__(self, asked: AskedCall) -> str | None:
        call = GatedCall(asked.name, asked.arguments, asked.call_id, asked.partial)
        decision = self.judge(call)
        if decision is None:
            return None
        self.decisions.append(decision)
        return refusal_text(decision) if decision.action == "deny" else None


class _PolicyGate:
    """An API's stream gate asking a judge."""

    def __init__(self, gate: gates.Gate, judging: _Judging) -> None:
        self._gate = gate
        self._judging = judging

    def feed(self, blocks: list[bytes]) -> list[bytes]:
        return self._gate.feed(blocks)

    def finish(self) -> list[bytes]:
        return self._gate.finish()

    @property
    def decisions(self) -> list[Decision]:
        return self._judging.decisions

    @property
    def changed(self) -> bool:
        return self._gate.changed


def stream_gate(api: str, judge: Judge, hold_limit: int) -> StreamGate | None:
    """The gate for a stream of `api`'s events; `hold_limit`: the bytes a held call may
    keep waiting before it is judged on what it has."""
    judging = _Judging(judge)
    gate = gates.stream_gate(api, judging, hold_limit)
    return _PolicyGate(gate, judging) if gate is not None else None


def gate_answer(api: str, answer: Any, judge: Judge) -> list[Decision]:
    """A whole answer of `api` with its refused calls replaced in place; the decisions."""
    judging = _Judging(judge)
    gates.gate_answer(api, answer, judging)
    return judging.decisions
