"""What the writer's next sync pass must make durable, and the cheapest way to do it.

A pass covers three things: the session files written since the last pass,
files the writer evicted from its open-file cache while still unsynced
(kept open until the pass, so eviction costs no fsync of its own), and the
directory entries of files created since then (one directory fsync per pass
instead of one per new session).

With few dirty files each is fsynced and a failure names its file. With many
(`MANY` or more; e.g. 100 agents each adding a line within one 100 ms
interval) one fsync per file is one journal commit per file, so on Linux the
pass is a single `syncfs(2)` of the data directory's filesystem instead
(errors reported since Linux 5.8). A failed `syncfs` cannot say which file
lost data, so every file of that pass counts as failed, and the writer seals
each one as suspect (`Recorder._sync_failed`): more files set aside than
strictly needed, never a loss unreported. A failed directory fsync counts
against the files created since the last pass.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from taplog.recorder.store.logfile import SessionFile, _sync_directory

MANY = 16

Failure = tuple[SessionFile, OSError]


def _load_syncfs() -> Callable[[int], None] | None:
    """`syncfs(fd)` raising OSError, or None where libc has none (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.syncfs
    except (OSError, AttributeError):
        return None

    def syncfs(fd: int) -> None:
        if call(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return syncfs


syncfs = _load_syncfs()


class SyncPlan:
    """The writer's unsynced state between passes; used on the writer thread only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._created: list[SessionFile] = []  # their directory entries are not synced yet
        self._retired: dict[str, SessionFile] = {}  # evicted while dirty, by session
        self._written = False  # lines were appended since the last pass

    def wrote(self) -> None:
        """Lines were appended: the next pass has files to sync."""
        self._written = True

    def created(self, session_file: SessionFile) -> None:
        """A new file: the next pass syncs its directory entry too."""
        self._created.append(session_file)

    def retire(self, session: str, session_file: SessionFile) -> None:
        """An evicted file: kept open until the next pass has synced it, then closed."""
        self._retired[session] = session_file

    def reclaim(self, session: str) -> SessionFile | None:
        """The retired file of a session written to again (one open file per session)."""
        return self._retired.pop(session, None)

    @property
    def retired(self) -> int:
        return len(self._retired)

    def due(self) -> bool:
        """Whether a pass has anything to do (asked on every turn: scans no files)."""
        return self._written or bool(self._created or self._retired)

    def run(self, open_files: Iterable[SessionFile]) -> tuple[bool, list[Failure]]:
        """Sync everything unsynced: (whether there was anything, the files that failed)."""
        dirty = [f for f in open_files if f.dirty]
        retired = list(self._retired.values())
        created = [f for f in self._created if f.fd >= 0]
        self._created, self._retired, self._written = [], {}, False
        files = dirty + [f for f in retired if f.dirty]
        if not files and not created:
            return False, []
        if syncfs is not None and len(files) + bool(created) >= MANY:
            failures = self._sync_filesystem(syncfs, files + created)
        else:
            failures = self._sync_each(files, created)
        failed = {id(f) for f, _ in failures}
        for session_file in retired:
            if id(session_file) not in failed:
                session_file.close(sync=False)  # synced just now
        return True, failures

    def _sync_filesystem(
        self, sync: Callable[[int], None], files: list[SessionFile]
    ) -> list[Failure]:
        try:
            dir_fd = os.open(self.directory, os.O_RDONLY)
            try:
                sync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:  # which file lost data is unknown: all of them failed
            return [(f, exc) for f in dict.fromkeys(files)]
        for session_file in files:
            session_file.dirty = False
        return []

    def _sync_each(self, files: list[SessionFile], created: list[SessionFile]) -> list[Failure]:
        failures: list[Failure] = []
        for session_file in files:
            try:
                session_file.sync()
            except OSError as exc:
                failures.append((session_file, exc))
        if created:
            try:
                _sync_directory(self.directory)
            except OSError as exc:  # their names may be lost: count it against those files
                failed = {id(f) for f, _ in failures}
                failures += [(f, exc) for f in created if id(f) not in failed]
        return failures
