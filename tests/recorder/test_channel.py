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
    FrameReader,
    Records,
    beside,
    frame,
    frames,
    record_message,
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
