"""What the tool policy's gate adds to a streamed answer, against the same taplog without one.

    .venv/bin/python bench/tool_gate.py [--calls 150]

Starts the fake vendor and two `taplog serve` (processes on 127.0.0.1): one with no
policy, one with `--tool-policy` of a few rules (one refuses `get_weather` in Paris, one
flags `read_file`, the others match nothing). Each call is a streamed answer with text,
then two tool calls (`get_weather`, whose arguments come in 12 events, and `read_file`),
for each API (Anthropic Messages, OpenAI Chat, OpenAI Responses); the two proxies take
each call in turn, alternating who goes first. Per API and proxy, milliseconds from the
request to (median / p90):
1. the first event;
2. the first event of the first tool call (with the gate: its refusal, sent in its place);
3. the first tool call whole: the event that ends its arguments (Anthropic
   `content_block_stop`, Responses `response.function_call_arguments.done`, Chat the next
   call's start), or, with the gate, its refusal;
4. the end of the stream.
The gate holds a tool call until its arguments are whole, so (2) moves by the time the
vendor takes to stream the arguments (12 events here, 2 ms apart), while (3), when an
agent can act on the call, and (1) and (4) should move only by the gate's own work.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import HEADERS, start_fake, start_taplog

POLICY = """
[[tool_policy]]
id = "no-rm"
name = "Bash"
fields = { command = '\\brm\\s' }
action = "deny"
reason = "no deletes"

[[tool_policy]]
id = "no-push"
arguments = 'git\\s+push'
action = "deny"
reason = "no pushes"

[[tool_policy]]
id = "no-paris-weather"
name = "get_weather"
fields = { city = "^Paris$" }
action = "deny"
reason = "weather is off limits"

[[tool_policy]]
id = "watch-reads"
name = "read_file"
action = "flag"
"""
PROMPT = "check both !preamble !plan=get_weather+read_file !events=12 !delay=0.002"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
NAMES = ("get_weather", "read_file")
CALLS = {
    "anthropic": (
        "/v1/messages",
        {
            "model": "claude-sonnet-4-6",
            "max_tokens": 256,
            "stream": True,
            "tools": [{"name": n, "input_schema": SCHEMA} for n in NAMES],
            "messages": [{"role": "user", "content": PROMPT}],
        },
        b'"tool_use"',
        b"content_block_stop",
    ),
    "chat": (
        "/v1/chat/completions",
        {
            "model": "gpt-4.1",
            "stream": True,
            "tools": [
                {"type": "function", "function": {"name": n, "parameters": SCHEMA}} for n in NAMES
            ],
            "messages": [{"role": "user", "content": PROMPT}],
        },
        b'"tool_calls"',
        b'"index":1',
    ),
    "responses": (
        "/v1/responses",
        {
            "model": "gpt-4.1",
            "stream": True,
            "tools": [{"type": "function", "name": n, "parameters": SCHEMA} for n in NAMES],
            "input": PROMPT,
        },
        b'"function_call"',
        b"response.function_call_arguments.done",
    ),
}
REFUSAL = b"taplog's tool policy"
ANTHROPIC_HEADERS = {"x-api-key": "sk-ant-bench-0123456789", "anthropic-version": "2023-06-01"}


def _timed(client: httpx.Client, url: str, api: str) -> tuple[float, ...]:
    """Milliseconds to the first event, to the first tool call's first event, to that
    call whole (or its refusal), and to the end."""
    path, body, tool_mark, whole_mark = CALLS[api]
    headers = ANTHROPIC_HEADERS if api == "anthropic" else HEADERS
    started = time.perf_counter()
    first = tool = whole = None
    seen = b""
    with client.stream("POST", url + path, json=body, headers=headers) as answer:
        for chunk in answer.iter_raw():
            now = (time.perf_counter() - started) * 1000
            first = first if first is not None else now
            seen += chunk
            refused = REFUSAL in seen
            at = seen.find(tool_mark)
            if tool is None and (refused or at >= 0):
                tool = now
            if whole is None and (refused or (at >= 0 and seen.find(whole_mark, at) >= 0)):
                whole = now
    end = (time.perf_counter() - started) * 1000
    if answer.status_code != 200 or first is None or tool is None or whole is None:
        raise SystemExit(f"{url}{path}: {answer.status_code} {seen[:300]!r}")
    return first, tool, whole, end


def _spread(values: list[float]) -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):.2f} / {ordered[int(len(ordered) * 0.9)]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=150, help="calls per API and proxy")
    calls = parser.parse_args().calls
    scratch = Path(tempfile.mkdtemp(prefix="taplog-gate-bench-"))
    policy = scratch / "policy.toml"
    policy.write_text(POLICY)
    fake = start_fake()
    proxies = {
        "no policy": start_taplog(str(scratch / "plain"), fake.url),
        "policy": start_taplog(str(scratch / "gated"), fake.url, "--tool-policy", str(policy)),
    }
    times: dict[tuple[str, str], list[tuple[float, ...]]] = {}
    try:
        with httpx.Client(timeout=60) as client:
            for n in range(calls):
                for api in CALLS:
                    names = list(proxies) if n % 2 else list(reversed(proxies))
                    for name in names:
                        times.setdefault((api, name), []).append(
                            _timed(client, proxies[name].url, api)
                        )
    finally:
        for service in [*proxies.values(), fake]:
            service.stop()
    print(f"{calls} streamed calls per API and proxy (ms, median / p90)\n")
    print("| API | proxy | first event | first tool call's first event | that call whole | end |")
    print("|---|---|---|---|---|---|")
    for api in CALLS:
        for name in proxies:
            found = times[(api, name)]
            columns = [_spread([t[i] for t in found]) for i in range(4)]
            print(f"| {api} | {name} | {' | '.join(columns)} |")


if __name__ == "__main__":
    main()
