"""`taplog sql` only reads: every way to write is refused, slow queries stop, output is capped.

The data dir here has every folder taplog writes (session logs, a blob, a
compacted segment, its manifest), recorded from real SDK traffic; each test
runs the command as a user would and checks what a user would: the files on
disk, the exit code, the message.
"""

from __future__ import annotations

import hashlib
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import duckdb
import httpx
import openai
import orjson
import pytest
from click.testing import CliRunner, Result

from taplog.proxy.cli.main import main
from taplog.recorder.query.compaction import compact
from taplog.recorder.query.connect import connect
from tests.fakes.harness import TAPLOG, serve_fake, start_on_fake, taplog_env
from tests.fakes.keys import OPENAI_KEY
from tests.fakes.servers import ServerThread

SLOW = "SELECT count(*) FROM range(100000) a, range(100000) b WHERE a.range + b.range = 7"


@pytest.fixture(scope="module")
def sql_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sessions, one with a body in blobs/, both compacted into compacted/."""
    servers = ServerThread()
    try:
        fake = serve_fake(servers, handler_cancellation=True)
        data = tmp_path_factory.mktemp("sql") / "data"
        taplog = start_on_fake(servers, fake, data, body_inline_max_kb=2)
        for session, prompt in (("big", "summarise " + "lorem ipsum " * 2000), ("small", "hi")):
            client = openai.OpenAI(
                base_url=f"{taplog.url}/s/{session}/v1", api_key=OPENAI_KEY, max_retries=0
            )
            message = {"role": "user", "content": prompt}
            client.chat.completions.create(model="gpt-4.1", messages=[message])
        taplog.wait_answers(2)
        taplog.flush()
    finally:
        servers.stop()
    compact(data, 0)
    assert _target(data, "a blob").exists() and _target(data, "the compaction manifest").exists()
    return data


def _files(root: Path) -> dict[str, str]:
    """Every file and folder under `root`, with a hash of each file's bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "/"
        for p in root.rglob("*")
    }


def _run_sql(data_dir: Path, sql: str, *options: str) -> Result:
    return CliRunner().invoke(main, ["sql", sql, "--data-dir", str(data_dir), *options])


# A file to overwrite and a file to create in each folder, and in the data dir itself.
TARGETS = {
    "a session log": "sessions/big.jsonl",
    "a new session log": "sessions/forged.jsonl",
    "a blob": "blobs/*/*.json",
    "a new blob": "blobs/00/forged.json",
    "the compaction manifest": "compacted/manifest.json",
    "a new segment": "compacted/segment-forged.parquet",
    "a new file in the data dir": "forged.csv",
}


def _target(data_dir: Path, name: str) -> Path:
    return next(data_dir.glob(TARGETS[name]), data_dir / TARGETS[name])


REFUSED = "only queries run here (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE"
WRITES = {
    "COPY (SELECT 'x') TO '{path}' (FORMAT csv, HEADER false)": "refused a COPY statement",
    "EXPLAIN ANALYZE COPY (SELECT 'x') TO '{path}' (FORMAT csv, HEADER false)": (
        "refused an EXPLAIN of a COPY statement"
    ),
    "EXPLAIN (FORMAT json, ANALYZE) COPY (SELECT 'x') TO '{path}'": (
        "refused an EXPLAIN of a COPY statement"
    ),
    "EXPLAIN COPY (SELECT 'x') TO '{path}'": "refused an EXPLAIN of a COPY statement",
    "COPY (FROM events) TO '{path}' (FORMAT parquet)": "refused a COPY statement",
    "EXPORT DATABASE '{path}'": "refused an EXPORT statement",
    "ATTACH '{path}' AS forged": "refused an ATTACH statement",
    "ATTACH '{path}' AS forged; CREATE TABLE forged.t AS SELECT 'x'": (
        "refused an ATTACH statement"
    ),
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 'x'": "refused an EXPLAIN of a CREATE statement",
    "SELECT 1; COPY (SELECT 'x') TO '{path}'": "refused a COPY statement",
    "SET profile_output = '{path}'": "refused a SET statement",
    "PRAGMA enable_profiling": "refused a PRAGMA statement",
    "CALL checkpoint()": "refused a CALL statement",
    "INSTALL '{path}'": "refused a LOAD statement",
    "SELECT * FROM query('COPY (SELECT 1) TO ''{path}''')": "Expected a single SELECT statement",
    "COPY (PIVOT (SELECT 'x' AS k, 1 AS v) ON k USING sum(v)) TO '{path}'": (
        "refused a MULTI statement"
    ),
    "CREATE TABLE t AS PIVOT (SELECT 'x' AS k, 1 AS v) ON k USING sum(v)": (
        "refused a MULTI statement"
    ),
}


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("statement", list(WRITES))
def test_every_way_to_write_is_refused_and_leaves_the_data_dir_as_it_was(
    sql_data_dir, statement, target
):
    path = _target(sql_data_dir, target)
    before = _files(sql_data_dir)
    result = _run_sql(sql_data_dir, statement.format(path=path))
    assert result.exit_code == 1
    assert WRITES[statement] in result.output
    if "refused" in WRITES[statement]:
        assert REFUSED in result.output
    assert _files(sql_data_dir) == before


