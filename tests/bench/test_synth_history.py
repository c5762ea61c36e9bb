"""bench/synth_history.py (code in bench/synth/) writes logs that taplog's own readers and
DuckDB accept as real."""

from __future__ import annotations

import importlib.util
import re
import stat
from collections import Counter
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

import duckdb
import orjson
import pytest

from taplog.recorder import prices
from taplog.recorder.events import EVENT_TYPES
from taplog.recorder.store.lognames import session_name
from taplog.recorder.store.reader import read_events, session_files
from taplog.recorder.vendors.apis import api_module
from taplog.recorder.vendors.sse import parse_block
from tests import ROOT

EVENTS = 2_000
SESSIONS = 40
SEED = 10  # a small sample in which every rare feature (flags, failover, unpriced) shows up
END = datetime(2026, 11, 30, tzinfo=UTC)
ENVELOPE = ["v", "seq", "ts", "session", "type", "id", "exchange"]
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def _load_synth():
    """The entry point as the script runs it (it puts the checkout on sys.path for bench/)."""
    spec = importlib.util.spec_from_file_location(
        "synth_history", ROOT / "bench" / "synth_history.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


synth = _load_synth()


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("synth")
    result = synth.generate(folder, EVENTS, seed=SEED, sessions=SESSIONS, end=END, workers=2)
    assert result["events"] == EVENTS
    return folder


@pytest.fixture(scope="module")
def sessions(synth_dir: Path) -> dict[str, list[dict]]:
    return {session_name(path): list(read_events(path)) for path in session_files(synth_dir)}


def _all(sessions: dict[str, list[dict]]) -> list[dict]:
    return [event for events in sessions.values() for event in events]


def test_every_line_verifies_chains_and_counts(synth_dir: Path, sessions):
    assert len(sessions) == SESSIONS
    assert sum(len(events) for events in sessions.values()) == EVENTS
    assert stat.S_IMODE((synth_dir / "sessions").stat().st_mode) == 0o700
    for path in session_files(synth_dir):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        events = sessions[session_name(path)]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["type"] == "session.started" and events[0]["prev"] is None
        for before, event in pairwise(events):
            assert event["prev"] == before["h"]
            assert event["ts"] >= before["ts"]
        for event in events:
            assert list(event)[:7] == ENVELOPE and list(event)[-2:] == ["prev", "h"]
            assert event["session"] == session_name(path)
            assert TS.match(event["ts"])


def test_timestamps_lie_in_the_last_30_days(sessions):
    first = (END - timedelta(days=30)).strftime("%Y-%m-%dT%H:%M:%S")
    stamps = [e["ts"] for e in _all(sessions)]
    assert min(stamps) >= first and max(stamps) < END.strftime("%Y-%m-%dT%H:%M:%S")
    days = {ts[:10] for ts in stamps}
    assert len(days) >= 10  # spread out, not bunched


def test_event_mix(sessions):
    events = _all(sessions)
    types = Counter(e["type"] for e in events)
    assert set(types) <= EVENT_TYPES
    assert set(types) >= {
        "session.started",
        "llm.request",
        "llm.response",
        "tool.pre",
        "tool.post",
        "failover",
    }
    assert types["session.started"] == SESSIONS
    for kind in ("llm.request", "llm.response", "tool.pre", "tool.post"):
        assert 0.15 < types[kind] / EVENTS < 0.35, (kind, types)
    assert types["failover"] < 0.02 * EVENTS
    requests = [e for e in events if e["type"] == "llm.request"]
    answers = [e for e in events if e["type"] == "llm.response"]
    apis = Counter(e["api"] for e in requests)
    assert set(apis) == {"openai.chat", "openai.responses", "anthropic.messages", "passthrough"}
    assert apis["passthrough"] < 0.1 * len(requests)
    assert {e["provider"] for e in requests} == {"openai", "anthropic"}
    assert {True, False} == {e["stream"] for e in requests}
    outcomes = Counter(e["outcome"] for e in answers)
    assert outcomes["ok"] > 0.85 * len(answers)
    assert {"upstream_error", "client_disconnected"} <= set(outcomes)
    assert {e["status"] for e in answers} >= {200, 429}
    priced = [e for e in answers if "usage" in e and e["usage"]["input_tokens"] is not None]
    assert any(e["cost_usd"] is None for e in priced)  # models litellm does not know
    assert sum(e["cost_usd"] is not None for e in priced) > 0.8 * len(priced)
    assert all(e["sse"] for e in answers if e["stream"])
    posts = [e for e in events if e["type"] == "tool.post"]
    assert any(e["is_error"] for e in posts)
    flags = Counter(flag for e in events if e["type"].startswith("tool.") for flag in e["flags"])
    assert set(flags) == {"orphan_result", "unanswered", "finish_mismatch"}
    assert sum(flags.values()) < 0.05 * len(posts)
    for event in events:
        if event["type"] == "failover":
            assert event["from_model"] != event["to_model"] and event["attempt"] >= 2
            assert event["reason"]
    # Failover as proxy/chain.py records it: every try in one exchange, attempts numbered.
    for events_ in sessions.values():
        exchanges: dict[str, list[dict]] = {}
        for event in events_:
            if event["type"] in ("llm.request", "failover"):
                exchanges.setdefault(event["exchange"], []).append(event)
        for tries in exchanges.values():
            requests_ = [e for e in tries if e["type"] == "llm.request"]
            assert [e["attempt"] for e in requests_] == list(
                range(requests_[0]["attempt"], requests_[0]["attempt"] + len(requests_))
            )
            if requests_[0]["attempt"] == 0:  # breaker open: the client's call, never sent
                assert requests_[0]["sent"] is False and len(requests_) == 2
            for event in requests_[1:]:
                if event["api"] != requests_[0]["api"]:
                    assert event["translated_from"] == requests_[0]["api"]


def test_every_result_follows_its_call(sessions):
    for events in sessions.values():
        asked: dict[str, dict] = {}
        for event in events:
            if event["type"] == "tool.pre":
                asked[event["call_id"]] = event
            elif event["type"] == "tool.post":
                flags = event["flags"]
                if "orphan_result" in flags:
                    assert event["call_id"] not in asked and event["name"] is None
                    continue
                assert event["call_id"] in asked, event
                assert event["name"] == asked[event["call_id"]]["name"]
                if event["server"] or "unanswered" in flags:
                    assert event["duration_ms"] is None
                else:
                    assert event["duration_ms"] > 0


def test_answers_and_tool_events_are_what_the_recorder_would_derive(sessions):
    """Replays the proxy's own parsers over the logs: bodies, summaries, pairing, prices."""
    for events in sessions.values():
        answered: set[str] = set()
        for i, event in enumerate(events):
            module = api_module(event.get("api") or "")
            following = []
            for later in events[i + 1 :]:
                if later["type"] not in ("tool.pre", "tool.post") or later["flags"] == [
                    "unanswered"
                ]:
                    break
                following.append(later)
            if event["type"] == "llm.request" and module is not None:
                new = [r.call_id for r in module.tool_results(event["body"])]
                new = [c for c in new if c not in answered]
                answered.update(new)
                assert [e["call_id"] for e in following] == new
            if event["type"] != "llm.response":
                continue
            if "body_raw" in event:
                assert orjson.loads(event["body_raw"]) == event["body"]
            if module is None or event["status"] != 200:
                assert "usage" not in event and not following
                continue
            if event["stream"]:
                rebuilt = module.reassemble(
                    e for e in (parse_block(s["raw"].encode()) for s in event["sse"]) if e
                )
                assert rebuilt.body == event["body"]
                assert rebuilt.complete is event["stream_complete"]
                assert rebuilt.complete is (event["outcome"] == "ok")
            summary = module.summarize(event["body"])
            assert event["response_id"] == summary.response_id
            assert event["model"] == summary.model
            assert event["finish_reason"] == summary.finish_reason
            assert event["usage"]["input_tokens"] == summary.input_tokens
            assert event["usage"]["output_tokens"] == summary.output_tokens
            assert event["cost_usd"] == prices.cost_usd(
                event["provider"],
                summary.model,
                summary.input_tokens,
                summary.output_tokens,
                summary.cached_tokens,
                summary.cache_write_tokens,
            )
            if event["outcome"] != "ok":
                assert not following
                continue
            calls = module.tool_calls(event["body"])
            pres = [e for e in following if e["type"] == "tool.pre"]
            assert [e["call_id"] for e in pres] == [c.call_id for c in calls]
            for pre, call in zip(pres, calls, strict=True):
                assert pre["arguments"] == call.arguments and pre["server"] == call.server
                assert pre["model"] == event["model"]
                mismatch = event["finish_reason"] in module.NORMAL_STOPS and not call.server
                assert ("finish_mismatch" in pre["flags"]) == mismatch
            answered.update(c.call_id for c in calls if c.server)


def test_duckdb_reads_every_event(synth_dir: Path, sessions):
    glob = str(synth_dir / "sessions" / "*.jsonl.zst")
    total = duckdb.sql(f"select count(*) from read_ndjson_objects('{glob}')").fetchall()
    assert total == [(EVENTS,)]
    by_type = dict(
        duckdb.sql(
            f"select json ->> 'type', count(*) from read_ndjson_objects('{glob}') group by 1"
        ).fetchall()
    )
    assert by_type == dict(Counter(e["type"] for e in _all(sessions)))
    inferred = duckdb.sql(
        f"select count(*), count(distinct session) from read_json_auto('{glob}', "
        "format='newline_delimited', union_by_name=true)"
    ).fetchall()
    assert inferred == [(EVENTS, SESSIONS)]


def test_same_seed_same_bytes(synth_dir: Path, tmp_path: Path):
    synth.generate(tmp_path, EVENTS, seed=SEED, sessions=SESSIONS, end=END, workers=1)
    ours = sorted(p.name for p in (tmp_path / "sessions").iterdir())
    assert ours == sorted(p.name for p in (synth_dir / "sessions").iterdir())
    for name in ours:
        assert (tmp_path / "sessions" / name).read_bytes() == (
            synth_dir / "sessions" / name
        ).read_bytes()


def test_refuses_a_data_dir_that_already_has_logs(synth_dir: Path):
    with pytest.raises(SystemExit, match="already holds session logs"):
        synth.generate(synth_dir, 10, seed=SEED, end=END, workers=1)


def test_main_writes_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """The entry point bench/query_bench.py calls: options in, a data dir and a report out."""
    argv = ["--data-dir", str(tmp_path), "--events", "300", "--seed", "2"]
    synth.main([*argv, "--end", "2026-11-30T00:00:00Z", "--workers", "1"])
    report = capsys.readouterr().out
    assert report.startswith("sessions 1  events 300  ")
    assert "  type: " in report and "  agent: " in report
    assert sum(len(list(read_events(path))) for path in session_files(tmp_path)) == 300
