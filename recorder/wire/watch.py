"""Watching an answer as it passes: the one place that tells how a vendor's answer ended.

    vendor bytes ──▶ feed(chunk) ──▶ the complete events (or body bytes) that may
                         │            go on to the client, each judged once
                         ▼
                  ended     the API's end marker or terminal event arrived
                  finished  the answer is whole (every stop reason given), only
                            its end marker may still be missing
                  failure   why the answer cannot go on: the vendor's own error
                            event (`vendor_error`, held back) or a malformed one

A stream is cut into events at their blank lines and only whole events are
handed on, so whatever the proxy adds after them (an error event, an end
marker) starts at an event boundary. Limits are the splitter's: an event (or
a line without an end) over `max_event_bytes` raises `SseTooLarge`.

A body that is not a stream ends with its Content-Length, or with the end of
the body; a body delimited only by the connection closing (no length, not
chunked) could be a cut one, so for an LLM API it counts as ended only if it
is whole JSON.
"""

from __future__ import annotations

from typing import Any

from recorder.bodies import parse_json
from recorder.wire import api_module
from recorder.wire.sse import MalformedEvent, SseEvent, SseSplitter, parse_block

Passed = list[tuple[bytes, SseEvent | None]]  # raw block, parsed (None: comments only)


class StreamWatch:
    """One SSE answer of `api`, cut into events and judged as it arrives."""

    streamed = True

    def __init__(self, api: str, max_event_bytes: int) -> None:
        module = api_module(api)
        self._splitter = SseSplitter(max_event_bytes)
        self._progress: Any = module.Progress() if module is not None else None
        self.end_event: bytes | None = module.END_EVENT if module is not None else None
        self.failure: str | None = None
        self.vendor_error: bytes | None = None  # the vendor's own error event, held back

    @property
    def ended(self) -> bool:
        return self._progress is not None and self._progress.ended

    @property
    def finished(self) -> bool:
        """Whole but for the end marker: what an added marker may complete."""
        return self._progress is not None and self._progress.finished

    @property
    def progress(self) -> Any:
        """The API's own view of the stream so far (`recorder.wire.<api>.Progress`)."""
        return self._progress

    def feed(self, chunk: bytes) -> Passed:
        """The whole events `chunk` completes, up to (not including) a failing one."""
        passed: Passed = []
        progress = self._progress
        for block in self._splitter.feed(chunk):
            event = parse_block(block)
            if event is not None and progress is not None and not progress.ended:
                try:
                    progress.see(event)
                except MalformedEvent as exc:
                    self.failure = str(exc)
                    return passed
                if progress.error is not None:
                    self.failure = f"the vendor sent an error mid-stream: {event.data[:300]}"
                    self.vendor_error = block
                    return passed
            passed.append((block, event))
        return passed

    def close(self) -> Passed:
        """At the end of the body: bytes after the last blank line, judged as a last event
        (a final event without its blank line still counts, as SDKs read it)."""
        rest = self._splitter.flush()
        if not rest:
            return []
        event = parse_block(rest)
        if event is not None and self._progress is not None and not self._progress.ended:
            try:
                self._progress.see(event)
            except MalformedEvent:
                return []  # half an event: nothing a client could read
            if self._progress.error is not None:
                return []
        return [(rest, event)]


class BodyWatch:
    """A whole (not streamed) body, ended by its length or by the end of the body."""

    streamed = False
    finished = False
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
        return [(chunk, None)]

    def close(self) -> Passed:
        if self._remaining is not None:
            self.ended = self._remaining <= 0
        else:
            self.ended = not self._check_json or parse_json(b"".join(self._kept)) is not None
        return []
