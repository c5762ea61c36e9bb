"""Figures that need no interleaving: the recorder alone, start-up time, disk use.

- `recorder_rate`: events/s `recorder.store.writer.Recorder` writes with fsync interval,
  driven directly with ready-made `EventRecord`s (no HTTP, no proxy).
- `ready_times`: seconds from starting `taplog serve` to its first healthy answer.
- `disk_per_call`: log bytes per short non-streaming call.
- `growth`: log bytes per turn of one 200-turn session whose transcript grows by a
  user message and an answer each turn, as agents resend their whole history
  (blobs beside the log counted with the turn that first points at them).
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path

import httpx
import orjson

from bench.common import BODY, HEADERS, dir_bytes, p50, settle, start_taplog
from taplog.recorder.events import LLM_REQUEST, make_event
from taplog.recorder.store.blobs import BLOBS_DIR, blob_path
from taplog.recorder.store.lognames import iter_lines, session_logs
from taplog.recorder.store.writer import EventRecord, Recorder

TURN_TEXT = "Please look at the next part of the code and tell me what to change. " * 3


def recorder_rate(events: int = 200_000, sessions: int = 100, fsync: str = "interval") -> float:
    """Events per second from the first `record` to everything written."""
    payload = {"path": "/v1/chat/completions", "model": "gpt-4.1", "body": {"text": "x" * 300}}
    records = [
        EventRecord(make_event(LLM_REQUEST, f"s{n % sessions:04d}", f"ex{n}", **payload))
        for n in range(events)
    ]
    recorder = Recorder(Path(tempfile.mkdtemp(prefix="taplog-rec-")), fsync=fsync)
    recorder.start()
    started = time.perf_counter()
    for record in records:
        recorder.record(record)
    if not recorder.flush(120):
        raise RuntimeError("the recorder did not finish in 120 s")
    elapsed = time.perf_counter() - started
    recorder.close(timeout=5)
    return events / elapsed


def ready_times(fake_url: str, starts: int = 5) -> list[float]:
    times = []
    for _ in range(starts):
        service = start_taplog(tempfile.mkdtemp(prefix="taplog-ready-"), fake_url)
        times.append(service.ready)
        service.stop(grace=0.5)
    return times


def disk_per_call(fake_url: str, calls: int = 200) -> float:
    data_dir = Path(tempfile.mkdtemp(prefix="taplog-disk-"))
    service = start_taplog(str(data_dir), fake_url)
    try:
        with httpx.Client(base_url=service.url, headers=HEADERS) as client:
            for n in range(calls):  # distinct prompts: distinct sessions, as from many agents
                body = {**BODY, "messages": [{"role": "user", "content": f"Task {n}: hello"}]}
                client.post("/v1/chat/completions", json=body).raise_for_status()
    finally:
        settle(data_dir)
        service.stop()
    return dir_bytes(data_dir) / calls


def growth(fake_url: str, turns: int = 200) -> list[int]:
    """Log bytes of each turn of one session (every line of its exchange, its share of
    the session's first line included in turn 1)."""
    data_dir = Path(tempfile.mkdtemp(prefix="taplog-growth-"))
    service = start_taplog(str(data_dir), fake_url)
    messages: list[dict[str, str]] = [{"role": "system", "content": "You are a coder."}]
    try:
        with httpx.Client(base_url=service.url, headers=HEADERS, timeout=30) as client:
            for turn in range(turns):
                messages.append({"role": "user", "content": f"Turn {turn}. {TURN_TEXT}"})
                reply = client.post("/v1/chat/completions", json={**BODY, "messages": messages})
                reply.raise_for_status()
                messages.append(reply.json()["choices"][0]["message"])
        settle(data_dir)
    finally:
        service.stop()
    per_exchange: dict[str | None, int] = defaultdict(int)
    order: list[str | None] = []
    counted: set[str] = set()  # blobs, each counted with the first line that points at it
    for path in session_logs(data_dir / "sessions"):
        for line in iter_lines(path):
            event = orjson.loads(line)
            exchange = event.get("exchange")
            if exchange not in per_exchange:
                order.append(exchange)
            per_exchange[exchange] += len(line)
            blob = (event.get("blob") or {}).get("sha256")
            if blob and blob not in counted:
                counted.add(blob)
                per_exchange[exchange] += blob_path(data_dir / BLOBS_DIR, blob).stat().st_size
    sizes = [per_exchange[e] for e in order if e is not None]
    sizes[0] += sum(per_exchange[e] for e in order if e is None)
    return sizes


def growth_summary(sizes: list[int]) -> list[str]:
    turns = len(sizes)
    total = sum(sizes)
    marks = [1, 50, 100, 150, turns]
    lines = [f"bytes logged by turn {m}: {sizes[m - 1]:,}" for m in marks if m <= turns]
    late = p50(sizes[-20:]) / p50(sizes[:20])
    lines.append(f"total for {turns} turns: {total:,} bytes ({total / 2**20:.1f} MiB)")
    lines.append(
        f"bytes per turn, last 20 / first 20 (medians): {late:.1f}x; total / "
        f"({turns} x first turn): {total / (turns * sizes[0]):.1f}x"
    )
    return lines
