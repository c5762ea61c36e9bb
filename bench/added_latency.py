"""What taplog adds to one non-streaming call: median of many, against the fake directly.

    .venv/bin/python bench/added_latency.py [--calls 500] [--workers N] [--serve=--flag=value …]

Starts the tests' fake vendor and `taplog serve` (fsync interval) as separate
processes on 127.0.0.1, then alternates calls direct / through taplog from one
keep-alive client, so both see the same machine noise. Prints medians, p99s
and the difference.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BODY, HEADERS, p50, spread, start_fake, start_taplog


def _time(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    reply = client.post(url, json=BODY, headers=HEADERS)
    elapsed = time.perf_counter() - started
    reply.raise_for_status()
    return elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--workers", default="0", help="taplog's proxy workers (0: one process)")
    parser.add_argument(
        "--serve",
        action="append",
        default=[],
        help="another argument of taplog serve, e.g. --serve=--coordination=redis://127.0.0.1:6379/0",
    )
    args = parser.parse_args()
    fake = start_fake()
    data_dir = tempfile.mkdtemp(prefix="taplog-bench-")
    taplog = start_taplog(data_dir, fake.url, "--workers", args.workers, *args.serve)
    try:
        direct_url = f"{fake.url}/v1/chat/completions"
        taplog_url = f"{taplog.url}/v1/chat/completions"
        direct, through = [], []
        with httpx.Client() as client:
            for _ in range(50):  # warm up both paths and their connection pools
                _time(client, direct_url), _time(client, taplog_url)
            for _ in range(args.calls):
                direct.append(_time(client, direct_url))
                through.append(_time(client, taplog_url))
    finally:
        taplog.stop()
        fake.stop()
    print(f"calls: {args.calls} each, interleaved (ms, median / p99)")
    print(f"direct:  {spread(direct)}")
    print(f"taplog:  {spread(through)}")
    added = p50(through) - p50(direct)
    print(f"added by taplog (median): {added:.3f} ms")


if __name__ == "__main__":
    main()
