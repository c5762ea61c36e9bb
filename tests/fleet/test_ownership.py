"""Sessions owned across a fleet (`--coordination`): three `taplog serve` instances behind a
real HAProxy (config/haproxy.cfg) and a real Redis, agents streaming through the official
SDK. One instance writes a session at a time: a kill -9 hands its sessions over with a
linked (or declared) `session.resumed`, its restart forks nothing, a fourth instance that
joins sends the sessions it now receives to their owners, and Redis being away refuses no
call."""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from taplog.recorder.store.reader import read_all
from tests.fakes.engines import HAProxy, RedisServer, SeaweedFS, _free_ports
from tests.fakes.harness import (
    TAPLOG,
    TaplogProcess,
    fleet_json,
    serve_on_fake,
    taplog_env,
    until,
)
from tests.fakes.keys import OPENAI_KEY

pytestmark = pytest.mark.slow
TAKEN_OUT = 3.0  # HAProxy's two failed checks a second apart, and a margin
PUT_BACK = 2.5  # one good check (rise 1) a second apart, and a margin
TO = "s3://fleet/ownership"


def _client(url: str, session: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1",
        api_key=OPENAI_KEY,
        max_retries=0,
        timeout=20,
        default_headers={"X-Taplog-Session": session},
        http_client=httpx.Client(),  # a connection of its own: HAProxy picks per request
    )


def _stream(client: openai.OpenAI, text: str) -> str:
    """What a streaming agent's turn received, whole (the SDK raises on a cut stream)."""
    chunks = client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": text}], stream=True
    )
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


class _Instance:
    """`taplog serve --coordination` on a port of its own, which a restart keeps (shipping
    quickly to `store` when given one)."""

    def __init__(
        self, fake, folder: Path, name: str, redis_url: str, port: int, store: SeaweedFS | None
    ) -> None:
        self.fake, self.data, self.name, self.port = fake, folder / name, name, port
        self.args = ("--instance", name, "--coordination", redis_url, "--fsync", "always")
        self.env = None
        if store is not None:
            self.args += ("--ship-to", TO, "--ship-after-minutes", "0.02")
            self.env = taplog_env(**store.env)
        self.process: TaplogProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *extra: str) -> None:
        self.process = serve_on_fake(
            self.fake,
            self.data,
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *self.args,
            *extra,
            env=self.env,
        )

    def kill(self) -> None:
        os.kill(self.process.process.pid, signal.SIGKILL)
        self.process.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.process.poll() is None:
            code, err = self.process.stop()
            assert code == 0, err


def _fleet(
    fake, tmp_path: Path, redis: RedisServer, count: int, store: SeaweedFS | None = None
) -> list[_Instance]:
    """`count` instances, the first of them with two workers and a recorder process."""
    ports = _free_ports(count)
    fleet = [_Instance(fake, tmp_path, f"i{n}", redis.url, ports[n], store) for n in range(count)]
    fleet[0].args += ("--workers", "2")
    return fleet


def _lines(instances: list[_Instance]) -> dict[str, dict[str, list[dict]]]:
    """session -> instance -> its events there."""
    found: dict[str, dict[str, list[dict]]] = collections.defaultdict(dict)
    for instance in instances:
        for session, events in read_all(instance.data).items():
            found[session][instance.name] = events
    return found


def _assert_owned_one_at_a_time(found: dict[str, dict[str, list[dict]]]) -> list[dict]:
    """No (session, epoch, seq) twice, every epoch written by one instance, every change of
    owner a `session.resumed` linked to a line of the previous owner (or declared so).
    Returns the handovers."""
    handovers = []
    for session, by_instance in found.items():
        keys = collections.Counter()
        writers: dict[int, set[str]] = collections.defaultdict(set)
        for name, events in by_instance.items():
            for event in events:
                assert event["epoch"] is not None, event  # Redis answered all along
                keys[(event["epoch"], event["seq"])] += 1
                writers[event["epoch"]].add(name)
        assert max(keys.values()) == 1, (session, keys.most_common(3))
        assert all(len(names) == 1 for names in writers.values()), (session, writers)
        resumed = {
            event["epoch"]: event
            for events in by_instance.values()
            for event in events
            if event["type"] == "session.resumed"
        }
        assert set(resumed) == set(writers) - {min(writers)}, (session, resumed, writers)
        for epoch, event in resumed.items():
            previous = event["previous"]
            assert previous["epoch"] == epoch - 1 and previous["instance"] in writers[epoch - 1]
            if event["linked"]:  # the line it names is in the previous owner's log
                lines = by_instance[previous["instance"]]
                named = [e for e in lines if e["seq"] == previous["seq"]]
                assert named and named[0]["epoch"] == previous["epoch"], (session, event)
                assert named[0]["h"] == previous["h"]
            else:
                assert event["reason"]
            handovers.append(event)
    return handovers


