"""One real-day run: send the day through four systems, then weigh and read what taplog kept.

Steps, one at a time so they do not disturb each other: start the systems, send every
call (latency), wait for both taplogs' writers, note their peak RSS and stop everything;
weigh both data dirs (storage; zstd of the `taplog serve` one only, it is slow); run the
reading commands and the UI on the `taplog serve` data dir. The data dirs are under
/tmp and removed at the end unless `keep`.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import time
from collections.abc import Iterable
from typing import Any

from bench.common import ROOT
from bench.real_day import latency, reading, storage
from bench.real_day.thread import Call


def tree() -> str:
    """The commit measured, and whether the tree differs from it (`--note` says more)."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    if not head:
        return "not a git checkout"
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "proxy", "recorder"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"`{head}`" + (" (proxy/ or recorder/ edited)" if dirty else "")


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def event_loop() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "taplog ran on asyncio's own loop (no uvloop in the venv), as the bare proxy does."
    return "taplog ran on uvloop (in the venv); the bare proxy on asyncio's own loop."


def measure(
    calls: Iterable[Call], keep: bool = False, compress: bool = True, repeats: int = 1
) -> dict[str, Any]:
    """Every figure of the "A real day" section, from the calls given."""
    started, load_before = time.monotonic(), os.getloadavg()[0]
    systems = latency.Systems()
    try:
        sent = latency.send(systems, calls)
        systems.settle()
        rss = {name: systems.peak_rss_mb(name) for name in ("taplog", "taplog-workers")}
    finally:
        systems.stop()
    try:
        raw = sum(sent.sizes)
        stored = {
            name: storage.summary(folder, raw, len(sent.sizes), compress and name == "taplog")
            for name, folder in systems.dirs.items()
        }
        sessions = storage.session_ids(systems.dirs["taplog"])
        session = sessions[0]
        load_reading = os.getloadavg()[0]
        readings = reading.read_all(systems.dirs["taplog"], session, repeats)
    finally:
        if not keep:
            for folder in systems.dirs.values():
                shutil.rmtree(folder, ignore_errors=True)
    return {
        "sent": sent,
        "rss": rss,
        "stored": stored,
        "session": session,
        "sessions": len(sessions),
        "readings": readings,
        "dirs": {k: str(v) for k, v in systems.dirs.items()} if keep else {},
        "seconds": time.monotonic() - started,
        "load": (load_before, load_reading, os.getloadavg()[0]),
        "repeats": repeats,
        "machine": machine(),
        "tree": tree(),
        "loop": event_loop(),
    }


def dump(f: dict[str, Any]) -> dict[str, Any]:
    """The figures without the per-call lists, for a JSON file beside the report."""
    sent = f["sent"]
    return {
        **{k: v for k, v in f.items() if k not in ("sent", "readings")},
        "readings": [r.__dict__ for r in f["readings"]],
        "ms": sent.ms,
        "sizes": sent.sizes,
        "kinds": [c.kind for c in sent.calls],
        "threads": [c.thread for c in sent.calls],
    }
