"""SQL over logs recorded from real SDK traffic: views, CLI commands, compaction, safety."""

from __future__ import annotations

import shutil
import threading
import time

import duckdb
import openai
import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.events import ERROR, make_event
from taplog.recorder.query.compaction import compact
from taplog.recorder.query.connect import connect, query
from taplog.recorder.store.lognames import session_name
from taplog.recorder.store.writer import EventRecord, Recorder
from taplog.recorder.store.zstd_stream import Compressor
from tests.disk import log_of, logs, readable
from tests.fakes.agents import PLAN, anthropic_agent, chat_agent
from tests.fakes.harness import start_taplog
from tests.fakes.keys import OPENAI_KEY

LLM_CALL_COLUMNS = [
    "session", "exchange", "started_at", "ended_at", "api", "provider_name", "request_model",
    "response_model", "stream", "status", "outcome", "error", "latency_ms", "ttfb_ms",
    "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
    "reasoning_output_tokens", "cost_usd", "finish_reason", "response_id", "attempts",
    "failovers", "copied", "request_body", "response_body",
]  # fmt: skip


@pytest.fixture
def recorded_taplog(taplog, oai, ant):
    """A data dir holding two agent sessions with tools, a vendor error and an unknown model."""
    chat_agent(oai, stream=False)
    anthropic_agent(ant, stream=True)
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "!status=500"}]
        )
    oai.chat.completions.create(
        model="my-local-model", messages=[{"role": "user", "content": "hi"}]
    )
    taplog.wait_responses(18)
    return taplog


def _rows(con, sql, params=None):
    relation = query(con, sql, params)
    return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def test_views_over_real_traffic(recorded_taplog):
    con = connect(recorded_taplog.data_dir)
    lines = sum(
        len(readable(p).splitlines()) for p in (recorded_taplog.data_dir / "sessions").iterdir()
    )
    assert _rows(con, "SELECT count(*) AS n FROM events") == [{"n": lines}]

    calls = _rows(con, "SELECT * FROM llm_calls ORDER BY started_at")
    assert list(calls[0]) == LLM_CALL_COLUMNS
    assert len(calls) == 18
    assert {c["api"] for c in calls} == {"openai.chat", "anthropic.messages"}
    failed = [c for c in calls if c["status"] == 500]
    assert len(failed) == 1 and failed[0]["outcome"] == "upstream_error"
    assert failed[0]["input_tokens"] is None and failed[0]["cost_usd"] is None
    for call in calls:
        if call["response_model"] == "gpt-4.1" and call["status"] == 200:
            assert call["cost_usd"] == pytest.approx(
                call["input_tokens"] * 2e-6 + call["output_tokens"] * 8e-6
            )
            assert call["attempts"] == 1 and call["failovers"] == 0
            assert orjson.loads(call["request_body"])["model"] == "gpt-4.1"
    unknown = next(c for c in calls if c["request_model"] == "my-local-model")
    assert unknown["input_tokens"] > 0 and unknown["cost_usd"] is None
    streamed = [c for c in calls if c["stream"]]
    assert len(streamed) == 8 and all(c["ttfb_ms"] <= c["latency_ms"] for c in streamed)
    assert all(orjson.loads(c["response_body"])["type"] == "message" for c in streamed)

    tools = _rows(con, "SELECT * FROM tool_calls ORDER BY session, seq")
    assert len(tools) == 6
    assert sorted(t["tool_name"] for t in tools) == sorted(
        ["get_weather", "get_time", "read_file"] * 2
    )
    failed_tools = [t for t in tools if t["is_error"]]
    assert [t["tool_name"] for t in failed_tools] == ["read_file"]  # only Anthropic can say so
    assert all(t["duration_ms"] >= 20 and t["flags"] == [] for t in tools)
    assert all(t["answered_at"] >= t["asked_at"] for t in tools)
    weather = next(t for t in tools if t["tool_name"] == "get_weather")
    assert orjson.loads(weather["arguments"]) == {"city": "Paris"}
    assert orjson.loads(weather["result"]) == "sunny, 21°C"

    sessions = {s["session"]: s for s in _rows(con, "SELECT * FROM sessions")}
    assert len(sessions) == 4
    agents = [s for s in sessions.values() if s["tool_calls"]]
    assert sorted(s["calls"] for s in agents) == [8, 8]
    assert sorted(s["tool_errors"] for s in agents) == [0, 1]
    assert all(s["cost_usd"] > 0 and s["source"] == "new" for s in agents)
    assert sorted(m for s in agents for m in s["models"]) == ["claude-sonnet-4-6", "gpt-4.1"]
    unpriced = next(s for s in sessions.values() if s["models"] == ["my-local-model"])
    assert unpriced["cost_usd"] is None  # never a wrong total
    erred = next(s for s in sessions.values() if s["failed_calls"] == 1 and s["calls"] == 1)
    assert (erred["cost_usd"], erred["input_tokens"]) == (None, None)  # unknown, not 0


