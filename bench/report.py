"""Turns bench/run.py's figures into RESULTS.md sections with PASS/FAIL target lines.

`write` replaces only the sections named in OWNED (and the retired ones in RETIRED),
keeping every other section of RESULTS.md (queries, failover, profile findings).
"""

from __future__ import annotations

import pstats
import re
from pathlib import Path
from typing import Any

from bench.common import ROOT, p50, p99
from bench.litellm_proxy import INSTALL
from bench.load import SHAPES
from bench.offline import growth_summary

# Every system run.py can measure, in table order; LiteLLM only with the `bench` extra.
SYSTEMS = ("direct", "bare", "taplog", "taplog-always", "litellm")
OWNED = ("## Proxy overhead", "## Taplog alone", "## Storage growth", "## Profile (run.py)")
RETIRED = ("## Added latency",)
COMMAND = ".venv/bin/python bench/run.py"
CPU_KEYS = ("cpu_us", "cpu_worker_us", "cpu_recorder_us")


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _overhead(runs: dict[str, dict[str, list[float]]]) -> tuple[list[str], dict[str, float]]:
    rows, key = [], {}
    systems = [s for s in SYSTEMS if s in runs["c1"]]
    proxies = systems[1:]

    def row(label: str, values: dict[str, str]) -> None:
        rows.append(f"| {label} | " + " | ".join(values.get(s, "-") for s in systems) + " |")

    for phase, label in (("c1", "c=1"), ("c32", "c=32")):
        data = runs[phase]
        row(
            f"latency {label}, p50 / p99 (ms)",
            {s: f"{p50(data[s]):.2f} / {p99(data[s]):.2f}" for s in systems},
        )
        added = {
            s: (p50(data[s]) - p50(data["direct"]), p99(data[s]) - p99(data["direct"]))
            for s in proxies
        }
        row(
            f"added {label}, p50 / p99 (ms)",
            {s: f"{a:.2f} / {b:.2f}" for s, (a, b) in added.items()},
        )
        for s, (a, _) in added.items():
            key[f"{phase}:{s}"] = a
    ttfe = runs["ttfe"]
    row(
        "time to first event, p50 / p99 (ms)",
        {s: f"{p50(ttfe[s]):.2f} / {p99(ttfe[s]):.2f}" for s in systems},
    )
    for s in proxies:
        key[f"ttfe50:{s}"] = p50(ttfe[s]) - p50(ttfe["direct"])
        key[f"ttfe99:{s}"] = p99(ttfe[s]) - p99(ttfe["direct"])
    row(
        "added time to first event, p50 / p99 (ms)",
        {s: f"{key[f'ttfe50:{s}']:.2f} / {key[f'ttfe99:{s}']:.2f}" for s in proxies},
    )
    by_shape = {
        s: " / ".join(
            f"{p50(runs[f'ttfe:{shape}'][s]) - p50(runs[f'ttfe:{shape}']['direct']):.2f}"
            for shape in SHAPES
        )
        for s in proxies
    }
    row("added time to first event p50, " + " / ".join(SHAPES) + " (ms)", by_shape)
    gap = runs["gap"]
    row("gap between events, p99 (ms)", {s: f"{p99(gap[s]):.2f}" for s in systems})
    row("added gap p99 (ms)", {s: f"{p99(gap[s]) - p99(gap['direct']):.2f}" for s in proxies})
    rps = runs["rps64"]
    row("requests/s at c=64 (median of rounds)", {s: f"{p50(rps[s]):.0f}" for s in systems})
    cpu = {part: {s: p50(runs[part][s]) for s in systems} for part in CPU_KEYS}
    row(
        "CPU per call at c=64, all the system's processes (µs, median of rounds)",
        {s: f"{cpu['cpu_us'][s]:.0f}" for s in systems},
    )
    parted = [s for s in systems if cpu["cpu_worker_us"][s] > 0]
    row(
        "CPU per call at c=64, taplog's workers / recorder process (µs)",
        {s: f"{cpu['cpu_worker_us'][s]:.0f} / {cpu['cpu_recorder_us'][s]:.0f}" for s in parted},
    )
    for part, values in cpu.items():
        for s, value in values.items():
            key[f"{part}:{s}"] = value
    one_shot = runs["rps64-one-shot"]
    row(
        "requests/s at c=64, one-call sessions (median of rounds)",
        {s: f"{p50(one_shot[s]):.0f}" for s in systems},
    )
    if "p99_under_20" in runs:
        best = runs["p99_under_20"]
        row("highest concurrency with p99 < 20 ms", {s: f"{best[s][0]:.0f}" for s in systems})
    for s in systems:
        key[f"rps:{s}"] = p50(rps[s])
        key[f"gap99:{s}"] = p99(gap[s]) - p99(gap["direct"])
    head = ["| figure | " + " | ".join(systems) + " |", "|---|" + "---:|" * len(systems)]
    return head + rows, key


