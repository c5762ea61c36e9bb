"""Fixtures: a fake vendor and taplog on loopback, official SDK clients pointed at taplog.

What the fixtures are made of lives in tests/fakes/ (the fake vendor, the server thread,
taplog in-process or as a process, the keys, scripted agents and clients); tests import those
from there, and only ask for fixtures here by name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.clients import anthropic_at, openai_at
from tests.fakes.harness import (
    FAILOVER_RULES,
    FALLBACK_TTFB,
    Taplog,
    Vendors,
    serve_fake,
    start_on_fake,
)
from tests.fakes.keys import (
    ANTHROPIC_FALLBACK_KEY,
    GEMINI_FALLBACK_KEY,
    OPENAI_FALLBACK_KEY,
)
from tests.fakes.reading_traffic import record_day
from tests.fakes.servers import ServerThread
from tests.fakes.ui_traffic import Recorded, record_sessions
from tests.fakes.vendor import FakeVendor


@pytest.fixture
def servers() -> Iterator[ServerThread]:
    with ServerThread() as thread:
        yield thread


@pytest.fixture
def fake(servers: ServerThread) -> FakeVendor:
    return serve_fake(servers, handler_cancellation=True)


@pytest.fixture
def taplog(servers: ServerThread, fake: FakeVendor, tmp_path) -> Taplog:
    return start_on_fake(servers, fake, tmp_path / "data")


@pytest.fixture
def oai(taplog: Taplog) -> openai.OpenAI:
    return openai_at(taplog.url)


@pytest.fixture
def ant(taplog: Taplog) -> anthropic.Anthropic:
    return anthropic_at(taplog.url)


@pytest.fixture
def oai_direct(fake: FakeVendor) -> openai.OpenAI:
    return openai_at(fake.url)


@pytest.fixture
def ant_direct(fake: FakeVendor) -> anthropic.Anthropic:
    return anthropic_at(fake.url)


# -- two fake vendors, and taplog failing over between them -----------------------------


@pytest.fixture
def vendors(servers: ServerThread, monkeypatch: pytest.MonkeyPatch) -> Vendors:
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_FALLBACK_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_FALLBACK_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_FALLBACK_KEY)
    return Vendors(servers)


@pytest.fixture
def failover_proxy(servers: ServerThread, vendors: Vendors, tmp_path) -> Taplog:
    """taplog in front of both vendors, failing over both ways (`FAILOVER_RULES`)."""
    return vendors.proxy(servers, tmp_path / "data", FAILOVER_RULES)


@pytest.fixture
def failover_oai(failover_proxy: Taplog) -> openai.OpenAI:
    return openai_at(failover_proxy.url)


@pytest.fixture
def failover_ant(failover_proxy: Taplog) -> anthropic.Anthropic:
    return anthropic_at(failover_proxy.url)


@pytest.fixture
def fallback_proxy(servers: ServerThread, vendors: Vendors, tmp_path) -> Taplog:
    """taplog in front of both vendors with one rule, `gpt-* -> anthropic`, and its defaults."""
    rule = {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], "ttfb_timeout": FALLBACK_TTFB}
    return vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})


@pytest.fixture
def fallback_client(fallback_proxy: Taplog) -> openai.OpenAI:
    return openai_at(fallback_proxy.url)


# -- the web UI's sessions (tests/fakes/ui_traffic.py) ----------------------------------


def _recorded(
    tmp_path_factory: pytest.TempPathFactory, name: str, record: Callable[..., Any]
) -> Iterator[Recorded]:
    """`record(servers, vendors, data_dir)` run once against fresh vendors, with taplog's
    fallback keys in the environment, and what it recorded."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_API_KEY", OPENAI_FALLBACK_KEY)
        env.setenv("ANTHROPIC_API_KEY", ANTHROPIC_FALLBACK_KEY)
        with ServerThread() as servers:
            vendors = Vendors(servers)
            data_dir = tmp_path_factory.mktemp(name) / "data"
            yield Recorded(record(servers, vendors, data_dir), vendors)


@pytest.fixture(scope="module")
def ui_recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    def record(servers: ServerThread, vendors: Vendors, data_dir: Path) -> Any:
        return record_sessions(servers, vendors, data_dir, ui=True)

    yield from _recorded(tmp_path_factory, "ui", record)


@pytest.fixture
def counted(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """`caplog` with the reading tools' DEBUG lines (`reading_traffic.bodies_read`)."""
    caplog.set_level(logging.DEBUG, "taplog.query")
    return caplog


@pytest.fixture(scope="session")
def reading_recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recorded]:
    """A long agent session and short ones (tests/fakes/reading_traffic.py), recorded once."""
    yield from _recorded(tmp_path_factory, "reading", record_day)
