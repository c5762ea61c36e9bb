"""Circuit breakers shared by a fleet's instances through a real Redis (`--coordination`).

Two `FleetBreakers` stand for two instances; `refresh` is what each does every half
second. Then two real `taplog serve` instances, one vendor failing through both.
"""

from __future__ import annotations

import asyncio
import re
import time

import httpx
import openai
import pytest

from taplog.proxy.coordination.breakers import FleetBreakers
from taplog.proxy.coordination.clients import connect
from tests.fakes.engines import RedisServer
from tests.fakes.harness import TaplogProcess, model_requests
from tests.fakes.keys import OPENAI_KEY

pytestmark = pytest.mark.slow
TARGET = "openai:gpt-4.1"


async def _settled(*fleet: FleetBreakers) -> None:
    """What each sent has reached Redis, and each has read the others'."""
    for breakers in fleet:
        await breakers.sent()
    for breakers in fleet:
        await breakers.refresh()


def test_what_one_instance_saw_opens_the_circuit_for_all_with_one_probe(tmp_path):
    async def run() -> None:
        with RedisServer(tmp_path / "redis") as server:
            one, other = (FleetBreakers(connect(server.url), n, cool_down=0.3) for n in "ab")
            await _settled(one, other)
            assert one.shared and other.shared
            assert other[TARGET].allows()  # known to it from now on
            for _ in range(3):
                one[TARGET].failed()
            await _settled(one, other)
            assert other.states() == {TARGET: "open"} and not other[TARGET].allows()
            await asyncio.sleep(0.35)
            await _settled(one, other)  # both race for the probe
            allowed = [b[TARGET].allows() for b in (one, other) for _ in range(3)]
            assert allowed.count(True) == 1  # one call of the whole fleet
            prober = one if any(allowed[:3]) else other
            prober[TARGET].succeeded()
            await _settled(one, other)
            assert one.states() == other.states() == {TARGET: "closed"}

    asyncio.run(run())


def test_with_redis_away_each_instance_keeps_breakers_of_its_own(tmp_path):
    async def run() -> None:
        server = RedisServer(tmp_path / "redis")
        with server:
            one, other = (FleetBreakers(connect(server.url), n) for n in "ab")
            await _settled(one, other)
            server.stop()
            for _ in range(3):
                one[TARGET].failed()
            await _settled(one, other)
            assert not one.shared and not other.shared
            assert not one[TARGET].allows()  # its own circuit opened
            assert other[TARGET].allows()  # it saw no failure itself
            server.start()
            await _settled(one, other)
            assert one.shared and one[TARGET].allows()  # the fleet's state again

    asyncio.run(run())


def _serve(vendors, data, redis_url: str) -> TaplogProcess:
    return TaplogProcess(
        *("--data-dir", str(data), "--coordination", redis_url),
        *("--openai-base", f"{vendors.openai.url}/v1", "--anthropic-base", vendors.anthropic.url),
        *("--fallback", "gpt-*=anthropic:claude-sonnet-4-6"),
    )


def _ask(instance: TaplogProcess, text: str) -> str:
    client = openai.OpenAI(base_url=instance.openai_base, api_key=OPENAI_KEY, max_retries=0)
    answer = client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": text}]
    )
    return answer.choices[0].message.content


def _open_in(instance: TaplogProcess) -> bool:
    scraped = httpx.get(f"{instance.url}/metrics").text
    return bool(re.search(r'circuit_breaker_state\{[^}]*state="open"[^}]*\} 1', scraped))


def test_a_vendor_failing_through_one_instance_is_skipped_by_every_instance(vendors, tmp_path):
    password = "redis-pass-4f9c2e7a1b"
    with RedisServer(tmp_path / "redis", password) as server:
        one, other = (_serve(vendors, tmp_path / n, server.url) for n in ("one", "other"))
        try:
            vendors.openai.down = {"status": "503"}
            assert _ask(one, "here") == "Echo: here"  # its three tries open the circuit
            failed = len(model_requests(vendors.openai))
            deadline = time.monotonic() + 3
            while not _open_in(other):
                assert time.monotonic() < deadline, "the other instance never saw it open"
                time.sleep(0.1)
            assert _ask(other, "there") == "Echo: there"
            assert len(model_requests(vendors.openai)) == failed  # not waited on again
            time.sleep(5.5)  # the cool-down: now calls through both, one probe among them
            for n in range(3):
                for instance in (one, other):
                    assert _ask(instance, f"later {n}") == f"Echo: later {n}"
                time.sleep(0.3)
            assert len(model_requests(vendors.openai)) == failed + 1
            server.stop()
            time.sleep(1)  # each instance finds it away within half a second
            assert _ask(one, "alone") == "Echo: alone"  # on its own breakers
        finally:
            stopped = [instance.stop() for instance in (one, other)]
    assert all(code == 0 for code, _ in stopped), stopped
    assert "Redis does not answer" in stopped[0][1]
    assert not [err for _, err in stopped if password in err]
