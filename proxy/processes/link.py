"""A worker's recorder: the recorder process, over its Unix socket (`recorder.channel`).

It stands where a `Recorder` stands in the app (`record`, `accepting`, `health`,
`when_written`) and costs the event loop a pickle per record; the events are built and
written in the recorder process. A large body goes through the memory it shares with the
recorder process (`recorder.channel.BodyRing`, one per connection, handed over first),
and only its frame through the socket. What one turn of the loop sends goes in one write
at its end (a write is a system call, and a call sends five or so messages), but for a
large body the ring has no room for, written from where it is rather than copied into
that write; a request to hear when written goes at once, with what came before it, as
its caller waits on it.

Its health arrives whenever it changes, so `accepting` asks nothing on a call's way in:
new calls are refused while the recorder is away (it died and is being restarted), says
it cannot take more, or while what this worker has not yet handed over is above the
high-water mark (a slow recorder is back-pressure, never a drop). Calls in flight when
the recorder goes away hear that their answers were not written (`when_written` says
False), so their clients are cut off rather than told the answer is whole; the link
connects again by itself.

It also carries what the workers must agree on (`recorder.sessions`): the facts this
worker's resolver learns go to the recorder process, which passes them to every other
worker before it reads on, so before it acknowledges the answer that taught them; the
client hears the end of that answer only then, so its next call finds them wherever it
lands. The usage totals of budgets and the loop guard (`recorder.usage`) arrive the
same way, after each turn of the recorder's writer that changed them, before that turn's
acknowledgements. The Responses answers go to the recorder process too
(`proxy.failover.responses_history`).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from taplog.recorder.channel import (
    BESIDE,
    BodyRing,
    beside,
    frame_parts,
    frames,
    record_message,
    share_ring,
)
from taplog.recorder.sessions import Fact
from taplog.recorder.usage import Totals

log = logging.getLogger("taplog")

RECONNECT_SECONDS = 0.05
ASK_SECONDS = 5.0
AWAY = "the recorder process is not running (it is being restarted)"


class RecorderLink(asyncio.Protocol):
    def __init__(
        self,
        path: str,
        sessions_dir: Path,
        high_water_bytes: int,
        learn: Callable[[Fact, float], None],
        usage: Callable[[str, str, Totals], None] | None = None,
    ) -> None:
        self.sessions_dir = sessions_dir
        self._learn = learn
        self._usage = usage
        self._path = path
        self._high_water = high_water_bytes
        self._transport: asyncio.Transport | None = None
        self._ring: BodyRing | None = None  # the connection's (None: bodies follow frames)
        self._unsent: list[bytes | memoryview] = []  # this turn of the loop's frames (`_send`)
        self._unsent_bytes = 0
        self._health: dict[str, Any] = _away()
        self._buffer = bytearray()
        self._tokens = itertools.count()
        self._waiting: dict[int, Callable[[bool], None]] = {}
        self._answers: dict[int, asyncio.Future[Any]] = {}
        self._closing = False
        self._connecting: asyncio.Task[None] | None = None
        self._gone: asyncio.Future[None] | None = None
        self.lost_records = 0  # records of calls in flight while the recorder was away

    async def connect(self, timeout: float = 10.0) -> None:
        """Connect (retrying while the recorder process starts) and keep connected."""
        async with asyncio.timeout(timeout):
            await self._connect()

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closing:
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            connection.setblocking(False)
            ring = None
            try:
                await loop.sock_connect(connection, self._path)
                ring = BodyRing.create()
                share_ring(connection, ring)
                self._ring = ring
                await loop.create_unix_connection(lambda: self, sock=connection)
                return
            except OSError:
                connection.close()
                if ring is not None:
                    ring.close()
                self._ring = None
                await asyncio.sleep(RECONNECT_SECONDS)

    async def aclose(self) -> None:
        """Hand over what is buffered, then disconnect."""
        self._closing = True
        if self._connecting is not None:
            self._connecting.cancel()
        if self._transport is not None:
            self._flush()
            self._gone = asyncio.get_running_loop().create_future()
            self._transport.close()  # after what it still holds is written
            await self._gone

    # -- what the app calls (the event loop) --------------------------------

    def record(self, record: Any) -> None:
        if self._transport is None:
            self.lost_records += 1  # its call hears so: its acknowledgement fails
            return
        self._send(record_message(record))

    @property
    def accepting(self) -> bool:
        return self._refusal() is None

    def _refusal(self) -> str | None:
        if self._transport is None:
            return AWAY
        if self._health["reason"] is not None:
            return self._health["reason"]
        if self._not_handed_over() >= self._high_water:
            return "the recorder process is not keeping up (its channel is over the mark)"
        return None

    def _not_handed_over(self) -> int:
        """Bytes sent that the recorder process has not read yet: in the socket, still to
        go in it, or in the ring."""
        assert self._transport is not None
        waiting = self._transport.get_write_buffer_size() + self._unsent_bytes
        return waiting + (self._ring.waiting() if self._ring is not None else 0)

    def health(self) -> dict[str, Any]:
        reason = self._refusal()
        return {**self._health, "accepting": reason is None, "reason": reason}

    def tell(self, fact: Fact) -> None:
        """A fact for the other workers (lost with the recorder: see `recorder.sessions`)."""
        if self._transport is not None:
            self._send(("f", fact))

    def keep_answer(self, response_id: str, raw: bytes, output: list[Any]) -> None:
        """A Responses answer the client got, for a later call that chains to it."""
        if self._transport is not None:
            self._send(("c", response_id, beside(raw), output))

    async def ask(self, question: str, *args: Any) -> Any:
        """The recorder process's answer to `question` (`metrics`, `health`, `history`);
        ConnectionError when it is away or does not answer within `ASK_SECONDS`."""
        if self._transport is None:
            raise ConnectionError(AWAY)
        token = next(self._tokens)
        self._answers[token] = answer = asyncio.get_running_loop().create_future()
        self._send(("q", token, question, args))
        try:
            async with asyncio.timeout(ASK_SECONDS):
                return await answer
        except TimeoutError:
            self._answers.pop(token, None)
            silent = f"the recorder process did not answer within {ASK_SECONDS:g} s"
            raise ConnectionError(silent) from None

    def when_written(self, callback: Callable[[bool], None], session: str | None = None) -> None:
        """`callback(ok)`, on the loop, once what was recorded so far is written."""
        if self._transport is None:
            asyncio.get_running_loop().call_soon(callback, False)
            return
        token = next(self._tokens)
        self._waiting[token] = callback
        self._send(("w", token, session))
        self._flush()  # its caller waits on it: now, not at the end of the loop's turn

    def _send(self, message: tuple[Any, ...]) -> None:
        if not self._unsent:
            asyncio.get_running_loop().call_soon(self._flush)
        parts = frame_parts(message, self._ring)  # a body not in the ring: as a view of
        self._unsent += parts  # itself, joined once in `_flush`
        self._unsent_bytes += sum(map(len, parts))

    def _flush(self) -> None:
        """The loop turn's frames in as few writes as there are large bodies in them: a
        body goes from where it is, not copied into one joined write with the rest."""
        unsent, self._unsent, self._unsent_bytes = self._unsent, [], 0
        if self._transport is None or not unsent:
            return
        small: list[bytes | memoryview] = []
        for part in unsent:
            if len(part) < BESIDE:
                small.append(part)
                continue
            if small:
                self._transport.write(b"".join(small))
                small = []
            self._transport.write(part)
        if small:
            self._transport.write(b"".join(small))

    # -- the connection ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        if self.lost_records:
            log.error("%d records were lost while the recorder was away", self.lost_records)
            self.lost_records = 0
        log.debug("connected to the recorder process")

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        for message in frames(self._buffer):
            kind = message[0]
            if kind == "w":
                callback = self._waiting.pop(message[1], None)
                if callback is not None:
                    callback(message[2])
            elif kind == "f":
                self._learn(message[1], time.monotonic())
            elif kind == "F":  # what the others learned before this worker connected
                for fact, when in message[1]:
                    self._learn(fact, when)
            elif kind in ("u", "U"):  # usage totals: what a turn changed, or all of them
                if self._usage is not None:
                    for totals in message[1]:
                        self._usage(*totals)
            elif kind == "h":
                self._health = message[1]
            elif kind == "a":
                answer = self._answers.pop(message[1], None)
                if answer is not None and not answer.done():
                    answer.set_result(message[2])

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        self._unsent.clear()  # their calls hear so: their acknowledgements fail below
        self._unsent_bytes = 0
        self._health = _away()
        self._buffer.clear()
        if self._ring is not None:  # the recorder process keeps its own map while it reads
            self._ring.close()
            self._ring = None
        waiting, self._waiting = self._waiting, {}
        for callback in waiting.values():
            callback(False)  # never written, as far as anyone can tell
        answers, self._answers = self._answers, {}
        for answer in answers.values():
            if not answer.done():
                answer.set_exception(ConnectionError(AWAY))
        if self._gone is not None and not self._gone.done():
            self._gone.set_result(None)
        if not self._closing:
            log.error("lost the recorder process; new calls are refused until it is back")
            self._connecting = asyncio.get_running_loop().create_task(self._connect())


def _away() -> dict[str, Any]:
    return {"accepting": False, "reason": AWAY, "queued_records": 0, "queued_bytes": 0}
