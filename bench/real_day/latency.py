"""A day's bodies sent in order to four systems, one call at a time, turn about.

Systems, each its own process on 127.0.0.1: the tests' fake vendor (direct), the bare
aiohttp pass-through in front of it (`bench/bare_proxy.py`, records nothing: the floor),
`taplog serve` with its defaults and `taplog serve --workers 2`. Each call goes to all
four before the next call, in an order of its own (`orders`), so the systems share the
machine's noise; a call's *added* latency is a system's time minus direct's for the
same body. A time is from the request's first byte to the answer's last (the whole
stream for a streamed call), from one keep-alive client in this process.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import Service, settle, start_bare, start_fake, start_taplog
from bench.real_day.thread import Call, Facts

SYSTEMS = ("direct", "bare", "taplog", "taplog-workers")
TIMEOUT = httpx.Timeout(120.0)


@dataclass
class Sent:
    """What one run sent: per system the milliseconds of each call, and the bodies' sizes."""

    ms: dict[str, list[float]] = field(default_factory=lambda: {s: [] for s in SYSTEMS})
    calls: list[Facts] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def sizes(self) -> list[int]:
        return [c.size for c in self.calls]

    def added(self, system: str) -> list[float]:
        return [t - d for t, d in zip(self.ms[system], self.ms["direct"], strict=True)]


class Systems:
    """The fake vendor and the three proxies in front of it, and the taplog data dirs."""

    def __init__(self, workers: int = 2) -> None:
        self.dirs = {
            "taplog": Path(tempfile.mkdtemp(prefix="taplog-real-day-")),
            "taplog-workers": Path(tempfile.mkdtemp(prefix="taplog-real-day-w-")),
        }
        self.services: dict[str, Service] = {}
        try:
            fake = self.services["direct"] = start_fake()
            self.services["bare"] = start_bare(fake.url)
            self.services["taplog"] = start_taplog(str(self.dirs["taplog"]), fake.url)
            self.services["taplog-workers"] = start_taplog(
                str(self.dirs["taplog-workers"]), fake.url, "--workers", str(workers)
            )
        except BaseException:
            self.stop()
            raise

    def peak_rss_mb(self, name: str) -> float:
        return self.services[name].rss_mb("VmHWM")

    def settle(self) -> None:
        """Wait until both taplogs' data dirs stop growing (their writers caught up)."""
        for folder in self.dirs.values():
            settle(folder, seconds=120)

    def stop(self) -> None:
        for service in reversed(list(self.services.values())):
            service.stop()


def _post(client: httpx.Client, url: str, call: Call) -> float:
    started = time.perf_counter()
    answer = client.post(url + call.path, content=call.body, headers=call.headers)
    answer.read()
    elapsed = (time.perf_counter() - started) * 1000
    if answer.status_code != 200:
        raise SystemExit(f"{url}: {answer.status_code} on a {call.kind} call: {answer.text[:300]}")
    return elapsed


def orders(names: Sequence[str], seed: int = 0) -> Iterator[list[str]]:
    """For each call, the systems in an order shuffled for it (seeded), so that each runs
    after each of the others as often. What a system still does after its answer (taplog
    writing the call's last records) slows the one after it: with the order rotated
    instead, each had the same one before it three calls in four (the bare proxy after
    direct, which leaves nothing running; p90 1.95 ms there, 2.43 ms over all calls)."""
    rng = random.Random(seed)
    while True:
        order = list(names)
        rng.shuffle(order)
        yield order


def send(systems: Systems, calls: Iterable[Call]) -> Sent:
    """Every call to every system, each call in its own order. No warm-up call: the taplog
    data dirs must hold the day alone (its first calls are among the 2,000 timed)."""
    urls = {name: systems.services[name].url for name in SYSTEMS}
    sent = Sent()
    started = time.monotonic()
    with httpx.Client(timeout=TIMEOUT) as client:
        for call, order in zip(calls, orders(SYSTEMS), strict=False):
            for name in order:
                sent.ms[name].append(_post(client, urls[name], call))
            sent.calls.append(call.facts())
    sent.seconds = time.monotonic() - started
    return sent
