"""PreToolUse / PostToolUse: pairing a session's tool calls with their results.

A model answer that asks for tools gives one `tool.pre` per call. A later
request that carries a call's result gives its `tool.post`, once: clients
resend the whole transcript every turn, so only the first sighting counts.
`duration_ms` runs from the answer that asked to the request that answered,
the agent's own tool time (none for a call a fork copied from its origin: when
its tool started is not known). Server-side tools ran at the vendor: their pre
and post come from the same answer, marked `server`.

Anomalies are flagged, never dropped, so a query can find them:
- `orphan_result`: a result for a call this session never saw asked for;
- `unanswered`: a call still without a result when the session went idle;
- `finish_mismatch`: an answer asks for tools but its stop reason says it
  ended normally;
- `ran_though_refused`: a result for a call the tool policy took out of the answer
  (`tool.denied`): the agent ran it anyway, or got it some other way.
A refused call is never `unanswered`: it is closed by its `tool.denied`.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from taplog.recorder.events import (
    SESSION_FORKED,
    TOOL_DENIED,
    TOOL_POST,
    TOOL_PRE,
    Event,
    now_ts,
    tool_post,
    tool_pre,
)
from taplog.recorder.layouts import Layout
from taplog.recorder.vendors.clients import tool_run
from taplog.recorder.vendors.tools import ToolCall, ToolResult

# Transcripts read for results, known by their last link (`Layout.chain`): a request grows
# from the latest body of its conversation (`recorder.known_bodies` keeps 16 of them).
READ_RUNS = 64
ORPHAN_RESULT = "orphan_result"
UNANSWERED = "unanswered"
FINISH_MISMATCH = "finish_mismatch"
RAN_THOUGH_REFUSED = "ran_though_refused"


@dataclass(slots=True)
class _Asked:
    name: str | None
    at: float | None  # epoch seconds of the answer that asked; None: asked before a fork
    exchange: str | None


def epoch(ts: str) -> float:
    """Epoch seconds of a `ts` (`recorder.events.now_ts`'s form, read in C: twice a call)."""
    return datetime.fromisoformat(ts).timestamp()


@dataclass
class ToolLedger:
    """One session's open tool calls and the calls whose results were seen."""

    pending: dict[str, _Asked] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)
    refused: set[str] = field(default_factory=set)  # calls the tool policy took out
    read: OrderedDict[bytes, None] = field(default_factory=OrderedDict)

    def read_before(self, layout: Layout | None) -> int:
        """How many first transcript items of a request this session has read for results
        already: those it took from an earlier body (`Layout.grown`) whose items were all
        read here. An agent resends its history, so a request is read for what it adds."""
        if layout is None or layout.grown_from not in self.read:
            return 0
        self.read.move_to_end(layout.grown_from)
        return layout.inherited

    def read_through(self, layout: Layout | None) -> None:
        """Every item of `layout` was read for results (its results are in `answered`)."""
        if layout is not None and layout.items:
            self.read[layout.chain()[-1]] = None
            if len(self.read) > READ_RUNS:
                self.read.popitem(last=False)

    def asked(
        self, answer: Event, calls: list[ToolCall], normal_stops: frozenset[str]
    ) -> list[Event]:
        """Events for the tool calls in a model answer (`answer` is its llm.response)."""
        mismatch = bool(calls) and answer.get("finish_reason") in normal_stops
        events = []
        for call in calls:
            events.append(
                tool_pre(
                    answer,
                    call_id=call.call_id,
                    name=call.name,
                    arguments=call.arguments,
                    arguments_raw=call.arguments_raw,
                    arguments_error=call.arguments_error,
                    model=answer.get("model"),
                    server=call.server,
                    flags=[FINISH_MISMATCH] if mismatch and not call.server else [],
                )
            )
            if call.server:
                self.answered.add(call.call_id)
                events.append(
                    _post(answer, call.call_id, call.name, call.result, call.is_error, server=True)
                )
            elif call.call_id not in self.answered:
                self.pending[call.call_id] = _Asked(
                    call.name, epoch(answer["ts"]), answer["exchange"]
                )
        return events

    def refuse(self, call_id: str) -> None:
        """The tool policy took this call out of the answer (`tool.denied`): no result is
        awaited, and one that comes is flagged."""
        self.pending.pop(call_id, None)
        self.refused.add(call_id)

    def results(self, request: Event, results: Iterable[ToolResult]) -> list[Event]:
        """Events for results a request carries for the first time in this session."""
        events = []
        for result in results:
            if result.call_id in self.answered:
                continue
            self.answered.add(result.call_id)
            call_id, asked = self._asked_for(result)
            how = {} if call_id == result.call_id else {"result_id": result.call_id}
            if result.call_id in self.refused:
                name, timing = result.name, {"flags": [RAN_THOUGH_REFUSED]}
            elif asked is None:
                name, timing = None, {"flags": [ORPHAN_RESULT]}
            else:  # a call copied by a fork: when its tool started is not known
                took = None if asked.at is None else (epoch(request["ts"]) - asked.at) * 1000
                name, timing = asked.name, {"duration_ms": None if took is None else round(took, 3)}
            events.append(
                _post(request, call_id, name, result.result, **_judged(result), **timing, **how)
            )
        return events

    def _asked_for(self, result: ToolResult) -> tuple[str, _Asked | None]:
        """The open call `result` answers, and its id: the one of its own id, else (an API
        whose result ids may be the client's own, `by_name`) the oldest of its name."""
        asked = self.pending.pop(result.call_id, None)
        if asked is not None or not result.by_name:
            return result.call_id, asked
        named = next((cid for cid, a in self.pending.items() if a.name == result.name), None)
        if named is None:
            return result.call_id, None
        self.answered.add(named)
        return named, self.pending.pop(named)

    def expire(self, session: str) -> list[Event]:
        """`unanswered` events for every call still open; the session went idle."""
        events = [
            _post(
                {"session": session, "exchange": asked.exchange, "ts": now_ts()},
                call_id,
                asked.name,
                None,
                None,
                flags=[UNANSWERED],
            )
            for call_id, asked in self.pending.items()
        ]
        self.answered.update(self.pending)
        self.pending.clear()
        return events

    def restore(self, events: Iterable[Event]) -> None:
        """Pick up where an earlier process left off, from the session's own log."""
        for event in events:
            if event["type"] == TOOL_PRE and not event.get("server"):
                asked = _Asked(event.get("name"), epoch(event["ts"]), event.get("exchange"))
                self.pending[event["call_id"]] = asked
            elif event["type"] == TOOL_POST:
                self.pending.pop(event["call_id"], None)
                self.answered.add(event["call_id"])
                if isinstance(event.get("result_id"), str):  # the result's own id, resent
                    self.answered.add(event["result_id"])
            elif event["type"] == TOOL_DENIED:
                self.refuse(event["call_id"])
            elif event["type"] == SESSION_FORKED:
                for asked in self.pending.values():
                    asked.at = None


def _judged(result: ToolResult) -> dict[str, Any]:
    """Whether a result failed and how that is known, decided once, when it is first seen:
    the API's own flag, else the exit code its client states (`clients.tool_run`)."""
    if result.is_error is not None:
        failed, known, code = result.is_error, "is_error", None
    else:
        code = tool_run(result.result).exit_code
        failed, known = code is not None and code != 0, "exit_code"
    judged: dict[str, Any] = {"is_error": failed}
    if failed:
        judged["error_from"] = known
    if code is not None:
        judged["exit_code"] = code
    return judged


def _post(
    parent: Event,
    call_id: str,
    name: str | None,
    result: Any,
    is_error: bool | None,
    *,
    duration_ms: float | None = None,
    server: bool = False,
    flags: list[str] | None = None,
    **how: Any,
) -> Event:
    return tool_post(
        parent,
        call_id=call_id,
        name=name,
        result=result,
        is_error=is_error,
        duration_ms=duration_ms,
        server=server,
        flags=flags or [],
        **how,
    )
