"""Recorded events into metrics and the call log: the recorder's observer.

Runs on the writer thread, in log order, after each event is written. Most
events count on their own; a few need what came before in their exchange:

- an `llm.response` is labelled with the model its `llm.request` asked for;
- an `llm.request` with `attempt` > 1 is a retry unless a `failover` event
  just moved the call to another target;
- a `failover` is counted with the reason class of the answer that caused it
  (the last `llm.response` of the exchange), not its free text (except for
  `untranslatable` and `midstream`, a broken stream continued elsewhere);
- a request recorded with `sent: false` (the client's call, which an open
  circuit sent straight to a fallback) went to no vendor: it is not a try.

That memory is per exchange and bounded (least recently used goes first).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from taplog.proxy.observe.log_lines import log_call
from taplog.proxy.observe.metrics import Metrics
from taplog.recorder.events import (
    ERROR,
    FAILOVER,
    LLM_REQUEST,
    LLM_RESPONSE,
    SESSION_STARTED,
    TOOL_DENIED,
    TOOL_FLAGGED,
    TOOL_POST,
    TOOL_PRE,
    Event,
)

MAX_EXCHANGES = 100_000
FAILURE_OUTCOMES = frozenset({"timeout", "unreachable", "upstream_cut"})


@dataclass(slots=True)
class _Exchange:
    model: str | None = None  # the model asked of the try in flight
    switched: bool = False  # a failover event came after the last request
    status: int | None = None  # of the last answer
    outcome: str | None = None


def failover_reason(reason: str, status: object, outcome: object) -> str:
    """A bounded reason class for a failover, from the answer that caused it."""
    if reason.startswith("not translatable"):
        return "untranslatable"
    if reason.startswith("continuing a broken stream"):
        return "midstream"
    if reason.startswith("circuit open"):
        return "circuit_open"
    if outcome in FAILURE_OUTCOMES:
        return str(outcome)
    if outcome is None:
        return "other"
    if status == 429:
        return "rate_limited"
    if isinstance(status, int) and status >= 500:
        return "server_error"
    if status == 200:
        return "stream_error"  # an error event opened a 200 stream
    return "other"


class Observer:
    """Call with every recorded event (a `Recorder` observer)."""

    def __init__(self, metrics: Metrics, max_exchanges: int = MAX_EXCHANGES) -> None:
        self.metrics = metrics
        self._exchanges: OrderedDict[str, _Exchange] = OrderedDict()
        self._max = max_exchanges

    def __call__(self, event: Event) -> None:
        kind = event["type"]
        self.metrics.session_seen(event["session"])
        if kind == LLM_REQUEST:
            self._request(event)
        elif kind == LLM_RESPONSE:
            self._response(event)
        elif kind == FAILOVER:
            state = self._exchange(event.get("exchange")) or _Exchange()
            reason = failover_reason(str(event.get("reason", "")), state.status, state.outcome)
            self.metrics.failover(event.get("from_provider"), event.get("to_provider"), reason)
            state.switched = True
        elif kind in (TOOL_PRE, TOOL_POST):
            self.metrics.tool(event)
        elif kind in (TOOL_DENIED, TOOL_FLAGGED):
            self.metrics.tool_policy_decision(
                "deny" if kind == TOOL_DENIED else "flag", event.get("rule")
            )
        elif kind == SESSION_STARTED:
            self.metrics.session_started()
        elif kind == ERROR:
            self.metrics.error_event()

    def _exchange(self, exchange: object) -> _Exchange | None:
        if not isinstance(exchange, str):
            return None
        state = self._exchanges.get(exchange)
        if state is None:
            state = self._exchanges[exchange] = _Exchange()
            if len(self._exchanges) > self._max:
                self._exchanges.popitem(last=False)
        else:
            self._exchanges.move_to_end(exchange)
        return state

    def _request(self, event: Event) -> None:
        state = self._exchange(event.get("exchange"))
        if state is None:
            return
        if event.get("sent") is False:
            return
        if isinstance(event.get("attempt"), int) and event["attempt"] > 1 and not state.switched:
            self.metrics.retry(event.get("provider"), event.get("model"))
        model = event.get("model")
        state.model, state.switched = (model if isinstance(model, str) else None), False

    def _response(self, event: Event) -> None:
        state = self._exchange(event.get("exchange"))
        model = state.model if state is not None else None
        if state is not None:
            state.status, state.outcome = event.get("status"), event.get("outcome")
        self.metrics.response(event, model)
        log_call(event, model)
