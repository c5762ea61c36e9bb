"""The typed rows the writer keeps beside each log (`recorder.store.rows`): the fields a
reader would take from the log's lines, used only while they hold all of it.

Logs are written by taplog serving the official SDKs (and by the writer alone where a
crash or a repair is staged); the rows are checked against the log's own lines, and
the SQL views against the same views with the rows gone.
"""

from __future__ import annotations

import os
import shutil

from taplog.recorder.events import ERROR, make_event
from taplog.recorder.query.connect import connect, query
from taplog.recorder.store.lognames import iter_lines
from taplog.recorder.store.rows import ROWS_DIR, read_rows, rows_of, rows_path
from taplog.recorder.store.writer import EventRecord, Recorder
from tests.disk import edit_log, log_of, logs
from tests.fakes.agents import anthropic_agent, chat_agent

QUESTIONS = [
    "SELECT * EXCLUDE (data) FROM events ORDER BY session, seq",
    "SELECT * EXCLUDE (request_body, response_body) FROM llm_calls ORDER BY session, exchange",
    "SELECT * EXCLUDE (arguments, result) FROM tool_calls ORDER BY session, call_id",
    "SELECT * FROM sessions ORDER BY session",
]


def _from_lines(log):
    return b"".join(rows_of(iter_lines(log)))


def _answers(data_dir):
    con = connect(data_dir)
    return [query(con, q).fetchall() for q in QUESTIONS]


def _write(data_dir, session, reasons):
    recorder = Recorder(data_dir, fsync="never")
    recorder.start()
    for reason in reasons:
        recorder.record(EventRecord(make_event(ERROR, session, None, reason=reason)))
    recorder.close()


def test_the_rows_beside_each_log_are_its_lines_typed_fields(taplog, oai, ant, tmp_path):
    chat_agent(oai, stream=False)
    anthropic_agent(ant, stream=True)
    taplog.wait_responses(8)
    taplog.flush()
    for log in logs(taplog.data_dir):
        kept = read_rows(log)
        assert kept is not None and kept == _from_lines(log) and kept.count(b"\n") > 3
    without = tmp_path / "without rows"
    shutil.copytree(taplog.data_dir, without)
    shutil.rmtree(without / ROWS_DIR)
    assert _answers(taplog.data_dir) == _answers(without)


def test_rows_behind_their_log_are_not_read_and_the_writer_brings_them_up_to_it(tmp_path):
    _write(tmp_path, "s", ["one", "two"])
    log = log_of(tmp_path, "s")
    rows = rows_path(log)
    whole = rows.read_bytes()
    rows.write_bytes(whole[: whole.index(b'{"v"')])  # a crash after the log's write
    assert read_rows(log) is None
    reasons = "SELECT reason FROM events WHERE type = 'error' ORDER BY seq"
    assert query(connect(tmp_path), reasons).fetchall() == [("one",), ("two",)]
    _write(tmp_path, "s", ["three"])
    assert read_rows(log) == _from_lines(log)
    assert [r for (r,) in query(connect(tmp_path), reasons).fetchall()] == ["one", "two", "three"]


def test_rows_that_do_not_fit_their_log_are_written_afresh(tmp_path):
    _write(tmp_path, "s", ["one", "two", "three"])
    log = log_of(tmp_path, "s")
    edit_log(log, lambda text: text[: text.rindex(b'{"v"')])  # a repair cut the last line
    assert read_rows(log) is None  # they hold more than the log
    _write(tmp_path, "s", ["four"])
    assert read_rows(log) == _from_lines(log)
    reasons = "SELECT reason FROM events WHERE type = 'error' ORDER BY seq"
    assert query(connect(tmp_path), reasons).fetchall() == [("one",), ("two",), ("four",)]


def test_a_link_planted_where_rows_go_is_not_written_through(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"theirs\n")
    (tmp_path / "data" / ROWS_DIR).mkdir(parents=True)
    (tmp_path / "data" / ROWS_DIR / "s.rows").symlink_to(outside)
    (tmp_path / "data" / ROWS_DIR / "s.rows.partial").symlink_to(outside)
    _write(tmp_path / "data", "s", ["one"])
    assert outside.read_bytes() == b"theirs\n"
    log = log_of(tmp_path / "data", "s")
    assert not rows_path(log).is_symlink() and read_rows(log) == _from_lines(log)
    assert oct(os.stat(rows_path(log)).st_mode & 0o777) == "0o600"
