"""The log side on real files: append-only, gapless, chained, repaired after a crash."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time
from pathlib import Path

import duckdb
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taplog.recorder.bodies import decode_body, encode_body
from taplog.recorder.channel import Records, record_message
from taplog.recorder.events import (
    ERROR,
    FORMAT_VERSION,
    LLM_REQUEST,
    make_event,
    seal,
    session_started,
    verify_line,
)
from taplog.recorder.store import writer
from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent, read_events, read_session
from taplog.recorder.store.writer import EventRecord, Recorder, SessionStart
from taplog.recorder.store.zstd_stream import FRAME_END
from taplog.recorder.verify import verify
from tests.disk import edit_log, log_of, readable

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd


def _record(recorder, session, count, **payload):
    for n in range(count):
        recorder.record(EventRecord(make_event(ERROR, session, None, reason=f"r{n}", **payload)))


def _recorder(tmp_path, fsync="interval"):
    recorder = Recorder(tmp_path, fsync=fsync)
    recorder.start()
    return recorder


@pytest.mark.parametrize("fsync", ["always", "interval", "never"])
def test_events_are_numbered_gaplessly_and_chained(tmp_path, fsync):
    recorder = _recorder(tmp_path, fsync)
    _record(recorder, "a", 50)
    _record(recorder, "b", 3)
    recorder.close()
    events = read_session(tmp_path, "a")
    assert [e["seq"] for e in events] == list(range(1, 51))
    assert [e["reason"] for e in events] == [f"r{n}" for n in range(50)]
    assert events[0]["prev"] is None
    assert all(later["prev"] == earlier["h"] for earlier, later in itertools.pairwise(events))
    assert len(read_session(tmp_path, "b")) == 3


def _started(session, source):
    started = session_started(
        session, source=source, original=None, api="x", user_agent=None, taplog_version="0"
    )
    return SessionStart(started)


def test_a_session_is_started_once_however_many_workers_saw_its_first_call(tmp_path):
    """Two workers each take a call of a new session for its first; the first of their
    `session.started` to arrive is the one written, also after a restart."""
    records = Records()  # as they cross from the workers (`recorder.channel`)
    recorder = _recorder(tmp_path)
    for source in ("header", "client:x-claude-code-session-id"):
        recorder.record(records.rebuilt(record_message(_started("s", source))))
        _record(recorder, "s", 1)
    recorder.close()
    recorder = _recorder(tmp_path)
    recorder.record(_started("s", "path"))
    recorder.close()
    events = read_session(tmp_path, "s")
    assert [e["type"] for e in events] == ["session.started", ERROR, ERROR]
    assert events[0]["source"] == "header"


def test_a_reopened_session_continues_its_sequence_and_chain(tmp_path):
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 2)
    recorder.close()
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 2)
    recorder.close()
    events = read_session(tmp_path, "s")
    assert [e["seq"] for e in events] == [1, 2, 3, 4]
    assert events[2]["prev"] == events[1]["h"]


def _written_twice(tmp_path, first: int, prompt: str) -> tuple[Path, int]:
    """Session s's log: `first` events by one recorder, then one event carrying `prompt` by
    a second (a second frame); the log, and its size after the first."""
    recorder = _recorder(tmp_path)
    _record(recorder, "s", first)
    recorder.close()
    path = log_of(tmp_path, "s")
    size = path.stat().st_size
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 1, prompt=prompt)
    recorder.close()
    return path, size


def test_a_torn_tail_is_skipped_on_read_and_repaired_on_open(tmp_path):
    path, whole = _written_twice(tmp_path, 3, prompt="lorem ipsum " * 2000)
    data = path.read_bytes()
    cut = data[: (whole + len(data)) // 2]  # a crash in the middle of the fourth write
    path.write_bytes(cut)

    assert [e["seq"] for e in read_events(path)] == [1, 2, 3]
    assert verify(tmp_path)[0].torn is not None
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 1)
    recorder.close()
    assert [e["seq"] for e in read_session(tmp_path, "s")] == [1, 2, 3, 4]
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert cut.endswith(kept.read_bytes()) and len(cut) - whole <= len(kept.read_bytes()) + 3
    assert verify(tmp_path)[0].ok


def test_a_torn_tail_of_a_plain_log_is_skipped_on_read_and_repaired_on_open(tmp_path):
    path = tmp_path / "sessions" / "s.jsonl"  # an older taplog's: written on as it is
    path.parent.mkdir()
    path.write_bytes(seal(make_event(ERROR, "s", None, reason="r0"), 1, None)[0])
    torn = b'{"v":1,"seq":2,"ts":"2026-'
    path.write_bytes(path.read_bytes() + torn)  # a crash in the middle of a write

    assert [e["seq"] for e in read_events(path)] == [1]
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 1)
    recorder.close()
    assert log_of(tmp_path, "s") == path and not list(path.parent.glob("*.zst"))
    assert [e["seq"] for e in read_session(tmp_path, "s")] == [1, 2]
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.read_bytes() == torn


def test_a_block_that_does_not_decode_is_damage_named_and_set_aside(tmp_path):
    path, first_frame = _written_twice(tmp_path, 2, prompt="lorem ipsum dolor " * 500)
    data = bytearray(path.read_bytes())
    # the second frame (closing the file ended the first): magic, descriptor, window, block
    assert path.read_bytes()[:first_frame].endswith(FRAME_END)
    block = first_frame + 6
    data[block] |= 0b110  # a reserved block type: no decoder reads on
    path.write_bytes(bytes(data))

    with pytest.raises(
        DamagedLine, match=r"s\.jsonl\.zst: the compressed stream .* at byte \d+ \(lines read: 2\)"
    ):
        list(read_events(path))
    (report,) = verify(tmp_path)
    assert report.lines == 2 and "the compressed stream has no zstd block" in str(report.damage[0])
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 1)
    recorder.close()
    events = read_session(tmp_path, "s")
    assert "the compressed stream has no zstd block" in events[0]["reason"]
    (aside,) = (tmp_path / "quarantine").glob("s.*.damaged.jsonl.zst")
    assert aside.read_bytes() == bytes(data)


def test_damage_in_the_middle_is_reported_with_file_and_line(tmp_path):
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 3)
    recorder.close()
    path = log_of(tmp_path, "s")
    edit_log(path, lambda text: text.replace(b'"r1"', b'"rX"'))
    with pytest.raises(DamagedLine, match=r"s\.jsonl\.zst:2 \(byte \d+\): line fails its checksum"):
        list(read_events(path))


def test_a_damaged_last_line_is_set_aside_not_continued(tmp_path):
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 2)
    recorder.close()
    path = log_of(tmp_path, "s")
    edit_log(path, lambda text: text.replace(b'"r1"', b'"rX"'))
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 1)
    recorder.close()
    events = read_session(tmp_path, "s")
    assert "fails its checksum" in events[0]["reason"]
    damaged = list((tmp_path / "quarantine").glob("*.damaged.jsonl.zst"))
    assert len(damaged) == 1 and b'"rX"' in readable(damaged[0])


def test_recorded_content_cannot_break_out_of_its_line(tmp_path):
    recorder = _recorder(tmp_path)
    forged = '\n{"v":1,"seq":99,"type":"llm.request"}\n\r\u2028'
    _record(recorder, "s", 1, prompt=forged)
    recorder.close()
    lines = readable(log_of(tmp_path, "s")).splitlines()
    assert len(lines) == 1 and verify_line(lines[0])
    assert read_session(tmp_path, "s")[0]["prompt"] == forged


def test_readers_refuse_newer_formats_and_unknown_types(tmp_path):
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 1)
    recorder.close()
    path = log_of(tmp_path, "s")
    edit_log(path, lambda line: line.replace(b'"v":%d,' % FORMAT_VERSION, b'"v":9,', 1))
    with pytest.raises((UnsupportedEvent, DamagedLine)):
        list(read_events(path))


def test_unknown_event_type_is_refused_unless_ignorable(tmp_path):
    from taplog.recorder.events import seal

    path = tmp_path / "x.jsonl"
    unknown = {
        "v": 1,
        "seq": 0,
        "ts": "t",
        "session": "x",
        "type": "future.thing",
        "id": "e",
        "exchange": None,
    }
    path.write_bytes(seal(dict(unknown), 1, None)[0])
    with pytest.raises(UnsupportedEvent, match=r"unknown event type 'future\.thing'"):
        list(read_events(path))
    path.write_bytes(seal({**unknown, "ignorable": True}, 1, None)[0])
    assert len(list(read_events(path))) == 1


def test_make_event_refuses_types_outside_the_format():
    with pytest.raises(ValueError, match="unknown event type"):
        make_event("llm.requests", "s", None)
    assert make_event(LLM_REQUEST, "s", "ex_1")["type"] == LLM_REQUEST


def test_flush_waits_until_everything_is_written(tmp_path):
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 200)
    assert recorder.flush(10)
    assert len(read_session(tmp_path, "s")) == 200
    recorder.close()


def test_a_session_waited_on_is_written_at_once_and_the_others_soon_after(tmp_path):
    """Lines nobody waits on may sit in memory a moment (so a call's request and answer
    share one write), but never longer than WRITE_DELAY plus a batch."""
    recorder = _recorder(tmp_path)
    _record(recorder, "quiet", 3)
    _record(recorder, "waited", 2)
    told = []
    written = threading.Event()
    recorder.when_written(lambda ok: (told.append(ok), written.set()), session="waited")
    assert written.wait(10) and told == [True]
    assert len(read_session(tmp_path, "waited")) == 2
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if log_of(tmp_path, "quiet").exists() and len(read_session(tmp_path, "quiet")) == 3:
            break
        time.sleep(0.01)
    assert len(read_session(tmp_path, "quiet")) == 3
    assert time.monotonic() < deadline
    recorder.close()


def test_a_caller_that_takes_the_turn_writes_on_its_own_thread(tmp_path):
    """The recorder process's readers: what they queued is built, written and released
    by their own thread, in order, without waking the writer thread."""
    recorder = _recorder(tmp_path)
    for n in range(3):
        event = make_event(ERROR, "s", None, reason=f"r{n}")
        recorder.record(EventRecord(event), wake=False)
    told = []
    recorder.when_written(lambda ok: told.append((ok, threading.current_thread())), "s", wake=False)
    recorder.take_turn()
    assert told == [(True, threading.current_thread())]
    assert [e["reason"] for e in read_session(tmp_path, "s")] == ["r0", "r1", "r2"]
    recorder.close()


def test_observers_nobody_waits_on_come_after_the_callers_and_before_a_flush(tmp_path):
    """Metrics and the call line (`acknowledged_first`) see a turn's events once the
    callers waiting on them were told, the others before, whoever takes the turn (the
    writer thread tells them a moment later: the callers go first); a flush returns after
    both."""
    recorder = _recorder(tmp_path)
    heard = []
    recorder.observe(lambda event: heard.append(("before", event["reason"])))
    recorder.observe(lambda event: heard.append(("after", event["reason"])), True)

    def turn(first: int, take_it: bool) -> list:
        told, start = threading.Event(), len(heard)
        for n in (first, first + 1):
            event = make_event(ERROR, "s", None, reason=f"r{n}")
            recorder.record(EventRecord(event), wake=not take_it)
        recorder.when_written(
            lambda ok: (heard.append(("written", ok)), told.set()), "s", not take_it
        )
        if take_it:
            recorder.take_turn()
        assert told.wait(5)
        deadline = time.monotonic() + 5
        while len(heard) < start + 5 and time.monotonic() < deadline:
            time.sleep(0.001)
        return heard[start:]

    for first, take_it in ((0, True), (2, False)):  # a caller's turn, then the writer's
        assert turn(first, take_it) == [
            ("before", f"r{first}"),
            ("before", f"r{first + 1}"),
            ("written", True),
            ("after", f"r{first}"),
            ("after", f"r{first + 1}"),
        ]
    recorder.record(EventRecord(make_event(ERROR, "s", None, reason="r4")))
    assert recorder.flush(10)
    assert heard[-2:] == [("before", "r4"), ("after", "r4")]
    recorder.close()


def test_observers_nobody_waits_on_are_not_put_off_by_a_busy_writer(tmp_path, monkeypatch):
    """Turns that release callers one after the other, as a busy recorder process takes
    them, never put those observers off: they see the first turn's events while the turns
    go on, each far sooner after the one before than the observers' delay."""
    monkeypatch.setattr(writer, "AFTER_RELEASE", 0.05)
    recorder = _recorder(tmp_path)
    heard = threading.Event()
    recorder.observe(lambda event: heard.set(), True)
    turns, deadline = 0, time.monotonic() + 10
    while not heard.is_set() and time.monotonic() < deadline:
        recorder.record(EventRecord(make_event(ERROR, "s", None, reason=f"r{turns}")), False)
        recorder.when_written(lambda ok: None, "s", wake=False)
        recorder.take_turn()
        turns += 1
    assert heard.is_set(), f"no observer told in {turns} turns"
    recorder.close()


