"""Watching an answer as it passes: the one place that tells how a vendor's answer ended.

    vendor bytes ──▶ feed(chunk) ──▶ the complete events (or body bytes) that may
                         │            go on to the client, each judged once
                         ▼
                  ended     the API's end marker or terminal event arrived
                  finished  the answer is whole (every stop reason given), only
                            its end marker may still be missing
                  failure   why the answer cannot go on: the vendor's own error
                            event (`vendor_error`, held back) or a malformed one
                            (looked for in `every` event only where something can
                            be done about it; else a malformed event goes on as
                            the vendor sent it, and the client's SDK fails on it
                            as it would have without taplog)

A stream is cut into events at their blank lines and only whole events are
handed on, so whatever the proxy adds after them (an error event, an end
marker) starts at an event boundary. Limits are the splitter's: an event (or
a line without an end) over `max_event_bytes` raises `SseTooLarge`.

A stream of an API taplog does not parse (a pass-through call: a Responses stream
resumed by id, an Anthropic session's events) has no end marker taplog knows: the
end of its body, once its framing is whole and no half event is left, is its end.

A body that is not a stream ends with its Content-Length, or with the end of
the body; a body delimited only by the connection closing (no length, not
chunked) could be a cut one, so for an LLM API it counts as ended only if it
is whole JSON.
"""

from __future__ import annotations

from typing import Any

import orjson

from taplog.recorder.vendors.apis import api_module
from taplog.recorder.vendors.sse import MalformedEvent, SseSplitter, load_object, parse_block

Passed = list[bytes]  # whole raw event blocks (or body chunks), as they came


class StreamWatch:
    """One SSE answer of `api`, cut into events and judged as it arrives."""

    streamed = True

    def __init__(
        self, api: str, max_event_bytes: int, every: bool = True, request: Any = None
    ) -> None:
        module = api_module(api)
        self._splitter = SseSplitter(max_event_bytes)
        self._progress: Any = module.Progress(every, request) if module is not None else None
        self.end_event: bytes | None = module.END_EVENT if module is not None else None
        self.events = 0  # events (not comments) passed so far
        self.failure: str | None = None
        self.vendor_error: bytes | None = None  # the vendor's own error event, held back
        self._body_ended = False  # an unparsed API's stream: its body ended whole

    @property
    def ended(self) -> bool:
        if self._progress is None:
            return self._body_ended
        return self._progress.ended

    @property
    def finished(self) -> bool:
        """Whole but for the end marker: what an added marker may complete."""
        return self._progress is not None and self._progress.finished

    @property
    def progress(self) -> Any:
        """The API's own view of the stream so far (`recorder.vendors.apis.<api>.Progress`)."""
        return self._progress

    def feed(self, chunk: bytes) -> Passed:
        """The whole events `chunk` completes, up to (not including) a failing one."""
        blocks = self._splitter.feed(chunk)
        for n, block in enumerate(blocks):
            if not self._judge(block):
                return blocks[:n]
        return blocks

    def close(self) -> Passed:
        """At the end of the body: bytes after the last blank line, judged as a last event
        if they are a whole one (SDKs read a final event without its blank line)."""
        rest = self._splitter.flush()
        whole = not rest or whole_event(rest)
        self._body_ended = self._progress is None and whole
        if not rest or not whole or not self._judge(rest):
            return []  # half an event, or a failing one: nothing a client could use
        return [rest]

    def _judge(self, block: bytes) -> bool:
        """Tell the API's progress about one block; False when it fails the stream."""
        progress = self._progress
        if progress is not None and not progress.every and not progress.telling(block):
            self.events += not block.startswith(b":")
            return True  # a byte test says it can neither end nor fail the answer
        fields = event_fields(block)
        if fields is None:
            return True  # comments only
        self.events += 1
        if progress is None or progress.ended:
            return True
        name, data = fields
        try:
            progress.see(name, data)
        except MalformedEvent as exc:
            self.failure = str(exc)
            return False
        if progress.error is not None:
            shown = data[:300].decode(errors="replace")
            self.failure = f"the vendor sent an error mid-stream: {shown}"
            self.vendor_error = block
            return False
        return True


def whole_event(block: bytes) -> bool:
    """Whether bytes that lack their blank line still make a whole event: comments, the
    end marker, or data that is a whole JSON object (not one cut short)."""
    fields = event_fields(block)
    return fields is None or fields[1].startswith(b"[DONE]") or load_object(fields[1]) is not None


def event_fields(block: bytes) -> tuple[str | None, bytes] | None:
    """(event name, data) of one raw block; None when it holds no event (comments only).

    Vendors write `data: …` or `event: …` then `data: …` on single lines: those are
    read straight from the bytes; anything else goes through the full SSE rules.
    """
    if block.endswith(b"\n\n") and b"\r" not in block:
        lines = block.count(b"\n")
        if lines == 2 and block.startswith(b"data: "):
            return None, block[6:-2]
        if lines == 3 and block.startswith(b"event: "):
            line_end = block.index(b"\n")
            if block.startswith(b"data: ", line_end + 1):
                return block[7:line_end].decode(errors="replace"), block[line_end + 7 : -2]
    event = parse_block(block)
    if event is None:
        return None
    return event.event, event.data.encode()


class BodyWatch:
    """A whole (not streamed) body, ended by its length or by the end of the body."""

    streamed = False
    finished = False
    events = 0
    failure: str | None = None
    vendor_error: bytes | None = None
    end_event: bytes | None = None
    progress = None

    def __init__(self, api: str, length: int | None, close_delimited: bool) -> None:
        self._remaining = length
        # Only JSON can tell a cut of such a body from its end.
        self._check_json = close_delimited and length is None and api_module(api) is not None
        self._kept: list[bytes] = []
        self.ended = length == 0

    def feed(self, chunk: bytes) -> Passed:
        if self._remaining is not None:
            self._remaining -= len(chunk)
            self.ended = self._remaining <= 0
        elif self._check_json:
            self._kept.append(chunk)
        return [chunk]

    def close(self) -> Passed:
        if self._remaining is not None:
            self.ended = self._remaining <= 0
        else:
            self.ended = not self._check_json or _parses(b"".join(self._kept))
        return []


def _parses(raw: bytes) -> bool:
    """Whether a body is whole JSON (`null` does not count: no API answers that)."""
    try:
        return orjson.loads(raw) is not None
    except orjson.JSONDecodeError:
        return False
