"""The figures of a real-day run as the "A real day" section of bench/RESULTS.md.

`write` replaces only that section and keeps every other one, the way bench/report.py
keeps the sections it does not own (the same split on `## ` headings).
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from bench.real_day.bodies import summary
from bench.real_day.latency import Sent
from bench.real_day.reading import Reading

HEADING = "## A real day"
BANDS = ((0, 100_000, "< 100 KB"), (100_000, 500_000, "100-500 KB"), (500_000, 1 << 40, "> 500 KB"))
LABELS = {"bare": "bare proxy", "taplog": "taplog serve", "taplog-workers": "taplog --workers 2"}


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def size(n: float) -> str:
    """Bytes in the unit that reads best: B, KB or MB."""
    if n < 10_000:
        return f"{n:,.0f} B"
    return f"{n / 1e3:,.0f} KB" if n < 10e6 else mb(n)


def describe(found: dict[str, Any]) -> str:
    """One sentence: how many calls of each thread, and their bodies' sizes."""
    threads = ", ".join(f"{k} {v:,}" for k, v in sorted(found["threads"].items()))
    return (
        f"{found['calls']:,} calls ({threads}; {found['sub_agents']} sub-agents, "
        f"{found['kinds'].get('compaction', 0)} compactions; {found['streamed']:,} streamed), "
        f"request bodies {mb(found['bytes'])} in all, mean {found['mean'] / 1e3:,.0f} KB, "
        f"median {found['median'] / 1e3:,.0f} KB, largest {found['max'] / 1e3:,.0f} KB"
    )


def latency_table(sent: Sent) -> list[str]:
    lines = [
        "| added (ms) | p50 | p90 | p99 | mean | p90 by body size: "
        + " / ".join(b[2] for b in BANDS)
        + " |",
        "|---|---|---|---|---|---|",
    ]
    for name, label in LABELS.items():
        added = sent.added(name)
        bands = []
        for low, high, _ in BANDS:
            inside = [a for a, s in zip(added, sent.sizes, strict=True) if low <= s < high]
            bands.append(f"{pct(inside, 90):.2f}" if len(inside) >= 10 else "-")
        lines.append(
            f"| {label} | {pct(added, 50):.2f} | {pct(added, 90):.2f} | {pct(added, 99):.2f} | "
            f"{statistics.mean(added):.2f} | {' / '.join(bands)} |"
        )
    direct = sent.ms["direct"]
    lines.append(
        f"| (direct's own time) | {pct(direct, 50):.2f} | {pct(direct, 90):.2f} | "
        f"{pct(direct, 99):.2f} | {statistics.mean(direct):.2f} | |"
    )
    return lines


def ratios(sent: Sent) -> str:
    bare = sent.added("bare")
    parts = []
    for name in ("taplog", "taplog-workers"):
        ours = sent.added(name)
        parts.append(
            f"{LABELS[name]} / bare: p50 {pct(ours, 50) / pct(bare, 50):.1f}x, "
            f"p90 {pct(ours, 90) / pct(bare, 90):.1f}x"
        )
    return "; ".join(parts)


def storage_table(stored: dict[str, dict[str, Any]]) -> list[str]:
    names = list(stored)
    lines = ["| | " + " | ".join(LABELS[n] for n in names) + " |", "|---" * (len(names) + 1) + "|"]

    def row(label: str, cell) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(stored[n]) for n in names) + " |")

    row("raw request bodies", lambda s: mb(s["raw"]))
    row("stored: whole data dir", lambda s: mb(s["parts"]["total"]))
    for part in sorted({p for s in stored.values() for p in s["parts"]} - {"total"}):
        row(f"&nbsp;&nbsp;{part}", lambda s, p=part: size(s["parts"].get(p, 0)))
    row("**stored / raw**", lambda s: f"**{s['ratio']:.3f}x**")
    row("bytes per call", lambda s: f"{s['per_call'] / 1e3:,.1f} KB")
    row(
        "zstd -19 --long=27 of the data dir",
        lambda s: (
            "not measured"
            if s.get("zstd") is None
            else f"{mb(s['zstd'])} ({s['parts']['total'] / s['zstd']:,.0f}x smaller)"
        ),
    )
    return lines


def reading_table(readings: list[Reading]) -> list[str]:
    lines = ["| command | wall time | peak RSS | printed / answered |", "|---|---|---|---|"]
    for r in readings:
        peak = "?" if r.peak_mb is None else f"{r.peak_mb:,.0f} MB"
        failed = "" if r.status in (0, 200) else f" (exit/status {r.status})"
        lines.append(
            f"| `{r.what}` | {r.seconds:.2f} s | {peak} | {size(r.output_bytes)}{failed} |"
        )
    return lines


def render(f: dict[str, Any]) -> str:
    sent: Sent = f["sent"]
    lines = [
        HEADING,
        "",
        f"`{f['command']}` on {f['machine']}, tree {f['tree']}; whole run {f['seconds']:.0f} s "
        f"(sending {sent.seconds:.0f} s). **The machine is shared with other engineers' test "
        f"runs** (load average {f['load'][0]:.1f} before, {f['load'][1]:.1f} when reading began, "
        f"{f['load'][2]:.1f} after): absolute "
        "times move with it, ratios from the same run much less.",
        "",
        f"The day (`bench/real_day`, seed {f['seed']}): one Claude Code 2.1.197-shaped session, "
        f"{describe(summary(sent.calls))}. Sent in "
        "order, one at a time, to the fake vendor directly, through `bench/bare_proxy.py`, "
        "`taplog serve` (bench defaults: fsync interval, no auto-compaction) and `taplog serve "
        "--workers 2`, each call in an order shuffled for it (each system after each other as "
        "often); added = system minus direct for the same call. "
        f"{f['loop']}",
        "",
        *latency_table(sent),
        "",
        f"Ratios: {ratios(sent)}. Peak RSS during the day: "
        + ", ".join(f"{LABELS[n]} {v:,.0f} MB" for n, v in f["rss"].items())
        + ".",
        "",
        "Storage (the data dir after the day, against the request bodies sent):",
        "",
        *storage_table(f["stored"]),
        "",
        f"Reading the `taplog serve` data dir (session S = `{f['session']}`), each command its "
        "own process, one after the other; the UI is one `taplog ui` process, its peak RSS "
        f"read after the three answers. Each reading done {f['repeats']} times in a row "
        "(`compact` once): the fastest time, the largest peak RSS:",
        "",
        *reading_table(f["readings"]),
        "",
        *f.get("notes", []),
    ]
    return "\n".join(lines).rstrip() + "\n"


def write(path: Path, section: str) -> None:
    """Replace the section of `path` under `section`'s heading (its first line) with
    `section`; keep the others in order (a new section goes last)."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    heading = section.split("\n", 1)[0]
    parts = re.split(r"(?m)^(?=## )", text)
    index = next((i for i, p in enumerate(parts) if p.split("\n", 1)[0] == heading), None)
    if index is None:
        parts.append("\n" + section)
    else:
        parts[index] = section + "\n"
    path.write_text("".join(parts).rstrip() + "\n")
