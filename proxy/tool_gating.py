"""The tool policy held to one call's answer, in the client's API: the judge with the
call's facts bound, the gate that rewrites its stream or body (`proxy.tool_gate`), and
the decisions recorded beside the try that carried them.

A call is gated only when a policy has rules and its request offers the model tools
(without them no answer can ask for one): every other call costs nothing more.
"""

from __future__ import annotations

from typing import Any

from taplog.proxy.call import Call, Try
from taplog.proxy.tool_gate import StreamGate, gate_answer, stream_gate
from taplog.proxy.tool_policy import CallFacts, Decision, GatedCall, Policy
from taplog.recorder import events
from taplog.recorder.store.writer import EventRecord

HOLD_LIMIT = 1024 * 1024  # a tool call's held events past this are judged on what came


def offers_tools(parsed: Any) -> bool:
    """Whether a request lets the model ask for tools (every API names them `tools`;
    OpenAI Chat's older form `functions`)."""
    return isinstance(parsed, dict) and bool(parsed.get("tools") or parsed.get("functions"))


class CallGate:
    """One call's answer held to `policy`; its decisions are recorded once."""

    def __init__(self, call: Call, policy: Policy) -> None:
        self.call = call
        self._policy = policy
        model = call.model
        self._facts = CallFacts(
            call.session, call.key_fingerprint, model if isinstance(model, str) else None
        )
        self.decisions: list[Decision] = []
        self._stream: StreamGate | None = None
        self._recorded = False

    def judge(self, tool_call: GatedCall) -> Decision | None:
        return self._policy.judge(tool_call, self._facts)

    def stream(self) -> StreamGate | None:
        """The gate for a streamed answer in the client's API (None: an API without tools)."""
        self._stream = stream_gate(self.call.api, self.judge, HOLD_LIMIT)
        return self._stream

    def answer(self, answer: Any) -> bool:
        """A whole answer in the client's API (Gemini's stream read whole: a list of its
        chunks), rewritten in place: whether a call was taken out of it."""
        if not isinstance(answer, dict | list):
            return False
        self.decisions = gate_answer(self.call.api, answer, self.judge)
        return any(decision.action == "deny" for decision in self.decisions)

    @property
    def changed(self) -> bool:
        """Whether the client got other bytes than the vendor's (or the translator's)."""
        if self._stream is not None:
            return self._stream.changed
        return any(decision.action == "deny" for decision in self.decisions)

    def record(self, attempt_try: Try) -> None:
        """`tool.denied` / `tool.flagged` for each decision, after the try's answer; once."""
        if self._recorded:
            return
        self._recorded = True
        decisions = self._stream.decisions if self._stream is not None else self.decisions
        call = self.call
        for decision in decisions:
            event = events.tool_policy_event(
                call.session,
                call.id,
                action=decision.action,
                rule=decision.rule,
                reason=decision.reason,
                call_id=decision.call.call_id,
                name=decision.call.name,
                partial=decision.call.partial,
                attempt=attempt_try.number,
            )
            event["epoch"] = call.epoch
            call.services.recorder.record(EventRecord(event))


def gate_for(call: Call) -> CallGate | None:
    """The call's gate, when its answer could hold a tool call a rule may refuse."""
    policy = call.services.settings.tool_policy_rules
    if not policy or not offers_tools(call.parsed):
        return None
    return CallGate(call, policy)
