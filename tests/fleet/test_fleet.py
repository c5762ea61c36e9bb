"""A fleet as a user runs one: `taplog serve --instance … --ship-to s3://…` processes in
front of fake vendors, official SDK clients, a real SeaweedFS, and `taplog sql --fleet`.

Shipping is made quick (sessions idle 1.2 s are shipped) so the tests can wait for it;
everything else is as in production.
"""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.fakes.clients import anthropic_at, openai_at
from tests.fakes.engines import SeaweedFS
from tests.fakes.harness import TaplogProcess, fleet_json, serve_on_fake, taplog_env, until

pytestmark = pytest.mark.slow
TO = "s3://fleet/prod"
QUICK = ("--ship-after-minutes", "0.02", "--log-level", "warning")
STORE_DOWN_SECONDS = 60.0  # "SeaweedFS stopped for a minute"


def _fleet(seaweed: SeaweedFS, tmp_path, *command: str) -> list[dict]:
    return fleet_json(seaweed.env, TO, tmp_path / "cache", *command)


def _fleet_sql(seaweed: SeaweedFS, tmp_path, sql: str) -> list[dict]:
    return _fleet(seaweed, tmp_path, "sql", sql)


def _metrics(served: TaplogProcess) -> dict[str, float]:
    text = httpx.get(f"{served.url}/metrics").text
    return {
        name: float(value)
        for name, _, value in (line.partition(" ") for line in text.splitlines())
        if name.startswith("taplog_ship_")
    }


def _agent(served: TaplogProcess, session: str, calls: int) -> float:
    """`calls` calls of one session, OpenAI (streamed and not) and Anthropic in turn; when
    the last ended."""
    headers = {"X-Taplog-Session": session}
    oai, ant = openai_at(served.url), anthropic_at(served.url)
    for n in range(calls):
        if n % 3 == 0:
            oai.chat.completions.create(
                model="gpt-4.1",
                messages=[{"role": "user", "content": f"hi {n}"}],
                extra_headers=headers,
            )
        elif n % 3 == 1:
            stream = oai.chat.completions.create(
                model="gpt-4.1",
                messages=[{"role": "user", "content": f"tell {n} !events=5"}],
                stream=True,
                extra_headers=headers,
            )
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        else:
            ant.messages.create(
                model="claude-sonnet-4-6",
                max_tokens=64,
                messages=[{"role": "user", "content": f"hello {n}"}],
                extra_headers=headers,
            )
    return time.time()


