"""Shipping and fleet queries in-process, against a real SeaweedFS: what one round writes,
that writing it again uploads nothing new, and that a session shipped twice counts once."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from taplog.recorder.fleet.fetch import fetch
from taplog.recorder.fleet.layout import parse_location
from taplog.recorder.fleet.shipper import Shipper
from taplog.recorder.fleet.store import StoreError
from taplog.recorder.fleet.table import SMALL_FILES, storage_options
from taplog.recorder.fleet.views import connect_fleet
from tests.disk import log_of, logs, readable
from tests.fakes.clients import openai_at
from tests.fakes.engines import SeaweedFS
from tests.fakes.harness import start_on_fake

pytestmark = pytest.mark.slow
TO = "s3://fleet/prod"


def _shipper(data_dir: Path, instance: str = "a") -> Shipper:
    return Shipper(data_dir, parse_location(TO), instance, idle_seconds=0)


def _fleet(tmp_path: Path, sql: str) -> list[tuple]:
    fleet = fetch(parse_location(TO), tmp_path / "cache")
    return connect_fleet(fleet).sql(sql).fetchall()


def _chat(oai, session: str, text: str = "hi") -> None:
    oai.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": text}],
        extra_headers={"X-Taplog-Session": session},
    )


def _objects(store: SeaweedFS) -> list[str]:
    """The logs and blobs in the store (the table's files change with every commit)."""
    return [k for k in store.keys("prod/") if not k.startswith("prod/tables/")]


def test_a_round_ships_logs_and_one_commit_and_the_fleet_reads_them(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    for n in range(3):
        _chat(oai, "one", f"turn {n}")
    _chat(oai, "two")
    taplog.flush()
    shipper = _shipper(taplog.data_dir)
    assert shipper.ship_once() == ["one", "two"]
    keys = store_env.keys("prod/")
    assert len([k for k in keys if k.startswith("prod/logs/instance=a/")]) == 2
    assert [k for k in keys if "_delta_log/" in k] == [
        "prod/tables/events/_delta_log/00000000000000000000.json"
    ]
    parts = [k for k in keys if k.startswith("prod/tables/events/day=")]
    assert len(parts) == 1 and "/instance=a/" in parts[0]
    assert shipper.stats.backlog_objects == 0 and shipper.stats.uploads == 3
    rows = _fleet(
        tmp_path, "SELECT instance, session, count(*) FROM llm_calls GROUP BY ALL ORDER BY 2"
    )
    assert rows == [("a", "one", 3), ("a", "two", 1)]
    [(instances,)] = _fleet(tmp_path, "SELECT instances FROM sessions WHERE session = 'one'")
    assert instances == ["a"]


def test_shipping_again_uploads_nothing_twice_and_a_lost_state_replaces_its_copy(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    _chat(oai, "one")
    taplog.flush()
    assert _shipper(taplog.data_dir).ship_once() == ["one"]
    before = store_env.keys("prod/")
    assert _shipper(taplog.data_dir).ship_once() == []  # the saved state says it is there
    assert store_env.keys("prod/") == before
    (taplog.data_dir / "shipping" / "state.json").unlink()
    logs_before = _objects(store_env)
    assert _shipper(taplog.data_dir).ship_once() == ["one"]  # shipped again, as a new copy
    assert _objects(store_env) == logs_before  # the same log: found in the store, not rewritten
    assert _fleet(tmp_path, "SELECT count(*) FROM llm_calls") == [(1,)]


def test_a_session_that_grows_after_shipping_is_shipped_again_and_counted_once(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    _chat(oai, "grows", "first")
    taplog.flush()
    shipper = _shipper(taplog.data_dir)
    shipper.ship_once()
    _chat(oai, "grows", "second")
    taplog.flush()
    assert shipper.ship_once() == ["grows"]
    assert len(store_env.keys("prod/logs/instance=a/grows/")) == 2  # both versions are kept
    rows = _fleet(tmp_path, "SELECT count(*), count(DISTINCT (session, seq)) FROM events")
    [(events, distinct)] = rows
    assert events == distinct and _fleet(tmp_path, "SELECT count(*) FROM llm_calls") == [(2,)]


def test_many_rounds_leave_few_files_in_a_partition(taplog, oai, store_env: SeaweedFS, tmp_path):
    from deltalake import DeltaTable

    shipper = _shipper(taplog.data_dir)
    for k in range(SMALL_FILES + 4):  # a round for each session: a file each
        _chat(oai, f"s{k}")
        taplog.flush()
        assert shipper.ship_once() == [f"s{k}"]
    events = DeltaTable("s3://fleet/prod/tables/events", storage_options=storage_options())
    assert len(events.file_uris()) <= SMALL_FILES
    assert "OPTIMIZE" in [commit["operation"] for commit in events.history()]
    assert _fleet(tmp_path, "SELECT count(*) FROM llm_calls") == [(SMALL_FILES + 4,)]


def test_a_large_body_ships_as_its_blob_and_the_fleet_puts_it_back(
    servers, fake, store_env: SeaweedFS, tmp_path
):
    taplog = start_on_fake(servers, fake, tmp_path / "data", body_inline_max_kb=1.0)
    _chat(openai_at(taplog.url), "big", "x" * 5000)
    taplog.flush()
    _shipper(taplog.data_dir).ship_once()
    assert store_env.keys("prod/blobs/")
    [(body,)] = _fleet(tmp_path, "SELECT request_body FROM llm_calls")
    assert orjson.loads(body)["messages"][0]["content"] == "x" * 5000


def test_two_data_dirs_shipping_as_one_instance_hide_nothing_of_each_other(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    _chat(oai, "one")
    taplog.flush()
    _shipper(taplog.data_dir).ship_once()
    other = tmp_path / "other"
    (other / "sessions").mkdir(parents=True)
    (log,) = logs(taplog.data_dir)
    log_of(other, "copy").write_bytes(log.read_bytes())
    assert _shipper(other).ship_once() == ["copy"]
    _chat(oai, "two")
    taplog.flush()
    assert _shipper(taplog.data_dir).ship_once() == ["two"]
    sql = "SELECT session, count(*) FROM llm_calls GROUP BY ALL ORDER BY 1"
    assert _fleet(tmp_path, sql) == [("copy", 1), ("one", 1), ("two", 1)]


def test_a_table_naming_a_log_outside_the_layout_is_refused_and_nothing_is_fetched(
    store_env: SeaweedFS, tmp_path
):
    import pyarrow as pa
    from deltalake import write_deltalake

    planted = pa.table(
        {
            "instance": ["a"],
            "day": ["2026-01-01"],
            "session": ["s"],
            "seq": [1],
            "blob_sha256": pa.array([None], pa.string()),
            "shipped_log": ["logs/instance=a/s/../../../../x.jsonl"],
        }
    )
    with pytest.MonkeyPatch.context() as env:
        for name, value in store_env.env.items():
            env.setenv(name, value)
        write_deltalake(
            "s3://fleet/prod/tables/events",
            planted,
            partition_by=["day", "instance"],
            storage_options=storage_options(),
        )
    with pytest.raises(StoreError, match="names the log"):
        fetch(parse_location(TO), tmp_path / "cache", logs=True)
    assert not (tmp_path / "cache").exists()


def test_a_shipped_session_of_interleaved_threads_reads_back_whole_from_the_fleet(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    """Requests stored as what they add to earlier ones (a thread's history, a system prompt
    met again) are put back whole from the shipped table, as from the local log."""
    task = "Find why the nightly build fails and fix it; the log is below. " * 20
    threads: dict[str, list] = {
        "main": [{"role": "system", "content": "You are a careful coding agent."}],
        "agent": [{"role": "system", "content": "You explore a repository and report."}],
    }
    for turn in range(6):
        history = threads["main" if turn % 2 == 0 else "agent"]
        history.append({"role": "user", "content": task if turn < 2 else f"turn {turn}"})
        answer = oai.chat.completions.create(
            model="gpt-4.1", messages=history, extra_headers={"X-Taplog-Session": "day"}
        )
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
    taplog.flush()
    _shipper(taplog.data_dir).ship_once()
    sql = "SELECT request_body FROM llm_calls ORDER BY started_at"
    shipped = [orjson.loads(body) for (body,) in _fleet(tmp_path, sql)]
    assert len(shipped) == 6
    assert shipped[-1]["messages"] == threads["agent"][:-1]
    assert shipped[-2]["messages"] == threads["main"][:-1]
    log = readable(log_of(taplog.data_dir, "day"))
    assert b'"base":' in log and b'"items":' in log  # stored apart, not whole
