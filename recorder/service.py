"""The recorder process's side of the channel (`recorder.channel`): workers connect over a
Unix socket, and their records reach the one `Recorder` that owns the data dir.

    worker ─┐  records, "tell me when written"   ┌─ reader thread ─┐
    worker ─┼──────────── Unix socket ───────────┼─ reader thread ─┼─▶ Recorder (writer thread)
    worker ─┘  ◀── written / health / answers ───┴─ (one per peer) ┘

Each connection has a reader thread that rebuilds records (their bodies out of the ring
the worker shares, `recorder.channel.BodyRing`) and queues them (`record` never blocks),
and passes on acknowledgement requests, which the writer answers once the lines are
written (and synced, per policy). Health goes to every worker when it
changes, so a worker decides on each call without asking; so do the usage totals
(`recorder.usage`), after each turn of the writer that changed them and before that
turn's acknowledgements. Questions (`metrics`, `health`, `history`) are answered by the
callables the process registered. A worker's facts (`recorder.sessions`) go to every
other worker as soon as they are read, before anything the same worker sent after them
(its acknowledgement requests among them); the latest `KEPT_FACTS` are kept, and a worker
that connects (started, or started again) hears them before any other fact. A worker
that goes away takes nothing with it: what it sent is written; its unanswered
acknowledgements are dropped. A worker that takes nothing from its connection for
`STUCK_SECONDS` (stopped, not dead) is disconnected rather than let stall the others.

After each batch it read, a reader takes the writer's turn itself (`Recorder.take_turn`):
it has nothing else to do until the next batch, so a batch costs no wake-up of the writer
thread, and a request is built and written while its call is still with the vendor.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from taplog.recorder.channel import FrameReader, Records, frame, shared_ring
from taplog.recorder.known_bodies import KnownBodies
from taplog.recorder.sessions import Fact
from taplog.recorder.store.writer import Recorder
from taplog.recorder.usage import Totals, UsageLedger

log = logging.getLogger("taplog.recorder")

HEALTH_SECONDS = 0.02  # how often health is looked at for a change
ACCEPT_SECONDS = 0.2  # how soon a stop is noticed
STOP_SECONDS = 60.0  # the longest a stop waits for the workers' connections to end
STUCK_SECONDS = 10  # a worker that reads nothing for this long is cut off
KEPT_FACTS = 20_000  # told to a worker that connects (a few MiB)


class _Peer:
    """One worker's connection: sends from several threads, one frame at a time."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self._lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        self.send_frame(frame(message))

    def send_frame(self, data: bytes) -> None:
        try:
            with self._lock:
                self.connection.sendall(data)
        except OSError:  # gone (its reader thread sees to the rest), or stuck: cut it off
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)


class RecorderService:
    """Serve `recorder` to the workers that connect to `listener` until `stop`."""

    def __init__(
        self,
        recorder: Recorder,
        listener: socket.socket,
        questions: dict[str, Callable[..., Any]],
        keep_answer: Callable[[str, bytes, list[Any]], None],
        usage: UsageLedger | None = None,
    ) -> None:
        """`keep_answer(answer id, request, output)` takes the workers' Responses answers;
        `usage` (with a budget or the loop guard on) is told to every worker that connects."""
        self.recorder = recorder
        self._listener = listener
        self._questions = questions
        self._keep_answer = keep_answer
        self._usage = usage
        self._peers: set[_Peer] = set()
        self._facts: OrderedDict[tuple[str, Any], tuple[Fact, float]] = OrderedDict()
        self._lock = threading.Lock()  # the peers and the facts
        self._stopping = threading.Event()
        self._bodies = KnownBodies()  # request bodies parsed before, from any worker

    def serve(self) -> None:
        """Accept workers until `stop` (on this thread), then wait for the connections
        still open to end: everything a worker sent before it went is handed on."""
        threading.Thread(target=self._push_health, name="taplog-health", daemon=True).start()
        self._listener.settimeout(ACCEPT_SECONDS)
        readers: list[threading.Thread] = []
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            connection.settimeout(None)
            stuck = struct.pack("ll", STUCK_SECONDS, 0)
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, stuck)
            peer = _Peer(connection)
            with self._lock:  # no other fact reaches it before these
                self._peers.add(peer)
                peer.send(("h", self.recorder.health()))
                peer.send(("F", list(self._facts.values())))
                if self._usage is not None:
                    with self._usage.lock:
                        peer.send(("U", self._usage.snapshot()))
            reader = threading.Thread(target=self._read, args=(peer,), daemon=True)
            reader.start()
            readers.append(reader)
        for reader in readers:
            reader.join(STOP_SECONDS)

    def stop(self) -> None:
        """Stop accepting workers (those connected are read to their end)."""
        self._stopping.set()

    def _read(self, peer: _Peer) -> None:
        records, reader = Records(self._bodies), FrameReader()
        try:
            reader.ring = shared_ring(peer.connection)
            while (messages := reader.read(peer.connection)) is not None:
                for message in messages:  # none while a large record is still arriving
                    self._handle(peer, records, message)
                if messages:
                    self.recorder.take_turn()
        except OSError:
            pass
        finally:
            with self._lock:
                self._peers.discard(peer)
            peer.connection.close()
            if reader.ring is not None:
                reader.ring.close()

    def _handle(self, peer: _Peer, records: Records, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "r":
            self.recorder.record(records.rebuilt(message), wake=False)
        elif kind == "w":
            token, session = message[1], message[2]
            self.recorder.when_written(lambda ok: peer.send(("w", token, ok)), session, wake=False)
        elif kind == "f":
            self._tell_others(peer, message)
        elif kind == "c":
            self._keep_answer(*message[1:])
        elif kind == "q":
            token, question, args = message[1:]
            peer.send(("a", token, self._questions[question](*args)))

    def _tell_others(self, teller: _Peer, message: tuple[Any, ...]) -> None:
        fact: Fact = message[1]
        data = frame(message)
        with self._lock:
            known = fact[:2]
            self._facts.pop(known, None)
            self._facts[known] = (fact, time.monotonic())
            if len(self._facts) > KEPT_FACTS:
                self._facts.popitem(last=False)
            others = [peer for peer in self._peers if peer is not teller]
        for peer in others:
            peer.send_frame(data)

    def tell_usage(self, changed: list[tuple[str, str, Totals]]) -> None:
        """What a turn changed of the usage totals, to every worker (`recorder.usage`)."""
        data = frame(("u", changed))
        with self._lock:
            peers = list(self._peers)
        for peer in peers:
            peer.send_frame(data)

    def _push_health(self) -> None:
        last = None
        while not self._stopping.wait(HEALTH_SECONDS):
            health = self.recorder.health()
            now = (health["accepting"], health["reason"])
            if now != last:
                last = now
                with self._lock:
                    peers = list(self._peers)
                for peer in peers:
                    peer.send(("h", health))
