"""An answer's end waits for its record: a client never sees complete what the log lacks.

    vendor ──chunks──▶ taplog ──chunks──▶ client
                          │  the chunk that completes the answer is held back
                          ▼
                     record the answer ──▶ writer thread: written (and fsynced
                          │                 under `always`), then the barrier fires
                          ▼
                     held chunk(s) and the end of the body go to the client

What "completes the answer" for the client: in a stream of a known API, the
chunk that finishes its end-marker event (`[DONE]`, `message_stop`,
`response.completed`; SDKs stop reading there); in a body with a
Content-Length, the chunk that reaches it; otherwise the end of the body
itself. Only that chunk (and anything after it) waits: tokens stream as
before, and the wait costs the time the writer takes to write the answer.

When the log cannot take the answer within `LOGGED_WAIT` seconds (a full or
failing disk), the policy decides: under `always` the client is cut off, so
it never holds a complete answer the log lacks; under `interval` and `never`
the answer is delivered (calls in flight finish) and stays queued until the
disk takes it.
"""

from __future__ import annotations

import asyncio

from multidict import CIMultiDict

from recorder.wire import api_module
from recorder.wire.sse import SseSplitter, parse_block
from recorder.writer import Recorder

LOGGED_WAIT = 10.0


class EndGuard:
    """Tells which chunk going to the client completes the answer."""

    def __init__(self, api: str, headers: CIMultiDict[str], max_event_bytes: int) -> None:
        self.streamed = headers.get("content-type", "").startswith("text/event-stream")
        module = api_module(api) if self.streamed else None
        self._is_end = module.is_end if module is not None else None
        self._end_bytes: tuple[bytes, ...] = module.END_BYTES if module is not None else ()
        self._splitter = SseSplitter(max_event_bytes) if self.streamed else None
        length = headers.get("content-length", "")
        self._remaining = int(length) if not self.streamed and length.isdigit() else None

    def completes(self, chunk: bytes) -> bool:
        """Whether this chunk, added to those before it, completes the client's answer.

        Raises `SseTooLarge` when a stream event (or a line without an end) outgrows
        `max_event_bytes`: watching any stream bounds what one event may hold.
        """
        if self._remaining is not None:
            self._remaining -= len(chunk)
            return self._remaining <= 0
        if self._splitter is None:
            return False  # only the end of the body completes it
        blocks = self._splitter.feed(chunk)
        return self._is_end is not None and any(
            any(marker in block for marker in self._end_bytes)  # most blocks: no parsing
            and (event := parse_block(block)) is not None
            and self._is_end(event)
            for block in blocks
        )


async def logged(recorder: Recorder, session: str, timeout: float = LOGGED_WAIT) -> bool:
    """Wait until everything recorded so far for `session` is written (synced under
    `always`).

    False when the writer reported a failure or did not get there in time.
    """
    loop = asyncio.get_running_loop()
    written: asyncio.Future[bool] = loop.create_future()

    def settle(ok: bool) -> None:
        if not written.done():
            written.set_result(ok)

    timer = loop.call_later(timeout, settle, False)  # cheaper than asyncio.timeout per call
    recorder.when_written(lambda ok: loop.call_soon_threadsafe(settle, ok), session)
    try:
        return await written
    finally:
        timer.cancel()
