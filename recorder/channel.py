"""What crosses between a proxy worker and the recorder process, and how it is framed.

A worker hands over what it saw of each call as records (`recorder.calls`,
`recorder.store.writer.EventRecord`) and asks to hear when they are written; the
recorder process builds the events, writes them, and answers. Everything else (the
events' building and chaining, tool events, bodies, blobs, syncing) happens on the
recorder's side, so a record crosses as the plain values it holds: the event's
envelope made when the call happened (its id and timestamp), the bytes as they were sent
or came back, with their arrival times. A request's parse on the worker does not cross:
the recorder parses again, off the worker's CPU (from where the body differs from one
it parsed before, `recorder.known_bodies`). An answer for the client
(`CallAnswer`) names the try's answer that served it by its event id; the recorder links
it to that answer, which it received first (its writer fills in that answer's outcome and
finish reason).

Frames are a header (the pickle's length, how many bodies go with it, each one's length
and place), a pickle, and the large bytes the message holds (request and answer bodies),
which cross beside the pickle rather than in it. A worker puts them in its `BodyRing`, a
memory it shares with the recorder process, when they fit there: the socket then carries
only the frame, and a body is copied twice (into the ring, out of it) instead of going
through the kernel in pieces of its socket buffer, waking the reader each time (a 300 KB
body: about 50 us of system calls on each side). A body that does not fit follows its
frame on the socket, copied once out of the buffer the recorder process reads into
(`FrameReader`). Only taplog's own processes connect (the socket sits in a folder only its
user can enter), so pickle's trust in its peer holds.

    worker -> recorder                            recorder -> worker
    ("r", …)                   a record to write  ("w", token, ok)     written (or a write failed)
    ("w", token, session)      tell when written  ("h", health)        its health, when it changes
    ("q", token, question, args)  ask ("metrics")  ("a", token, answer) the answer
    ("f", fact)                for the others     ("f", fact)          another worker's fact
                                                  ("F", [(fact, when)]) the latest, on connecting
                                                  ("u", [(scope, name, totals)]) usage
                                                  ("U", [(scope, name, totals)]) all, on connecting
    ("c", answer id, raw, output)  a Responses answer, kept for the `history` question
"""

from __future__ import annotations

import mmap
import os
import pickle
import socket
import struct
from collections import OrderedDict
from typing import Any

from taplog.recorder.calls import CallAnswer, LlmRequest, LlmResponse
from taplog.recorder.known_bodies import KnownBodies
from taplog.recorder.store.writer import EventRecord, SessionStart

HEADER = struct.Struct("<II")  # a frame: its pickle's length, how many bodies go with it
BODY = struct.Struct("<Iq")  # each body's length and place in the ring (FOLLOWS: on the socket)
FOLLOWS = -1
BESIDE = 64 * 1024  # bytes this long cross beside the pickle, not in it
RING_BYTES = 8 << 20  # a worker's ring: room for several large bodies on their way
READ_BUFFER = 1 << 20  # a reader's buffer, grown for a larger frame while it arrives
_UNLINKED = 10_000  # answers kept for the `CallAnswer` that names them


class BodyRing:
    """Memory a worker shares with the recorder process for the bodies it sends: the
    worker writes each one after the last (`place`), the recorder copies it out in the
    same order (`take`) and says how far it took them, in the ring's first bytes; the
    worker writes only over what was taken. One per connection, from the worker
    (`create`, a memfd passed over the socket), so a worker or recorder that starts again
    starts a new one.

    Places count bytes from the start of the connection (a body never wraps: one that
    would go past the end begins at the start again, the rest of the end left unused).
    """

    _TAKEN = struct.Struct("<Q")  # how far the recorder took the bodies; 8 bytes aligned

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self._map = mmap.mmap(fd, self._TAKEN.size + size)
        self._placed = 0  # the worker's: where the next body may begin

    @classmethod
    def create(cls, size: int = RING_BYTES) -> BodyRing | None:
        """A new ring, or None where the system has no memfd (bodies then follow their
        frames on the socket)."""
        if not hasattr(os, "memfd_create"):
            return None
        fd = os.memfd_create("taplog-bodies", os.MFD_CLOEXEC)
        os.ftruncate(fd, cls._TAKEN.size + size)
        return cls(fd, size)

    @classmethod
    def attach(cls, fd: int) -> BodyRing:
        """The recorder's side of a ring a worker created."""
        return cls(fd, os.fstat(fd).st_size - cls._TAKEN.size)

    def place(self, data: memoryview) -> int:
        """Copy `data` in; its place, or FOLLOWS when the room not yet taken is too small."""
        start, length = self._placed, len(data)
        offset = start % self.size
        if offset + length > self.size:
            start, offset = start + self.size - offset, 0
        if start + length - self._taken() > self.size:
            return FOLLOWS
        at = self._TAKEN.size + offset
        self._map[at : at + length] = data
        self._placed = start + length
        return start

    def waiting(self) -> int:
        """Bytes of bodies placed and not yet taken (the end left unused counted in)."""
        return self._placed - self._taken()

    def take(self, place: int, length: int) -> bytes:
        """The body at `place`, copied out; its room may be written over from now."""
        at = self._TAKEN.size + place % self.size
        data = self._map[at : at + length]
        self._TAKEN.pack_into(self._map, 0, place + length)
        return data

    def _taken(self) -> int:
        """How far the recorder took the bodies, read until two reads agree (the other
        process writes it meanwhile)."""
        taken = self._TAKEN.unpack_from(self._map)[0]
        while (again := self._TAKEN.unpack_from(self._map)[0]) != taken:
            taken = again
        return taken

    def close(self) -> None:
        self._map.close()
        os.close(self.fd)