def test_sessions_and_show_commands(recorded_taplog):
    runner = CliRunner()
    data = ["--data-dir", str(recorded_taplog.data_dir)]
    listed = runner.invoke(main, ["sessions", *data, "--format", "jsonl"])
    assert listed.exit_code == 0, listed.output
    rows = [orjson.loads(line) for line in listed.output.splitlines()]
    assert len(rows) == 4
    assert [r["last_at"] for r in rows] == sorted((r["last_at"] for r in rows), reverse=True)
    assert ("OpenAI Python SDK", PLAN) in {(r["client"], r["prompt"]) for r in rows}
    assert ("Anthropic Python SDK", PLAN) in {(r["client"], r["prompt"]) for r in rows}
    failing = runner.invoke(main, ["sessions", *data, "--failing", "--format", "jsonl"])
    assert len(failing.output.splitlines()) == 2  # the tool error and the vendor error
    by_model = runner.invoke(main, ["sessions", *data, "--model", "claude-sonnet-4-6"])
    assert "(1 row)" in by_model.output
    assert "(0 rows)" in runner.invoke(main, ["sessions", *data, "--model", "x' OR 1=1 --"]).output

    anthropic_session = next(r["session"] for r in rows if r["models"] == ["claude-sonnet-4-6"])
    shown = runner.invoke(main, ["show", anthropic_session, *data])
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert lines[0].startswith(f"session {anthropic_session}")
    assert (
        sum("  call  anthropic.messages claude-sonnet-4-6  200 ok" in line for line in lines) == 8
    )
    tool_lines = [line for line in lines if "  tool " in line]
    assert [line.split()[2] for line in tool_lines] == ["get_weather", "get_time", "read_file"]
    assert "→ ERROR error: README.md: no such file" in tool_lines[2]
    assert lines[-1].startswith("8 calls · 3 tool calls (1 failed) · ")
    missing = runner.invoke(main, ["show", "nope", *data])
    assert missing.exit_code == 1 and "no session 'nope'" in missing.output


def test_show_says_a_tool_call_that_was_never_answered_has_no_result(taplog, oai):
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    oai.chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "!plan=get_weather:Paris"}],
        tools=[tool],
        extra_headers={"X-Taplog-Session": "asked"},
    )  # the agent stops here: the call is never run
    taplog.flush()
    shown = CliRunner().invoke(main, ["show", "asked", "--data-dir", str(taplog.data_dir)])
    assert shown.exit_code == 0, shown.output
    [line] = [line for line in shown.output.splitlines() if "  tool " in line]
    assert line.split("  tool ", 1)[1].startswith('get_weather {"q":"Paris"} → no result')


