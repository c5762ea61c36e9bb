"""The generator against the real Claude Code, or the real Codex: the same measurements on
both.

    .venv/bin/python bench/real_day check-cli [--cli claude|codex] [--steps N] [--seed 1]

The pinned CLI (`tests/fakes/clis.py` finds it; `TAPLOG_CLIS` names another
`node_modules/.bin`) runs `claude -p` through `taplog serve` against the tests' fake
vendor, working through a `!plan=` of `--steps` tool steps: shell commands, and now and
then two sub-agents side by side (`Agent+Agent`), each with a plan of its own. Two
things are changed in the fake, in its own process only, so that the CLI's context grows
as a real one does: its `Bash` step runs `sh next.sh`, which prints the next of a set of
files sized as the generator sizes tool results (100 B to 50 KB, log-uniform), and its
`Agent` step's prompt plans `AGENT_STEPS` shell commands and asks for thinking. The fake
records every request body as the CLI sent it (`bodies.py`'s JSONL).

Codex (`codex exec`, OpenAI Responses) runs a plan of shell steps the same way (its
`exec_command` runs the same script). It compacts its context at about 950 KB against
the fake's token counts (a 258,400-token window, which its config does not move for its
model): it asks the model for a summary, then starts again from its first messages and
that summary. The fake's plan is counted in the turns of the history it is sent, so a
third change carries the count across: the fake's summary says how many steps were done.
A step makes one call, where Claude Code's make about 2.6 (sub-agents, side calls): its
default of 1,000 steps makes about as many calls, with 8 compactions.

Then the recording and two generated days of the same number of calls each go through
`measure.measure` (direct, bare, taplog, taplog --workers 2; storage; reading), and
the sets of figures are printed side by side: storage ratio, bytes per call, body
growth per main-agent call, added latency, reading times.

400 steps make about 1,050 calls: a p90 over them moves less from run to run than over
the 313 calls of 120 steps. The CLI (Opus with its 1M-token context) does not compact
within them, where the generator compacts at 300k tokens: its bodies grow to about 2 MB
against the generator's 1.2 MB, and the longer the recording, the further its storage
ratio falls below the generator's. Codex compacts sooner than the generator. So the
second generated day compacts where the CLI did, or would have (`cli_context`: at the
largest context it sent): the generator against the CLI under the same conditions.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.common import PYTHON, Service, free_port, settle, start_taplog
from bench.real_day import bodies, measure, report, storage, texts
from bench.real_day.day import BYTES_PER_TOKEN
from bench.real_day.thread import Facts
from bench.synth.vocabulary import pools

AGENT_STEPS = 8
STEPS = {"claude": 400, "codex": 1000}  # each makes about a thousand calls (see the module)
# The CLI then labels each of the main agent's tool batches with a side call, as hosts
# that show those labels have it do; the side calls interleave as in the session.
SUMMARIES = {"CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES": "1"}
AGENT_EVERY = 28  # main steps between two sub-agents (the generator: 1 turn in ~28)
FAKE = """
import re
import sys
import orjson
from aiohttp import web
from tests.fakes import vendor

port, capture, command, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
vendor._ARGS["Bash"] = {"command": command, "description": "Show the next output"}
vendor._ARGS["exec_command"] = {"cmd": command}  # Codex's shell
vendor._ARGS["Agent"] = {
    "description": "Look around",
    "prompt": "Run the shell commands, then report. !thinking !plan=" + ",".join(["Bash"] * steps),
    "subagent_type": "general-purpose",
}
out = open(capture, "ab")
COMPACTION = "CONTEXT CHECKPOINT COMPACTION"  # in the prompt of Codex's compaction request
DONE = re.compile(r"Steps done: (\\d+)")
responses_transcript = vendor.Responses.transcript


# Codex's plan goes on across its compactions: its summary says how many steps were done
# (the history they were in is gone), and a history that carries one counts them.
def transcript(self, body):
    tr = responses_transcript(self, body)
    tr.turns += max((int(m.group(1)) for u in tr.users if (m := DONE.search(u))), default=0)
    if tr.users and COMPACTION in tr.users[-1]:
        tr.users, tr.turns = [f"Steps done: {tr.turns}"], 0
    return tr


vendor.Responses.transcript = transcript


@web.middleware
async def record(request, handler):
    raw = await request.read()
    if request.method == "POST" and raw:
        agent = request.headers.get("x-claude-code-agent-id")
        body = orjson.loads(raw)
        side = not body.get("tools")  # side calls carry no tools (a tool-use label)
        thread = f"agent-{agent}" if agent else ("side" if side else "main")
        kind = "summary" if side else thread.split("-")[0]
        headers = {k.lower(): v for k, v in request.headers.items() if k.lower() not in
                   ("host", "content-length", "connection")}
        head = orjson.dumps({"thread": thread, "kind": kind, "path": request.path_qs,
                             "headers": headers})
        out.write(head[:-1] + b',"body":' + raw + b"}\\n")
        out.flush()
    return await handler(request)


