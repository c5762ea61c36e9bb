"""How fast docs/sql.md's queries run over a large history, before and after compaction.

    .venv/bin/python bench/query_bench.py --data-dir /tmp/taplog-1m [--events 1000000]

Generates a synthetic data dir (bench/synth_history.py) if DIR holds no logs,
times each query over the JSONL logs, compacts (timed), times them again over
the Parquet segment, and writes the figures into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import bench.tree  # noqa: E402, F401  (`import taplog` loads this tree)
from bench import synth_history  # noqa: E402
from taplog.recorder.query.compaction import COMPACTED_DIR, compact  # noqa: E402
from taplog.recorder.query.connect import connect, query  # noqa: E402
from taplog.recorder.store.lognames import iter_lines, session_logs  # noqa: E402

QUESTIONS = {
    "Which sessions cost most?": "SELECT session, calls, tool_calls, tool_errors, cost_usd "
    "FROM sessions ORDER BY cost_usd DESC NULLS LAST LIMIT 10",
    "Which tools fail?": "SELECT tool_name, count(*) AS runs, count(*) FILTER (WHERE is_error) "
    "AS errors, round(avg(duration_ms), 1) AS avg_ms FROM tool_calls GROUP BY 1 "
    "ORDER BY errors DESC, runs DESC",
    "How slow is each model?": "SELECT response_model, count(*) AS calls, "
    "round(median(latency_ms), 2) AS p50_ms, round(quantile_cont(latency_ms, 0.95), 2) AS p95_ms "
    "FROM llm_calls WHERE status = 200 GROUP BY 1 ORDER BY 1",
    "Which calls failed or could not be priced?": "SELECT api, request_model, outcome, status, "
    "count(*) FROM llm_calls WHERE outcome <> 'ok' OR cost_usd IS NULL GROUP BY ALL",
    "What did the model see at each step?": "SELECT seq, data->'body'->'messages'->-1 "
    "FROM events WHERE session = (SELECT max(session) FROM events) AND type = 'llm.request' "
    "ORDER BY seq LIMIT 3",
    "Cost per day and model": "SELECT date_trunc('day', started_at) AS day, response_model, "
    "sum(cost_usd) FROM llm_calls GROUP BY ALL",
}


def _timed(data_dir: Path, repeats: int) -> dict[str, float]:
    """Median seconds per question, each on a fresh connection as `taplog sql` opens one."""
    times = {}
    for question, sql in QUESTIONS.items():
        runs = []
        for _ in range(repeats):
            started = time.perf_counter()
            query(connect(data_dir), sql).fetchall()
            runs.append(time.perf_counter() - started)
        times[question] = statistics.median(runs)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not session_logs(args.data_dir / "sessions"):
        synth_history.main(["--data-dir", str(args.data_dir), "--events", str(args.events)])
    shutil.rmtree(args.data_dir / COMPACTED_DIR, ignore_errors=True)
    events = sum(1 for p in session_logs(args.data_dir / "sessions") for _ in iter_lines(p))

    before = _timed(args.data_dir, 1)  # minutes per question over JSONL: once is enough
    started = time.perf_counter()
    compact(args.data_dir)
    compaction = time.perf_counter() - started
    after = _timed(args.data_dir, args.repeats)

    rows = [
        f"| {q} | {before[q]:.2f} | {after[q]:.2f} | {'PASS' if after[q] < 1 else 'FAIL'} |"
        for q in QUESTIONS
    ]
    report = "\n".join(
        [
            f"## Queries over {events:,} events",
            "",
            f"`{' '.join(sys.argv)}` on {platform.machine()}, {platform.python_version()}; "
            f"compaction took {compaction:.1f} s. Seconds per query, including opening the "
            "connection (target after compaction: under 1 s):",
            "",
            "| question | JSONL logs | after compaction | < 1 s |",
            "|---|---:|---:|---|",
            *rows,
            "",
        ]
    )
    print(report)
    _write_section(HERE / "RESULTS.md", report)


def _write_section(path: Path, section: str) -> None:
    """Replace (or add) this report's section of bench/RESULTS.md."""
    title = section.splitlines()[0].split(" over ")[0]
    text = path.read_text() if path.exists() else "# Benchmark results\n\n"
    parts = text.split("\n## ")
    kept = [p for p in parts[1:] if not ("## " + p).startswith(title)]
    path.write_text(
        "\n## ".join([parts[0].rstrip("\n") + "\n", *kept]).rstrip("\n") + "\n\n" + section
    )


if __name__ == "__main__":
    main()
