"""The load generator: a small asyncio client that keeps every request loop bounded.

All functions take one shared `aiohttp.ClientSession` (keep-alive, no connection
limit) and return milliseconds. Loops are bounded in both count and time, so a
system that stalls slows the bench down but never hangs it.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from bench.common import BODY, HEADERS

Json = dict[str, Any]
SHAPES = ("chat", "responses", "anthropic")  # the streaming API shapes, in turn
ANTHROPIC_HEADERS = {"x-api-key": "sk-bench-0123456789", "anthropic-version": "2023-06-01"}


def session() -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=120)
    return aiohttp.ClientSession(connector=connector, timeout=timeout)


def stream_request(shape: str, text: str) -> tuple[str, Json, dict[str, str]]:
    """(path, body, headers) of a streaming call in one of the three API shapes."""
    messages = [{"role": "user", "content": text}]
    if shape == "chat":
        return "/v1/chat/completions", {**BODY, "messages": messages, "stream": True}, HEADERS
    if shape == "responses":
        return "/v1/responses", {"model": "gpt-4.1", "input": text, "stream": True}, HEADERS
    body = {"model": "claude-sonnet-4-6", "max_tokens": 512, "messages": messages, "stream": True}
    return "/v1/messages", body, ANTHROPIC_HEADERS


TURNS = 8  # calls in one agent task before the agent starts the next
_agents = itertools.count(1)


class Agent:
    """The calls of one agent, as agents make them: each turn resends the transcript so
    far plus a new user message; after `TURNS` turns the agent starts a new task (for
    taplog, a new session, stitched from its transcript as a real agent's would be).

    `one_shot` agents send one unrelated prompt per call instead (for taplog, a new
    session per call: the most it pays for one call)."""

    def __init__(self, one_shot: bool = False) -> None:
        self.name, self.one_shot = next(_agents), one_shot
        self.tasks = itertools.count(1)
        self.messages: list[Json] = []

    def next_body(self) -> Json:
        if self.one_shot or len(self.messages) >= 2 * TURNS - 1 or not self.messages:
            task = next(self.tasks)
            self.messages = [{"role": "user", "content": f"Agent {self.name}, task {task}: go."}]
        else:
            turn = len(self.messages) // 2 + 1
            self.messages += [
                {"role": "assistant", "content": "Done with that step. What next?"},
                {"role": "user", "content": f"Step {turn}: check the result, then go on."},
            ]
        return {**BODY, "messages": list(self.messages)}


async def call(client: aiohttp.ClientSession, url: str, body: Json = BODY) -> float:
    """One non-streaming Chat call; its latency in ms."""
    started = time.perf_counter()
    async with client.post(url + "/v1/chat/completions", json=body, headers=HEADERS) as reply:
        await reply.read()
        reply.raise_for_status()
    return (time.perf_counter() - started) * 1000


async def closed_loop(
    client: aiohttp.ClientSession, url: str, workers: int, calls_each: int
) -> list[float]:
    """`workers` concurrent agents, `calls_each` calls each; every latency in ms."""

    async def worker() -> list[float]:
        agent = Agent()
        return [await call(client, url, agent.next_body()) for _ in range(calls_each)]

    results = await asyncio.gather(*(worker() for _ in range(workers)))
    return [latency for result in results for latency in result]


async def throughput(
    client: aiohttp.ClientSession, url: str, workers: int, seconds: float, one_shot: bool = False
) -> float:
    """Completed calls per second with `workers` agents busy for `seconds`."""
    deadline = time.perf_counter() + seconds
    done = 0

    async def worker() -> None:
        nonlocal done
        agent = Agent(one_shot)
        while time.perf_counter() < deadline:
            await call(client, url, agent.next_body())
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return done / (time.perf_counter() - started)


@dataclass
class Stream:
    shape: str  # chat, responses or anthropic
    ttfe: float = 0.0  # ms from sending the request to the first `data:` line
    gaps: list[float] = field(default_factory=list)  # ms between `data:` lines
    events: int = 0


async def stream(client: aiohttp.ClientSession, url: str, shape: str, text: str) -> Stream:
    path, body, headers = stream_request(shape, text)
    result = Stream(shape)
    started = last = time.perf_counter()
    async with client.post(url + path, json=body, headers=headers) as reply:
        reply.raise_for_status()
        async for line in reply.content:
            if not line.startswith(b"data:"):
                continue
            now = time.perf_counter()
            if result.events == 0:
                result.ttfe = (now - started) * 1000
            else:
                result.gaps.append((now - last) * 1000)
            last = now
            result.events += 1
    return result


async def streams(
    client: aiohttp.ClientSession, url: str, workers: int, each: int, text: str
) -> list[Stream]:
    """`workers` concurrent streamers, `each` streams each, cycling the three shapes."""

    async def worker(offset: int) -> list[Stream]:
        return [await stream(client, url, SHAPES[(offset + i) % 3], text) for i in range(each)]

    results = await asyncio.gather(*(worker(n) for n in range(workers)))
    return [s for result in results for s in result]
