"""How fast the web UI answers, and how soon an open page hears of a new call.

    .venv/bin/python bench/ui_bench.py --data-dir /tmp/taplog-synth [--events 100000]

Endpoints: the median time of each JSON endpoint a page loads (the sessions
list, the largest session, one of its calls, the overview) over a synthetic
history (bench/synth_history.py, generated when DIR holds no logs), read from
the JSONL logs, then again after compacting every session into Parquet.
Live: `--calls` OpenAI SDK calls through taplog (`ui` on, fsync interval) to
the tests' fake vendor, each timed from the SDK's return to the arrival of
its `llm.response` on the session's event stream (the page's trigger to
redraw). Prints the figures; nothing is written.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import openai

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import bench.tree  # noqa: E402, F401  (`import taplog` loads this tree)
from bench import synth_history  # noqa: E402
from taplog.proxy.app import create_app  # noqa: E402
from taplog.proxy.config import Settings  # noqa: E402
from taplog.proxy.runner import ProxyRunner  # noqa: E402
from taplog.recorder.query.compaction import COMPACTED_DIR, compact  # noqa: E402
from taplog.recorder.query.connect import connect  # noqa: E402
from taplog.recorder.store.lognames import session_logs  # noqa: E402
from tests.fakes.servers import ServerThread  # noqa: E402
from tests.fakes.vendor import FakeVendor  # noqa: E402


def _median_ms(url: str, repeats: int) -> float:
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = httpx.get(url, timeout=600)
        response.raise_for_status()
        runs.append((time.perf_counter() - started) * 1000)
    return statistics.median(runs)


def endpoints(data_dir: Path, repeats: int) -> dict[str, float]:
    servers = ServerThread()
    try:
        settings = Settings(data_dir=data_dir, ui=True, compact_after_minutes=0)
        base = servers.serve(create_app(settings), ProxyRunner, header_timeout=60) + "/ui/api"
        con = connect(data_dir)
        (biggest,) = con.execute("SELECT session FROM sessions ORDER BY events DESC").fetchone()
        (exchange,) = con.execute(
            "SELECT exchange FROM llm_calls WHERE session = ? LIMIT 1", [biggest]
        ).fetchone()
        return {
            "sessions list (200 newest)": _median_ms(f"{base}/sessions", repeats),
            "sessions, text search": _median_ms(f"{base}/sessions?text=weather", repeats),
            "the largest session": _median_ms(f"{base}/sessions/{biggest}", repeats),
            "one call of it": _median_ms(f"{base}/sessions/{biggest}/calls/{exchange}", repeats),
            "overview": _median_ms(f"{base}/overview", repeats),
        }
    finally:
        servers.stop()


def live(calls: int) -> list[float]:
    """Milliseconds from each call's return to its answer on the event stream."""
    servers = ServerThread()
    heard: dict[int, float] = {}
    try:
        vendor = FakeVendor()
        vendor.url = servers.serve(vendor.app(), handler_cancellation=True)
        data_dir = Path(tempfile.mkdtemp(prefix="taplog-ui-bench-"))
        settings = Settings(
            data_dir=data_dir, openai_base=f"{vendor.url}/v1", anthropic_base=vendor.url, ui=True
        )
        url = servers.serve(create_app(settings), ProxyRunner, header_timeout=60)
        client = openai.OpenAI(base_url=f"{url}/s/bench/v1", api_key="sk-bench", max_retries=0)

        def ask() -> None:
            client.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
            )

        ask()  # the session exists: the stream can open
        answers = 1

        def listen() -> None:
            events = f"{url}/ui/api/sessions/bench/events?from=0"
            seen = 0
            with httpx.stream("GET", events, timeout=60) as stream:
                for line in stream.iter_lines():
                    if line.startswith("data: ") and '"type":"llm.response"' in line:
                        seen += 1
                        heard[seen] = time.perf_counter()
                        if seen == calls + 1:
                            return

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        gaps = []
        for _ in range(calls):
            time.sleep(0.3)  # a page is idle between calls, as it is between an agent's turns
            ask()
            answers += 1
            returned = time.perf_counter()
            while answers not in heard:
                time.sleep(0.001)
            gaps.append((heard[answers] - returned) * 1000)
        listener.join(5)
        return gaps
    finally:
        servers.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    if not session_logs(args.data_dir / "sessions"):
        synth_history.main(["--data-dir", str(args.data_dir), "--events", str(args.events)])
    logs = sum(p.stat().st_size for p in session_logs(args.data_dir / "sessions"))
    print(f"endpoints over {args.data_dir} ({logs / 2**20:.0f} MiB of logs), median ms:")
    compacted = (args.data_dir / COMPACTED_DIR).exists()  # then the logs are never read alone
    before = {} if compacted else endpoints(args.data_dir, args.repeats)
    compact(args.data_dir, 0)
    after = endpoints(args.data_dir, args.repeats)
    print(f"  {'':<48} {'JSONL':>8} {'compacted':>10}")
    for name, ms in after.items():
        print(f"  {name:<48} {before.get(name, float('nan')):8.1f} {ms:10.1f}")
    gaps = sorted(live(args.calls))
    p95 = gaps[int(0.95 * (len(gaps) - 1))]
    print(
        f"live: call returned -> answer on the event stream, {len(gaps)} calls: "
        f"p50 {statistics.median(gaps):.0f} ms, p95 {p95:.0f} ms, max {gaps[-1]:.0f} ms"
    )


if __name__ == "__main__":
    main()
