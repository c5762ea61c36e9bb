"""The session lease protocol against a real Redis: `SessionLeases` stand for instances (and
runs of one instance), `LineReports` for the recorder that tells Redis the lines it wrote.
The whole fleet through real processes is `test_ownership.py`."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis

from taplog.proxy.coordination import leases as leases_module
from taplog.proxy.coordination.clients import connect
from taplog.proxy.coordination.leases import SessionLeases
from taplog.proxy.coordination.reports import LineReports
from tests.fakes.engines import RedisServer

pytestmark = pytest.mark.slow
A_URL, B_URL = "http://127.0.0.1:1001", "http://127.0.0.1:1002"


@pytest.fixture
def server(tmp_path):
    with RedisServer(tmp_path / "redis") as running:
        yield running


def _line(session: str, epoch: int | None, seq: int, h: str) -> dict:
    return {"session": session, "epoch": epoch, "seq": seq, "h": h}


def _reported(server: RedisServer, *lines: dict) -> None:
    """What a recorder wrote, told to Redis as its reporter thread tells it."""
    reports = LineReports(redis.Redis.from_url(server.url))
    reports.start()
    for line in lines:
        reports.observe(line)
    reports.stop()


def test_a_session_is_one_instances_until_its_lease_runs_out(server, monkeypatch):
    async def run() -> None:
        a = SessionLeases(connect(server.url), "a", "a:run1")
        b = SessionLeases(connect(server.url), "b", "b:run1")
        first = await a.claim("s", A_URL)
        assert (first.epoch, first.resumed, first.owner_url) == (1, None, None)
        assert a.held("s") == 1 and (await a.claim("s", A_URL)).epoch == 1  # renewed, same
        owned = await b.claim("s", B_URL)
        assert owned.owner_url == A_URL and b.held("s") is None  # b sends the call to a
        _reported(server, _line("s", 1, 7, "h7"))
        monkeypatch.setattr(leases_module, "LEASE_SECONDS", 0.2)
        await a.claim("s", A_URL)  # a lease of 0.2 s, which then runs out
        await asyncio.sleep(0.3)
        taken = await b.claim("s", B_URL)
        assert taken.epoch == 2 and taken.owner_url is None
        resumed = taken.resumed
        assert resumed["type"] == "session.resumed" and resumed["epoch"] == 2
        assert resumed["instance"] == "b" and resumed["linked"] is True
        assert resumed["previous"] == {"instance": "a", "epoch": 1, "seq": 7, "h": "h7"}
        _reported(server, _line("s", 1, 9, "late"))  # a's report of epoch 1 no longer counts
        monkeypatch.setattr(leases_module, "LEASE_SECONDS", 30.0)
        assert (await a.claim("s", A_URL)).owner_url == B_URL
        a.started("s")  # a believed it until its own end: its renewal learns it is b's now
        a._held["s"].until = time.monotonic()  # due
        await a.renew()
        assert a.held("s") is None

    asyncio.run(run())


def test_a_restart_takes_its_own_sessions_back_at_once_and_a_forwarded_call_takes_any(server):
    async def run() -> None:
        before = SessionLeases(connect(server.url), "a", "a:run1")
        assert (await before.claim("s", A_URL)).epoch == 1
        _reported(server, _line("s", 1, 3, "h3"))
        after = SessionLeases(connect(server.url), "a", "a:run2")  # same name, new run
        again = await after.claim("s", A_URL)
        assert again.epoch == 2 and again.resumed["previous"]["seq"] == 3
        b = SessionLeases(connect(server.url), "b", "b:run1")
        assert (await b.claim("s", B_URL)).owner_url == A_URL
        taken = await b.claim("s", B_URL, take=True)  # a could not be reached, or sent it
        assert taken.epoch == 3 and taken.resumed["previous"]["instance"] == "a"
        assert taken.resumed["linked"] is False and "reported no line" in taken.resumed["reason"]

    asyncio.run(run())


def test_a_clean_stop_releases_what_was_written_so_the_next_owner_links_the_last_line(server):
    async def run() -> None:
        a = SessionLeases(connect(server.url), "a", "a:run1")
        b = SessionLeases(connect(server.url), "b", "b:run1")
        await a.claim("s", A_URL)
        assert (await b.claim("s", B_URL)).owner_url == A_URL
        _reported(server, _line("s", 1, 1, "h1"), _line("s", 1, 2, "h2"))  # then released
        taken = await b.claim("s", B_URL)
        assert taken.epoch == 2 and taken.resumed["previous"]["seq"] == 2

    asyncio.run(run())


def test_a_session_taplog_names_itself_waits_on_no_redis(server):
    async def run() -> None:
        a = SessionLeases(connect(server.url), "a", "a:run1")
        assert a.claim_new("fresh", A_URL).epoch == 1 and a.held("fresh") == 1
        await asyncio.sleep(0.2)  # claimed in the background meanwhile
        b = SessionLeases(connect(server.url), "b", "b:run1")
        assert (await b.claim("fresh", B_URL)).owner_url == A_URL

    asyncio.run(run())


def test_without_redis_a_claim_answers_at_once_with_no_epoch_and_does_not_ask_again(tmp_path):
    async def run() -> None:
        server = RedisServer(tmp_path / "redis")  # never started: nothing listens
        a = SessionLeases(connect(server.url), "a", "a:run1")
        started = time.monotonic()
        assert (await a.claim("s", A_URL)).epoch is None
        assert (await a.claim("t", A_URL)).epoch is None  # within the retry pause: not asked
        assert time.monotonic() - started < 1.0

    asyncio.run(run())
