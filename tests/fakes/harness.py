"""taplog as the tests run it: in-process on a `ServerThread`, in front of one fake vendor or of
two (`Vendors`), or as a `taplog serve` process of its own (`TaplogProcess`).

Everything runs for real: taplog's own aiohttp app (the same `create_app` that `taplog serve`
runs) forwards to `FakeVendor` over TCP on 127.0.0.1, and the tests read back the session files
from disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taplog.proxy.app import create_app
from taplog.proxy.config import Settings
from taplog.proxy.failover.rules import Fallbacks, load_fallbacks
from taplog.proxy.keys import RECORDER
from taplog.proxy.replay import create_replay_app
from taplog.proxy.runner import ProxyRunner
from taplog.recorder.events import Event
from taplog.recorder.store.reader import read_all
from tests.fakes.servers import ServerThread
from tests.fakes.vendor import FakeVendor


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
    """taplog with every vendor pointed at the fake one."""
    bases = {"openai_base": f"{fake.url}/v1", "anthropic_base": fake.url, "gemini_base": fake.url}
    return start_taplog(servers, data_dir, **{**bases, **overrides})


def serve_fake(servers: ServerThread, **runner_kwargs: Any) -> FakeVendor:
    """A fake vendor served on `servers`, its `url` set; it reads request bodies as they
    came (it decodes a Content-Encoding itself)."""
    vendor = FakeVendor()
    vendor.url = servers.serve(vendor.app(), auto_decompress=False, **runner_kwargs)
    return vendor


class Vendors:
    """Three fake vendors, one per provider, so one can be down while the others serve."""

    def __init__(self, servers: ServerThread) -> None:
        self.openai = serve_fake(servers, handler_cancellation=True)
        self.anthropic = serve_fake(servers, handler_cancellation=True)
        self.gemini = serve_fake(servers, handler_cancellation=True)

    def proxy(
        self, servers: ServerThread, data_dir: Path, rules: dict[str, Any], **overrides: Any
    ) -> Taplog:
        """taplog in front of all three, with these fallback rules (and other settings)."""
        bases = {
            "openai_base": f"{self.openai.url}/v1",
            "anthropic_base": self.anthropic.url,
            "gemini_base": self.gemini.url,
        }
        fallbacks = load_fallbacks(*list(bases.values())[:2], rules, (), bases["gemini_base"])
        return start_taplog(servers, data_dir, fallbacks, **{**bases, **overrides})


# Both ways: an OpenAI model falls back to Claude and a Claude model to OpenAI's.
FAILOVER_RULES = {
    "fallback": [
        {
            "model": "gpt-*",
            "to": ["anthropic:claude-sonnet-4-6"],
            "retries": 2,
            "ttfb_timeout": 1.0,
            "idle_timeout": 1.0,
        },
        {
            "model": "claude-*",
            "to": ["openai:gpt-4.1"],
            "retries": 1,
            "ttfb_timeout": 1.0,
            "idle_timeout": 1.0,
        },
    ]
}
# The first-byte timeout of the one rule `gpt-* -> anthropic` (conftest's `fallback_proxy`).
FALLBACK_TTFB = 1.0


_MODEL_PATHS = ("/v1/chat/completions", "/v1/messages")
_MODEL_METHODS = ("generateContent", "streamGenerateContent")  # Gemini's


def model_requests(fake: FakeVendor) -> list[Any]:
    """The model calls a fake vendor received (not count_tokens, models…)."""
    return [
        r
        for r in fake.requests
        if r.path in _MODEL_PATHS or r.path.rpartition(":")[2] in _MODEL_METHODS
    ]


def serve_replay(servers: ServerThread, source: Path, speed: float = 0) -> str:
    """`taplog replay`'s app on the server thread, answering from `source`, served as
    `taplog replay` serves it; its base URL."""
    app = create_replay_app(source, speed)
    return servers.serve(app, ProxyRunner, header_timeout=Settings().header_timeout)


# -- taplog as a process: `taplog serve` as a user runs it ------------------------------

TAPLOG = str(Path(sys.executable).with_name("taplog"))


def taplog_env(**extra: str) -> dict[str, str]:
    """This environment without any TAPLOG_ setting, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAPLOG_")}
    return {**env, **extra}


class TaplogProcess:
    """A `taplog serve` subprocess, started on a free port."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [TAPLOG, "serve", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or taplog_env(),
        )
        self.banner = [self.process.stdout.readline() for _ in range(4)]
        exported = next(line for line in self.banner if "OPENAI_BASE_URL" in line)
        self.openai_base = exported.strip().split("=", 1)[1]
        self.url = self.openai_base.removesuffix("/v1")

    def stop(self) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=20)
        return self.process.returncode, err


def serve_on_fake(
    fake: FakeVendor, data_dir: Path, *args: str, env: dict[str, str] | None = None
) -> TaplogProcess:
    """`taplog serve` with every vendor pointed at the fake one, and more options."""
    return TaplogProcess(
        "--data-dir",
        str(data_dir),
        "--openai-base",
        f"{fake.url}/v1",
        "--anthropic-base",
        fake.url,
        "--gemini-base",
        fake.url,
        *args,
        env=env,
    )


def fleet_json(env: dict[str, str], location: str, cache: Path, *command: str) -> Any:
    """`taplog COMMAND --fleet LOCATION …` as a user types it (the store's variables in
    `env`), its JSON output read back."""
    fleet = ("--fleet", location, "--fleet-cache", str(cache), "--format", "json")
    done = subprocess.run(
        [TAPLOG, command[0], *fleet, *command[1:]],
        capture_output=True,
        text=True,
        env=taplog_env(**env),
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def until(check: Callable[[], Any], seconds: float = 60.0) -> Any:
    """What `check` returns once it is truthy (asked every 0.2 s, for at most `seconds`)."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.2)
    return found
