"""What handing a call's records to a recorder process would cost the proxy (issue #21).

    python bench/channel.py                 # every channel and encoding, 20,000 calls each
    python bench/channel.py --calls 5000

The proxy worker would hand what it saw of each call (the request as sent, the answer's
chunks with their arrival times, the few facts it decided) to one recorder process, and
hold the end of each answer until that process says it is written. This measures that
hand-off alone, against a recorder that only decodes and acknowledges, for call shapes
like bench/run.py's: a short Chat call (one 3.6 KB request, a 600-byte answer) and a
stream (the same request, 20 chunks of 200 bytes).

For each channel (a pipe, a Unix socket, a shared-memory ring with a pipe to wake the
reader) and encoding (`marshal`, `pickle`), per call: the worker's CPU to encode and send
(the figure that moves throughput; today the worker builds and writes the events itself,
~250 µs of a call's ~600 µs), and the time from sending a call's last record to its
acknowledgement (what the held end of an answer would wait), p50 and p99. A ratio
against the pipe with `marshal` in the same run is printed beside each.
"""

from __future__ import annotations

import argparse
import marshal
import multiprocessing
import os
import pickle
import socket
import statistics
import struct
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from typing import Any

HEADER = struct.Struct("<I")  # a frame's length; frames of one call go in one write
ACK = b"a"
REQUEST_HEADERS = {
    "content-type": "application/json",
    "user-agent": "OpenAI/Python 1.99.0",
    "accept": "application/json",
    "x-stainless-lang": "python",
    "x-stainless-retry-count": "0",
    "host": "127.0.0.1:8787",
}
ANSWER_HEADERS = {"content-type": "application/json", "x-request-id": "req_0123456789abcdef"}


def call_records(n: int, stream: bool) -> list[tuple[Any, ...]]:
    """A call's records as plain values: what `recorder.calls` holds before it builds events."""
    request = b'{"model":"gpt-4.1","messages":[' + b"x" * 3600 + b"]}"
    chunks = (
        [(i * 5.0, b"data: " + b"y" * 194) for i in range(20)] if stream else [(0.0, b"z" * 600)]
    )
    return [
        ("request", f"sess-{n % 64}", f"ex_{n}", "openai.chat", REQUEST_HEADERS, request),
        ("answer", f"ex_{n}", 200, ANSWER_HEADERS, chunks, 12.5, 3.1),
        ("answered", f"ex_{n}", 200, "ok", 13.0, 1, True),  # True: acknowledge when written
    ]


ENCODINGS: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any]]] = {
    "marshal": (marshal.dumps, marshal.loads),
    "pickle": (lambda v: pickle.dumps(v, protocol=5), pickle.loads),
}


# -- the recorder's side: decode every frame, acknowledge the calls that ask -------------


def _frames(buffer: bytearray, decode: Callable[[bytes], Any]) -> tuple[int, int]:
    """Decode whole frames at the front of `buffer`; (bytes used, acknowledgements due)."""
    at, acks = 0, 0
    while len(buffer) - at >= HEADER.size:
        (size,) = HEADER.unpack_from(buffer, at)
        if len(buffer) - at - HEADER.size < size:
            break
        record = decode(bytes(buffer[at + HEADER.size : at + HEADER.size + size]))
        acks += record[0] == "answered"
        at += HEADER.size + size
    return at, acks


def stream_recorder(read_fd: int, ack_fd: int, encoding: str, workers: list[int]) -> None:
    for fd in workers:  # the worker's ends, inherited by the fork: the end is their close
        os.close(fd)
    decode = ENCODINGS[encoding][1]
    buffer = bytearray()
    while data := os.read(read_fd, 1 << 20):
        buffer += data
        used, acks = _frames(buffer, decode)
        del buffer[:used]
        if acks:
            os.write(ack_fd, ACK * acks)


def ring_recorder(
    name: str, size: int, wake_fd: int, ack_fd: int, encoding: str, workers: list[int]
) -> None:
    for fd in workers:
        os.close(fd)
    decode = ENCODINGS[encoding][1]
    ring = shared_memory.SharedMemory(name)
    positions = ring.buf.cast("Q")  # [written, read, sleeping]
    buffer = bytearray()
    try:
        while True:
            written, read = positions[0], positions[1]
            if written == read:
                positions[2] = 1  # asleep: the writer wakes it with a byte
                if positions[0] == read and not os.read(wake_fd, 1 << 16):
                    return
                positions[2] = 0
                continue
            start, end = 24 + read % size, 24 + (written - read) + read % size
            if end <= 24 + size:
                buffer += ring.buf[start:end]
            else:
                buffer += ring.buf[start : 24 + size]
                buffer += ring.buf[24 : end - size]
            positions[1] = written
            used, acks = _frames(buffer, decode)
            del buffer[:used]
            if acks:
                os.write(ack_fd, ACK * acks)
    finally:
        del positions
        ring.close()


