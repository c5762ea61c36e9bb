"""Instructions `taplog serve` executes per call, counted by callgrind: an A/B that noise
cannot move.

    python bench/instructions.py                      # this tree
    python bench/instructions.py --against /tmp/old   # and another tree, beside it

Timings on a small shared machine move by tens of percent from run to run;
instruction counts move by well under one. Each tree's `taplog serve` runs
under `valgrind --tool=callgrind` (all its threads: the event loop and the
writer) against the tests' fake vendor, once with a few warm-up calls and
once with as many more as asked; the difference, divided by the extra
calls, is what one call costs. Kinds: `chat` (a short non-streaming Chat
call), `stream` (a Chat stream of 20 events), `anthropic` (a Messages stream
of 20 events). Needs valgrind (Debian's `valgrind`); about 40 s a kind and tree.

With `--workers N` the count is per process kind: the workers' (summed) and the
recorder process's, each per call (the supervisor's share is next to nothing).
"""

from __future__ import annotations

import argparse
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import bench.tree  # noqa: E402  (`import taplog` loads this tree)
from tests.fakes.servers import ServerThread  # noqa: E402
from tests.fakes.vendor import FakeVendor  # noqa: E402

WARM_UP = 20
CALLS = {
    "chat": ("/v1/chat/completions", {"model": "gpt-4.1"}, "hi {n}", "authorization"),
    "stream": (
        "/v1/chat/completions",
        {"model": "gpt-4.1", "stream": True},
        "story {n} !events=20",
        "authorization",
    ),
    "anthropic": (
        "/v1/messages",
        {"model": "claude-sonnet-4-6", "max_tokens": 5, "stream": True},
        "story {n} !events=20",
        "x-api-key",
    ),
}


_KINDS = {
    "serve": "the supervisor",
    "taplog-worker": "the workers",
    "taplog-recorder": "the recorder",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _call(client: httpx.Client, url: str, kind: str, n: int) -> None:
    path, body, prompt, auth = CALLS[kind]
    headers = {auth: "Bearer sk-bench" if auth == "authorization" else "sk-bench"}
    headers["x-taplog-session"] = f"bench-{n % 20}"
    body = {**body, "messages": [{"role": "user", "content": prompt.format(n=n)}]}
    with client.stream("POST", url + path, json=body, headers=headers) as answer:
        for _ in answer.iter_raw():
            pass


def instructions(tree: Path, fake_url: str, kind: str, calls: int, workers: int) -> Counter[str]:
    """The instructions of one `taplog serve` run that served `calls` calls, by process
    (`serve` alone, or `taplog-worker` and `taplog-recorder`)."""
    out = Path(tempfile.mkdtemp())
    port = _free_port()
    serve = [sys.executable, "-c", "from taplog.proxy.cli.main import main; main()", "serve"]
    serve += ["--port", str(port), "--data-dir", tempfile.mkdtemp(), "--log-level", "warning"]
    serve += ["--openai-base", f"{fake_url}/v1", "--anthropic-base", fake_url]
    serve += ["--workers", str(workers)] if workers else []
    process = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/%p", *serve],
        cwd=tree,
        env=bench.tree.environment(tree),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=120) as client:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                try:
                    if client.get(url + "/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            for n in range(calls):
                _call(client, url, kind, n)
            names = _names(process.pid)
    finally:
        process.terminate()
        process.wait(300)
    counted: Counter[str] = Counter()
    for pid, name in names.items():
        written = (out / str(pid)).read_bytes()
        totals = re.search(rb"^(?:summary|totals): (\d+)", written, re.M)
        if totals is None:
            raise RuntimeError(f"callgrind wrote no totals to {out / str(pid)}")
        counted[name] += int(totals.group(1))
    return counted


def _names(serve: int) -> dict[int, str]:
    """pid -> what it is: `serve` itself, and its children by name."""
    children = Path(f"/proc/{serve}/task/{serve}/children").read_text().split()
    return {serve: "serve"} | {
        int(child): Path(f"/proc/{child}/comm").read_text().strip() for child in children
    }


def per_call(tree: Path, fake_url: str, kind: str, calls: int, workers: int) -> Counter[str]:
    extra = instructions(tree, fake_url, kind, WARM_UP + calls, workers)
    extra.subtract(instructions(tree, fake_url, kind, WARM_UP, workers))
    return Counter({name: count / calls for name, count in extra.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, help="another tree to count beside this one")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--kinds", default="chat,stream,anthropic")
    parser.add_argument("--workers", type=int, default=0, help="serve's --workers")
    args = parser.parse_args()
    servers = ServerThread()
    fake = FakeVendor()
    fake.url = servers.serve(fake.app())
    trees = [ROOT, *([args.against.resolve()] if args.against else [])]
    try:
        for kind in args.kinds.split(","):
            counts = [per_call(tree, fake.url, kind, args.calls, args.workers) for tree in trees]
            for name in sorted(counts[0]) if args.workers else ["serve"]:
                this = counts[0][name]
                line = f"{kind}: {this / 1000:,.0f} k instructions per call"
                line = line if not args.workers else f"{line} in {_KINDS.get(name, name)}"
                if len(counts) == 2:
                    other = counts[1][name]
                    line += f" (other tree {other / 1000:,.0f} k: {this / other:.3f}x)"
                print(line, flush=True)
    finally:
        servers.stop()


if __name__ == "__main__":
    main()