def share_ring(connection: socket.socket, ring: BodyRing | None) -> None:
    """A worker's first byte on its connection: with its ring's file beside it, or
    without (no ring: its bodies follow their frames)."""
    if ring is None:
        connection.send(b"-")
    else:
        socket.send_fds(connection, [b"R"], [ring.fd])


def shared_ring(connection: socket.socket) -> BodyRing | None:
    """The recorder's side of `share_ring`; ConnectionError when the worker is gone
    before it said."""
    said, fds, _, _ = socket.recv_fds(connection, 1, 1)
    if not said:
        for fd in fds:
            os.close(fd)
        raise ConnectionError("the worker left before it began")
    for extra in fds[1:]:
        os.close(extra)
    return BodyRing.attach(fds[0]) if fds else None


def frame(message: tuple[Any, ...]) -> bytes:
    return b"".join(frame_parts(message))


def frame_parts(message: tuple[Any, ...], ring: BodyRing | None = None) -> list[bytes | memoryview]:
    """The message's frame in parts, for a sender that joins them once: the message
    pickled, then the large bytes it holds (`beside`) that `ring` has no room for, as
    views of them (pickle copies a megabyte into its stream in a good part of a
    millisecond)."""
    bodies: list[pickle.PickleBuffer] = []
    payload = pickle.dumps(message, protocol=5, buffer_callback=bodies.append)
    head = [HEADER.pack(len(payload), len(bodies))]
    following: list[memoryview] = []
    for body in bodies:
        view = body.raw()
        place = FOLLOWS if ring is None else ring.place(view)
        head.append(BODY.pack(len(view), place))
        if place == FOLLOWS:
            following.append(view)
    return [*head, payload, *following]


def beside(data: bytes) -> bytes | pickle.PickleBuffer:
    """`data` as a message holds it: beside the pickle when it is large."""
    return pickle.PickleBuffer(data) if len(data) >= BESIDE else data


def frames(buffer: bytearray) -> list[tuple[Any, ...]]:
    """The whole frames at the front of `buffer`, taken out of it (no ring's)."""
    with memoryview(buffer) as view:
        messages, used = _whole_frames(view)
    del buffer[:used]
    return messages


class FrameReader:
    """Frames read from a blocking socket into one buffer kept from read to read: a body
    is copied once, out of it, where reading into new bytes and adding them to a buffer
    copied it three times into fresh memory (a 300 KB request: about 100 us more)."""

    def __init__(self, size: int = READ_BUFFER, ring: BodyRing | None = None) -> None:
        self._size = size
        self._buffer = bytearray(size)
        self._filled = 0  # bytes read and not yet taken
        self.ring = ring  # the sender's, for the bodies it placed there

    def read(self, connection: socket.socket) -> list[tuple[Any, ...]] | None:
        """The frames that one read completes (often none while a large one arrives);
        None once the peer closed the connection."""
        if self._filled == len(self._buffer):  # a frame larger than the buffer
            self._buffer.extend(bytes(len(self._buffer)))
        with memoryview(self._buffer) as view:
            got = connection.recv_into(view[self._filled :])
            if not got:
                return None
            self._filled += got
            messages, used = _whole_frames(view[: self._filled], self.ring)
        if used:
            rest = self._filled - used
            self._buffer[:rest] = self._buffer[used : self._filled]
            self._filled = rest
            if not rest and len(self._buffer) > self._size:  # let go of a large frame's room
                self._buffer = bytearray(self._size)
        return messages


