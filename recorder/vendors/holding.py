"""Taking refused tool calls out of answers: what every API's gate shares.

Each API's `gate` module (`anthropic.gate`, `openai_chat.gate`, `openai_responses.gate`,
`gemini.gate`) knows its answers; `recorder.vendors.gates` finds one by API name. The
caller decides, the gate rewrites:

    AskedCall      a tool call as the client would receive it: name, arguments, id, and
                   whether the arguments were cut (`partial`)
    Refuse         the caller's verdict on one: the text to put in its place, or None to
                   let it pass
    HoldingGate    a stream's gate: whole SSE events in, the client's events out (`feed`),
                   then what it still holds (`finish`); `changed` once they differ

The hold: a tool call's events wait until its arguments are whole, then go on as they came,
or rewritten. Blocks queue in arrival order, each with the calls it carries pieces of; the
head leaves once its calls are judged, so nothing overtakes a held call and a block of no
call waits only behind one. Each API's `_take` says what a block carries and which calls it
closes; its `_emit` writes a leaving block (as it came, or the refused call's events out,
its replacement in, stop reasons and numbering fixed). The hold is bounded: once the queue
exceeds `hold_limit` bytes every open call is judged on what it has (`partial`); a passing
one then streams as it comes, a refused one's later events are dropped by `_emit`.
`finish` judges what is still open the same way, since its stream ended before it did.

Blocks are read cheaply: the `event:` name by a prefix match, the JSON only when a gate
needs it. A written block keeps the framing of the one it stands for: its event name and
its line ends (comments and ids are not kept).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.vendors.sse import as_str, load_object, parse_block


@dataclass(frozen=True, slots=True)
class AskedCall:
    """A tool call the model asked for, as the client would receive it."""

    name: str
    arguments: str  # JSON text (a function tool) or the raw input (a custom tool)
    call_id: str  # the API's id for it; "" when it has none
    partial: bool = False  # cut at the hold limit, or by the stream's end


Refuse = Callable[[AskedCall], str | None]  # the text in a refused call's place; None: it passes


# -- SSE blocks ---------------------------------------------------------------------------

_EVENT_LINE = re.compile(rb"event: ?([^\r\n]*)")


def event_name(block: bytes) -> str | None:
    """The block's `event:` name, read without parsing when it comes first (as every vendor
    sends it); None when it has none."""
    found = _EVENT_LINE.match(block)
    if found is not None:
        return found.group(1).decode(errors="replace")
    if b"event:" not in block:
        return None
    event = parse_block(block)
    return event.event if event is not None else None


def event_type(block: bytes) -> str | None:
    """The event's type: its `event:` name, else (from a server that leaves the line out)
    its data's `type`."""
    name = event_name(block)
    if name is None and b'"type"' in block:
        data = payload(block)
        name = as_str(data.get("type")) if data is not None else None
    return name


def payload(block: bytes) -> dict | None:
    """The block's data as a JSON object; None when it is not one (an end marker, a comment)."""
    event = parse_block(block)
    return load_object(event.data) if event is not None and event.data else None


def line_end(block: bytes) -> bytes:
    """The line end the vendor framed `block` with."""
    if b"\r\n" in block:
        return b"\r\n"
    return b"\n" if b"\n" in block or b"\r" not in block else b"\r"


def framed(name: str | None, data: Any, end: bytes) -> bytes:
    """One event: its `event:` line (when named), one `data:` line of compact JSON, the
    blank line, each ending with `end`."""
    head = b"event: " + name.encode() + end if name is not None else b""
    return head + b"data: " + orjson.dumps(data) + end + end


def rebuilt(block: bytes, data: Any) -> bytes:
    """`block` with `data` in place of its data, its event name and line ends kept."""
    return framed(event_name(block), data, line_end(block))


# -- the hold -----------------------------------------------------------------------------


@dataclass(slots=True, eq=False)
class HeldCall:
    """One tool call of a stream, from its first event on."""

    key: Any  # its place in the stream: block index, output index, (choice, index)
    name: str
    call_id: str
    pieces: list[str] = field(default_factory=list)  # its arguments as they came
    whole: str | None = None  # its arguments as an event gave them whole, if one did
    judged: bool = False
    refusal: str | None = None  # the text in its place, once refused
    replaced: bool = False  # refused, and its replacement went out
    facts: dict[str, Any] = field(default_factory=dict)  # what its API's gate keeps of it

    @property
    def denied(self) -> bool:
        return self.refusal is not None

    @property
    def arguments(self) -> str:
        return self.whole if self.whole is not None else "".join(self.pieces)


class HoldingGate(ABC):
    """A stream's gate; an API's gate says what its blocks carry (`_take`) and how a
    leaving one is written (`_emit`, which sends through `_send`)."""

    def __init__(self, refuse: Refuse, hold_limit: int) -> None:
        self.changed = False
        self._refuse = refuse
        self._limit = hold_limit
        self._open: dict[Any, HeldCall] = {}  # calls not judged yet, by key
        self._queue: deque[tuple[bytes, tuple[HeldCall, ...], Any]] = deque()
        self._queued = 0  # bytes in the queue
        self._out: list[bytes] = []

    def feed(self, blocks: list[bytes]) -> list[bytes]:
        for block in blocks:
            self._take(block)
        out, self._out = self._out, []
        return out

    def finish(self) -> list[bytes]:
        for key in list(self._open):
            self._close(key, partial=True)
        self._release()
        out, self._out = self._out, []
        return out

    # -- for the API's gate ------------------------------------------------------------

    @abstractmethod
    def _take(self, block: bytes) -> None:
        """Read one arriving block: open the calls it starts (`_opened`), add to the
        arguments of those it carries pieces of, judge those it closes (`_close`), and queue
        it with the calls it carries (`_hold`)."""

    @abstractmethod
    def _emit(self, block: bytes, calls: tuple[HeldCall, ...], note: Any) -> None:
        """Write a block leaving the queue (its `calls` all judged): as it came, or without
        the refused calls' events and with their replacements, through `_send`."""

    def _judged(self, call: HeldCall) -> None:  # noqa: B027 (a hook: most gates need none)
        """`call` was just judged (`refusal` set when refused)."""

    def _opened(self, key: Any, name: str, call_id: str) -> HeldCall:
        call = self._open[key] = HeldCall(key, name, call_id)
        return call

    def _close(self, key: Any, partial: bool = False) -> None:
        """Judge the open call `key` on the arguments it has."""
        call = self._open.pop(key, None)
        if call is None:
            return
        call.refusal = self._refuse(AskedCall(call.name, call.arguments, call.call_id, partial))
        call.judged = True
        self._judged(call)

    def _hold(self, block: bytes, calls: tuple[HeldCall, ...] = (), note: Any = None) -> None:
        """`block`, carrying pieces of `calls` (`note`: what `_take` parsed of it for
        `_emit`), goes on now when nothing is held before it and its calls are judged,
        else waits its turn."""
        if not self._queue and all(call.judged for call in calls):
            self._emit(block, calls, note)
            return
        self._queue.append((block, calls, note))
        self._queued += len(block)
        if self._queued > self._limit:
            for key in list(self._open):
                self._close(key, partial=True)
        self._release()

    def _release(self) -> None:
        queue = self._queue
        while queue and all(call.judged for call in queue[0][1]):
            block, calls, note = queue.popleft()
            self._queued -= len(block)
            self._emit(block, calls, note)

    def _send(self, block: bytes, changed: bool = False) -> None:
        self._out.append(block)
        if changed:
            self.changed = True

    def _drop(self) -> None:
        """A block left out of the client's stream."""
        self.changed = True