def test_sql_command_formats_and_output_files(recorded_taplog, tmp_path):
    runner = CliRunner()
    data = ["--data-dir", str(recorded_taplog.data_dir)]
    sql = "SELECT response_model, count(*) AS calls FROM llm_calls GROUP BY 1 ORDER BY 1"
    as_csv = runner.invoke(main, ["sql", sql, *data, "--format", "csv"])
    assert as_csv.output.splitlines() == [
        "response_model,calls", "claude-sonnet-4-6,8", "gpt-4.1,8", "my-local-model,1", ",1"
    ]  # fmt: skip
    for suffix in ("parquet", "csv", "json", "jsonl"):
        target = tmp_path / f"out.{suffix}"
        result = runner.invoke(main, ["sql", sql, *data, "--output", str(target)])
        assert result.exit_code == 0, result.output
        reader = {"jsonl": "read_json", "json": "read_json"}.get(suffix, f"read_{suffix}")
        assert duckdb.sql(f"SELECT count(*) FROM {reader}('{target}')").fetchall() == [(4,)]
    body = runner.invoke(
        main, ["sql", "SELECT request_body FROM llm_calls LIMIT 1", *data, "--format", "json"]
    )
    assert isinstance(orjson.loads(body.output)[0]["request_body"], dict)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM read_text('/etc/passwd')", "file system operations are disabled"),
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        ("COPY (SELECT 1) TO 'stolen.csv'", "refused a COPY statement"),
        ("ATTACH 'other.db'", "refused an ATTACH statement"),
        ("INSTALL httpfs", "refused a"),
        ("LOAD httpfs", "refused a"),
        ("SET enable_external_access = true", "refused a SET statement"),
        ("CREATE TABLE t AS SELECT 1", "refused a CREATE statement"),
        ("SELECT 1; SELECT 2", "exactly one SQL statement"),
        ("SELEC nonsense", "syntax error"),
    ],
)
def test_forbidden_sql_is_refused_clearly(taplog, oai, sql, message):
    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "x"}])
    taplog.wait_responses(1)
    result = CliRunner().invoke(main, ["sql", sql, "--data-dir", str(taplog.data_dir)])
    assert result.exit_code == 1
    assert message in result.output
    assert not (taplog.data_dir / "sessions" / "stolen.csv").exists()


def test_queries_see_fresh_events_and_skip_a_torn_tail_while_a_writer_appends(tmp_path):
    recorder = Recorder(tmp_path, fsync="never")
    recorder.start()
    stop = threading.Event()

    def keep_writing():
        n = 0
        while not stop.is_set():
            recorder.record(EventRecord(make_event(ERROR, "busy", None, reason=f"e{n}")))
            n += 1
            time.sleep(0.001)

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        seen = []
        for _ in range(20):
            con = connect(tmp_path)
            seen.append(query(con, "SELECT count(*) FROM events").fetchall()[0][0])
        assert seen == sorted(seen) and seen[-1] > seen[0]
    finally:
        stop.set()
        writer.join()
        recorder.close()
    log = log_of(tmp_path, "busy")
    complete = len(readable(log).splitlines())
    with open(log, "ab") as torn:  # a write a crash cut short: the start of a new frame
        torn.write(Compressor().write(b'{"v":1,"seq":99999,"ts":"2026-11-30T00:"}\n' * 9)[:-5])
    assert query(connect(tmp_path), "SELECT count(*) FROM events").fetchall() == [(complete,)]


def test_a_log_damaged_at_its_end_is_read_up_to_the_damage_by_every_view(recorded_taplog, tmp_path):
    data_dir = tmp_path / "copy"
    shutil.copytree(recorded_taplog.data_dir, data_dir)
    before = [query(connect(data_dir), q).fetchall() for q in QUESTIONS]
    last = query(connect(data_dir), "SELECT max(seq) FROM events").fetchall()[0][0]
    for log in logs(data_dir):
        with open(log, "ab") as damaged:  # bytes no writer wrote: no zstd frame
            damaged.write(b"\x00not a zstd frame\n" * 64)
    con = connect(data_dir)
    assert [query(con, q).fetchall() for q in QUESTIONS] == before
    [(data,)] = query(con, "SELECT data FROM events WHERE seq = ? LIMIT 1", [last]).fetchall()
    assert orjson.loads(data)["seq"] == last
    listed = CliRunner().invoke(main, ["sessions", "--data-dir", str(data_dir)])
    assert listed.exit_code == 0, listed.output
    assert f"({len(before[-1])} rows)" in listed.output