# -- the worker's side --------------------------------------------------------------------


class StreamSender:
    """Frames into one write per call, on a pipe or a socket."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, frames: bytes) -> None:
        view = memoryview(frames)
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        os.close(self.fd)


class RingSender:
    """Frames copied into a shared-memory ring; a byte on a pipe wakes a sleeping reader."""

    def __init__(self, ring: shared_memory.SharedMemory, size: int, wake_fd: int) -> None:
        self.ring, self.size, self.wake_fd = ring, size, wake_fd
        self.positions = ring.buf.cast("Q")

    def send(self, frames: bytes) -> None:
        while self.positions[0] + len(frames) - self.positions[1] > self.size:
            time.sleep(0)  # full: back-pressure, never a drop
        written = self.positions[0]
        start = written % self.size
        first = min(len(frames), self.size - start)
        self.ring.buf[24 + start : 24 + start + first] = frames[:first]
        if first < len(frames):
            self.ring.buf[24 : 24 + len(frames) - first] = frames[first:]
        self.positions[0] = written + len(frames)
        if self.positions[2]:
            os.write(self.wake_fd, b"w")

    def close(self) -> None:
        os.close(self.wake_fd)
        del self.positions


def measure(channel: str, encoding: str, calls: int, stream: bool) -> dict[str, float]:
    encode = ENCODINGS[encoding][0]
    ack_read, ack_write = os.pipe()
    ring = None
    if channel == "ring":
        size = 8 << 20
        ring = shared_memory.SharedMemory(create=True, size=size + 24)
        ring.buf[:24] = bytes(24)
        wake_read, wake_write = os.pipe()
        args = (ring.name, size, wake_read, ack_write, encoding, [wake_write, ack_read])
        process = multiprocessing.Process(target=ring_recorder, args=args)
        sender: StreamSender | RingSender = RingSender(ring, size, wake_write)
        theirs = [wake_read]
    else:
        if channel == "pipe":
            read_fd, write_fd = os.pipe()
        else:
            ours, their = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            read_fd, write_fd = their.detach(), ours.detach()
        process = multiprocessing.Process(
            target=stream_recorder, args=(read_fd, ack_write, encoding, [write_fd, ack_read])
        )
        sender = StreamSender(write_fd)
        theirs = [read_fd]
    process.start()
    for fd in [*theirs, ack_write]:
        os.close(fd)
    records = [call_records(n, stream) for n in range(calls)]
    waits: list[float] = []
    cpu = time.process_time()
    for n, call in enumerate(records):
        frames = b"".join(HEADER.pack(len(e)) + e for e in map(encode, call))
        sender.send(frames)
        if n % 10 == 0:  # a sample of held ends: wait for this call's acknowledgement
            sent = time.perf_counter()
            os.read(ack_read, 1 << 16)
            waits.append((time.perf_counter() - sent) * 1e6)
    cpu = (time.process_time() - cpu) / calls * 1e6
    sender.close()
    process.join()
    os.close(ack_read)
    if ring is not None:
        ring.close()
        ring.unlink()
    waits.sort()
    return {
        "cpu": cpu,
        "p50": statistics.median(waits),
        "p99": waits[int(len(waits) * 0.99)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    args = parser.parse_args()
    print(f"{args.calls:,} calls per row; acknowledgement waited for on every 10th call")
    print(
        f"{'call':<8}{'channel':<8}{'encoding':<9}{'worker CPU/call':>17}"
        f"{'ack wait p50':>14}{'ack wait p99':>14}"
    )
    for stream in (False, True):
        base = None
        for channel in ("pipe", "socket", "ring"):
            for encoding in ENCODINGS:
                got = measure(channel, encoding, args.calls, stream)
                base = base or got
                ratio = got["cpu"] / base["cpu"]
                print(
                    f"{'stream' if stream else 'short':<8}{channel:<8}{encoding:<9}"
                    f"{got['cpu']:>10.1f} µs {ratio:4.2f}x"
                    f"{got['p50']:>11.1f} µs{got['p99']:>11.1f} µs"
                )


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    main()