def _ratio(
    label: str, mine: float, other: float, limit: float, most: bool = True, to: str = "bare"
) -> str:
    """taplog's figure over system `to`'s, against `limit` (at most, or at least)."""
    sign = "<=" if most else ">="
    if other <= 0:  # a difference of two noisy p99s: no ratio to take
        return (
            f"FAIL  {label}: taplog {mine:.3f} / {to} {other:.3f}: no ratio, {to}'s figure "
            f"is within noise ({sign} {limit}x wanted)"
        )
    ratio = mine / other
    ok = ratio <= limit if most else ratio >= limit
    return (
        f"{_verdict(ok)}  {label}: taplog {mine:.3f} / {to} {other:.3f} = {ratio:.2f}x "
        f"({sign} {limit}x)"
    )


def _against_litellm(key: dict[str, float]) -> list[str]:
    """Issue 9's two targets against LiteLLM's proxy, when it was measured."""
    if "rps:litellm" not in key:
        return [f"SKIP  against LiteLLM's proxy: not measured (install it: `{INSTALL}`)"]
    return [
        _ratio(
            "added p50 latency, c=1 (ms), against LiteLLM",
            key["c1:taplog"],
            key["c1:litellm"],
            0.25,
            to="litellm",
        ),
        _ratio(
            "throughput at c=64 (req/s), against LiteLLM",
            key["rps:taplog"],
            key["rps:litellm"],
            3,
            most=False,
            to="litellm",
        ),
    ]


def _targets(key: dict[str, float], f: dict[str, Any]) -> list[str]:
    ready = p50(f["ready"])
    return [
        _ratio("added p50 latency, c=1 (ms)", key["c1:taplog"], key["c1:bare"], 1.2),
        _ratio("added p50 latency, c=32 (ms)", key["c32:taplog"], key["c32:bare"], 1.2),
        _ratio("throughput at c=64 (req/s)", key["rps:taplog"], key["rps:bare"], 0.7, most=False),
        _ratio("added time to first event p50 (ms)", key["ttfe50:taplog"], key["ttfe50:bare"], 1.3),
        _ratio("added time to first event p99 (ms)", key["ttfe99:taplog"], key["ttfe99:bare"], 1.5),
        f"{_verdict(key['gap99:taplog'] <= 1.0)}  added gap between events p99: "
        f"{key['gap99:taplog']:.2f} ms (<= 1.0)",
        _ratio(
            "CPU per call at c=64, the workers (µs)",
            key["cpu_worker_us:taplog"] or key["cpu_us:taplog"],
            key["cpu_us:bare"],
            1.3,
        ),
        _ratio(
            "CPU per call at c=64, all processes (µs)", key["cpu_us:taplog"], key["cpu_us:bare"], 2
        ),
        *_against_litellm(key),
        f"{_verdict(f['pss_idle'] <= 120)}  idle memory of all processes after the load: "
        f"{f['pss_idle']:.1f} MB PSS ({f['rss_idle']:.1f} MB RSS, shared pages counted in "
        "each) (<= 120)",
        f"{_verdict(ready <= 1)}  start to ready, median of {len(f['ready'])}: "
        f"{ready:.2f} s (<= 1)",
        f"{_verdict(f['recorder'] >= 50_000)}  recorder alone: {f['recorder']:,.0f} events/s "
        "(>= 50,000)",
    ]


def _held(f: dict[str, Any]) -> list[str]:
    lines = []
    for name, (count, held, failed) in f["held"].items():
        gaps = [g for s in held for g in s.gaps]
        stalls = sum(1 for g in gaps if g > 500)
        seen = sum(s.events for s in held)
        line = (
            f"{name}: {count} concurrent streams (40 events 50 ms apart): {len(held)} "
            f"completed, {failed} failed; gap p50 {p50(gaps):.1f} ms, p99 {p99(gaps):.1f} ms, "
            f"max {max(gaps):.1f} ms, {stalls} gaps over 500 ms; events seen {seen:,}"
        )
        if name == "taplog":
            logged_streams, logged_events = f["held_log"]
            ok = failed == 0 and stalls == 0 and logged_streams == count
            ok = ok and logged_events == seen
            line = (
                f"{_verdict(ok)}  {line}, in the log {logged_events:,} over "
                f"{logged_streams} recorded answers"
            )
        lines.append(line)
    return lines


