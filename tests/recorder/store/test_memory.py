"""A large streamed answer is relayed and recorded in bounded memory, and the memory goes back.

`taplog serve` runs as a process of its own so that its resident memory can be
read from /proc: the peak while one 64 MiB answer streams through it must stay
within the answer's size plus 64 MiB above idle, and once the answer is in the
log the process must be back near idle. The log must hold the answer whole all
the same. (A Responses stream repeats its text in four `done` events after the
deltas, so its answer is a fifth of its size; see docs/performance.md.)
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from taplog.recorder.store.reader import read_all
from tests.fakes.harness import serve_on_fake
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

MIB = 2**20
SIZE = 64 * MIB
CALLS = {
    "openai.chat": (
        "/v1/chat/completions",
        {"model": "gpt-4.1", "stream": True},
        {"authorization": f"Bearer {OPENAI_KEY}"},
    ),
    "anthropic.messages": (
        "/v1/messages",
        {"model": "claude-sonnet-4-6", "stream": True, "max_tokens": 10},
        {"x-api-key": ANTHROPIC_KEY, "anthropic-version": "2023-06-01"},
    ),
}


def _rss_mb(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0]) / 1024
    raise AssertionError(f"no {field} for {pid}")


def _settled_rss(pid: int) -> float:
    """Resident memory once it stops moving (the writer may still be finishing)."""
    last, deadline = -1.0, time.monotonic() + 20
    while time.monotonic() < deadline:
        now = _rss_mb(pid, "VmRSS")
        if abs(now - last) < 1:
            return now
        last = now
        time.sleep(0.5)
    return last


@pytest.mark.slow
@pytest.mark.parametrize("api", sorted(CALLS))
def test_a_64_mib_streamed_answer_costs_at_most_its_size_and_is_given_back(fake, tmp_path, api):
    served = serve_on_fake(fake, tmp_path / "data", "--log-level", "warning")
    try:
        path, body, headers = CALLS[api]
        prompt = {"messages": [{"role": "user", "content": "hi"}]}
        small = {**body, **prompt}
        httpx.post(served.url + path, json=small, headers=headers).raise_for_status()  # warm
        pid = served.process.pid
        idle = _settled_rss(pid)
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak counts from here

        big = {**body, "messages": [{"role": "user", "content": f"!big={SIZE} !events=1024"}]}
        received = 0
        with httpx.stream("POST", served.url + path, json=big, headers=headers, timeout=120) as r:
            for chunk in r.iter_raw():
                received += len(chunk)
        peak = _rss_mb(pid, "VmHWM") - idle
        after = _settled_rss(pid) - idle

        measured = f"{api}: {received / MIB:.1f} MiB streamed; idle {idle:.0f} MB, peak +{peak:.0f} MB, after +{after:.0f} MB"  # noqa: E501
        print(measured)
        assert received > SIZE
        assert peak <= received / MIB + 64, measured
        assert after <= 16, measured
    finally:
        served.stop()
    answers = [e for es in read_all(tmp_path / "data").values() for e in es if "blob" in e]
    (answer,) = [e for e in answers if e["type"] == "llm.response"]  # beside the log
    assert answer["outcome"] == "ok" and answer["stream_complete"] is True
    assert sum(len(entry["raw"].encode()) for entry in answer["sse"]) == received
