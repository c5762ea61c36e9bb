"""A day's calls on disk: one JSONL line per call, in the order they are sent.

Each line is `{"thread", "kind", "path", "headers", "body"}`, the body the request's
JSON exactly as sent (compact, as the CLI serialises it). Reading a line back and
serialising its body with orjson gives the same bytes, so a file can stand in for the
generator (`run --bodies FILE`), including a real CLI's recording made by cli_check.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from bench.real_day.day import CONTEXT_TOKENS, Day
from bench.real_day.thread import Call, Facts


def generate(calls: int, seed: int, context_tokens: int = CONTEXT_TOKENS) -> Iterator[Call]:
    return itertools.islice(Day(seed, context_tokens).calls(), calls)


def write(calls: Iterable[Call], path: Path) -> dict[str, Any]:
    """Write the calls as JSONL; returns their summary."""
    seen: list[Facts] = []
    with path.open("wb") as out:
        for call in calls:
            out.write(call.line())
            seen.append(call.facts())
    return summary(seen)


def load(path: Path) -> Iterator[Call]:
    with path.open("rb") as lines:
        for line in lines:
            row = orjson.loads(line)
            body = orjson.dumps(row["body"])
            stream = bool(row["body"].get("stream"))
            yield Call(row["thread"], row["kind"], row["headers"], body, stream, row["path"])


def summary(calls: list[Facts]) -> dict[str, Any]:
    """Counts and sizes: what `generate` reports."""
    sizes = [c.size for c in calls]
    return {
        "calls": len(calls),
        "bytes": sum(sizes),
        "mean": sum(sizes) / len(sizes),
        "median": sorted(sizes)[len(sizes) // 2],
        "max": max(sizes),
        "threads": dict(Counter(c.thread.split("-")[0] for c in calls)),
        "sub_agents": len({c.thread for c in calls if c.thread.startswith("agent-")}),
        "kinds": dict(Counter(c.kind for c in calls)),
        "streamed": sum(c.stream for c in calls),
    }


def print_summary(found: dict[str, Any]) -> None:
    print(
        f"calls: {found['calls']:,} ({found['streamed']:,} streamed)\n"
        f"bodies: {found['bytes'] / 1e6:,.1f} MB in all, mean {found['mean'] / 1e3:,.1f} KB, "
        f"largest {found['max'] / 1e3:,.1f} KB\n"
        f"per thread: {found['threads']} ({found['sub_agents']} sub-agents)\n"
        f"per kind: {found['kinds']}"
    )
