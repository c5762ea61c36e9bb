"""What failover costs: nothing when nothing fails, and little when it switches.

    .venv/bin/python bench/failover_bench.py [--calls 300]

Starts the tests' fake vendors in this process and two `taplog serve`
processes on 127.0.0.1, one with a fallback rule and one without, then:
1. alternates non-streaming calls through both while every vendor is healthy,
   and compares the medians (the rule must cost nothing measurable);
2. takes the OpenAI fake down (503) and calls through the one with the rule:
   each call fails over to the Anthropic fake. The switch time is read from
   the log: from the failed try's answer to the fallback's request, so vendor
   time is left out (target: under 50 ms).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import BODY, HEADERS, Service, spread, start_taplog
from taplog.recorder.store.reader import read_all
from tests.fakes.servers import ServerThread
from tests.fakes.vendor import FakeVendor


def _serve(data_dir: str, openai_url: str, anthropic_url: str, *extra: str) -> Service:
    """taplog against the two in-process fakes (start_taplog points both vendors at one)."""
    return start_taplog(data_dir, openai_url, "--anthropic-base", anthropic_url, *extra)


def _time(client: httpx.Client, url: str) -> float:
    started = time.perf_counter()
    client.post(f"{url}/v1/chat/completions", json=BODY, headers=HEADERS).raise_for_status()
    return (time.perf_counter() - started) * 1000


def _switch_times(data_dir: Path) -> list[float]:
    """Milliseconds taplog took to move each call on: from the failed try's answer (or, when
    the circuit was open, from the client's request) to the request sent to the fallback."""

    def at(event: dict) -> float:
        return datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp() * 1000

    times = []
    for events in read_all(data_dir).values():
        for index, event in enumerate(events):
            if event["type"] != "failover":
                continue
            same_call = [e for e in events[:index] if e["exchange"] == event["exchange"]]
            sent = next(e for e in events[index:] if e["type"] == "llm.request")
            times.append(at(sent) - at(same_call[-1]))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    servers = ServerThread()
    openai_fake, anthropic_fake = FakeVendor(), FakeVendor()
    openai_url, anthropic_url = (
        servers.serve(openai_fake.app()),
        servers.serve(anthropic_fake.app()),
    )
    plain_dir, rule_dir = tempfile.mkdtemp(), tempfile.mkdtemp()
    plain = _serve(plain_dir, openai_url, anthropic_url)
    ruled = _serve(
        rule_dir, openai_url, anthropic_url, "--fallback", "gpt-*=anthropic:claude-sonnet-4-6"
    )
    plain_url, ruled_url = plain.url, ruled.url
    try:
        without, with_rule = [], []
        with httpx.Client() as client:
            for _ in range(30):
                _time(client, plain_url), _time(client, ruled_url)
            for _ in range(args.calls):
                without.append(_time(client, plain_url))
                with_rule.append(_time(client, ruled_url))
            openai_fake.down = {"status": "503"}
            failing = [_time(client, ruled_url) for _ in range(20)]
    finally:
        for service in (plain, ruled):
            service.stop()
        servers.stop()
    _report(args.calls, without, with_rule, failing, _switch_times(Path(rule_dir)))


def _report(
    calls: int,
    without: list[float],
    with_rule: list[float],
    failing: list[float],
    switches: list[float],
) -> None:
    ratio = statistics.median(with_rule) / statistics.median(without)
    worst = max(switches)
    print(f"healthy vendors, {calls} calls each, interleaved (ms, median / p99):")
    print(f"  no rule:   {spread(without)}")
    print(f"  with rule: {spread(with_rule)}")
    print(f"  ratio with/without: {ratio:.2f}  {'PASS' if ratio <= 1.2 else 'FAIL'} (<= 1.2)")
    print(f"OpenAI down, {len(failing)} calls served by Anthropic (ms): {spread(failing)}")
    print("  (the first call retries the broken vendor; then its breaker sends calls straight on)")
    print(
        f"  switch time from the log over {len(switches)} switches: median "
        f"{statistics.median(switches):.2f} ms, max {worst:.2f} ms  "
        f"{'PASS' if worst < 50 else 'FAIL'} (< 50 ms)"
    )


if __name__ == "__main__":
    main()