def _whole_frames(
    view: memoryview, ring: BodyRing | None = None
) -> tuple[list[tuple[Any, ...]], int]:
    """The whole frames at the front of `view`, and how many bytes they took; their
    bodies from `ring` or from after them."""
    messages, at, size = [], 0, len(view)
    while size - at >= HEADER.size:
        length, count = HEADER.unpack_from(view, at)
        first = at + HEADER.size
        start = first + BODY.size * count
        if size < start:
            break
        places = [BODY.unpack_from(view, first + BODY.size * n) for n in range(count)]
        following = sum(body_length for body_length, place in places if place == FOLLOWS)
        if size < start + length + following:
            break
        bodies, body_at = [], start + length
        for body_length, place in places:
            if place != FOLLOWS:
                assert ring is not None, "a body in a ring the sender never shared"
                bodies.append(ring.take(place, body_length))
                continue
            bodies.append(bytes(view[body_at : body_at + body_length]))
            body_at += body_length
        messages.append(pickle.loads(view[start : start + length], buffers=bodies))
        at = body_at
    return messages, at


def record_message(record: Any) -> tuple[Any, ...]:
    """A record as the plain values that cross (see the module)."""
    if isinstance(record, LlmRequest):
        return (
            "r",
            "request",
            record.event,
            (record.session, record.exchange, record.api, record.provider, record.method),
            (record.path, record.upstream_url, record.headers, record.key_fingerprint),
            (beside(record.body), record.attempt, record.secrets),
        )
    if isinstance(record, LlmResponse):
        return (
            "r",
            "response",
            record.event,
            (record.session, record.exchange, record.api, record.provider, record.status),
            (
                record.headers,
                [(at, beside(chunk)) for at, chunk in record.chunks],
                record.outcome,
                record.latency_ms,
                record.ttfb_ms,
            ),
            (record.error, record.overhead_ms, record.secrets),
        )
    if isinstance(record, CallAnswer):
        served = None if record.served is None else record.served.event["id"]
        return (
            "r",
            "answered",
            record.event,
            (record.session, record.exchange, record.api, record.status, record.latency_ms),
            (record.tries, served, record.attempt, record.outcome, record.error),
            (record.skipped, record.client_bytes, record.secrets, record.size, record.gated),
        )
    assert isinstance(record, EventRecord), type(record)
    kind = "start" if isinstance(record, SessionStart) else "event"
    return ("r", kind, record.event, record.size)


class Records:
    """The recorder's side: records rebuilt from their messages, each answer kept until
    the `CallAnswer` that names it arrives (or too many came after it); request bodies
    parsed from where they differ from `bodies` parsed before (the process's, from any
    worker)."""

    def __init__(self, bodies: KnownBodies | None = None) -> None:
        self._answers: OrderedDict[str, LlmResponse] = OrderedDict()
        self._bodies = bodies if bodies is not None else KnownBodies()

    def rebuilt(self, message: tuple[Any, ...]) -> Any:
        kind, event = message[1], message[2]
        if kind == "event":
            return EventRecord(event, message[3])
        if kind == "start":
            return SessionStart(event, message[3])
        if kind == "request":
            (session, exchange, api, provider, method), (path, url, headers, key), rest = message[
                3:
            ]
            body, attempt, secrets = rest
            parsed, layout = self._bodies.parse(body, api)
            record: Any = LlmRequest(
                session,
                exchange,
                api,
                provider,
                method,
                path,
                url,
                headers,
                key,
                body,
                parsed,
                attempt,
                secrets,
                layout,
                envelope=event,
            )
        elif kind == "response":
            (session, exchange, api, provider, status), (headers, chunks, outcome, *times), rest = (
                message[3:]
            )
            error, overhead, secrets = rest
            record = LlmResponse(
                session,
                exchange,
                api,
                provider,
                status,
                headers,
                chunks,
                outcome,
                *times,
                error,
                overhead,
                secrets,
                envelope=event,
            )
            self._answers[event["id"]] = record
            if len(self._answers) > _UNLINKED:
                self._answers.popitem(last=False)
        else:
            (session, exchange, api, status, latency), (tries, served, *facts), rest = message[3:]
            skipped, client_bytes, secrets, size, gated = rest
            answer = None if served is None else self._answers.pop(served, None)
            record = CallAnswer(
                session,
                exchange,
                api,
                status,
                latency,
                tries,
                answer,
                *facts,
                skipped,
                client_bytes,
                secrets,
                size,
                gated,
                envelope=event,
            )
        return record
