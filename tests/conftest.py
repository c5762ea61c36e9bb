"""Fixtures: a fake vendor and taplog on loopback, official SDK clients pointed at taplog.

Everything runs for real: taplog's own aiohttp app (the same `create_app`
that `taplog serve` runs) forwards to `FakeVendor` over TCP on 127.0.0.1,
and the tests read back the session files from disk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from taplog.proxy.app import create_app
from taplog.proxy.config import Settings
from taplog.proxy.failover.rules import Fallbacks, load_fallbacks
from taplog.proxy.keys import RECORDER
from taplog.proxy.runner import ProxyRunner
from taplog.recorder.events import Event
from taplog.recorder.reader import read_all
from tests.fakes.servers import ServerThread
from tests.fakes.vendor import FakeVendor

OPENAI_KEY = "sk-test-openai-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-test-0123456789abcdef"
OPENAI_FALLBACK_KEY = "sk-fallback-openai-0123456789"  # taplog's own keys, for translated calls
ANTHROPIC_FALLBACK_KEY = "sk-ant-fallback-0123456789"


@dataclass
class Taplog:
    """A running taplog: its URL, its data dir, and a way to read what it logged."""

    url: str
    data_dir: Path
    app: Any
    servers: ServerThread

    def flush(self) -> None:
        recorder = self.app[RECORDER]
        self.servers.call(lambda: asyncio.to_thread(recorder.flush, 10))

    def sessions(self) -> dict[str, list[Event]]:
        self.flush()
        return read_all(self.data_dir)

    def events(self, event_type: str | None = None) -> list[Event]:
        found = [e for events in self.sessions().values() for e in events]
        return [e for e in found if event_type is None or e["type"] == event_type]

    def wait_for(
        self, check: Callable[[dict[str, list[Event]]], bool], timeout: float = 10
    ) -> dict[str, list[Event]]:
        """Sessions once `check` holds; answers are logged just after clients get them."""
        deadline = time.monotonic() + timeout
        while True:
            sessions = self.sessions()
            if check(sessions):
                return sessions
            if time.monotonic() > deadline:
                raise AssertionError(f"log never satisfied the check: {sessions}")
            time.sleep(0.02)

    def wait_responses(self, count: int) -> dict[str, list[Event]]:
        def enough(sessions: dict[str, list[Event]]) -> bool:
            answers = [e for ev in sessions.values() for e in ev if e["type"] == "llm.response"]
            return len(answers) >= count

        return self.wait_for(enough)

    def wait_answers(self, count: int) -> dict[str, list[Event]]:
        """Sessions once `count` calls are over (`call.answered`, written as a call ends)."""

        def enough(sessions: dict[str, list[Event]]) -> bool:
            answers = [e for ev in sessions.values() for e in ev if e["type"] == "call.answered"]
            return len(answers) >= count

        return self.wait_for(enough)


@pytest.fixture
def servers() -> Iterator[ServerThread]:
    thread = ServerThread()
    yield thread
    thread.stop()


@pytest.fixture
def fake(servers: ServerThread) -> FakeVendor:
    vendor = FakeVendor()
    vendor.url = servers.serve(vendor.app(), handler_cancellation=True)
    return vendor


def start_taplog(
    servers: ServerThread, data_dir: Path, fallbacks: Fallbacks | None = None, **overrides: Any
) -> Taplog:
    settings = Settings(data_dir=data_dir, **overrides)
    app = create_app(settings, fallbacks)
    url = servers.serve(
        app, ProxyRunner, header_timeout=settings.header_timeout, shutdown_timeout=5
    )
    return Taplog(url, data_dir, app, servers)


def start_on_fake(
    servers: ServerThread, fake: FakeVendor, data_dir: Path, **overrides: Any
) -> Taplog:
    """taplog with both vendors pointed at the fake one."""
    return start_taplog(
        servers, data_dir, openai_base=f"{fake.url}/v1", anthropic_base=fake.url, **overrides
    )


@pytest.fixture
def taplog(servers: ServerThread, fake: FakeVendor, tmp_path: Path) -> Taplog:
    return start_on_fake(servers, fake, tmp_path / "data")


@pytest.fixture
def oai(taplog: Taplog) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)


@pytest.fixture
def ant(taplog: Taplog) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=taplog.url, api_key=ANTHROPIC_KEY, max_retries=0)


@pytest.fixture
def oai_direct(fake: FakeVendor) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{fake.url}/v1", api_key=OPENAI_KEY, max_retries=0)


@pytest.fixture
def ant_direct(fake: FakeVendor) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.url, api_key=ANTHROPIC_KEY, max_retries=0)


class Vendors:
    """Two fake vendors, one per provider, so one can be down while the other serves."""

    def __init__(self, servers: ServerThread) -> None:
        self.openai, self.anthropic = FakeVendor(), FakeVendor()
        self.openai.url = servers.serve(self.openai.app(), handler_cancellation=True)
        self.anthropic.url = servers.serve(self.anthropic.app(), handler_cancellation=True)

    def proxy(
        self, servers: ServerThread, data_dir: Path, rules: dict[str, Any], **overrides: Any
    ) -> Taplog:
        """taplog in front of both, with these fallback rules (and other settings)."""
        openai_base, anthropic_base = f"{self.openai.url}/v1", self.anthropic.url
        fallbacks = load_fallbacks(openai_base, anthropic_base, rules, ())
        return start_taplog(
            servers,
            data_dir,
            fallbacks,
            openai_base=openai_base,
            anthropic_base=anthropic_base,
            **overrides,
        )


@pytest.fixture
def vendors(servers: ServerThread, monkeypatch: pytest.MonkeyPatch) -> Vendors:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_FALLBACK_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_FALLBACK_KEY)
    return Vendors(servers)


def model_requests(fake: FakeVendor) -> list[Any]:
    """The model calls a fake vendor received (not count_tokens, models…)."""
    return [r for r in fake.requests if r.path in ("/v1/chat/completions", "/v1/messages")]
