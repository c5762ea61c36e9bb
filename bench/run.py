"""The whole benchmark in one command; writes its sections of bench/RESULTS.md.

    .venv/bin/python bench/run.py [--rounds 6] [--no-write]

Starts, on 127.0.0.1, the tests' fake vendor (its own process), the bare proxy
(`bare_proxy.py`: streams through, records nothing; the floor), `taplog serve`
with fsync interval and with fsync always, and LiteLLM's proxy server when the
`bench` extra is installed (`litellm_proxy.py`). The load generator (`load.py`) runs
in this process. Each measurement goes round the systems in turn, `--rounds`
times, so every system sees the same machine noise; "added" figures are a
system's minus direct-to-the-fake's from the same rounds. Then, one thing at a
time: 256 concurrent streams through taplog (every event checked in its log),
RSS, start-up time, the recorder alone, disk bytes, a 200-turn session's growth
and a cProfile of taplog's event loop under load. Sections of RESULTS.md that
this script does not write (queries, failover, profile findings) are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import pstats
import signal
import sys
import tempfile
import time
from collections import defaultdict
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import litellm_proxy, load, offline, report
from bench.common import (
    PYTHON,
    ROOT,
    Service,
    p99,
    settle,
    start_bare,
    start_fake,
    start_taplog,
)
from taplog.recorder.store.reader import read_all

STREAM_TEXT = "Tell me a story !events=20 !delay=0.005 !ttfb=0.02"
# Streams per caller per round: 6 callers x 5 x 6 rounds = 180 first events per system,
# so a p99 is not just the largest of a few dozen.
STREAMS_EACH = 5
# CPU per call, by the processes it is summed over (/proc comm; None: all of them)
CPU_PARTS = {None: "cpu_us", "taplog-worker": "cpu_worker_us", "taplog-recorder": "cpu_recorder_us"}
HELD_TEXT = "A long story !events=40 !delay=0.05"  # 2 s of events per stream
HELD_STALL_MS = 500.0


class Systems:
    """The fake vendor and the proxies in front of it (LiteLLM's when it is installed)."""

    def __init__(self, workers: int) -> None:
        self.fake = start_fake()
        self.bare = start_bare(self.fake.url)
        self.dirs = {name: tempfile.mkdtemp(prefix=f"taplog-{name}-") for name in ("i", "a")}
        extra = ("--workers", str(workers))
        self.interval = start_taplog(self.dirs["i"], self.fake.url, "--fsync", "interval", *extra)
        self.always = start_taplog(self.dirs["a"], self.fake.url, "--fsync", "always", *extra)
        self.services = {
            "direct": self.fake,
            "bare": self.bare,
            "taplog": self.interval,
            "taplog-always": self.always,
        }
        self.litellm = None
        if litellm_proxy.installed():
            try:
                self.litellm = litellm_proxy.start_litellm(self.fake.url)
            except SystemExit:  # never came up: leave no process behind
                self.stop()
                raise
            self.services["litellm"] = self.litellm

    @property
    def urls(self) -> dict[str, str]:
        return {name: service.url for name, service in self.services.items()}

    def stop(self) -> None:
        for service in (self.litellm, self.always, self.interval, self.bare, self.fake):
            if service is not None:
                service.stop()


async def interleaved(systems: Systems, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Every per-system measurement, rounds interleaved; values in ms (rps for c64)."""
    out: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    async with load.session() as client:
        for url in systems.urls.values():  # warm connection pools and code paths
            await load.closed_loop(client, url, 16, 10)
            await load.streams(client, url, 3, 1, STREAM_TEXT)
        for _ in range(rounds):
            for name, url in systems.urls.items():
                out["c1"][name] += await load.closed_loop(client, url, 1, 60)
                out["c32"][name] += await load.closed_loop(client, url, 32, 8)
                service = systems.services[name]
                cpu_before = {part: service.cpu_seconds(part) for part in CPU_PARTS}
                started = time.perf_counter()
                rps = await load.throughput(client, url, 64, 1.5)
                calls = rps * (time.perf_counter() - started)
                out["rps64"][name].append(rps)
                for part, key in CPU_PARTS.items():
                    cpu = service.cpu_seconds(part) - cpu_before[part]
                    out[key][name].append(cpu / calls * 1e6)
                one_shot = await load.throughput(client, url, 64, 1.5, one_shot=True)
                out["rps64-one-shot"][name].append(one_shot)
                for s in await load.streams(client, url, 6, STREAMS_EACH, STREAM_TEXT):
                    out["ttfe"][name].append(s.ttfe)
                    out[f"ttfe:{s.shape}"][name].append(s.ttfe)
                    out["gap"][name] += s.gaps
    return out


CONCURRENCY_LEVELS = (1, 2, 4, 8, 16, 32, 64, 128)
P99_LIMIT_MS = 20.0


async def highest_concurrency(systems: Systems) -> dict[str, list[float]]:
    """Per system, the highest of CONCURRENCY_LEVELS at which non-stream calls keep their
    p99 under P99_LIMIT_MS (0: not even one caller). Levels go up in step for all systems,
    interleaved; a system stops at its first level over the limit."""
    best = dict.fromkeys(systems.urls, 0)
    climbing = set(systems.urls)
    async with load.session() as client:
        for level in CONCURRENCY_LEVELS:
            for name, url in systems.urls.items():
                if name not in climbing:
                    continue
                latencies = await load.closed_loop(client, url, level, max(4, 512 // level))
                if p99(latencies) < P99_LIMIT_MS:
                    best[name] = level
                else:
                    climbing.discard(name)
    return {name: [level] for name, level in best.items()}


async def held_streams(url: str, count: int) -> tuple[list[load.Stream], int]:
    """`count` streams at once; returns them and how many failed."""
    async with load.session() as client:
        results = await asyncio.gather(
            *(load.stream(client, url, "chat", HELD_TEXT) for _ in range(count)),
            return_exceptions=True,
        )
    held = [r for r in results if isinstance(r, load.Stream)]
    return held, len(results) - len(held)


def logged_stream_events(data_dir: Path, text: str) -> tuple[int, int]:
    """(streams, SSE events) recorded for answers to prompts holding `text`."""
    streams = events = 0
    for session in read_all(data_dir).values():
        asked = {
            e["exchange"]
            for e in session
            if e["type"] == "llm.request" and text in str(e.get("body"))
        }
        for event in session:
            if event["type"] == "llm.response" and event["exchange"] in asked:
                streams += 1
                events += len(event.get("sse") or ())
    return streams, events


async def profiled_load(url: str, seconds: float) -> None:
    async with load.session() as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            await asyncio.gather(
                load.closed_loop(client, url, 32, 10),
                load.streams(client, url, 8, 1, STREAM_TEXT),
            )


def profile(fake_url: str, seconds: float) -> pstats.Stats:
    out = Path(tempfile.mkdtemp(prefix="taplog-prof-")) / "serve.prof"
    wrapper = (PYTHON, str(ROOT / "bench" / "profile_serve.py"), str(out))
    service: Service = start_taplog(tempfile.mkdtemp(), fake_url, wrapper=wrapper)
    try:
        asyncio.run(profiled_load(service.url, 1))  # warm up, unprofiled
        os.kill(service.process.pid, signal.SIGUSR2)
        asyncio.run(profiled_load(service.url, seconds))
        os.kill(service.process.pid, signal.SIGUSR1)
        for _ in range(100):
            if out.exists() and out.stat().st_size:
                break
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        service.stop(grace=1)
    return pstats.Stats(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--held", type=int, default=256, help="concurrent streams to hold")
    parser.add_argument("--profile-seconds", type=float, default=10)
    parser.add_argument("--no-write", action="store_true", help="print, leave RESULTS.md")
    parser.add_argument("--note", default="", help="what tree was measured, for RESULTS.md")
    parser.add_argument(
        "--workers", type=int, default=0, help="taplog's proxy workers (0: one process)"
    )
    args = parser.parse_args()
    began = time.monotonic()
    load_before = os.getloadavg()[0]
    figures: dict[str, object] = {}
    systems = Systems(args.workers)
    try:
        figures["ready_in_run"] = systems.interval.ready
        time.sleep(1)
        figures["rss_start"] = systems.interval.rss_mb()
        print("interleaved rounds ...", flush=True)
        figures["runs"] = asyncio.run(interleaved(systems, args.rounds))
        print("highest concurrency with p99 under 20 ms ...", flush=True)
        figures["runs"]["p99_under_20"] = asyncio.run(highest_concurrency(systems))
        if systems.litellm is not None:
            figures["litellm"] = {
                "version": metadata.version("litellm"),
                "ready": systems.litellm.ready,
                "rss": systems.litellm.rss_mb(),
            }
        print(f"{args.held} held streams ...", flush=True)
        figures["held"] = {}
        for name in ("direct", "bare", "taplog"):
            held, failed = asyncio.run(held_streams(systems.urls[name], args.held))
            figures["held"][name] = (args.held, held, failed)
        settle(Path(systems.dirs["i"]))
        figures["held_log"] = logged_stream_events(Path(systems.dirs["i"]), HELD_TEXT)
        figures["rss_peak"] = systems.interval.rss_mb("VmHWM")
        time.sleep(2)
        figures["rss_idle"] = systems.interval.rss_mb()
        figures["pss_idle"] = systems.interval.pss_mb()
        figures["disk_run"] = {k: offline.dir_bytes(Path(d)) for k, d in systems.dirs.items()}
    finally:
        systems.stop()
    fake = start_fake()
    try:
        print("start-up, recorder, disk, growth, profile ...", flush=True)
        figures["ready"] = offline.ready_times(fake.url)
        figures["recorder"] = offline.recorder_rate()
        figures["recorder_variants"] = {
            "fsync interval, 200,000 events, 100 sessions": figures["recorder"],
            "fsync interval, 200,000 events, 1 session": offline.recorder_rate(sessions=1),
            "fsync never, 200,000 events, 100 sessions": offline.recorder_rate(fsync="never"),
        }
        figures["disk_per_call"] = offline.disk_per_call(fake.url)
        figures["growth"] = offline.growth(fake.url)
        figures["profile"] = profile(fake.url, args.profile_seconds)
    finally:
        fake.stop()
    figures["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after (other processes share the machine)"
        + (f"; {args.note}" if args.note else "")
    )
    figures["seconds"] = time.monotonic() - began
    figures["rounds"] = args.rounds
    text = report.render(figures)
    print(text)
    if not args.no_write:
        report.write(ROOT / "bench" / "RESULTS.md", text)


if __name__ == "__main__":
    main()