def _profile(stats: pstats.Stats, top: int = 15) -> list[str]:
    entries = stats.stats  # type: ignore[attr-defined]
    idle = sum(v[2] for k, v in entries.items() if "epoll" in k[2])
    total = stats.total_tt - idle  # type: ignore[attr-defined]

    def name(func: tuple[str, int, str]) -> str:
        path, line, fn = func
        path = re.sub(r".*/(site-packages|lib/python3\.\d+)/", "", path)
        path = path.removeprefix(f"{ROOT}/")
        return f"{fn} ({path}:{line})"

    busy = [kv for kv in entries.items() if "epoll" not in kv[0][2]]
    by_self = sorted(busy, key=lambda kv: kv[1][2], reverse=True)[:top]
    own = [kv for kv in busy if re.search(r"/(proxy|recorder)/", kv[0][0])]
    by_cum = sorted(own, key=lambda kv: kv[1][3], reverse=True)[:top]
    lines = [
        f"Event-loop thread of `taplog serve` under cProfile, profiling switched on after "
        f"start-up: {total:.1f} s busy ({idle:.1f} s waiting in epoll left out); "
        "percentages are of the busy time.",
        "",
        "Most own time (tottime):",
        "",
        "| function | calls | own s | own % | cum s |",
        "|---|---:|---:|---:|---:|",
    ]
    for func, (_, calls, tt, ct, _) in by_self:
        lines.append(f"| `{name(func)}` | {calls} | {tt:.2f} | {100 * tt / total:.1f} | {ct:.2f} |")
    lines += [
        "",
        "taplog's own functions by cumulative time:",
        "",
        "| function | calls | cum s | cum % |",
        "|---|---:|---:|---:|",
    ]
    for func, (_, calls, _, ct, _) in by_cum:
        lines.append(f"| `{name(func)}` | {calls} | {ct:.2f} | {100 * ct / total:.1f} |")
    return lines


def _litellm_note(litellm: dict[str, Any] | None) -> str:
    if litellm is None:
        return f"LiteLLM's proxy: not measured (`litellm[proxy]` is not installed: `{INSTALL}`)."
    return (
        f"litellm: LiteLLM's proxy server {litellm['version']} (`litellm --config`, one "
        "uvicorn worker, no database, no master key, telemetry off, its default logging), "
        "routing `gpt-4.1` to the fake's /v1 as an OpenAI model and `claude-sonnet-4-6` to the "
        "fake as an Anthropic model; the same calls and all three stream shapes go through it. "
        f"It was ready {litellm['ready']:.1f} s after start and held {litellm['rss']:.0f} MB "
        "RSS after the rounds."
    )


def render(f: dict[str, Any]) -> str:
    table, key = _overhead(f["runs"])
    lines = [
        "## Proxy overhead",
        "",
        f"`{COMMAND}` on {f['machine']}; whole run {f['seconds']:.0f} s. Systems measured "
        f"in the same run, {f['rounds']} rounds going round them in turn: direct to the fake "
        "vendor, `bench/bare_proxy.py` (streams through, records nothing: the floor), "
        "`taplog serve` (fsync interval) and `taplog serve --fsync always`. Added = the "
        "system's figure minus direct's from the same rounds. Non-stream: short Chat calls "
        "from agents, each working through tasks of 8 turns that resend the transcript so "
        "far plus a new message, as agents do (c=1: 60 per round; c=32: 32 agents x 8; "
        "c=64: 64 agents for 1.5 s); the one-call sessions row sends unrelated one-message "
        "prompts instead, each a new session for taplog. Streams: 20 events 5 ms apart after a "
        "20 ms time to first byte, Chat, Responses and Anthropic shapes in turn, 6 at once, "
        "5 each per round. " + _litellm_note(f.get("litellm")),
        "",
        *table,
        "",
        "### Targets",
        "",
        "```",
        *_targets(key, f),
        "```",
        "",
        "## Taplog alone",
        "",
        "```",
        *_held(f),
        f"RSS: {f['rss_start']:.1f} MB at start, {f['rss_idle']:.1f} MB idle after the load, "
        f"peak {f['rss_peak']:.1f} MB",
        "start to ready (s): "
        + ", ".join(f"{t:.2f}" for t in f["ready"])
        + f" (median {p50(f['ready']):.2f}; {f['ready_in_run']:.2f} while 3 others started)",
        *(
            f"recorder alone (Recorder + EventRecord, {label}): {rate:,.0f} events/s"
            for label, rate in f["recorder_variants"].items()
        ),
        f"disk per short non-streaming call: {f['disk_per_call']:,.0f} bytes",
        "log bytes after the run: "
        + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in f["disk_run"].items()),
        "```",
        "",
        "## Storage growth",
        "",
        "One session of 200 turns through `taplog serve`; each turn resends the whole "
        "transcript plus a ~230-byte user message (and the previous answers). Bytes are the "
        "log lines of each turn's exchange, plus any blob they point at first. The log stores "
        "each request's history as a delta on the one before (`recorder/store/deltas.py`).",
        "",
        "```",
        *growth_summary(f["growth"]),
        "```",
        "",
        "## Profile (run.py)",
        "",
        *_profile(f["profile"]),
    ]
    return "\n".join(lines) + "\n"


def write(path: Path, generated: str) -> None:
    """Replace the owned sections of `path` with `generated`, keep the others."""
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    parts = re.split(r"(?m)^(?=## )", text)
    kept = [p for p in parts if not p.startswith(OWNED + RETIRED)]
    head, rest = kept[0], kept[1:]
    path.write_text(head.rstrip() + "\n\n" + generated + "\n" + "".join(rest).rstrip() + "\n")
