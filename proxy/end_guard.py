"""An answer's end waits for its record: a client never sees complete what the log lacks.

    vendor ──chunks──▶ taplog ──chunks──▶ client
                          │  the chunk that completes the answer is held back
                          ▼
                     record the answer ──▶ writer thread: written (and fsynced
                          │                 under `always`), then the barrier fires
                          ▼
                     held chunk(s) and the end of the body go to the client

What "completes the answer" for the client (`recorder.vendors.watch`): in a
stream of a known API, the chunk that finishes its end-marker event
(`[DONE]`, `message_stop`, `response.completed`; SDKs stop reading there),
or the end marker taplog adds to an answer that is whole without it; in a
body with a Content-Length, the chunk that reaches it; otherwise the end of
the body itself. Only that (and anything after it) waits: tokens stream as
before, and the wait costs the time the writer takes to write the answer.

When the log cannot take the answer within `LOGGED_WAIT` seconds (a full or
failing disk), the policy decides: under `always` the client is cut off, so
it never holds a complete answer the log lacks; under `interval` and `never`
the answer is delivered (calls in flight finish) and stays queued until the
disk takes it.
"""

from __future__ import annotations

import asyncio
import threading

from aiohttp import web

from taplog.proxy.call import Call
from taplog.proxy.keys import Recording

LOGGED_WAIT = 10.0


class ClientGone(Exception):
    """Writing to the client failed: it disconnected."""


async def send(response: web.StreamResponse, chunk: bytes) -> None:
    try:
        await response.write(chunk)
    except ConnectionResetError as exc:  # aiohttp's ClientConnectionResetError included
        raise ClientGone from exc


def cut_off(request: web.Request) -> None:
    """End the client's response without a clean end (no chunked terminator, a short
    Content-Length): no SDK can take what it received for a complete answer."""
    if request.transport is not None:
        request.transport.close()


async def logged(recorder: Recording, session: str, timeout: float = LOGGED_WAIT) -> bool:
    """Wait until everything recorded so far for `session` is written (synced under
    `always`).

    False when the writer reported a failure or did not get there in time.
    """
    loop = asyncio.get_running_loop()
    written: asyncio.Future[bool] = loop.create_future()
    loop_thread = threading.get_ident()

    def settle(ok: bool) -> None:
        if not written.done():
            written.set_result(ok)

    def told(ok: bool) -> None:
        """From the writer's thread (`taplog serve`) or on the loop itself (a worker's
        link to the recorder process: no wake-up of the loop through its pipe)."""
        if threading.get_ident() == loop_thread:
            settle(ok)
        else:
            loop.call_soon_threadsafe(settle, ok)

    timer = loop.call_later(timeout, settle, False)  # cheaper than asyncio.timeout per call
    recorder.when_written(told, session)
    try:
        return await written
    finally:
        timer.cancel()


async def deliver_end(
    call: Call, request: web.Request, response: web.StreamResponse, held: list[bytes]
) -> None:
    """Send the held end of a recorded answer, and end the body, once it is in the log."""
    services = call.services
    if not await logged(services.recorder, call.session) and services.settings.fsync == "always":
        cut_off(request)  # never a complete answer that the log lacks
        call.record_error(
            "the client was cut off before the end of this answer: the log could not take it"
        )
        return
    try:  # with the end of the body in one write: one packet for the client to wake for
        await response.write_eof(b"".join(held))
    except ConnectionResetError as exc:
        raise ClientGone from exc
