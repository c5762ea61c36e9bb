"""How long reading a day's data dir takes, and how much memory it needs.

Each CLI command runs as its own process (`taplog` from this tree, as the bench starts
it), its output to a file; wall time from this process, peak RSS from `/usr/bin/time -v`
(else `getrusage(RUSAGE_CHILDREN)`, which only says the largest child so far). The UI is
`taplog ui` on 127.0.0.1: each endpoint asked with httpx, and the process's peak RSS
(VmHWM) read from /proc after all of them. The order is the issue's: the list, the
timeline, the conversation, a count in SQL, the UI, then `compact` and the list again.
Each reading is done `repeats` times in a row (`compact` once): the fastest time is
kept, as the one least slowed by the other work on a shared machine, and the largest
peak.
"""

from __future__ import annotations

import atexit
import functools
import re
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import PYTHON, ROOT, TAPLOG, Service, free_port
from bench.tree import environment

TIME = Path("/usr/bin/time")
TIMEOUT = 1800  # seconds for any one command; the issue saw 34 s
_MAX_RSS = re.compile(rb"Maximum resident set size \(kbytes\): (\d+)")
SQL = "SELECT count(*), sum(input_tokens) FROM llm_calls"


@dataclass
class Reading:
    what: str
    seconds: float
    peak_mb: float | None
    output_bytes: int = 0
    status: int = 0


def commands(session: str) -> list[tuple[str, list[str]]]:
    """(label, taplog arguments) in the order they run; `compact` sits before the last."""
    return [
        ("taplog sessions --limit 5", ["sessions", "--limit", "5"]),
        ("taplog show S", ["show", session]),
        ("taplog show S --messages", ["show", session, "--messages"]),
        (f'taplog sql "{SQL}"', ["sql", SQL]),
        ("taplog compact", ["compact"]),
        ("taplog sessions --limit 5 (after compact)", ["sessions", "--limit", "5"]),
    ]


@functools.cache
def taplog_script() -> str:
    """`taplog` as a script file, not `python -c`: DuckDB takes a `__main__` without a
    file for an interactive session and draws its progress bar on stdout, which the
    installed `taplog` command never does."""
    folder = tempfile.mkdtemp(prefix="taplog-real-day-script-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    script = Path(folder) / "run_taplog.py"  # not taplog.py: that would hide the package
    script.write_text(TAPLOG + "\n")
    return str(script)


def run_command(label: str, args: list[str], data_dir: Path) -> Reading:
    command = [PYTHON, taplog_script(), *args[:1], "--data-dir", str(data_dir), *args[1:]]
    timed = TIME.exists()
    if timed:
        command = [str(TIME), "-v", *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        done = subprocess.run(
            command, cwd=ROOT, env=environment(), stdout=out, stderr=err, timeout=TIMEOUT
        )
        seconds = time.perf_counter() - started
        printed = out.tell()
        err.seek(0)
        errors = err.read()
    if timed and (found := _MAX_RSS.search(errors)):
        peak: float | None = int(found.group(1)) / 1024
    else:
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        peak = after / 1024 if after > before else None  # not above an earlier child's
    return Reading(label, seconds, peak, printed, done.returncode)


def fastest(readings: list[Reading]) -> Reading:
    """One reading of several runs: the fastest time, the largest peak, any failure."""
    best = min(readings, key=lambda r: r.seconds)
    peaks = [r.peak_mb for r in readings if r.peak_mb is not None]
    failed = [r.status for r in readings if r.status not in (0, 200)]
    status = failed[0] if failed else best.status
    return Reading(best.what, best.seconds, max(peaks, default=None), best.output_bytes, status)


def run_ui(data_dir: Path, session: str, repeats: int = 1) -> list[Reading]:
    """The UI's sessions list, session page and chat, each timed; peak RSS after all."""
    port = free_port()
    command = [PYTHON, taplog_script(), "ui", "--data-dir", str(data_dir), "--port", str(port)]
    ui = Service(command, port, "/ui/", wait=60)
    out = []
    try:
        base = f"{ui.url}/ui/api"
        for label, path in (
            ("UI /ui/api/sessions", "/sessions"),
            ("UI /ui/api/sessions/S", f"/sessions/{session}"),
            ("UI /ui/api/sessions/S/chat", f"/sessions/{session}/chat"),
        ):
            runs = []
            for _ in range(repeats):
                started = time.perf_counter()
                answer = httpx.get(base + path, timeout=TIMEOUT)
                seconds = time.perf_counter() - started
                runs.append(Reading(label, seconds, None, len(answer.content), answer.status_code))
            out.append(fastest(runs))
        peak = ui.rss_mb("VmHWM")
        for reading in out:
            reading.peak_mb = peak
    finally:
        ui.stop()
    return out


def read_all(data_dir: Path, session: str, repeats: int = 1) -> list[Reading]:
    """Every reading command and UI endpoint on `data_dir`, in the issue's order."""
    readings = []
    for label, args in commands(session):
        if label == "taplog compact":
            readings += run_ui(data_dir, session, repeats)  # before compacting, as the CLI's
        times = 1 if label == "taplog compact" else repeats
        readings.append(fastest([run_command(label, args, data_dir) for _ in range(times)]))
    return readings
