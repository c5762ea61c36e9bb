"""The fleet's events table as other engines read it, and as its days expire: `taplog serve
--ship-to` processes and the in-process shipper against a real SeaweedFS, then `taplog sql
--fleet`, DuckDB and chDB (both from PyPI) reading the table directly, as
docs/deployment.md shows.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from taplog.recorder.fleet.layout import parse_location
from taplog.recorder.fleet.shipper import Shipper
from tests.builders import write_dated_sessions
from tests.fakes.clients import openai_at
from tests.fakes.engines import SeaweedFS, SlowLink
from tests.fakes.harness import TAPLOG, fleet_json, serve_on_fake, taplog_env, until

pytestmark = pytest.mark.slow
TO = "s3://fleet/prod"
QUICK = ("--ship-after-minutes", "0.02", "--log-level", "warning")
# the calls `taplog sql --fleet "SELECT count(*) FROM llm_calls"` counts, in the table's rows
CALLS = "count(DISTINCT (session, exchange)) FILTER (WHERE type = 'llm.request')"


def _duckdb(seaweed: SeaweedFS) -> tuple[int, int]:
    """Calls and events, DuckDB reading the table through delta-rs (docs/deployment.md)."""
    import duckdb
    from deltalake import DeltaTable

    options = {
        "AWS_ENDPOINT_URL": seaweed.env["AWS_ENDPOINT_URL"],
        "AWS_ACCESS_KEY_ID": seaweed.env["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": seaweed.env["AWS_SECRET_ACCESS_KEY"],
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    events = DeltaTable("s3://fleet/prod/tables/events", storage_options=options)
    events = events.to_pyarrow_dataset()  # DuckDB reads it by its name
    [(calls, count)] = duckdb.sql(f"SELECT {CALLS}, count(*) FROM events").fetchall()
    return calls, count


def _chdb(seaweed: SeaweedFS) -> tuple[int, int]:
    """Calls and events, chDB (ClickHouse) reading the table (docs/deployment.md)."""
    import chdb

    env = seaweed.env
    table = (
        f"deltaLake('{env['AWS_ENDPOINT_URL']}/fleet/prod/tables/events/', "
        f"'{env['AWS_ACCESS_KEY_ID']}', '{env['AWS_SECRET_ACCESS_KEY']}')"
    )
    found = chdb.query(
        f"SELECT uniqExactIf((session, exchange), type = 'llm.request'), count() FROM {table}",
        "CSV",
    )
    calls, events = str(found).strip().split(",")
    return int(calls), int(events)


def _taplog(seaweed: SeaweedFS, tmp_path) -> tuple[int, int]:
    """Calls and events as `taplog sql --fleet` counts them, with a cold cache."""
    sql = "SELECT (SELECT count(*) FROM llm_calls) AS calls, (SELECT count(*) FROM events) AS n"
    [row] = fleet_json(seaweed.env, TO, tmp_path / f"cache-{time.monotonic_ns()}", "sql", sql)
    return row["calls"], row["n"]


def _call(url: str, session: str, text: str) -> None:
    openai_at(url).chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": text}],
        extra_headers={"X-Taplog-Session": session},
    )


def test_sessions_shipped_again_and_a_round_killed_mid_upload_count_once_in_every_engine(
    fake, seaweed: SeaweedFS, tmp_path
):
    env = taplog_env(**seaweed.env)
    shipping = ("--instance", "a", "--ship-to", TO, *QUICK)
    calls = 0
    served = serve_on_fake(fake, tmp_path / "a", *shipping, env=env)
    try:
        for turn in range(5):  # each session grows and is shipped again, five times
            for k in range(3):
                _call(served.url, f"grows-{k}", f"turn {turn}")
            calls += 3
            until(lambda: _taplog(seaweed, tmp_path)[0] == calls, seconds=60)  # noqa: B023
    finally:
        assert served.stop()[0] == 0

    # 40 sessions recorded without shipping; the next start ships them in its first round,
    # and is killed as that round's first logs land, before its commit
    quiet = serve_on_fake(fake, tmp_path / "a", "--log-level", "warning", env=env)
    for k in range(40):
        _call(quiet.url, f"late-{k}", "hello")
    calls += 40
    assert quiet.stop()[0] == 0
    shipped_logs = len(seaweed.keys("prod/logs/"))
    slow = SlowLink(int(seaweed.env["AWS_ENDPOINT_URL"].rpartition(":")[2]), delay=0.05)
    try:  # each request held 50 ms: the round's 80 (a PUT and a HEAD a log) take seconds
        killed = serve_on_fake(
            fake, tmp_path / "a", *shipping, env={**env, "AWS_ENDPOINT_URL": slow.url}
        )
        deadline = time.monotonic() + 30
        while len(seaweed.keys("prod/logs/")) == shipped_logs:
            assert time.monotonic() < deadline, "the first round uploaded nothing"
            time.sleep(0.005)
        killed.process.kill()
        killed.process.communicate(timeout=20)
    finally:
        slow.close()
    late_logs = {key.split("/")[3] for key in seaweed.keys("prod/logs/") if "/late-" in key}
    counted, _ = _duckdb(seaweed)
    assert late_logs and counted == calls - 40  # killed mid-round: its uploads, no commit

    again = serve_on_fake(fake, tmp_path / "a", *shipping, env=env)
    try:
        until(lambda: _taplog(seaweed, tmp_path)[0] == calls, seconds=60)
    finally:
        assert again.stop()[0] == 0
    by_taplog, by_duckdb, by_chdb = _taplog(seaweed, tmp_path), _duckdb(seaweed), _chdb(seaweed)
    print(
        f"\ncalls made {calls}; (calls, events): taplog {by_taplog}, DuckDB {by_duckdb}, "
        f"chDB {by_chdb}"
    )
    assert by_taplog == by_duckdb == by_chdb and by_taplog[0] == calls == 55


def test_expiring_old_days_the_documented_way_leaves_every_fleet_command_working(
    store_env: SeaweedFS, tmp_path
):
    shared = "shared " * 400  # over the writer's inline limit: a blob, in both sessions
    data = tmp_path / "data"
    write_dated_sessions(
        data,
        {
            "old-a": ([40, 39], shared),
            "old-b": ([50], "only old-b " * 300),  # its blob named by nobody else
            "kept": ([1, 0.5], shared),
        },
    )
    assert Shipper(data, parse_location(TO), "a", idle_seconds=0).ship_once() == [
        "kept",
        "old-a",
        "old-b",
    ]
    blobs_before = store_env.keys("prod/blobs/")
    assert len(blobs_before) == 2

    env = taplog_env(**store_env.env)
    pruned = subprocess.run(
        [TAPLOG, "prune", "--fleet", TO, "--older-than", "30d"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert pruned.returncode == 0, pruned.stderr
    assert "pruned 2 sessions" in pruned.stdout and "2 logs, 1 blob" in pruned.stdout
    assert [k.split("/")[3] for k in store_env.keys("prod/logs/")] == ["kept"]
    assert len(store_env.keys("prod/blobs/")) == 1

    for cache in ("cold", "cold-again"):  # every fleet command, from an empty cache
        calls = fleet_json(
            store_env.env,
            TO,
            tmp_path / cache,
            "sql",
            "SELECT session, count(*) AS n, max(length(request_body::VARCHAR)) > 2000 AS big "
            "FROM llm_calls GROUP BY ALL",
        )
        assert calls == [{"session": "kept", "n": 2, "big": True}]
    listed = fleet_json(store_env.env, TO, tmp_path / "listed", "sessions")
    assert [row["session"] for row in listed] == ["kept"]
    assert listed[0]["prompt"].startswith("shared shared")  # its first request, a blob
    verified = subprocess.run(
        [TAPLOG, "verify", "--fleet", TO, "--fleet-cache", str(tmp_path / "verify")],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    tidied = subprocess.run(
        [TAPLOG, "compact", "--fleet", TO], capture_output=True, text=True, env=env, timeout=60
    )
    assert tidied.returncode == 0 and "merged away" in tidied.stdout, tidied.stderr