def test_a_callers_turn_that_fails_stops_new_calls(tmp_path, monkeypatch):
    recorder = _recorder(tmp_path)

    def broken(pending):
        raise RuntimeError("a bug")

    monkeypatch.setattr(recorder, "_write", broken)
    recorder.record(EventRecord(make_event(ERROR, "s", None, reason="r")), wake=False)
    recorder.when_written(lambda ok: None, "s", wake=False)
    recorder.take_turn()  # the caller's thread goes on
    assert not recorder.accepting
    assert "the log writer stopped" in recorder.health()["reason"]
    recorder.close(5)


def test_files_are_private_to_their_owner(tmp_path):
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 1)
    recorder.close()
    assert os.stat(log_of(tmp_path, "s")).st_mode & 0o077 == 0


@given(st.binary(max_size=300))
def test_any_body_bytes_round_trip_exactly(raw):
    stored = orjson.loads(orjson.dumps(encode_body(raw)))
    assert decode_body(stored) == raw


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_json_bodies_are_stored_readable_and_exact(value):
    for raw in (orjson.dumps(value), orjson.dumps(value, option=orjson.OPT_INDENT_2)):
        stored = orjson.loads(orjson.dumps(encode_body(raw)))
        assert decode_body(stored) == raw
        if raw and value is not None:
            assert stored["body"] == value


