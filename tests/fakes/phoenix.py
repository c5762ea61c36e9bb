"""Arize Phoenix (`phoenix serve`) as a real OTLP receiver, on free loopback ports, its data in a
temporary folder, everything that would reach the internet turned off.

Phoenix pins `anthropic<2` (the SDK the tests drive is 2.x) and weighs ~600 MB, so it lives in
a venv of its own: `.ci/run` makes it at `.venv-phoenix` from the `phoenix` extra's pin; set
TAPLOG_PHOENIX to another `phoenix` executable. Without one the tests that need it are skipped.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import ROOT

START_SECONDS = 90.0


def _two_free_ports() -> tuple[int, int]:
    with socket.socket() as one, socket.socket() as two:
        one.bind(("127.0.0.1", 0))
        two.bind(("127.0.0.1", 0))
        return one.getsockname()[1], two.getsockname()[1]


def phoenix_binary() -> str:
    found = os.environ.get("TAPLOG_PHOENIX") or str(ROOT / ".venv-phoenix" / "bin" / "phoenix")
    if not Path(found).is_file():
        pytest.skip(f"no Phoenix at {found} (.ci/run installs it; or set TAPLOG_PHOENIX)")
    return found


class Phoenix:
    """`phoenix serve` on 127.0.0.1; `url` takes OTLP/HTTP at /v1/traces and answers its REST
    API under /v1."""

    def __init__(self, folder: Path) -> None:
        http, grpc = _two_free_ports()
        self.url = f"http://127.0.0.1:{http}"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))},
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(http),
            "PHOENIX_GRPC_PORT": str(grpc),
            "PHOENIX_WORKING_DIR": str(folder),
            "PHOENIX_TELEMETRY_ENABLED": "false",  # no FullStory or Scarf pixels
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",  # no fonts, no downloads
        }
        self.log = (folder / "phoenix.log").open("w")
        self.process = subprocess.Popen(
            [phoenix_binary(), "serve"], cwd=folder, env=env, stdout=self.log, stderr=self.log
        )
        deadline = time.monotonic() + START_SECONDS
        while not self._healthy():
            assert self.process.poll() is None, (folder / "phoenix.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "Phoenix did not start"
            time.sleep(0.3)

    def _healthy(self) -> bool:
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def version(self) -> str:
        return httpx.get(f"{self.url}/arize_phoenix_version", timeout=10).text

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        """Every span of the project, through Phoenix's REST API."""
        found, cursor = [], None
        while True:
            params: dict[str, Any] = {"limit": 1000, **({"cursor": cursor} if cursor else {})}
            answer = httpx.get(f"{self.url}/v1/projects/{project}/spans", params=params, timeout=10)
            if answer.status_code == 404:  # no project before the first span
                return []
            body = answer.json()
            found += body["data"]
            if not (cursor := body.get("next_cursor")):
                return found

    def sessions(self, project: str = "default") -> dict[str, list[str]]:
        """Phoenix's sessions: their id, and the traces it grouped under each."""
        url = f"{self.url}/v1/projects/{project}/sessions"
        answer = httpx.get(url, params={"limit": 100}, timeout=10)
        return {
            s["session_id"]: [t["trace_id"] for t in s["traces"]] for s in answer.json()["data"]
        }

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
