"""What a replayed call costs against a vendor call through taplog, per replay mode.

    .venv/bin/python bench/replay_bench.py [--calls 200]

Starts the fake vendor and `taplog serve` (processes on 127.0.0.1), records
`--calls` distinct non-streaming Chat calls, then starts `taplog serve --replay`
on that recording in record-missing mode (recording into a data dir of its
own) and times, per call (milliseconds, median / p99):
1. hits: the recorded calls again, answered from the recording;
2. misses: new calls, forwarded to the vendor and recorded;
3. the same new calls again, now answered from the recording.
The calls recorded by the replaying proxy show which of them reached the vendor.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BODY, HEADERS, settle, spread, start_fake, start_taplog
from taplog.recorder.store.reader import read_all


def _bodies(calls: int, tag: str) -> list[dict]:
    return [
        {**BODY, "messages": [{"role": "user", "content": f"{tag} question {n}"}]}
        for n in range(calls)
    ]


def _time_all(client: httpx.Client, url: str, bodies: list[dict]) -> list[float]:
    times = []
    for body in bodies:
        started = time.perf_counter()
        answer = client.post(f"{url}/v1/chat/completions", json=body, headers=HEADERS)
        times.append((time.perf_counter() - started) * 1000)
        answer.raise_for_status()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    calls = parser.parse_args().calls
    fake = start_fake()
    recorded, new = _bodies(calls, "recorded"), _bodies(calls, "new")
    with tempfile.TemporaryDirectory() as tmp, httpx.Client(timeout=30) as client:
        recording = Path(tmp) / "recording"
        proxy = start_taplog(str(recording), fake.url)
        vendor = _time_all(client, proxy.url, recorded)
        settle(recording / "sessions")
        proxy.stop()
        misses = Path(tmp) / "misses"
        replay = start_taplog(
            str(misses),
            fake.url,
            "--replay",
            str(recording),
            "--replay-mode",
            "record-missing",
        )
        results = {
            "vendor through taplog (recording)": vendor,
            "replay hits": _time_all(client, replay.url, recorded),
            "record-missing misses (vendor)": _time_all(client, replay.url, new),
            "the same calls again (hits)": _time_all(client, replay.url, new),
        }
        settle(misses / "sessions")
        replay.stop()
        forwarded = sum(
            e["type"] == "llm.request" for events in read_all(misses).values() for e in events
        )
    fake.stop()
    print(f"{calls} non-streaming Chat calls each, ms median / p99")
    for name, times in results.items():
        print(f"  {name:38} {spread(times)}")
    print(f"calls the replaying proxy sent to the vendor: {forwarded} (expected {calls})")


if __name__ == "__main__":
    main()