def test_a_killed_instance_hands_its_sessions_over_linked_and_its_restart_forks_none(
    fake, seaweed, tmp_path
):
    with RedisServer(tmp_path / "redis") as redis:
        instances = _fleet(fake, tmp_path, redis, 3, store=seaweed)
        for instance in instances:
            instance.start()
        try:
            with HAProxy(tmp_path / "haproxy", [i.address for i in instances]) as balancer:
                sessions = [f"agent-{n}" for n in range(12)]
                clients = {s: _client(balancer.url, s) for s in sessions}
                for session in sessions:
                    assert _stream(clients[session], f"{session} 0").startswith("Echo")
                owner = {s: next(iter(where)) for s, where in _lines(instances).items()}
                victim = next(i for i in instances if i.name == owner["agent-0"])

                seen_whole: list[tuple[str, str]] = []
                stop = threading.Event()

                def agent(session: str) -> None:
                    turn = 1
                    while not stop.is_set():
                        text = f"{session} turn {turn} !delay=0.01"
                        try:
                            if _stream(clients[session], text).startswith("Echo"):
                                seen_whole.append((session, text))
                        except (openai.APIError, httpx.HTTPError):
                            time.sleep(0.2)  # its instance died under it: the agent retries
                        turn += 1

                agents = [threading.Thread(target=agent, args=(s,)) for s in sessions]
                for thread in agents:
                    thread.start()
                time.sleep(2)
                victim.kill()  # under load: streams in flight on it are cut
                time.sleep(TAKEN_OUT + 2)
                victim.start()  # same data dir, name and port
                time.sleep(PUT_BACK + 2)
                stop.set()
                for thread in agents:
                    thread.join(30)
                assert _leases(victim, "forwarded") > 0  # back, it sent its old sessions on
            logs = sum(len(where) for where in _lines(instances).values())
            verified = until(lambda: _verified(seaweed, tmp_path, logs, len(sessions)), 90)
        finally:
            for instance in instances:
                instance.stop()

    found = _lines(instances)
    handovers = _assert_owned_one_at_a_time(found)
    moved = [s for s in sessions if owner[s] == victim.name]
    assert moved and len(moved) < len(sessions)
    for session in moved:  # taken by another instance, then by the victim's restart
        assert len(found[session]) >= 2, found[session].keys()
    assert {e["session"] for e in handovers} >= set(moved)
    assert any(e["linked"] for e in handovers)
    for session in set(sessions) - set(moved):  # the others never moved
        assert list(found[session]) == [owner[session]]
    recorded = {
        (e["session"], e["body"]["messages"][0]["content"])
        for by_instance in found.values()
        for events in by_instance.values()
        for e in events
        if e["type"] == "llm.request"
    }
    assert len(seen_whole) > 50
    assert set(seen_whole) <= recorded  # every answer a client saw whole is in a log
    assert verified.returncode == 0, verified.stdout  # the shipped fleet proves it too
    said = verified.stdout.splitlines()
    for session in moved:
        assert any(line.startswith(f"session {session}: {victim.name}@1 -> ") for line in said)
    assert said[-1].endswith("0 not yet shipped; 0 forks; 0 damaged"), said[-1]