def test_three_instances_ship_to_one_bucket_and_the_fleet_counts_each_call_once(
    fake, seaweed: SeaweedFS, tmp_path
):
    env = taplog_env(**seaweed.env)
    fleet = {
        name: serve_on_fake(
            fake, tmp_path / name, "--instance", name, "--ship-to", TO, *QUICK, *more, env=env
        )
        for name, more in (("a", ()), ("b", ("--workers", "2")), ("c", ()))
    }
    try:
        with ThreadPoolExecutor(9) as pool:
            ended = list(
                pool.map(
                    lambda job: _agent(fleet[job[0]], f"{job[0]}-{job[1]}", 4),
                    [(name, k) for name in fleet for k in range(3)],
                )
            )
        rows = until(
            lambda: [
                r
                for r in _fleet_sql(seaweed, tmp_path, "SELECT count(*) AS n FROM llm_calls")
                if r["n"] == 36
            ]
        )
        delay = time.time() - max(ended)
        print(f"\nshipping delay (last call's end to the fleet query counting it): {delay:.1f} s")
        assert rows
        per_instance = (
            "SELECT instance, count(*) AS calls, count(DISTINCT session) AS sessions, "
            "count(DISTINCT exchange) AS exchanges FROM llm_calls GROUP BY 1 ORDER BY 1"
        )
        for cache, parent in (("cold", tmp_path / "cold"), ("warm", tmp_path)):
            started = time.monotonic()
            per = _fleet_sql(seaweed, parent, per_instance)
            print(f"fleet query time, cache {cache}: {time.monotonic() - started:.2f} s")
        assert per == [
            {"instance": name, "calls": 12, "sessions": 3, "exchanges": 12} for name in "abc"
        ]
        [dupes] = _fleet_sql(
            seaweed,
            tmp_path,
            "SELECT count(*) AS events, count(DISTINCT (instance, session, seq)) AS keys, "
            "count(DISTINCT id) AS ids FROM events",
        )
        assert dupes["events"] == dupes["keys"] == dupes["ids"]
        sessions = _fleet_sql(seaweed, tmp_path, "SELECT session, instances, calls FROM sessions")
        assert sorted((s["session"], s["instances"], s["calls"]) for s in sessions) == [
            (f"{name}-{k}", [name], 4) for name in "abc" for k in range(3)
        ]
        listed = _fleet(seaweed, tmp_path, "sessions")
        assert {s["instances"][0] for s in listed} == {"a", "b", "c"}
        for served in fleet.values():  # shipping is where the recorder runs, --workers too
            shipped = _metrics(served)
            assert shipped["taplog_ship_backlog_objects"] == 0
            assert shipped["taplog_ship_uploads_total"] >= 3
    finally:
        for served in fleet.values():
            code, err = served.stop()
            assert code == 0, err
            assert seaweed.SECRET_KEY not in err


def test_a_store_that_is_down_slows_no_call_and_its_backlog_drains_when_it_is_back(
    fake, seaweed: SeaweedFS, tmp_path
):
    served = serve_on_fake(
        fake,
        tmp_path / "a",
        "--instance",
        "a",
        "--ship-to",
        TO,
        *QUICK,
        env=taplog_env(**seaweed.env),
    )
    try:
        oai = openai_at(served.url)

        def timed_calls(session: str, n: int) -> float:
            started = time.monotonic()
            for k in range(n):
                oai.chat.completions.create(
                    model="gpt-4.1",
                    messages=[{"role": "user", "content": f"hi {k}"}],
                    extra_headers={"X-Taplog-Session": session},
                )
            return (time.monotonic() - started) / n

        up = timed_calls("before", 20)
        seaweed.stop()
        down_since = time.monotonic()
        down = timed_calls("during-1", 20)
        time.sleep(2)  # idle: due to ship, into a store that is not there
        down = max(down, timed_calls("during-2", 20))
        waiting = until(lambda: (m := _metrics(served))["taplog_ship_backlog_objects"] and m)
        assert waiting["taplog_ship_backlog_bytes"] > 0
        assert waiting["taplog_ship_store_reachable"] == 0
        assert waiting["taplog_ship_failures_total"] >= 1
        made = 60
        while time.monotonic() - down_since < STORE_DOWN_SECONDS:  # calls go on meanwhile
            down = max(down, timed_calls(f"during-{made}", 5))
            made += 5
            time.sleep(1)
        # a call costs what it did: none waits on the store (its client gives up after
        # seconds); the bound leaves room for a shared machine's noise, tens of ms a call
        assert down < up + 0.25, (up, down)
        seaweed.start()
        until(lambda: _metrics(served)["taplog_ship_backlog_objects"] == 0)
        rows = until(
            lambda: [
                r
                for r in _fleet_sql(seaweed, tmp_path, "SELECT count(*) AS n FROM llm_calls")
                if r["n"] == made
            ]
        )
        assert rows and _metrics(served)["taplog_ship_store_reachable"] == 1
        metrics_text = httpx.get(f"{served.url}/metrics").text
        assert seaweed.SECRET_KEY not in metrics_text
        assert seaweed.ACCESS_KEY not in metrics_text
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert seaweed.SECRET_KEY not in err and "trying again" in err