app = vendor.FakeVendor().app()
app.middlewares.append(record)
web.run_app(app, host="127.0.0.1", port=int(port), print=None)
"""


def scratch_files(folder: Path, count: int, seed: int) -> str:
    """`count` outputs sized as the generator's tool results, and the script that prints
    the next one each time it runs; returns the command that runs it."""
    rng, words = random.Random(f"taplog-real-day-cli/{seed}"), pools(seed)
    (folder / "out").mkdir(parents=True)
    for i in range(count):
        text = texts.command_output(rng, texts.log_uniform(rng), words)
        (folder / "out" / f"{i}.txt").write_text(text)
    script = folder / "next.sh"
    counter = folder / "counter"
    script.write_text(
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n + 1)) > {counter}\n"
        f"cat {folder}/out/$((n % {count})).txt\n"
    )
    return f"sh {script}"


def plan(steps: int) -> str:
    return ",".join(
        "Agent+Agent" if i % AGENT_EVERY == AGENT_EVERY // 2 else "Bash" for i in range(steps)
    )


def record_cli(folder: Path, steps: int, seed: int, cli: str = "claude") -> Path:
    """Run the real CLI through taplog against the recording fake; the recording's path."""
    command = scratch_files(folder, steps * 3, seed)
    capture = folder / "cli.jsonl"
    port = free_port()
    fake = Service(
        [PYTHON, "-c", FAKE, str(port), str(capture), command, str(AGENT_STEPS)], port, "/v1/models"
    )
    try:
        data = folder / "data"
        taplog = start_taplog(str(data), fake.url)
        try:
            (run_codex if cli == "codex" else run_claude)(folder, taplog.url, steps)
            settle(data)
        finally:
            taplog.stop()
    finally:
        fake.stop()
    return capture


