"""What each reading command and UI answer costs on a data dir: time, peak RSS, bytes
printed or answered, and the request bodies it asked SQL for (issue #31, item 2).

    .venv/bin/python bench/reading_cost.py --data-dir DIR [--session S] [--tree DIR]

`bench/real_day run --keep` leaves a day's data dir to read. Each command runs as its
own process (`/usr/bin/time -v` for its peak RSS), the UI as one `taplog ui` process
(its VmHWM after all of its answers), with the code of this tree or of `--tree` (an
exported tree, `git archive REV | tar -x -C DIR`, to read the same data dir before and
after a change). Request bodies are counted from the DEBUG lines of
`recorder.query.requests` (`request bodies read: N (B bytes)`); a tree without them
says `-`. Each reading is done `--repeats` times: the fastest time, the largest peak.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import PYTHON, ROOT, free_port
from bench.tree import environment
from taplog.recorder.store.lognames import session_logs, session_name

TIME = Path("/usr/bin/time")
TIMEOUT = 1800
# `taplog`, with the reading tools' DEBUG lines on stderr
TAPLOG = (
    "import logging, sys; logging.basicConfig(level=logging.WARNING, format='%(message)s'); "
    "logging.getLogger('taplog.query').setLevel(logging.DEBUG); "
    "from taplog.proxy.cli.main import main; sys.argv[0] = 'taplog'; main()"
)
_READ = re.compile(rb"request bodies read: (\d+) \((\d+) bytes\)")
_MAX_RSS = re.compile(rb"Maximum resident set size \(kbytes\): (\d+)")
SQL = "SELECT count(*), sum(input_tokens) FROM llm_calls"


@dataclass
class Cost:
    what: str
    seconds: float
    peak_mb: float | None
    out_bytes: int
    bodies: int | None  # None: the tree does not say
    body_bytes: int | None
    status: int = 0


def _bodies(log: bytes) -> tuple[int, int]:
    found = [(int(n), int(b)) for n, b in _READ.findall(log)]
    return sum(n for n, _ in found), sum(b for _, b in found)


def _script() -> str:
    folder = tempfile.mkdtemp(prefix="taplog-reading-cost-")
    script = Path(folder) / "run_taplog.py"  # a file: DuckDB draws no progress bar then
    script.write_text(TAPLOG + "\n")
    return str(script)


def command(label: str, args: list[str], data_dir: Path, tree: Path, script: str) -> Cost:
    line = [PYTHON, script, args[0], "--data-dir", str(data_dir), *args[1:]]
    if TIME.exists():
        line = [str(TIME), "-v", *line]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        done = subprocess.run(
            line, cwd=tree, env=environment(tree), stdout=out, stderr=err, timeout=TIMEOUT
        )
        seconds = time.perf_counter() - started
        printed = out.tell()
        err.seek(0)
        log = err.read()
    peak = _MAX_RSS.search(log)
    bodies, size = _bodies(log)
    mb = int(peak.group(1)) / 1024 if peak else None
    return Cost(label, seconds, mb, printed, bodies, size, done.returncode)


UI_PATHS = (
    ("UI /ui/api/sessions", "/sessions"),
    ("UI /ui/api/sessions?limit=20", "/sessions?limit=20"),
    ("UI /ui/api/sessions/S", "/sessions/{session}"),
    ("UI /ui/api/sessions/S/chat", "/sessions/{session}/chat"),
)


def ui(data_dir: Path, session: str, tree: Path, script: str, repeats: int) -> list[Cost]:
    """The UI's answers from one `taplog ui`; its peak RSS after all of them."""
    port = free_port()
    line = [PYTHON, script, "ui", "--data-dir", str(data_dir), "--port", str(port)]
    base = f"http://127.0.0.1:{port}/ui/api"
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            line, cwd=tree, env=environment(tree), stdout=subprocess.DEVNULL, stderr=log
        )
        try:
            _wait(base + "/overview", process)
            costs = [
                _fastest(
                    [_ask(label, base + path.format(session=session), log) for _ in range(repeats)]
                )
                for label, path in UI_PATHS
            ]
            status = Path(f"/proc/{process.pid}/status").read_text()
        finally:
            process.terminate()
            process.wait(10)
    found = re.search(r"VmHWM:\s+(\d+) kB", status)
    for cost in costs:
        cost.peak_mb = int(found.group(1)) / 1024 if found else None
    return costs


def _ask(label: str, url: str, log: IO[bytes]) -> Cost:
    """One answer: its time, its size, and the bodies the UI's log says it read."""
    log.seek(0, os.SEEK_END)
    mark = log.tell()
    started = time.perf_counter()
    answer = httpx.get(url, timeout=TIMEOUT)
    seconds = time.perf_counter() - started
    time.sleep(0.05)  # the log line is written before the answer; let it land
    log.seek(mark)
    bodies, size = _bodies(log.read())
    return Cost(label, seconds, None, len(answer.content), bodies, size, answer.status_code)


def _wait(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=120)
            return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit(f"taplog ui never came up at {url}")


def _fastest(runs: list[Cost]) -> Cost:
    best = min(runs, key=lambda c: c.seconds)
    peaks = [c.peak_mb for c in runs if c.peak_mb is not None]
    best.peak_mb = max(peaks, default=None)
    return best


def _session(data_dir: Path) -> str:
    logs = sorted(session_logs(data_dir / "sessions"), key=lambda p: p.stat().st_size)
    if not logs:
        raise SystemExit(f"no session logs in {data_dir}")
    return session_name(logs[-1])  # the largest


def measure(data_dir: Path, session: str, tree: Path, repeats: int) -> list[Cost]:
    """Every reading; bodies None when `tree` does not log them."""
    script = _script()
    commands = [
        ("taplog sessions --limit 5", ["sessions", "--limit", "5"]),
        ("taplog show S", ["show", session]),
        ("taplog show S --messages", ["show", session, "--messages"]),
        ("taplog show S --messages --all", ["show", session, "--messages", "--all"]),
        (f'taplog sql "{SQL}"', ["sql", SQL]),
    ]
    costs = []
    for label, args in commands:
        runs = [command(label, args, data_dir, tree, script) for _ in range(repeats)]
        costs.append(_fastest(runs))
    costs += ui(data_dir, session, tree, script, repeats)
    if not (tree / "recorder" / "query" / "requests.py").exists():
        for cost in costs:
            cost.bodies = cost.body_bytes = None
    return costs


def table(costs: list[Cost]) -> str:
    def size(n: int | None) -> str:
        if n is None:
            return "-"
        return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB" if n >= 1e3 else f"{n} B"

    lines = [
        "| reading | wall time | peak RSS | printed / answered | request bodies read |",
        "|---|---|---|---|---|",
    ]
    for c in costs:
        peak = "-" if c.peak_mb is None else f"{c.peak_mb:,.0f} MB"
        read = "-" if c.bodies is None else f"{c.bodies} ({size(c.body_bytes)})"
        failed = "" if c.status in (0, 200) else f" (exit {c.status})"
        lines.append(
            f"| `{c.what}` | {c.seconds:.2f} s{failed} | {peak} | {size(c.out_bytes)} | {read} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--session", help="the session to show (default: the largest log)")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the tree whose code reads")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    session = args.session or _session(args.data_dir)
    print(f"data dir {args.data_dir}, session {session}, tree {args.tree}")
    print(table(measure(args.data_dir, session, args.tree.resolve(), args.repeats)))


if __name__ == "__main__":
    main()
