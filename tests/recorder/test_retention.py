"""Retention: whole sessions whose last event is old go, with what only they use.

Sessions are written by the real writer with events dated in the past (`ts`),
large bodies going to blobs; `taplog prune` and the SQL views are then run as a
user runs them, and what is left is checked and verified.
"""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from pathlib import Path

import duckdb
import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.events import make_event
from taplog.recorder.query.compaction import compact
from taplog.recorder.retention import BadAge, last_event, parse_age, prune
from taplog.recorder.store.lognames import session_name
from taplog.recorder.store.writer import EventRecord, Recorder
from taplog.recorder.store.zstd_stream import Compressor
from taplog.recorder.verify import verify
from tests.builders import INLINE_MAX
from tests.builders import dated_ts as _ts
from tests.builders import write_dated_sessions as write_sessions
from tests.disk import log_of, logs
from tests.fakes.clients import sql_rows

SHARED = "shared " * 400  # a body over INLINE_MAX: a blob, the same in every session


def _blob_of(body: str, data_dir: Path) -> Path:
    """The blob a session's first request (with `body`) went to."""
    blobs = sorted((data_dir / "blobs").glob("*/*.json"))
    found = [b for b in blobs if body.encode() in b.read_bytes()]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_sessions(
        data,
        {
            "old-a": ([40, 39], SHARED),  # old, shares its blob with kept
            "old-b": ([50], "only old-b " * 300),  # old, its blob used by nobody else
            "kept": ([2, 1], SHARED),
            "old-start-recent-end": ([90, 60, 0.01], None),
        },
    )
    return data


def _prune(data_dir: Path, *args: str) -> CliRunner:
    return CliRunner().invoke(main, ["prune", "--data-dir", str(data_dir), *args])


def test_old_sessions_go_with_their_own_blobs_and_a_record_is_kept(data_dir):
    shared, own = _blob_of(SHARED, data_dir), _blob_of("only old-b ", data_dir)
    result = _prune(data_dir, "--older-than", "30d")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"pruned old-a: last event {_ts(39)[:16]}")
    assert lines[1].startswith("pruned old-b: last event") and lines[1].endswith("1 blob")
    assert lines[2].startswith("pruned 2 sessions older than 30d: 5 lines")
    left = sorted(session_name(p) for p in logs(data_dir))
    assert left == ["kept", "old-start-recent-end"]
    assert sorted(p.stem for p in (data_dir / "rows").iterdir()) == left  # the rows beside them
    assert shared.exists() and not own.exists()
    record = [orjson.loads(line) for line in (data_dir / "pruned.jsonl").read_bytes().splitlines()]
    assert [(r["session"], r["lines"], r["blobs_removed"], r["by"]) for r in record] == [
        ("old-a", 3, 0, "prune"),
        ("old-b", 2, 1, "prune"),
    ]
    assert record[0]["last_event"] == _ts(39) and record[0]["pruned_at"] > _ts(0.001)
    assert all(report.ok for report in verify(data_dir))


def test_a_blob_only_pruned_sessions_share_goes(tmp_path):
    data = tmp_path / "data"
    write_sessions(data, {"a": ([40], SHARED), "b": ([41], SHARED), "c": ([1], None)})
    shared = _blob_of(SHARED, data)
    gone = prune(data, timedelta(days=30))
    assert [(p.session, p.blobs_removed) for p in gone] == [("a", 1), ("b", 0)]
    assert not shared.exists()