def run_claude(folder: Path, base_url: str, steps: int) -> None:
    """`claude -p` with the plan, as tests/fakes/clis.py runs it (no telemetry, no
    updates), in a scratch home and working directory; an error unless it exits 0."""
    from tests.fakes.clis import CLAUDE, QUIET
    from tests.fakes.keys import ANTHROPIC_KEY

    if not CLAUDE.exists():
        raise SystemExit(f"no Claude Code CLI at {CLAUDE}: set TAPLOG_CLIS (tests/fakes/clis.py)")
    (folder / "work").mkdir()
    (folder / "home").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(folder / "home"), **QUIET, **SUMMARIES}
    env |= {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": ANTHROPIC_KEY}
    prompt = f"Run the shell commands, then report what they printed. !thinking !plan={plan(steps)}"
    argv = [str(CLAUDE), "-p", prompt, "--output-format", "json"]
    done = subprocess.run(
        [*argv, "--allowedTools", "Bash", "Agent"],
        cwd=folder / "work",
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise SystemExit(f"claude failed: {done.stdout[-1000:]} {done.stderr[-1000:]}")


def run_codex(folder: Path, base_url: str, steps: int) -> None:
    """`codex exec` with a plan of `steps` shell steps, as tests/fakes/clis.py runs it, its
    commands unsandboxed (the script keeps its count beside it, outside the workspace)."""
    from tests.fakes.clis import CODEX
    from tests.fakes.clis import run_codex as codex_exec

    if not CODEX.exists():
        raise SystemExit(f"no Codex CLI at {CODEX}: set TAPLOG_CLIS (tests/fakes/clis.py)")
    prompt = "Run the shell commands, then report what they printed. !plan=" + ",".join(
        ["exec_command"] * steps
    )
    codex_exec(f"{base_url}/v1", folder, prompt=prompt, sandbox="danger-full-access", timeout=900)


def growth(calls: list[Facts]) -> float:
    """Mean bytes a main-agent request adds to the one before it (compactions left out)."""
    sizes = [c.size for c in calls if c.thread == "main" and c.kind == "main"]
    steps = [b - a for a, b in itertools.pairwise(sizes) if b >= a]
    return statistics.mean(steps) if steps else 0.0


def figures(f: dict[str, Any], live: dict[str, Any] | None = None) -> dict[str, Any]:
    """The figures compared, from one `measure` run (and a live recording's storage)."""
    sent, stored = f["sent"], f["stored"]["taplog"]
    found = bodies.summary(sent.calls)
    readings = {r.what: r for r in f["readings"]}
    return {
        "calls": found["calls"],
        "threads": found["threads"],
        "mean": found["mean"],
        "max": found["max"],
        "growth": growth(sent.calls),
        "ratio": stored["ratio"],
        "per_call": stored["per_call"],
        "live_ratio": live["ratio"] if live else None,
        "added": {
            n: (measure_pct(sent.added(n), 50), measure_pct(sent.added(n), 90))
            for n in ("bare", "taplog", "taplog-workers")
        },
        "reading": {k: (r.seconds, r.peak_mb) for k, r in readings.items()},
    }


def measure_pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main(steps: int, seed: int, keep: bool, note: str = "", cli: str = "claude") -> str:
    """Record the CLI, measure it and generated days of as many calls; the section."""
    folder = Path(tempfile.mkdtemp(prefix="taplog-real-day-cli-"))
    try:
        capture = record_cli(folder, steps, seed, cli)
        calls = [c.facts() for c in bodies.load(capture)]
        live = storage_summary(folder / "data", calls)
        measured = measure.measure(bodies.load(capture), compress=False)
        real = figures(measured, live)
        made = figures(measure.measure(bodies.generate(len(calls), seed), compress=False))
        context = cli_context(calls)
        alike = figures(measure.measure(bodies.generate(len(calls), seed, context), compress=False))
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
    tree = measured["tree"] + (f" ({note})" if note else "")
    days = {"generator": made, f"generator at {context:,} tokens": alike}
    return compare(real, days, steps, seed, tree, cli)


def cli_context(calls: list[Facts]) -> int:
    """The context, in tokens, at which a generated day compacts as the CLI did: at the
    largest body it sent (where it compacted, or, if it did not, not before)."""
    return -(-max(call.size for call in calls) // BYTES_PER_TOKEN)


def storage_summary(data: Path, calls: list[Facts]) -> dict[str, Any]:
    return storage.summary(data, sum(c.size for c in calls), len(calls), compress=False)


HEADINGS = {
    "claude": "## A real day: the generator against the real CLI",
    "codex": "## A real day: the generator against the real Codex",
}
RUNS = {  # what each CLI was asked to do
    "claude": (
        "the real Claude Code 2.1.197 (`claude -p`, a plan of {steps} tool steps, two "
        f"sub-agents side by side every {AGENT_EVERY} steps, each with {AGENT_STEPS} steps, "
        "`CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES=1`)"
    ),
    "codex": "the real Codex 0.171.0 (`codex exec`, a plan of {steps} shell steps)",
}


def rows(real: dict[str, Any], made: list[dict[str, Any]]) -> list[tuple[str, list[Any], str]]:
    """(label, [the real CLI's figure, each generated day's], format) per figure compared."""
    days = [real, *made]
    out: list[tuple[str, list[Any], str]] = [
        ("calls", [f["calls"] for f in days], "{:,.0f}"),
        ("mean request body (KB)", [f["mean"] / 1e3 for f in days], "{:,.1f}"),
        ("largest request body (KB)", [f["max"] / 1e3 for f in days], "{:,.1f}"),
        ("mean growth per main-agent call (KB)", [f["growth"] / 1e3 for f in days], "{:,.1f}"),
        ("stored / raw, recorded live", [real["live_ratio"]] + [None] * len(made), "{:.3f}"),
        ("**stored / raw** (replayed through taplog serve)", [f["ratio"] for f in days], "{:.3f}"),
        ("stored bytes per call (KB)", [f["per_call"] / 1e3 for f in days], "{:,.1f}"),
    ]
    for name in ("bare", "taplog", "taplog-workers"):
        for i, q in enumerate(("p50", "p90")):
            label = f"added {q}, {report.LABELS[name]} (ms)"
            out.append((label, [f["added"][name][i] for f in days], "{:.2f}"))
    for what in real["reading"]:
        out.append((f"`{what}` (s)", [f["reading"][what][0] for f in days], "{:.2f}"))
    return out


def compare(
    real: dict[str, Any],
    made: dict[str, dict[str, Any]],
    steps: int,
    seed: int,
    tree: str,
    cli: str = "claude",
) -> str:
    """The section: each figure for the real CLI's recording and each generated day
    (`made`, by name), with its ratio to the real one."""
    lines = [
        HEADINGS[cli],
        "",
        f"`.venv/bin/python bench/real_day check-cli --cli {cli} --steps {steps} --seed {seed}`: "
        + RUNS[cli].format(steps=steps)
        + " recorded through `taplog serve` against the fake vendor, whose shell step prints "
        "outputs sized as the generator's tool results; "
        "then the recording and generated days of as many calls each measured as `run` does "
        f"(same machine, one after the other; tree {tree}): the generator as `run` makes it "
        "(compacting at 300k tokens), and one compacting at the largest context the "
        f"CLI sent (`cli_context`). Threads: real {real['threads']}, "
        + ", ".join(f"{name} {f['threads']}" for name, f in made.items())
        + ".",
        "",
        "| | real CLI | " + " | ".join(f"{name} | / real" for name in made) + " |",
        "|---|---|" + "---|---|" * len(made),
    ]
    for label, (first, *others), form in rows(real, list(made.values())):
        cells = ["-" if first is None else form.format(first)]
        for value in others:
            cells.append("-" if value is None else form.format(value))
            cells.append(f"{value / first:.2f}" if first and value else "-")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
