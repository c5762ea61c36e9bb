"""Two trees' `taplog serve --workers N` side by side, measured in the same rounds.

    .venv/bin/python bench/trees_ab.py --against /tmp/base [--workers 1] [--rounds 10]

On a small shared machine CPU per call moves by tens of percent from one run to the next,
far more than a change to the recorder process is worth; measured in the same run, round
by round, both trees see the same noise. Starts the tests' fake vendor and one `taplog
serve` per tree (fsync interval), then: c=1 added latency, one keep-alive client calling
direct / this tree / the other in turn (`--calls` each); and CPU per call at c=64 of the
workers and of the recorder process (/proc), `--rounds` rounds of 2 s going round the trees.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import load
from bench.common import BODY, HEADERS, KEYS, ROOT, Service, free_port, start_fake, taplog_command
from bench.tree import environment

PARTS = ("taplog-worker", "taplog-recorder")


def start(tree: Path, fake_url: str, workers: str) -> Service:
    port = free_port()
    command = taplog_command(port, tempfile.mkdtemp(prefix="taplog-ab-"), fake_url, *workers)
    return Service(command, port, "/healthz", env={**environment(tree), **KEYS})


def added_latency(urls: dict[str, str], calls: int) -> dict[str, float]:
    """Median ms added over direct, the systems called in turn by one client."""
    times: dict[str, list[float]] = {name: [] for name in urls}
    with httpx.Client() as client:
        for round_ in range(50 + calls):  # the first 50 warm the pools up
            for name, url in urls.items():
                started = time.perf_counter()
                client.post(url + "/v1/chat/completions", json=BODY, headers=HEADERS)
                if round_ >= 50:
                    times[name].append((time.perf_counter() - started) * 1000)
    direct = statistics.median(times.pop("direct"))
    return {name: statistics.median(values) - direct for name, values in times.items()}


async def cpu_per_call(taplogs: dict[str, Service], rounds: int) -> dict[str, dict[str, float]]:
    """Per tree, the median over rounds of each process kind's CPU µs per call at c=64."""
    out: dict[str, dict[str, list[float]]] = {t: {p: [] for p in PARTS} for t in taplogs}
    async with load.session() as client:
        for service in taplogs.values():
            await load.closed_loop(client, service.url, 16, 20)
        for _ in range(rounds):
            for tree, service in taplogs.items():
                before = {part: service.cpu_seconds(part) for part in PARTS}
                started = time.perf_counter()
                calls = await load.throughput(client, service.url, 64, 2.0)
                calls *= time.perf_counter() - started
                for part in PARTS:
                    used = service.cpu_seconds(part) - before[part]
                    out[tree][part].append(used / calls * 1e6)
    return {t: {p: statistics.median(v) for p, v in parts.items()} for t, parts in out.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="the other tree")
    parser.add_argument("--workers", default="1")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=600)
    args = parser.parse_args()
    fake = start_fake()
    trees = {"this tree": ROOT, "other tree": args.against.resolve()}
    taplogs = {
        name: start(tree, fake.url, ("--workers", args.workers)) for name, tree in trees.items()
    }
    try:
        urls = {"direct": fake.url, **{name: s.url for name, s in taplogs.items()}}
        latency = added_latency(urls, args.calls)
        cpu = asyncio.run(cpu_per_call(taplogs, args.rounds))
    finally:
        for service in taplogs.values():
            service.stop()
        fake.stop()
    for name in trees:
        parts = " / ".join(f"{cpu[name][part]:.0f}" for part in PARTS)
        print(
            f"{name}: added c=1 p50 {latency[name]:.3f} ms; CPU µs per call at c=64, "
            f"workers / recorder process: {parts}"
        )
    this, other = cpu["this tree"], cpu["other tree"]
    ratios = " / ".join(f"{this[part] / other[part]:.3f}x" for part in PARTS)
    print(f"this tree against the other: workers / recorder process {ratios}")


if __name__ == "__main__":
    main()
