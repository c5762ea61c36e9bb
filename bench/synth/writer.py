"""Writing the data dir: sessions generated in worker processes, one buffered write each.

Big sessions go first, dealt round-robin to the workers so they finish together. Each
session draws from its own generator, so the bytes do not depend on the worker count.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.synth.common import SECOND
from bench.synth.plan import Plan, make_plans
from bench.synth.session import Session
from bench.synth.vocabulary import pools
from taplog.recorder.store.lognames import COMPRESSED, session_logs
from taplog.recorder.store.zstd_stream import compress_whole


def generate(
    data_dir: Path,
    events: int,
    seed: int = 1,
    sessions: int | None = None,
    days: int = 30,
    end: datetime | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Write the data dir; returns counts, bytes, seconds and the distributions."""
    started = time.perf_counter()
    if end is None:
        today = datetime.now(UTC).date()
        end = datetime(today.year, today.month, today.day, tzinfo=UTC)
    end_us = int(end.timestamp()) * SECOND
    folder = data_dir / "sessions"
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder.mkdir(exist_ok=True, mode=0o700)
    if session_logs(folder):
        raise SystemExit(f"{folder} already holds session logs; use an empty --data-dir")
    plans = make_plans(events, sessions or max(1, events // 200), seed, end_us, days)
    workers = max(1, workers or os.cpu_count() or 1)
    # Big sessions first, dealt round-robin, so the workers finish together.
    ordered = sorted(plans, key=lambda p: -p.target)
    chunks = [ordered[i :: workers * 8] for i in range(min(len(plans), workers * 8))]
    jobs = [(chunk, seed, end_us, str(folder)) for chunk in chunks]
    stats: Counter = Counter()
    written = size = 0
    for n, b, s in _run(jobs, workers, seed):
        written, size = written + n, size + b
        stats.update(s)
    seconds = time.perf_counter() - started
    return {
        "sessions": len(plans),
        "events": written,
        "bytes": size,
        "seconds": seconds,
        "stats": stats,
    }


def _run(jobs: list, workers: int, seed: int) -> Iterator[tuple[int, int, Counter]]:
    """Each job's (events, bytes, stats), in this process or from a pool of forked workers."""
    if workers == 1:
        yield from map(write_chunk, jobs)
        return
    pools(seed)  # built once, inherited by forked workers
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    with context.Pool(workers) as pool:
        yield from pool.imap_unordered(write_chunk, jobs)


def write_chunk(job: tuple[list[Plan], int, int, str]) -> tuple[int, int, Counter]:
    """Generate and write a worker's share of the sessions."""
    plans, seed, end_us, folder = job
    total_events = total_bytes = 0
    stats: Counter = Counter()
    for plan in plans:
        session = Session(plan, seed, end_us)
        lines = session.run()
        data = b"".join(lines)
        _write_new(os.path.join(folder, f"{plan.session}{COMPRESSED}"), compress_whole(data))
        total_events += len(lines)
        total_bytes += len(data)
        stats.update(session.stats)
    return total_events, total_bytes, stats


def _write_new(path: str, data: bytes) -> None:
    """One file, created 0600 (never over an existing one), written whole."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
