"""What taplog adds to one non-streaming call: median of many, against the fake directly.

    .venv/bin/python bench/added_latency.py [--calls 500]

Starts the tests' fake vendor and `taplog serve` (fsync interval) as separate
processes on 127.0.0.1, then alternates calls direct / through taplog from one
keep-alive client, so both see the same machine noise. Prints medians, p99s
and the difference.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
FAKE = """
import sys
from aiohttp import web
from tests.fake_vendor import FakeVendor
web.run_app(FakeVendor().app(), host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""
BODY = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "How are you today?"}]}
HEADERS = {"authorization": "Bearer sk-bench-0123456789"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(url: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit(f"{url} never came up")


def _time(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    reply = client.post(url, json=BODY, headers=HEADERS)
    elapsed = time.perf_counter() - started
    reply.raise_for_status()
    return elapsed * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    fake_port, taplog_port = _free_port(), _free_port()
    data_dir = tempfile.mkdtemp(prefix="taplog-bench-")
    fake = subprocess.Popen([sys.executable, "-c", FAKE, str(fake_port)], cwd=ROOT)
    taplog_cmd = [
        str(Path(sys.executable).with_name("taplog")),
        "serve",
        "--port",
        str(taplog_port),
    ]
    taplog = subprocess.Popen(
        [
            *taplog_cmd,
            "--data-dir",
            data_dir,
            "--openai-base",
            f"http://127.0.0.1:{fake_port}/v1",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        _wait(f"http://127.0.0.1:{fake_port}/v1/models")
        _wait(f"http://127.0.0.1:{taplog_port}/healthz")
        direct_url = f"http://127.0.0.1:{fake_port}/v1/chat/completions"
        taplog_url = f"http://127.0.0.1:{taplog_port}/v1/chat/completions"
        direct, through = [], []
        with httpx.Client() as client:
            for _ in range(50):  # warm up both paths and their connection pools
                _time(client, direct_url), _time(client, taplog_url)
            for _ in range(args.calls):
                direct.append(_time(client, direct_url))
                through.append(_time(client, taplog_url))
    finally:
        taplog.terminate()
        fake.terminate()
        taplog.wait(10)
        fake.wait(10)
    p99 = lambda xs: statistics.quantiles(xs, n=100)[98]  # noqa: E731
    print(f"calls: {args.calls} each, interleaved")
    print(f"direct:  median {statistics.median(direct):.3f} ms  p99 {p99(direct):.3f} ms")
    print(f"taplog:  median {statistics.median(through):.3f} ms  p99 {p99(through):.3f} ms")
    added = statistics.median(through) - statistics.median(direct)
    print(f"added by taplog (median): {added:.3f} ms")


if __name__ == "__main__":
    main()