def _verified(store: SeaweedFS, tmp_path: Path, logs: int, sessions: int) -> Any:
    """`taplog verify --fleet` once every log is shipped, else None."""
    done = subprocess.run(
        [TAPLOG, "verify", "--fleet", TO, "--fleet-cache", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        env=taplog_env(**store.env),
        timeout=60,
    )
    summary = (done.stdout.splitlines() or [""])[-1]
    return done if summary.startswith(f"{logs} logs of {sessions} sessions") else None


def test_a_fourth_instance_that_joins_sends_sessions_on_to_their_owners(fake, seaweed, tmp_path):
    """Also the fleet as a user queries it: 30 streaming agents, each call counted once."""
    with RedisServer(tmp_path / "redis") as redis:
        instances = _fleet(fake, tmp_path, redis, 4, store=seaweed)
        newcomer = instances[3]
        for instance in instances[:3]:
            instance.start()
        try:
            with HAProxy(tmp_path / "haproxy", [i.address for i in instances]) as balancer:
                time.sleep(TAKEN_OUT)  # the fourth, not yet there, is taken out
                sessions = [f"agent-{n}" for n in range(30)]
                for session in sessions:
                    assert _stream(_client(balancer.url, session), "before").startswith("Echo")
                before = _lines(instances)
                newcomer.start()
                time.sleep(PUT_BACK)
                for turn in range(2):
                    for session in sessions:
                        text = f"after {turn}"
                        assert _stream(_client(balancer.url, session), text).startswith("Echo")
                forwarded = _leases(newcomer, "forwarded")
            counted = until(lambda: _shipped(seaweed, tmp_path, calls=90))
        finally:
            for instance in instances:
                instance.stop()
    after = _lines(instances)
    assert forwarded > 0  # the balancer moved some sessions to the newcomer, which sent them on
    for session in sessions:  # each went on in its owner's log, at its first epoch
        assert list(after[session]) == list(before[session])
        (events,) = after[session].values()
        assert len([e for e in events if e["type"] == "llm.request"]) == 3
        assert {e["epoch"] for e in events} == {1}
    assert not newcomer.data.joinpath("sessions").exists() or not list(
        newcomer.data.joinpath("sessions").glob("agent-*.jsonl*")
    )
    assert counted == {"calls": 90, "sessions": 30, "instances": 3, "twice": 0}


def _shipped(store: SeaweedFS, tmp_path: Path, calls: int) -> dict | None:
    """What the fleet query finds once it has `calls` calls: calls, sessions, the instances
    that served them, and `(session, epoch, seq)` keys found twice."""
    sql = (
        "SELECT (SELECT count(*) FROM llm_calls) AS calls, "
        "(SELECT count(DISTINCT session) FROM llm_calls) AS sessions, "
        "(SELECT count(DISTINCT instance) FROM llm_calls) AS instances, "
        "(SELECT count(*) FROM (SELECT session, epoch, seq FROM events "
        "GROUP BY ALL HAVING count(*) > 1)) AS twice"
    )
    (found,) = fleet_json(store.env, TO, tmp_path / "cache", "sql", sql)
    return found if found["calls"] >= calls else None


def _leases(instance: _Instance, outcome: str) -> float:
    """How many calls `instance` counted under `outcome` (its /metrics)."""
    text = httpx.get(f"http://{instance.address}/metrics").text
    found = re.search(rf'taplog_session_leases_total{{outcome="{outcome}"}} (\S+)', text)
    return float(found[1]) if found else 0.0


def test_with_redis_away_calls_go_on_with_their_epoch_unknown(fake, tmp_path):
    redis = RedisServer(tmp_path / "redis")
    with redis:
        instance = _fleet(fake, tmp_path, redis, 1)[0]
        instance.start()
        try:
            url = f"http://{instance.address}"
            assert _stream(_client(url, "before"), "hello").startswith("Echo")
            redis.stop()
            started = time.monotonic()
            assert _stream(_client(url, "while-away"), "hello").startswith("Echo")
            assert _stream(_client(url, "while-away"), "again").startswith("Echo")
            assert time.monotonic() - started < 2.5  # one Redis timeout at most
            redis.start()
            time.sleep(1.2)  # past the retry pause
            assert _stream(_client(url, "after"), "hello").startswith("Echo")
        finally:
            instance.stop()
    found = _lines([instance])
    epochs = {s: {e["epoch"] for e in by["i0"]} for s, by in found.items()}
    assert epochs == {"before": {1}, "while-away": {None}, "after": {1}}
