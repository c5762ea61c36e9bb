"""The recorder process's side of the channel (`recorder.channel`): workers connect over a
Unix socket, and their records reach the one `Recorder` that owns the data dir.

    worker ─┐  records, "tell me when written"   ┌─ reader thread ─┐
    worker ─┼──────────── Unix socket ───────────┼─ reader thread ─┼─▶ Recorder (writer thread)
    worker ─┘  ◀── written / health / answers ───┴─ (one per peer) ┘

Each connection has a reader thread that rebuilds records and queues them (`record`
never blocks), and passes on acknowledgement requests, which the writer answers once
the lines are written (and synced, per policy). Health goes to every worker when it
changes, so a worker decides on each call without asking; questions (`metrics`,
`health`) are answered by the callables the process registered. A worker that goes away
takes nothing with it: what it sent is written; its unanswered acknowledgements are
dropped.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

from taplog.recorder.channel import Records, frame, frames
from taplog.recorder.store.writer import Recorder

log = logging.getLogger("taplog.recorder")

HEALTH_SECONDS = 0.02  # how often health is looked at for a change
ACCEPT_SECONDS = 0.2  # how soon a stop is noticed
STOP_SECONDS = 60.0  # the longest a stop waits for the workers' connections to end


class _Peer:
    """One worker's connection: sends from several threads, one frame at a time."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self._lock = threading.Lock()

    def send(self, message: tuple[Any, ...]) -> None:
        data = frame(message)
        try:
            with self._lock:
                self.connection.sendall(data)
        except OSError:
            pass  # the worker is gone; its reader thread sees to the rest


class RecorderService:
    """Serve `recorder` to the workers that connect to `listener` until `stop`."""

    def __init__(
        self,
        recorder: Recorder,
        listener: socket.socket,
        questions: dict[str, Callable[[], Any]],
    ) -> None:
        self.recorder = recorder
        self._listener = listener
        self._questions = questions
        self._peers: set[_Peer] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

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
            peer = _Peer(connection)
            with self._lock:
                self._peers.add(peer)
            peer.send(("h", self.recorder.health()))
            reader = threading.Thread(target=self._read, args=(peer,), daemon=True)
            reader.start()
            readers.append(reader)
        for reader in readers:
            reader.join(STOP_SECONDS)

    def stop(self) -> None:
        """Stop accepting workers (those connected are read to their end)."""
        self._stopping.set()

    def _read(self, peer: _Peer) -> None:
        records, buffer = Records(), bytearray()
        try:
            while data := peer.connection.recv(1 << 20):
                buffer += data
                for message in frames(buffer):
                    self._handle(peer, records, message)
        except OSError:
            pass
        finally:
            with self._lock:
                self._peers.discard(peer)
            peer.connection.close()

    def _handle(self, peer: _Peer, records: Records, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "r":
            self.recorder.record(records.rebuilt(message))
        elif kind == "w":
            token, session = message[1], message[2]
            self.recorder.when_written(lambda ok: peer.send(("w", token, ok)), session)
        elif kind == "q":
            token, question = message[1], message[2]
            peer.send(("a", token, self._questions[question]()))

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
