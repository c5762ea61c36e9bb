"""The command line: parse the options, generate, print what was written.

python bench/synth_history.py --data-dir /tmp/synth --events 1000000 [--seed 1]
    [--sessions N] [--days 30] [--end 2026-11-30T00:00:00Z] [--workers N]
"""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bench.synth
from bench.synth.writer import generate

# The distributions the report shows, in this order.
_GROUPS = (
    "type",
    "api",
    "agent",
    "source",
    "model",
    "stream",
    "outcome",
    "status",
    "finish",
    "priced",
    "failover",
    "breaker",
    "flag",
    "tool",
    "tool_name",
    "ending",
    "clock",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(bench.synth.__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--sessions", type=int, default=None, help="default: events / 200")
    parser.add_argument("--days", type=int, default=30, help="history spans this many days")
    parser.add_argument(
        "--end", default=None, help="UTC end of the history (default: today 00:00 UTC)"
    )
    parser.add_argument("--workers", type=int, default=None, help="default: CPU count")
    args = parser.parse_args(argv)
    end = None
    if args.end:
        end = datetime.fromisoformat(args.end.replace("Z", "+00:00"))
        end = end if end.tzinfo else end.replace(tzinfo=UTC)
    result = generate(
        args.data_dir, args.events, args.seed, args.sessions, args.days, end, args.workers
    )
    print(report(result))


def report(result: dict[str, Any]) -> str:
    """Totals and speed, then each distribution, most frequent first."""
    stats: Counter = result["stats"]
    events, size, seconds = result["events"], result["bytes"], result["seconds"]
    lines = [
        f"sessions {result['sessions']:,}  events {events:,}  bytes {size:,} "
        f"({size / 2**20:.1f} MiB, {size / max(1, events):,.0f} B/event)  "
        f"seconds {seconds:.1f}  events/s {events / seconds:,.0f}",
    ]
    groups: dict[str, list[tuple[Any, int]]] = {}
    for (group, key), count in stats.items():
        groups.setdefault(group, []).append((key, count))
    for group in _GROUPS:
        items = sorted(groups.get(group, []), key=lambda kv: -kv[1])
        if items:
            lines.append(f"  {group}: " + ", ".join(f"{k}={v:,}" for k, v in items))
    return "\n".join(lines)
