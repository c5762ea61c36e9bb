"""Sync passes: one directory fsync for many new sessions, one syncfs for many dirty files,
evicted files synced before they close, a failed syncfs sealing every file it covered, and
lines a caller's turn wrote synced in time by the writer thread.

The recorder is real; only the OS calls are wrapped, to count them or make one fail.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from pathlib import Path

import pytest

from taplog.recorder.events import ERROR, make_event
from taplog.recorder.store import logfile, syncing, writer
from taplog.recorder.store.reader import read_session
from taplog.recorder.store.writer import EventRecord, Recorder
from taplog.recorder.verify import verify
from tests.disk import log_of
from tests.fakes.clients import wait_written


class Syncs:
    """Counts the fsyncs of logs (by inode) and of directories, and the syncfs calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, syncfs_fails: bool = False) -> None:
        self.files: list[int] = []
        self.directories = 0
        self.syncfs = 0
        real_fsync, real_syncfs = os.fsync, syncing.syncfs

        def fsync(fd: int) -> None:
            status = os.fstat(fd)
            if stat.S_ISDIR(status.st_mode):
                self.directories += 1
            else:
                self.files.append(status.st_ino)
            real_fsync(fd)

        def syncfs(fd: int) -> None:
            self.syncfs += 1
            if syncfs_fails and self.syncfs == 1:
                raise OSError(errno.EIO, "injected")
            real_syncfs(fd)

        monkeypatch.setattr(logfile.os, "fsync", fsync)
        if real_syncfs is not None:
            monkeypatch.setattr(syncing, "syncfs", syncfs)


def _one_batch(rec: Recorder, sessions: list[str], reason: str = "hello") -> None:
    """Queue one event per session while the writer is held, so it takes them together."""
    gate = threading.Event()
    rec.when_written(lambda ok: gate.wait(10))  # runs on the writer thread: holds it
    for session in sessions:
        rec.record(EventRecord(make_event(ERROR, session, None, reason=reason)))
    gate.set()


def _open_logs(data_dir: Path) -> list[str]:
    """The session logs this process holds open, one entry per descriptor."""
    folder = str(data_dir / "sessions")
    links = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return [link for link in links if link.startswith(folder)]


def test_new_sessions_written_together_cost_one_directory_fsync(tmp_path, monkeypatch):
    syncs = Syncs(monkeypatch)
    rec = Recorder(tmp_path, fsync="always")
    rec.start()
    sessions = [f"s{n}" for n in range(syncing.MANY - 4)]  # few: a fsync per file
    _one_batch(rec, sessions)
    assert wait_written(rec) is True
    assert syncs.directories == 1  # not one per new file
    inodes = {log_of(tmp_path, s).stat().st_ino for s in sessions}
    assert set(syncs.files) == inodes and len(syncs.files) == len(inodes)
    rec.close()


@pytest.mark.skipif(syncing.syncfs is None, reason="no syncfs(2) here (not Linux)")
def test_many_dirty_sessions_are_synced_by_one_syncfs(tmp_path, monkeypatch):
    syncs = Syncs(monkeypatch)
    rec = Recorder(tmp_path, fsync="always")
    rec.start()
    sessions = [f"s{n}" for n in range(syncing.MANY * 3)]
    _one_batch(rec, sessions)
    assert wait_written(rec) is True
    assert syncs.syncfs == 1 and syncs.files == [] and syncs.directories == 0
    _one_batch(rec, sessions[:2], reason="again")  # few dirty files: each its own fsync
    assert wait_written(rec) is True
    assert syncs.syncfs == 1 and len(syncs.files) == 2
    rec.close()
    assert all(len(read_session(tmp_path, s)) == (2 if s in sessions[:2] else 1) for s in sessions)


@pytest.mark.skipif(syncing.syncfs is None, reason="no syncfs(2) here (not Linux)")
def test_a_failed_syncfs_seals_every_file_it_covered(tmp_path, monkeypatch):
    Syncs(monkeypatch, syncfs_fails=True)
    rec = Recorder(tmp_path, fsync="always")
    rec.start()
    sessions = [f"s{n}" for n in range(syncing.MANY)]
    _one_batch(rec, sessions)
    assert wait_written(rec) is True  # every line read back whole and went on in a synced file
    assert rec.accepting
    _one_batch(rec, sessions, reason="after")
    assert wait_written(rec) is True
    rec.close()
    suspects = sorted(p.name.split(".")[0] for p in (tmp_path / "quarantine").iterdir())
    assert suspects == sorted(sessions)  # which file lost data is unknown: all were sealed
    for session in sessions:
        reasons = [e["reason"] for e in read_session(tmp_path, session)]
        assert reasons[0] == "hello" and reasons[-1] == "after"
        assert reasons[1].startswith("an fsync of this log failed (injected)")
    assert all(report.ok for report in verify(tmp_path))


def test_an_evicted_file_is_synced_before_it_closes_and_never_opened_twice(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "FSYNC_INTERVAL", 30.0)  # no pass until close
    syncs = Syncs(monkeypatch)
    rec = Recorder(tmp_path, fsync="interval", max_open_files=3)
    rec.start()
    first, between, second = threading.Event(), threading.Event(), threading.Event()
    rec.when_written(lambda ok: first.wait(10))
    for session in "abcd":  # "a" is evicted unsynced
        rec.record(EventRecord(make_event(ERROR, session, None, reason=session)))
    rec.when_written(lambda ok: (between.set(), second.wait(10)))
    first.set()
    assert between.wait(10)
    assert syncs.files == []  # eviction cost no fsync
    rec.record(EventRecord(make_event(ERROR, "a", None, reason="a again")))  # "a" is back
    held: list[list[str]] = []
    rec.when_written(lambda ok: held.append(_open_logs(tmp_path)))
    second.set()
    assert wait_written(rec) is True
    assert len(held[0]) == len(set(held[0])) == 4  # one descriptor per log, "a" included
    rec.close()
    inodes = {log_of(tmp_path, s).stat().st_ino for s in "abcd"}
    assert set(syncs.files) == inodes  # the evicted ones too, before they closed
    assert _open_logs(tmp_path) == []
    assert [e["reason"] for e in read_session(tmp_path, "a")] == ["a", "a again"]


def test_lines_a_callers_turn_wrote_are_synced_within_the_interval(tmp_path, monkeypatch):
    """The recorder process's reader writes what it built in its own turn (nothing is left
    for later) and goes back to its socket: the writer thread, woken for the sync
    deadline, syncs the file within FSYNC_INTERVAL plus a batch."""
    syncs = Syncs(monkeypatch)
    rec = Recorder(tmp_path, fsync="interval")
    rec.start()
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="r")), wake=False)
    rec.take_turn()
    assert len(read_session(tmp_path, "s")) == 1  # written in the turn itself
    inode = log_of(tmp_path, "s").stat().st_ino
    deadline = time.monotonic() + 5
    while inode not in syncs.files and time.monotonic() < deadline:
        time.sleep(0.01)
    assert inode in syncs.files
    rec.close()
