"""The data dir's lock file: who holds it, and where the serve that records there listens."""

from __future__ import annotations

import os

import pytest

from taplog.recorder.store.lock import (
    LOCK_FILE,
    DataDirBusy,
    DataDirLock,
    announce,
    serve_address,
)

URL = "http://127.0.0.1:9000"


def test_the_serve_s_address_outlives_it_and_every_later_holder_keeps_it(tmp_path):
    assert serve_address(tmp_path) is None  # no lock file yet
    serve = DataDirLock(tmp_path)
    serve.acquire()
    announce(tmp_path, URL)
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n{URL}\n"
    serve.release()
    assert serve_address(tmp_path) == URL  # stopped: still where it listened

    prune = DataDirLock(tmp_path)  # a later holder (resume, prune) that is no serve
    prune.acquire()
    assert serve_address(tmp_path) == URL
    prune.release()


def test_a_busy_data_dir_names_the_holder_and_where_it_listens(tmp_path):
    serve = DataDirLock(tmp_path)
    serve.acquire()
    announce(tmp_path, URL)
    try:
        with pytest.raises(DataDirBusy, match=rf"pid {os.getpid()}, listening on {URL}\)"):
            DataDirLock(tmp_path).acquire()
    finally:
        serve.release()


def test_only_the_holder_announces_and_an_older_lock_file_reads_as_no_address(tmp_path):
    (tmp_path / LOCK_FILE).write_text("1")  # an older taplog's: the pid alone
    assert serve_address(tmp_path) is None
    announce(tmp_path, URL)  # this process does not hold it: nothing changes
    assert (tmp_path / LOCK_FILE).read_text() == "1"
    lock = DataDirLock(tmp_path)
    lock.acquire()
    assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
    lock.release()
    announce(tmp_path / "elsewhere", URL)  # no lock file: nothing to speak for