def test_a_field_of_an_unexpected_type_is_null_and_its_event_still_counted(tmp_path):
    recorder = Recorder(tmp_path, fsync="never")
    recorder.start()
    recorder.record(EventRecord(make_event(ERROR, "odd", None, reason="first")))
    recorder.record(
        EventRecord(make_event(ERROR, "odd", None, reason="second", status="five hundred"))
    )
    recorder.close()
    sql = "SELECT reason, status, data ->> 'status' FROM events WHERE type = 'error'"
    rows = query(connect(tmp_path), sql)
    assert sorted(rows.fetchall(), key=str) == sorted(
        [("first", None, None), ("second", None, "five hundred")], key=str
    )


def test_an_event_is_queryable_within_a_second(taplog, oai):
    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "now"}])
    deadline = time.monotonic() + 1.0
    while query(
        connect(taplog.data_dir), "SELECT count(*) FROM llm_calls WHERE status = 200"
    ).fetchall() != [(1,)]:
        assert time.monotonic() < deadline, "not visible within a second"
        time.sleep(0.02)


QUESTIONS = [
    "SELECT type, count(*) FROM events GROUP BY 1 ORDER BY 1",
    "SELECT * EXCLUDE (data) FROM events ORDER BY session, seq",
    "SELECT * FROM llm_calls ORDER BY session, started_at",
    "SELECT * FROM tool_calls ORDER BY session, seq",
    "SELECT * FROM sessions ORDER BY session",
]


def test_compaction_twice_gives_the_same_answers_and_never_double_counts(recorded_taplog):
    data_dir = recorded_taplog.data_dir
    before = [query(connect(data_dir), q).fetchall() for q in QUESTIONS]
    assert len(compact(data_dir)) == 4
    once = [query(connect(data_dir), q).fetchall() for q in QUESTIONS]
    assert compact(data_dir) == []  # nothing changed since
    twice = [query(connect(data_dir), q).fetchall() for q in QUESTIONS]
    assert before == once == twice
    assert len(list((data_dir / "compacted").glob("segment-*.parquet"))) == 1  # one run, one file

    # A compacted session that grows again is read from its log, once.
    session = before[4][0][0]
    recorder = Recorder(data_dir)
    recorder.start()
    recorder.record(EventRecord(make_event(ERROR, session, None, reason="late")))
    recorder.close()
    total = query(connect(data_dir), "SELECT count(*) FROM events").fetchall()[0][0]
    assert total == sum(n for _, n in before[0]) + 1
    assert compact(data_dir) == [session]
    assert query(connect(data_dir), "SELECT count(*) FROM events").fetchall()[0][0] == total
    assert len(list((data_dir / "compacted").glob("segment-*.parquet"))) == 2


def test_many_segments_are_merged_into_one(recorded_taplog, monkeypatch):
    from taplog.recorder.query import compaction

    monkeypatch.setattr(compaction, "MAX_SEGMENTS", 2)
    data_dir = recorded_taplog.data_dir
    before = [query(connect(data_dir), q).fetchall() for q in QUESTIONS]
    sessions = sorted(session_name(p) for p in logs(data_dir))
    recorder_ = Recorder(data_dir)
    recorder_.start()
    for session in sessions:  # each session changes, then is compacted on its own
        compact(data_dir)
        recorder_.record(EventRecord(make_event(ERROR, session, None, reason="more")))
        recorder_.flush()
    recorder_.close()
    compact(data_dir)
    segments = list((data_dir / "compacted").glob("segment-*.parquet"))
    assert len(segments) <= 2
    after = query(connect(data_dir), "SELECT count(*) FROM events").fetchall()[0][0]
    assert after == sum(n for _, n in before[0]) + len(sessions)


def test_serve_compacts_idle_sessions_by_itself(servers, fake, tmp_path):
    taplog = start_taplog(
        servers, tmp_path / "data", openai_base=f"{fake.url}/v1", compact_after_minutes=0.002
    )
    client = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY)
    client.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "x"}])
    taplog.wait_responses(1)
    deadline = time.monotonic() + 10
    while not list((taplog.data_dir / "compacted").glob("*.parquet")):
        assert time.monotonic() < deadline, "never compacted"
        time.sleep(0.05)
    assert query(connect(taplog.data_dir), "SELECT count(*) FROM llm_calls").fetchall() == [(1,)]