def test_dry_run_changes_nothing(data_dir):
    before = {p: p.read_bytes() for p in data_dir.rglob("*") if p.is_file()}
    result = _prune(data_dir, "--older-than", "30d", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("would prune old-a: last event")
    assert result.output.splitlines()[-1].endswith("1 blob; nothing was changed (--dry-run)")
    assert {p: p.read_bytes() for p in data_dir.rglob("*") if p.is_file()} == before


def test_compacted_sessions_leave_the_views_and_the_segments(data_dir):
    compact(data_dir)
    result = _prune(data_dir, "--older-than", "30d")
    assert result.exit_code == 0, result.output
    counted = sql_rows(data_dir, "SELECT session, count(*) AS n FROM events GROUP BY 1 ORDER BY 1")
    assert counted == [{"session": "kept", "n": 3}, {"session": "old-start-recent-end", "n": 4}]
    sessions = sql_rows(data_dir, "SELECT session FROM sessions ORDER BY 1")
    assert [row["session"] for row in sessions] == ["kept", "old-start-recent-end"]
    calls = "SELECT count(*) AS n FROM llm_calls WHERE session IN ('old-a', 'old-b')"
    assert sql_rows(data_dir, calls) == [{"n": 0}]
    segments = ", ".join(f"'{s}'" for s in sorted((data_dir / "compacted").glob("*.parquet")))
    in_segments = duckdb.sql(f"SELECT DISTINCT session FROM read_parquet([{segments}]) ORDER BY 1")
    assert in_segments.fetchall() == [("kept",), ("old-start-recent-end",)]
    manifest = orjson.loads((data_dir / "compacted" / "manifest.json").read_bytes())
    assert sorted(manifest) == ["kept", "old-start-recent-end"]


def test_quarantined_files_of_a_pruned_session_go_with_it(data_dir):
    quarantine = data_dir / "quarantine"
    (quarantine / "old-b.20260101T000000000000Z.torn").write_bytes(b'{"torn')
    (quarantine / "kept.20260101T000000000000Z.torn").write_bytes(b'{"torn')
    gone = prune(data_dir, timedelta(days=30))
    assert [p.quarantine_removed for p in gone] == [0, 1]
    assert [p.name for p in quarantine.iterdir()] == ["kept.20260101T000000000000Z.torn"]


def test_the_last_whole_line_dates_a_session_and_a_torn_tail_is_ignored(data_dir):
    log = log_of(data_dir, "old-b")
    written = log.stat().st_mtime
    with open(log, "ab") as torn:  # a write a crash cut short, then: the start of a frame
        torn.write(Compressor().write(b'{"v":3,"seq":3,"ts":"' + _ts(0).encode() + b'"}\n')[:-4])
    os.utime(log, (written, written))
    assert last_event(log) == _ts(50)
    assert [p.session for p in prune(data_dir, timedelta(days=30))] == ["old-a", "old-b"]


@pytest.mark.parametrize("text", ["30", "d", "1.5d", "2w", "-1d", "00d", "30 days", ""])
def test_an_age_is_a_whole_number_and_a_unit(text):
    with pytest.raises(BadAge, match=r"d \(days\), h \(hours\) or m \(minutes\)"):
        parse_age(text)
    result = _prune(Path("nowhere"), "--older-than", text)
    assert result.exit_code == 2 and "as in 30d, 12h or 90m" in result.output


def test_an_age_of_zero_takes_every_session(data_dir):
    result = _prune(data_dir, "--older-than", "0d", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith("would prune 4 sessions older than 0d")


def test_ages_in_days_hours_and_minutes():
    assert parse_age("0d") == timedelta(0)
    assert parse_age("30d") == timedelta(days=30)
    assert parse_age("12h") == timedelta(hours=12)
    assert parse_age("90m") == timedelta(minutes=90)


def test_a_session_the_writer_is_busy_with_is_kept(data_dir):
    """A record of an old session queued while the pass holds the writer: the session
    stays, and the record lands in its log."""
    recorder = Recorder(data_dir, fsync="never", body_inline_max=INLINE_MAX)
    recorder.start()
    late = threading.Event()

    class Arriving:
        """The writer, with a call for old-a arriving once the pass holds it."""

        def held(self):
            return _then(recorder.held(), lambda: _arrive(recorder, late))

        busy, forget = recorder.busy, recorder.forget

    gone = prune(data_dir, timedelta(days=30), by="serve", writer=Arriving())
    assert late.is_set() and [p.session for p in gone] == ["old-b"]
    recorder.close()
    assert last_event(log_of(data_dir, "old-a")) > _ts(0.001)
    record = orjson.loads((data_dir / "pruned.jsonl").read_bytes())
    assert (record["session"], record["by"]) == ("old-b", "serve")
    assert all(report.ok for report in verify(data_dir))


def _arrive(recorder: Recorder, late: threading.Event) -> None:
    recorder.record(EventRecord(make_event("error", "old-a", None, reason="a late call")))
    late.set()


class _then:
    """A context manager that runs `after_enter` once `inner` is entered."""

    def __init__(self, inner, after_enter) -> None:
        self.inner, self.after_enter = inner, after_enter

    def __enter__(self):
        self.inner.__enter__()
        self.after_enter()

    def __exit__(self, *exc):
        return self.inner.__exit__(*exc)


def test_prune_refuses_while_the_data_dir_is_owned(data_dir):
    from taplog.recorder.store.lock import DataDirLock

    lock = DataDirLock(data_dir)
    lock.acquire()
    try:
        result = _prune(data_dir, "--older-than", "30d")
        dry = _prune(data_dir, "--older-than", "30d", "--dry-run")
    finally:
        lock.release()
    assert result.exit_code == 1
    assert "taplog serve --retention-days N" in result.output
    assert log_of(data_dir, "old-a").exists()
    assert dry.exit_code == 0 and "would prune 2 sessions" in dry.output


def test_a_blob_written_since_the_pass_started_stays(data_dir):
    own = _blob_of("only old-b ", data_dir)
    os.utime(own)  # written (or found again by its hash) just now
    gone = prune(data_dir, timedelta(days=30))
    assert [(p.session, p.blobs_removed) for p in gone] == [("old-a", 0), ("old-b", 0)]
    assert own.exists()


def test_a_shipping_data_dir_keeps_an_old_session_until_it_is_shipped_as_it_is(data_dir):
    shipped = {"old-a": {"size": log_of(data_dir, "old-a").stat().st_size}, "old-b": {"size": 1}}
    (data_dir / "shipping").mkdir()
    (data_dir / "shipping" / "state.json").write_bytes(orjson.dumps({"sessions": shipped}))
    state = (data_dir / "shipping" / "state.json").read_bytes()
    assert [p.session for p in prune(data_dir, timedelta(days=30))] == ["old-a"]
    assert log_of(data_dir, "old-b").exists()
    assert (data_dir / "shipping" / "state.json").read_bytes() == state  # the bucket untouched