def test_an_event_orjson_refuses_is_written_sanitised_and_the_log_goes_on(tmp_path):
    """Undecodable header bytes (surrogates), nesting past orjson's limit, huge integers."""
    recorder = _recorder(tmp_path)
    deep: object = "bottom"
    for _ in range(300):
        deep = [deep]
    _record(recorder, "s", 1, header="\udcff\udcfe", deep=deep, big=2**70)
    _record(recorder, "s", 1)
    assert recorder.flush(10)
    assert recorder.accepting
    recorder.close()
    first, second = read_session(tmp_path, "s")
    assert "surrogates" in first["sanitised"] or "Recursion" in first["sanitised"]
    assert first["header"] == "\\udcff\\udcfe" and first["big"] == str(2**70)
    assert "clipped" in orjson.dumps(first["deep"]).decode()
    assert second["seq"] == 2 and second["prev"] == first["h"]


def test_bodies_nested_too_deep_for_a_log_line_are_kept_exact_as_text():
    for depth in (10, 240, 300, 1000):
        raw = b'{"x":' + b"[" * depth + b"]" * depth + b"}"
        stored = encode_body(raw)
        assert decode_body(orjson.loads(orjson.dumps(stored))) == raw
        assert (stored["body"] is None) == (depth >= 240)


def test_a_writer_thread_that_dies_stops_new_calls(tmp_path, monkeypatch):
    recorder = _recorder(tmp_path)

    def broken(pending):
        raise RuntimeError("a bug")

    monkeypatch.setattr(recorder, "_write", broken)
    _record(recorder, "s", 1)
    recorder._thread.join(5)
    assert not recorder.accepting
    assert "the log writer stopped" in recorder.health()["reason"]


