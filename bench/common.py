"""Helpers shared by the bench scripts: ports, processes, request bodies, statistics.

Every process listens on 127.0.0.1 only. The fake vendor runs in a process of its
own (`start_fake`) so the load generator, the vendor and the proxy under test do
not share an event loop; `start_taplog` and `start_bare` start the two proxies
(`litellm_proxy.start_litellm` a third, when the `bench` extra is installed).
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.tree import environment

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
# `taplog` from this tree (bench/tree.py), not whichever copy is installed in the venv
TAPLOG = "import sys; from taplog.proxy.cli.main import main; sys.argv[0] = 'taplog'; main()"
BODY = {"model": "gpt-4.1", "messages": [{"role": "user", "content": "How are you today?"}]}
HEADERS = {"authorization": "Bearer sk-bench-0123456789"}
KEYS = {"OPENAI_API_KEY": "sk-bench-o", "ANTHROPIC_API_KEY": "sk-bench-a"}
FAKE = """
import sys
from aiohttp import web
from tests.fakes.vendor import FakeVendor
web.run_app(FakeVendor().app(), host="127.0.0.1", port=int(sys.argv[1]), print=None)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Service:
    """A process serving HTTP on 127.0.0.1:port; `ready` is its start-to-ready time."""

    def __init__(
        self, command: list[str], port: int, probe: str, wait: float = 20, **popen: object
    ) -> None:
        started = time.monotonic()
        popen.setdefault("env", environment())
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **popen
        )
        self.url = f"http://127.0.0.1:{port}"
        self._wait(self.url + probe, wait)
        self.ready = time.monotonic() - started

    def _wait(self, url: str, seconds: float) -> None:
        """Poll `url` until it answers; a process that exits or stays silent is an error."""
        deadline = time.monotonic() + seconds
        while self.process.poll() is None and time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.01)
        self.stop(grace=1)
        raise SystemExit(f"{url} never came up: {self.process.args!r}")

    def family(self, name: str | None = None) -> list[int]:
        """The process and its descendants (`taplog serve`'s recorder process and workers),
        or those of them named `name` (/proc/PID/comm)."""
        pids, found = [self.process.pid], []
        while pids:
            pid = pids.pop()
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
            except (FileNotFoundError, ProcessLookupError):
                continue  # it just exited
            pids += map(int, children)
            if name is None or comm == name:
                found.append(pid)
        return found

    def cpu_seconds(self, name: str | None = None) -> float:
        """User plus system CPU time used so far by the process and its descendants (or
        those named `name`), from /proc (all threads)."""
        total = 0
        for pid in self.family(name):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
                total += int(fields[11]) + int(fields[12])
        return total / os.sysconf("SC_CLK_TCK")

    def rss_mb(self, field: str = "VmRSS") -> float:
        """Resident memory (VmRSS) or its peak so far (VmHWM) of the process and its
        descendants together, in MiB, from /proc (pages they share are counted in each)."""
        total = 0
        for pid in self.family():
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    total += int(line.split()[1])
        return total / 1024

    def pss_mb(self) -> float:
        """Proportional memory of the process and its descendants together, in MiB: a
        page they share (forked, not written since) counted once, split between them."""
        total = 0
        for pid in self.family():
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        return total / 1024

    def stop(self, grace: float = 5) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; callers that need the log
        complete wait for it first (`settle`), not on a clean exit."""
        self.process.terminate()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def start_fake() -> Service:
    port = free_port()
    return Service([PYTHON, "-c", FAKE, str(port)], port, "/v1/models")


def taplog_command(port: int, data_dir: str, fake_url: str, *extra: str) -> list[str]:
    return [
        PYTHON,
        "-c",
        TAPLOG,
        "serve",
        "--port",
        str(port),
        "--data-dir",
        data_dir,
        "--openai-base",
        f"{fake_url}/v1",
        "--anthropic-base",
        fake_url,
        "--compact-after-minutes",
        "0",
        *extra,
    ]


def start_taplog(
    data_dir: str, fake_url: str, *extra: str, wrapper: tuple[str, ...] = ()
) -> Service:
    """`taplog serve` against the fake (both vendors); `wrapper` replaces the `taplog`
    executable with a script that takes its arguments (the profiler)."""
    port = free_port()
    command = taplog_command(port, data_dir, fake_url, *extra)
    if wrapper:
        command = [*wrapper, *command[3:]]
    return Service(command, port, "/healthz", env={**environment(), **KEYS})


def start_bare(fake_url: str) -> Service:
    port = free_port()
    command = [PYTHON, str(ROOT / "bench" / "bare_proxy.py"), str(port), fake_url]
    return Service(command, port, "/healthz")


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[98]


def spread(values: list[float]) -> str:
    """`median / p99` of milliseconds, for reports."""
    return f"{p50(values):.3f} / {p99(values):.3f}"


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def settle(path: Path, seconds: float = 10) -> int:
    """Wait until the bytes under `path` stop growing (the writer caught up); returns them."""
    deadline = time.monotonic() + seconds
    size = -1
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = dir_bytes(path)
        if now == size:
            return now
        size = now
    return size