@pytest.mark.parametrize("workers", [(), ("--workers", "2")], ids=["one-process", "workers"])
def test_a_stopped_instance_ships_every_session_before_it_exits_so_a_lost_disk_loses_nothing(
    fake, seaweed: SeaweedFS, tmp_path, workers
):
    """SIGTERM with 30 sessions that are not due yet (idle for 10 minutes, by default):
    they are shipped before the exit, so the fleet counts them all once the data dir is
    gone; the backlog counted them before."""
    data = tmp_path / "a"
    served = serve_on_fake(
        fake,
        data,
        "--instance",
        "a",
        "--ship-to",
        TO,
        "--log-level",
        "warning",
        *workers,
        env=taplog_env(**seaweed.env),
    )
    try:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda k: _agent(served, f"s-{k}", 1), range(30)))
        waiting = until(lambda: (m := _metrics(served))["taplog_ship_backlog_objects"] and m)
        assert waiting["taplog_ship_backlog_objects"] == 31  # the logs, and a manifest
        assert waiting["taplog_ship_backlog_bytes"] > 0
    finally:
        asked = time.monotonic()
        code, err = served.stop()
        took = time.monotonic() - asked
    assert code == 0, err
    print(f"\nSIGTERM to exit with 30 unshipped sessions ({' '.join(workers)}): {took:.2f} s")
    shutil.rmtree(data)  # the disk goes with the container
    [row] = _fleet_sql(
        seaweed, tmp_path, "SELECT count(*) AS calls, count(DISTINCT session) AS n FROM llm_calls"
    )
    assert row == {"calls": 30, "n": 30}


def test_an_instance_killed_with_its_disk_kept_ships_what_it_left_as_soon_as_it_starts(
    fake, seaweed: SeaweedFS, tmp_path
):
    env = taplog_env(**seaweed.env)
    args = ("--instance", "a", "--ship-to", TO, "--log-level", "warning")
    served = serve_on_fake(fake, tmp_path / "a", *args, env=env)
    for k in range(5):
        _agent(served, f"k-{k}", 2)
    served.process.kill()
    served.process.communicate(timeout=20)
    assert _fleet_sql(seaweed, tmp_path, "SELECT count(*) AS n FROM llm_calls") == [{"n": 0}]

    again = serve_on_fake(fake, tmp_path / "a", *args, env=env)
    started = time.monotonic()
    try:
        rows = until(
            lambda: [
                r
                for r in _fleet_sql(seaweed, tmp_path, "SELECT count(*) AS n FROM llm_calls")
                if r["n"] == 10
            ],
            seconds=30,
        )
        print(f"\nkilled, started again: in the fleet after {time.monotonic() - started:.1f} s")
        assert rows
    finally:
        code, err = again.stop()
    assert code == 0, err


def test_a_stop_whose_last_round_cannot_ship_says_what_it_left_and_the_next_start_ships_it(
    fake, seaweed: SeaweedFS, tmp_path
):
    env = taplog_env(**seaweed.env)
    args = ("--instance", "a", "--ship-to", TO, "--log-level", "warning")
    served = serve_on_fake(fake, tmp_path / "a", *args, "--shutdown-grace", "2", env=env)
    for k in range(3):
        _agent(served, f"left-{k}", 1)
    seaweed.stop()
    asked = time.monotonic()
    code, err = served.stop()
    took = time.monotonic() - asked
    assert code == 0 and took < 10, (took, err)  # the grace, not the store's patience
    assert "3 sessions not shipped within 2 s of the stop" in err
    assert "they ship when taplog next starts on" in err

    seaweed.start()
    again = serve_on_fake(fake, tmp_path / "a", *args, env=env)
    try:
        assert until(
            lambda: (
                _fleet_sql(seaweed, tmp_path, "SELECT count(*) AS n FROM llm_calls") == [{"n": 3}]
            ),
            seconds=30,
        )
    finally:
        code, err = again.stop()
    assert code == 0, err