@pytest.mark.parametrize(
    "statement",
    [
        "COPY (SELECT 'x') TO '{path}' (FORMAT csv)",
        "ATTACH '{path}' AS forged",
        "EXPORT DATABASE '{path}'",
    ],
)
def test_duckdb_itself_can_create_no_file_even_past_the_statement_check(sql_data_dir, statement):
    """The second wall: DuckDB may open only the files the views read, each by name.

    (It could overwrite those, given a writing statement: DuckDB has no setting
    that opens a file for reading only, so refusing such statements is the
    first wall's work, tested above.)
    """
    before = _files(sql_data_dir)
    con = connect(sql_data_dir)
    for name in TARGETS:
        if name.startswith("a new"):
            with pytest.raises(duckdb.PermissionException, match="disabled by configuration"):
                con.execute(statement.format(path=_target(sql_data_dir, name)))
    assert _files(sql_data_dir) == before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT count(*) FROM events",
        "WITH calls AS (FROM llm_calls) SELECT count(*) FROM calls",
        "FROM sessions",
        "VALUES (1)",
        "DESCRIBE llm_calls",
        "SHOW TABLES",
        "SUMMARIZE tool_calls",
        "EXPLAIN SELECT * FROM events",
        "EXPLAIN ANALYZE SELECT count(*) FROM events",
        "EXPLAIN (FORMAT json) SELECT 1",
        "/* a comment */ EXPLAIN (SELECT 1) UNION SELECT 2",
    ],
)
def test_every_kind_of_query_still_runs(sql_data_dir, sql):
    before = _files(sql_data_dir)
    result = _run_sql(sql_data_dir, sql)
    assert result.exit_code == 0, result.output
    assert _files(sql_data_dir) == before


def test_output_writes_the_named_file_and_nothing_else(sql_data_dir, tmp_path):
    before = _files(sql_data_dir)
    target = tmp_path / "calls.csv"
    first = _run_sql(
        sql_data_dir, "SELECT session FROM llm_calls ORDER BY 1", "--output", str(target)
    )
    assert first.exit_code == 0, first.output
    assert target.read_text().splitlines() == ["session", "big", "small"]
    second = _run_sql(sql_data_dir, "SELECT 'again' AS word -- a comment", "--output", str(target))
    assert second.exit_code == 0, second.output
    assert target.read_text().splitlines() == ["word", "again"]  # replaced whole
    failed = _run_sql(sql_data_dir, "SELECT error('boom') FROM llm_calls", "--output", str(target))
    assert failed.exit_code == 1 and "boom" in failed.output
    assert target.read_text().splitlines() == ["word", "again"]  # kept whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calls.csv"]
    assert _files(sql_data_dir) == before


def test_output_cannot_smuggle_a_second_target_or_land_in_the_data_dir(sql_data_dir, tmp_path):
    before = _files(sql_data_dir)
    forged = sql_data_dir / "sessions" / "forged.csv"
    escape = f"SELECT 1) TO '{forged}' (FORMAT csv); SELECT (1"
    smuggled = _run_sql(sql_data_dir, escape, "--output", str(tmp_path / "out.csv"))
    assert smuggled.exit_code == 1 and "syntax error" in smuggled.output
    inside = _run_sql(sql_data_dir, "SELECT 1", "--output", str(forged))
    assert inside.exit_code == 2 and "give a file outside the data dir" in inside.output
    assert _files(sql_data_dir) == before and not list(tmp_path.iterdir())


def test_a_slow_query_stops_at_its_timeout_and_writes_nothing(sql_data_dir, tmp_path):
    started = time.monotonic()
    result = _run_sql(sql_data_dir, SLOW, "--timeout", "1")
    assert result.exit_code == 1
    assert "stopped after 1 s (--timeout; 0 for no limit)" in result.output
    assert time.monotonic() - started < 15
    written = _run_sql(sql_data_dir, SLOW, "--timeout", "1", "--output", str(tmp_path / "slow.csv"))
    assert written.exit_code == 1 and "stopped after 1 s" in written.output
    assert not list(tmp_path.iterdir())


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads CPU time from /proc")
def test_ctrl_c_stops_a_slow_query_at_once(sql_data_dir):
    command = [TAPLOG, "sql", SLOW, "--timeout", "0", "--data-dir", str(sql_data_dir)]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=taplog_env()
    )
    try:
        deadline = time.monotonic() + 30
        while _cpu_seconds(process.pid) < 2 and time.monotonic() < deadline:  # querying
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = process.communicate(timeout=15)
    finally:
        process.kill()
    assert time.monotonic() - sent < 5
    assert process.returncode == 130
    assert err.strip() == "Error: stopped by Ctrl-C"


