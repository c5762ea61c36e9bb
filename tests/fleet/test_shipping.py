"""Shipping and fleet queries in-process, against a real SeaweedFS: what one round writes,
that writing it again writes nothing, and that a session shipped twice counts once."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from taplog.recorder.fleet.fetch import fetch
from taplog.recorder.fleet.layout import parse_location
from taplog.recorder.fleet.shipper import Shipper, StopShipping
from taplog.recorder.fleet.store import StoreError
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


def test_a_round_ships_logs_parquet_and_manifest_and_the_fleet_reads_them(
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
    assert len([k for k in keys if k.startswith("prod/events/day=")]) == 1
    assert [k for k in keys if "manifests" in k] == ["prod/manifests/instance=a/000000000001.json"]
    assert shipper.stats.backlog_objects == 0 and shipper.stats.uploads == 4
    rows = _fleet(
        tmp_path, "SELECT instance, session, count(*) FROM llm_calls GROUP BY ALL ORDER BY 2"
    )
    assert rows == [("a", "one", 3), ("a", "two", 1)]
    [(instances,)] = _fleet(tmp_path, "SELECT instances FROM sessions WHERE session = 'one'")
    assert instances == ["a"]


def test_shipping_again_writes_nothing_twice_and_a_lost_state_finds_what_was_shipped(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    _chat(oai, "one")
    taplog.flush()
    assert _shipper(taplog.data_dir).ship_once() == ["one"]
    before = store_env.keys("prod/")
    assert _shipper(taplog.data_dir).ship_once() == []  # the saved state says it is there
    assert store_env.keys("prod/") == before
    (taplog.data_dir / "shipping" / "state.json").unlink()
    assert _shipper(taplog.data_dir).ship_once() == []  # the store's manifest says so
    assert store_env.keys("prod/") == before
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


def test_two_data_dirs_shipping_as_one_instance_stop_rather_than_hide_each_other(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    _chat(oai, "one")
    taplog.flush()
    _shipper(taplog.data_dir).ship_once()
    other = tmp_path / "other"
    (other / "sessions").mkdir(parents=True)
    (log,) = logs(taplog.data_dir)
    log_of(other, "copy").write_bytes(log.read_bytes())
    assert _shipper(other).ship_once() == ["copy"]  # new to the store: it goes on from there
    _chat(oai, "two")
    taplog.flush()
    with pytest.raises(StopShipping, match="another data dir ships as instance 'a'"):
        _shipper(taplog.data_dir).ship_once()


def test_a_manifest_naming_a_path_outside_the_layout_is_refused_and_nothing_is_fetched(
    store_env: SeaweedFS, tmp_path
):
    planted = {
        "format": 1,
        "sessions": {"s": {"size": 1, "events": "events/day=2026-01-01/instance=a/../../../x"}},
    }
    store_env.client().put_object(
        Bucket="fleet",
        Key="prod/manifests/instance=a/000000000001.json",
        Body=orjson.dumps(planted),
    )
    with pytest.raises(StoreError, match="names"):
        fetch(parse_location(TO), tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_a_shipped_session_of_interleaved_threads_reads_back_whole_from_the_fleet(
    taplog, oai, store_env: SeaweedFS, tmp_path
):
    """Requests stored as what they add to earlier ones (a thread's history, a system prompt
    met again) are put back whole from the shipped Parquet, as from the local log."""
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
