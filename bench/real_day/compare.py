"""Two trees' `taplog serve` on one day's bodies, in the same run: a before and after that
the machine's noise moves alike (issue #31's latency goal).

    .venv/bin/python bench/real_day compare --against /tmp/base [--bodies FILE] [--workers 2]

Starts the tests' fake vendor (direct), the bare pass-through, and `taplog serve` of this
tree and of the other one (`--workers N` for both), then sends each call of the day to
all four in turn, each call in an order of its own, as `run` does; a round is one pass
over the day. Prints each system's added p50 and p90 per round and over all rounds, and
its p90 over the bare proxy's: two trees measured in separate runs differ by more than
most changes are worth on a small machine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path

import httpx

from bench.common import KEYS, ROOT, Service, free_port, start_bare, start_fake, taplog_command
from bench.real_day.latency import TIMEOUT, _post, orders
from bench.real_day.thread import Call
from bench.tree import environment


def _taplog(tree: Path, fake_url: str, workers: int, data_dir: str) -> Service:
    port = free_port()
    extra = ("--workers", str(workers)) if workers else ()
    command = taplog_command(port, data_dir, fake_url, *extra)
    return Service(command, port, "/healthz", env={**environment(tree), **KEYS})


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def _line(label: str, added: dict[str, list[float]]) -> str:
    floor = _quantile(added["bare"], 0.9)
    cells = [
        f"{name} p50 {_quantile(ms, 0.5):.2f} p90 {_quantile(ms, 0.9):.2f} ms"
        + ("" if name == "bare" else f" ({_quantile(ms, 0.9) / floor:.2f}x)")
        for name, ms in added.items()
    ]
    return f"{label}: " + " | ".join(cells)


def compare(calls: Iterable[Call], against: Path, workers: int, rounds: int) -> None:
    day = list(calls)
    services: dict[str, Service] = {}
    data = tempfile.TemporaryDirectory(prefix="taplog-compare-")  # both logs, gone after
    try:
        fake = services["direct"] = start_fake()
        services["bare"] = start_bare(fake.url)
        services["this tree"] = _taplog(ROOT, fake.url, workers, f"{data.name}/this")
        services["other tree"] = _taplog(against, fake.url, workers, f"{data.name}/other")
        names = list(services)
        every: dict[str, list[float]] = {name: [] for name in names[1:]}
        with httpx.Client(timeout=TIMEOUT) as client:
            for number in range(1, rounds + 1):
                ms: dict[str, list[float]] = {name: [] for name in names}
                for call, order in zip(day, orders(names, number), strict=False):
                    for name in order:
                        ms[name].append(_post(client, services[name].url, call))
                added = {
                    name: [t - d for t, d in zip(ms[name], ms["direct"], strict=True)]
                    for name in names[1:]
                }
                print(_line(f"round {number}", added), flush=True)
                for name, values in added.items():
                    every[name] += values
        print(_line(f"all {rounds} rounds", every))
    finally:
        for service in reversed(list(services.values())):
            service.stop()
        data.cleanup()
