"""Three `taplog serve` instances behind a real HAProxy with config/haproxy.cfg: each
session stays on one instance, stateless chats of one key stay where they can be
stitched, and an instance that dies moves only its own sessions."""

from __future__ import annotations

import os
import signal
import time

import httpx
import openai
import pytest

from taplog.recorder.store.reader import read_all
from tests.fakes.engines import HAProxy
from tests.fakes.harness import serve_on_fake
from tests.fakes.keys import OPENAI_KEY

pytestmark = pytest.mark.slow


def _ask(url: str, text: str, session: str | None = None, messages: list | None = None) -> str:
    client = openai.OpenAI(
        base_url=f"{url}/v1",
        api_key=OPENAI_KEY,
        max_retries=0,
        default_headers={"X-Taplog-Session": session} if session else None,
        http_client=httpx.Client(),  # a connection of its own: HAProxy picks per request
    )
    messages = messages or [{"role": "user", "content": text}]
    answer = client.chat.completions.create(model="gpt-4.1", messages=messages)
    return answer.choices[0].message.content


def _where(instances) -> dict[str, list[int]]:
    """session -> the instances whose data dir has it."""
    found: dict[str, list[int]] = {}
    for n, instance in enumerate(instances):
        for session in read_all(instance.data):
            found.setdefault(session, []).append(n)
    return found


def test_sessions_stay_on_one_instance_and_only_a_dead_ones_move(fake, tmp_path):
    instances = []
    for n in range(3):
        instance = serve_on_fake(fake, tmp_path / f"data-{n}", "--log-level", "warning")
        instance.data = tmp_path / f"data-{n}"
        instances.append(instance)
    servers = [instance.url.removeprefix("http://") for instance in instances]
    try:
        with HAProxy(tmp_path / "haproxy", servers) as balancer:
            sessions = [f"agent-{n}" for n in range(12)]
            for turn in range(3):
                for session in sessions:
                    assert _ask(balancer.url, f"{session} {turn}", session).startswith("Echo")
            messages = [{"role": "user", "content": "stateless"}]
            for turn in range(3):  # no session named: the key routes, taplog stitches
                reply = _ask(balancer.url, "", messages=messages)
                messages += [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": f"and {turn}"},
                ]
            before = _where(instances)
            assert all(len(before[s]) == 1 for s in sessions), before
            assert len({before[s][0] for s in sessions}) > 1  # spread over the instances
            stitched = [s for s in before if s not in sessions]
            assert len(stitched) == 1  # three turns, one session, on one instance

            (victim,) = before[sessions[0]]
            os.kill(instances[victim].process.pid, signal.SIGKILL)
            time.sleep(3)  # two failed checks, a second apart: it is taken out
            for session in sessions:
                assert _ask(balancer.url, f"{session} after", session).startswith("Echo")
            after = _where(instances)  # the dead one's data dir is still there
            moved = [s for s in sessions if before[s] == [victim]]
            assert moved and len(moved) < len(sessions)
            for session in sessions:  # only the dead one's sessions went elsewhere
                if session in moved:
                    assert victim in after[session] and len(after[session]) == 2
                else:
                    assert after[session] == before[session]
    finally:
        for instance in instances:
            if instance.process.poll() is None:
                instance.stop()