def test_a_log_taplog_has_closed_is_a_whole_zstd_file_any_tool_reads(tmp_path):
    recorder = _recorder(tmp_path)
    _record(recorder, "s", 3)
    recorder.close()
    recorder = _recorder(tmp_path)  # a second frame, after a restart
    _record(recorder, "s", 2)
    recorder.close()
    path = log_of(tmp_path, "s")
    assert path.name == "s.jsonl.zst"
    text = zstd.decompress(path.read_bytes())  # refuses a frame that is not ended
    assert [orjson.loads(line)["seq"] for line in text.splitlines()] == [1, 2, 3, 4, 5]
    rows = duckdb.sql(f"SELECT count(*) FROM read_ndjson_objects('{path}')").fetchall()
    assert rows == [(5,)]


def test_a_log_left_idle_ends_its_frame_while_taplog_runs_and_goes_on_in_a_new_one(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(writer, "COMPRESSING_IDLE", 0.3)
    recorder = _recorder(tmp_path)
    try:
        _record(recorder, "s", 3)
        assert recorder.flush(10)
        path = log_of(tmp_path, "s")
        deadline = time.monotonic() + 10
        while not path.read_bytes().endswith(FRAME_END):  # the writer wakes for it alone
            assert time.monotonic() < deadline, "the idle log's frame was never ended"
            time.sleep(0.05)
        text = zstd.decompress(path.read_bytes())  # whole, though the recorder runs
        assert [orjson.loads(line)["seq"] for line in text.splitlines()] == [1, 2, 3]
        _record(recorder, "s", 2)
    finally:
        recorder.close()
    assert [e["seq"] for e in read_session(tmp_path, "s")] == [1, 2, 3, 4, 5]
    assert [r.ok for r in verify(tmp_path)] == [True]
