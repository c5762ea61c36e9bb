"""Continuing a broken stream in the client's open one: what every API's splice shares.

The proxy (`proxy.failover.continuation`) decides what of a continuation the client gets;
each continuable API's `splice` module (`openai_chat.splice`, `anthropic.splice`) knows
its stream:

    client_view(body, events)         what the client has of the broken answer (a `ClientView`)
    with_answer(request, text, note)  the client's request, the partial answer appended
    Fitter(view, added_tokens)        the continuation's events, fitted into the client's
                                      stream: `fit` (each event in, a `Held` or None to drop
                                      it), `ends_text`, `set_text`, `encode`
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from taplog.recorder.vendors.sse import SseEvent, SseSplitter, load_object, parse_block

_END = "[DONE]"  # Chat's end marker: no data object, passed on as it came


@dataclass(frozen=True, slots=True)
class ClientView:
    """What the client has received of the broken answer."""

    text: str  # the answer's text so far
    has_tool_calls: bool

    @property
    def continuable(self) -> bool:
        return not self.has_tool_calls


@dataclass(slots=True)
class Held:
    """A client-format event of the continuation, held while its opening is judged."""

    data: dict | None  # None: raw bytes (`[DONE]`)
    name: str | None
    text: str | None  # the answer text it carries
    raw: bytes = b""


def sent_events(sent: bytes) -> list[tuple[str | None, dict]]:
    """The (event name, data object) of each event the client received."""
    splitter, out = SseSplitter(max_event_bytes=None), []
    for block in [*splitter.feed(sent), splitter.flush()]:
        event = parse_block(block) if block else None
        if event is None or event.data.startswith(_END):
            continue
        try:
            data = orjson.loads(event.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(data, dict):
            out.append((event.event, data))
    return out


def replayed(events: list[tuple[str | None, dict]]) -> list[SseEvent]:
    """`sent_events` as events again, for an API's reassembly."""
    return [SseEvent(name, orjson.dumps(data).decode()) for name, data in events]


def event_data(event: SseEvent) -> Held | dict | None:
    """A continuation event's data object; the end marker held as it came; None for
    anything else (dropped)."""
    if event.data.startswith(_END):
        return Held(None, None, None, b"data: [DONE]\n\n")
    return load_object(event.data)
