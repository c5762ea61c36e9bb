"""A call's records cross to the recorder process and come out building the same events."""

from __future__ import annotations

import copy
import socket
import threading

import orjson
import pytest

from taplog.recorder.calls import CallAnswer, LlmRequest, LlmResponse
from taplog.recorder.channel import (
    BESIDE,
    FOLLOWS,
    BodyRing,
    FrameReader,
    Records,
    beside,
    frame,
    frame_parts,
    frames,
    record_message,
    share_ring,
    shared_ring,
)
from taplog.recorder.store.writer import SessionState

COMMON = dict(session="s", exchange="ex_1", api="openai.chat")
BODY = orjson.dumps({"model": "gpt-4.1", "messages": [{"role": "user", "content": "sk-x1 hi"}]})
ANSWER = orjson.dumps(
    {"id": "c1", "model": "gpt-4.1", "choices": [{"finish_reason": "stop"}], "usage": {}}
)


def _call() -> tuple[LlmRequest, LlmResponse, CallAnswer]:
    request = LlmRequest(
        provider="openai",
        method="POST",
        path="/v1/chat/completions",
        upstream_url="u",
        headers={"content-type": "application/json"},
        key_fingerprint="fp",
        body=BODY,
        parsed=orjson.loads(BODY),
        secrets=(b"sk-x1",),
        **COMMON,
    )
    response = LlmResponse(
        provider="openai",
        status=200,
        headers={"content-type": "application/json"},
        chunks=[(1.0, ANSWER[:9]), (1.5, ANSWER[9:])],
        outcome="ok",
        latency_ms=2.0,
        ttfb_ms=1.0,
        **COMMON,
    )
    answer = CallAnswer(status=200, latency_ms=2.5, tries=1, served=response, **COMMON)
    return request, response, answer


def _events(records) -> list[dict]:
    state = SessionState()
    return [event for record in records for event in record.events(state, None)]


def test_rebuilt_records_keep_their_envelopes_and_build_the_same_events():
    sent = _call()
    envelopes = [copy.deepcopy(record.event) for record in sent]
    buffer = bytearray(b"".join(frame(record_message(record)) for record in sent))
    records = Records()  # one per connection: the answer waits there for its CallAnswer
    rebuilt = [records.rebuilt(message) for message in frames(buffer)]
    assert not buffer
    assert [record.event for record in rebuilt] == envelopes  # made by the worker, not again
    assert [record.size for record in rebuilt] == [record.size for record in sent]
    assert _events(rebuilt) == _events(sent)


def test_frames_come_out_whole_however_their_bytes_arrive_large_bodies_beside():
    large = bytes(range(256)) * (BESIDE // 256 + 1)
    sent = [("c", "a1", beside(large), []), ("w", 1, "s"), ("c", "a2", beside(b"small"), [1])]
    data = b"".join(frame(message) for message in sent)
    assert data.count(large) == 1 and len(data) < len(large) + 300  # beside, not pickled
    for piece in (1, 7, 100, BESIDE, len(data)):
        buffer, received = bytearray(), []
        for at in range(0, len(data), piece):
            buffer += data[at : at + piece]
            received += frames(buffer)
        assert received == [("c", "a1", large, []), ("w", 1, "s"), ("c", "a2", b"small", [1])]
        assert not buffer and type(received[0][2]) is bytes


@pytest.mark.parametrize("piece", [1, 7, 100, BESIDE, 1 << 22])
def test_a_socket_s_frames_come_out_whole_through_a_reader_smaller_than_them(piece):
    """The recorder process's reader keeps one buffer, grown for a frame larger than it
    while it arrives; every frame comes out whole and its bodies as bytes of their own,
    then the end of the connection."""
    large = bytes(range(256)) * (4 * BESIDE // 256)
    sent = [("w", n, "s") for n in range(3)] + [("c", "a1", beside(large), []), ("w", 3, "s")]
    data = b"".join(frame(message) for message in sent)
    ours, theirs = socket.socketpair()
    with ours, theirs:

        def send() -> None:
            for at in range(0, len(data), piece):
                theirs.sendall(data[at : at + piece])
            theirs.shutdown(socket.SHUT_WR)

        sender = threading.Thread(target=send)
        sender.start()
        reader, received = FrameReader(size=BESIDE), []
        while (messages := reader.read(ours)) is not None:
            received += messages
        sender.join()
    assert received == [*sent[:3], ("c", "a1", large, []), ("w", 3, "s")]
    assert type(received[3][2]) is bytes


def test_bodies_cross_through_the_shared_ring_and_after_their_frames_when_it_is_full():
    """A worker's ring smaller than what it sends before the recorder reads: the bodies
    that fit cross in it, the others after their frames, and every one comes out whole,
    in order, as the ring is written over again and again."""
    ring = BodyRing.create(size=3 * BESIDE)
    assert ring is not None
    bodies = [bytes([n]) * (BESIDE + 1000 * n) for n in range(12)]
    sent = [("c", f"a{n}", beside(body), []) for n, body in enumerate(bodies)]
    ours, theirs = socket.socketpair()
    with ours, theirs:
        share_ring(theirs, ring)
        reader = FrameReader(size=BESIDE, ring=shared_ring(ours))
        received, following = [], 0
        for batch in (sent[:5], sent[5:6], sent[6:9], sent[9:]):  # read after each batch
            parts = [part for message in batch for part in frame_parts(message, ring)]
            following += sum(len(part) >= BESIDE for part in parts)
            theirs.sendall(b"".join(parts))
            while len(received) < sent.index(batch[-1]) + 1:
                received += reader.read(ours)
            assert ring.waiting() == 0  # all taken: the next batch has the whole ring
        theirs.shutdown(socket.SHUT_WR)
        assert reader.read(ours) is None
    assert received == [("c", f"a{n}", body, []) for n, body in enumerate(bodies)]
    assert 0 < following < len(bodies)  # some crossed in the ring, some after their frames
    ring.close()
    reader.ring.close()


def test_a_ring_writes_only_over_what_was_taken():
    ring = BodyRing.create(size=1000)
    assert ring is not None
    first, second = ring.place(memoryview(b"a" * 600)), ring.place(memoryview(b"b" * 300))
    assert (first, second) == (0, 600)
    assert ring.place(memoryview(b"c" * 200)) == FOLLOWS  # would wrap onto the a's
    assert ring.take(first, 600) == b"a" * 600
    third = ring.place(memoryview(b"c" * 200))  # at the start again: the end left unused
    assert third == 1000 and ring.waiting() == 300 + 100 + 200
    assert ring.take(second, 300) == b"b" * 300 and ring.take(third, 200) == b"c" * 200
    assert ring.waiting() == 0
    ring.close()