def test_printed_rows_are_capped_and_the_rest_counted(sql_data_dir, tmp_path):
    many = "SELECT range AS n FROM range(2500)"
    table = _run_sql(sql_data_dir, many)
    assert table.exit_code == 0
    assert table.stdout.splitlines()[-2:] == ["999", "(1000 rows)"]
    assert table.stderr.strip() == (
        "1500 more rows not shown (--max-rows 1000): --max-rows 0 prints all 2500, "
        "--output FILE writes them all"
    )
    as_json = _run_sql(sql_data_dir, many, "--format", "json", "--max-rows", "10")
    assert [row["n"] for row in orjson.loads(as_json.stdout)] == list(range(10))
    assert "2490 more rows not shown" in as_json.stderr
    everything = _run_sql(sql_data_dir, many, "--format", "jsonl", "--max-rows", "0")
    assert len(everything.stdout.splitlines()) == 2500 and not everything.stderr
    exact = _run_sql(sql_data_dir, "SELECT range AS n FROM range(1000)")
    assert exact.stdout.splitlines()[-1] == "(1000 rows)" and not exact.stderr
    written = _run_sql(sql_data_dir, many, "--output", str(tmp_path / "all.jsonl"))
    assert len((tmp_path / "all.jsonl").read_text().splitlines()) == 2500 and not written.output


def test_a_pivot_whose_columns_come_from_the_data_runs(sql_data_dir):
    result = _run_sql(
        sql_data_dir,
        "PIVOT (SELECT type FROM events WHERE type LIKE 'llm.%') ON type USING count(*)",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    [row] = orjson.loads(result.output)
    assert set(row) == {"llm.request", "llm.response"} and row["llm.request"] > 0


def test_a_long_query_piped_as_json_is_json_whatever_its_numbers(sql_data_dir):
    """Seconds long (DuckDB would show its progress bar), its sum past 64 bits."""
    sql = "SELECT sum(hash(i)) AS total, count(*) AS n FROM range(1500000000) t(i)"
    done = subprocess.run(
        [TAPLOG, "sql", "--data-dir", str(sql_data_dir), "--format", "json", sql],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    [row] = orjson.loads(done.stdout)
    assert row["n"] == 1500000000 and int(row["total"]) > 2**64


def test_a_killed_sql_leaves_no_folder_behind(sql_data_dir, tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {k: v for k, v in taplog_env(TMPDIR=str(temp)).items() if k != "XDG_RUNTIME_DIR"}
    slow = "SELECT sum(hash(i)) FROM range(20000000000) t(i)"
    for _ in range(2):
        query = subprocess.Popen(
            [TAPLOG, "sql", "--data-dir", str(sql_data_dir), slow],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.5)  # the query is running
        query.send_signal(signal.SIGTERM)
        assert query.wait(timeout=10) == -signal.SIGTERM
    [folder] = temp.iterdir()  # one folder of this user's, used by every run
    assert folder.name == f"taplog-sql-{os.getuid()}"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700 and not list(folder.iterdir())


def test_duckdb_spills_to_a_private_folder_never_the_data_dir(sql_data_dir, monkeypatch):
    monkeypatch.chdir(sql_data_dir)  # DuckDB's own default is ./.tmp
    result = _run_sql(
        sql_data_dir, "SELECT current_setting('temp_directory') AS spill", "--format", "json"
    )
    spill = Path(orjson.loads(result.output)[0]["spill"])
    assert not spill.is_relative_to(sql_data_dir)
    assert stat.S_IMODE(spill.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    "path",
    [
        "sessions?model=gpt-4.1' OR '1'='1",
        "sessions?text=' OR 1=1 --",
        "sessions?text=x'); COPY (SELECT 1) TO 'forged.csv' --",
        "sessions/inert-script'--",
        "sessions/inert-script/calls/x' OR '1'='1",
    ],
)
def test_ui_values_with_quotes_match_nothing_and_inject_nothing(ui_recording, path):
    before = _files(ui_recording.data_dir)
    response = httpx.get(f"{ui_recording.proxy.url}/ui/api/{path}")
    if "?" in path:
        assert response.status_code == 200 and response.json()["sessions"] == []
    else:
        assert response.status_code == 404
    assert _files(ui_recording.data_dir) == before
    assert not Path("forged.csv").exists()
