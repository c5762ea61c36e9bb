"""What redaction costs the recorder per call: building a typical call's events (a
20-turn chat request of ~12 KB, and its streamed answer of 120 events) with every built-in
detector on, against with none. Off the event loop, but an answer's end waits for its
record, so this is the most it can add to a call.

`--body-kb N` makes the request about N KiB (more turns); `--secrets` gives the call the
secrets a real one has (the client's key, as `Bearer …` and alone, and a fallback key),
so both lines include the by-value scan of every body, event, header and URL (run it in
two trees, `PYTHONPATH=<tree>/build/import`, to compare them).

    .venv/bin/python bench/redaction_cost.py [--rounds 300] [--body-kb 1024] [--secrets]
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
KEY = "sk-bench-client-0123456789abcdef"  # lower case: no shape, found by its value only
SECRETS = (f"Bearer {KEY}".encode(), KEY.encode(), b"sk-bench-fallback-0123456789")
HEADERS = {  # what an SDK sends beside its key (the key's header is never logged)
    "content-type": "application/json",
    "user-agent": "OpenAI/Python 1.99.0",
    "x-stainless-lang": "python",
    "x-stainless-package-version": "1.99.0",
    "x-stainless-runtime": "CPython",
    "x-stainless-retry-count": "0",
}


def _request(turns: int) -> tuple[bytes, dict]:
    messages = [{"role": "system", "content": "You are a careful coding agent."}]
    for turn in range(turns):
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


def _build(redaction: Redaction | None, turns: int, secrets: tuple[bytes, ...]) -> float:
    raw, parsed = _request(turns)
    request = LlmRequest(
        "s",
        "x",
        "openai.chat",
        "openai",
        "POST",
        "/v1/chat/completions",
        "http://u/v1/chat/completions",
        HEADERS,
        None,
        raw,
        parsed,
        secrets=secrets,
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
        secrets=secrets,
    )
    started = time.perf_counter()
    list(request.events(SessionState(), None, redaction))
    list(response.events(SessionState(), None, redaction))
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--body-kb", type=int, default=12, help="the request's size, about")
    parser.add_argument(
        "--secrets", action="store_true", help="the call's secrets, as a real one's"
    )
    args = parser.parse_args()
    turns = max(1, args.body_kb * 20 // 12)  # 20 turns are about 12 KiB
    secrets = SECRETS if args.secrets else ()
    on = Redaction(built_in(BUILT_IN))
    plain, redacted = [], []
    for _ in range(args.rounds):  # alternated, so both see the same machine noise
        plain.append(_build(None, turns, secrets))
        redacted.append(_build(on, turns, secrets))
    p50_off, p50_on = statistics.median(plain), statistics.median(redacted)
    size = len(_request(turns)[0]) / 1024
    what = f"{size:.0f} KiB request" + (", the call's secrets" if secrets else "")
    print(f"building one call's events ({what}), median of {args.rounds}:")
    print(f"  no redaction      {p50_off:.3f} ms")
    print(f"  {','.join(BUILT_IN):<17} {p50_on:.3f} ms  (+{p50_on - p50_off:.3f} ms)")


if __name__ == "__main__":
    main()
