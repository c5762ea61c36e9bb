"""What redaction costs the recorder per call: building a typical call's events (a
20-turn chat request of ~12 KB, and its streamed answer of 120 events) with every built-in
detector on, against with none. Off the event loop, but an answer's end waits for its
record, so this is the most it can add to a call.

    .venv/bin/python bench/redaction_cost.py [--rounds 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from taplog.recorder.calls import LlmRequest, LlmResponse
from taplog.recorder.redaction import BUILT_IN, Redaction, built_in
from taplog.recorder.store.writer import SessionState

TURN = (
    "Please look at the failing test in tests/test_api.py; the traceback says the handler "
    "returned 502 after 30 seconds on port 8787, version 1.2.3. "
)
ANSWER = "The handler waits on the upstream pool; raise its limit to 100 and retry. " * 12


def _request() -> tuple[bytes, dict]:
    messages = [{"role": "system", "content": "You are a careful coding agent."}]
    for turn in range(20):
        messages.append({"role": "user", "content": f"{TURN} (turn {turn})"})
        messages.append({"role": "assistant", "content": ANSWER[:400]})
    body = {"model": "gpt-4.1", "messages": messages, "stream": True}
    return orjson.dumps(body), body


def _stream() -> list[tuple[float, bytes]]:
    words = ANSWER.split(" ")
    chunks = []
    for at, word in enumerate(words[:120]):
        data = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4.1"}
        data["choices"] = [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}]
        chunks.append((float(at), b"data: " + orjson.dumps(data) + b"\n\n"))
    chunks.append((121.0, b"data: [DONE]\n\n"))
    return chunks


def _build(redaction: Redaction | None) -> float:
    raw, parsed = _request()
    request = LlmRequest(
        "s",
        "x",
        "openai.chat",
        "openai",
        "POST",
        "/v1/chat/completions",
        "http://u/v1/chat/completions",
        {"content-type": "application/json"},
        None,
        raw,
        parsed,
    )
    response = LlmResponse(
        "s",
        "x",
        "openai.chat",
        "openai",
        200,
        {"content-type": "text/event-stream"},
        _stream(),
        "ok",
        10.0,
        1.0,
    )
    started = time.perf_counter()
    list(request.events(SessionState(), None, redaction))
    list(response.events(SessionState(), None, redaction))
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    rounds = parser.parse_args().rounds
    on = Redaction(built_in(BUILT_IN))
    plain, redacted = [], []
    for _ in range(rounds):  # alternated, so both see the same machine noise
        plain.append(_build(None))
        redacted.append(_build(on))
    p50_off, p50_on = statistics.median(plain), statistics.median(redacted)
    print(f"building one call's events, median of {rounds}:")
    print(f"  no redaction      {p50_off:.3f} ms")
    print(f"  {','.join(BUILT_IN):<17} {p50_on:.3f} ms  (+{p50_on - p50_off:.3f} ms)")


if __name__ == "__main__":
    main()
