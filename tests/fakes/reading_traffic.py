"""Sessions for the reading tools' bounds (issue #31): a coding agent's day, small, recorded
from real SDK traffic through taplog.

    long-agent   opened the way Claude Code opens one: a quota probe (`max_tokens: 1`, the
                 word "quota") and a title asked of a small model without tools, then an
                 Anthropic agent loop of `TOOL_STEPS` tool calls, each call resending the
                 whole history, every tenth tool printing `LONG_OUTPUT` characters
    short-NN     `SHORTS` sessions opened the same way, with a loop of one tool call

`reading_recording` (tests/conftest.py) records them once for the whole run; `counted`
(there too) lets a test read `bodies_read`: the request bodies the reading tools asked SQL
for, from the DEBUG lines of `recorder.query.requests`.
"""

from __future__ import annotations

from pathlib import Path

import anthropic
import pytest

from tests.fakes.harness import Taplog, Vendors
from tests.fakes.servers import ServerThread
from tests.fakes.ui_traffic import anthropic_client

LONG = "long-agent"
TOOL_STEPS = 210
SHORTS = 19
LONG_OUTPUT = 1200
SMALL_MODEL = "claude-haiku-4-5"
TOOLS = [{"name": "read_file", "input_schema": {"type": "object"}}]


def bodies_read(caplog: pytest.LogCaptureFixture) -> int:
    """How many request bodies the reading tools asked SQL for, by their DEBUG log."""
    said = [r.getMessage() for r in caplog.records if r.name == "taplog.query"]
    return sum(int(m.split(": ")[1].split()[0]) for m in said if "request bodies read" in m)


def prompt(session: str, steps: int) -> str:
    """The person's prompt of a session: what `taplog sessions` must show."""
    return f"Tidy up the parser of {session}. !plan=" + ",".join(["read_file"] * steps + ["text"])


def output(step: int) -> str:
    """What the loop's `step`-th tool printed: every tenth run a long listing."""
    if step % 10 == 9:
        return "".join(f"line {n:04d} of a long listing\n" for n in range(LONG_OUTPUT // 28 + 1))
    return f"read {step}: ok"


def agent_session(client: anthropic.Anthropic, session: str, steps: int) -> None:
    """The opening side calls, then the loop: a tool call per step, then the answer."""
    client.messages.create(
        model=SMALL_MODEL, max_tokens=1, messages=[{"role": "user", "content": "quota"}]
    )
    asked = prompt(session, steps)
    client.messages.create(
        model=SMALL_MODEL,
        max_tokens=512,
        system="Write a short title for the coding session that starts with this message.",
        messages=[{"role": "user", "content": f"Title this: {asked[:40]}"}],
    )
    messages: list = [{"role": "user", "content": asked}]
    step = 0
    while True:
        answer = client.messages.create(
            model="claude-sonnet-4-6", max_tokens=1024, messages=messages, tools=TOOLS
        )
        if answer.stop_reason != "tool_use":
            return
        messages.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
        uses = [b for b in answer.content if b.type == "tool_use"]
        results = [
            {"type": "tool_result", "tool_use_id": u.id, "content": output(step)} for u in uses
        ]
        messages.append({"role": "user", "content": results})
        step += 1


def record_day(servers: ServerThread, vendors: Vendors, data_dir: Path) -> Taplog:
    """A running taplog (its UI on) that has recorded the long session and the short ones."""
    proxy = vendors.proxy(servers, data_dir, {}, ui=True)
    for number in range(SHORTS):
        agent_session(anthropic_client(proxy, f"short-{number:02d}"), f"short-{number:02d}", 1)
    agent_session(anthropic_client(proxy, LONG), LONG, TOOL_STEPS)
    proxy.wait_for(lambda sessions: len(sessions) == SHORTS + 1)
    proxy.flush()
    return proxy
