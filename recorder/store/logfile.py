"""One session's log file: append-only, hash-chained, repaired on open.

A crash can leave a torn last line. Opening the file detects it, moves the
cut bytes to `quarantine/` (kept, never deleted) and truncates back to the
last complete line, so the chain continues from there. A last complete line
that fails its own checksum is damage, not a tear: the file is set aside
whole and the caller is told, loudly; `open_session_file` then starts the
session anew with an `error` event that says so. The writer does this when it
opens a file, and `taplog repair` on demand (`recorder.verify`).

A failed fsync is never retried on the same file: the kernel may have
dropped the pages it could not write and would report the next fsync as a
success. `reseal` seals such a file as suspect instead (a hard link in
`quarantine/`) and starts a new file holding what reads back whole, synced
on a new inode, followed by an `error` event saying what happened.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import orjson

from taplog.recorder.events import Event, error_event, seal, verify_line
from taplog.recorder.store.blobs import NEW_FILE, BlobStore
from taplog.recorder.store.deltas import Batch, Ledger

_BLOCK = 64 * 1024


class DamagedLog(Exception):
    """The file's last complete line does not verify; it was moved aside."""


def quarantine_name(session: str, kind: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{session}.{stamp}.{kind}"


def _last_newline_before(fd: int, end: int) -> int:
    """Offset of the last b"\\n" in [0, end), or -1."""
    pos = end
    while pos > 0:
        start = max(0, pos - _BLOCK)
        block = os.pread(fd, pos - start, start)
        idx = block.rfind(b"\n")
        if idx >= 0:
            return start + idx
        pos = start
    return -1


class SessionFile:
    """An open session log positioned after its last verified line."""

    def __init__(
        self, path: Path, quarantine: Path, sync_dir: bool, blobs: BlobStore | None = None
    ) -> None:
        self.path = path
        self.blobs = blobs
        self.transcripts = Ledger()  # what this handle wrote: a reopened file starts afresh
        self.created = not path.exists()  # its directory entry needs a sync to last
        self.fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        if self.created and sync_dir:
            _sync_directory(path.parent)
        self.size = os.fstat(self.fd).st_size
        self.seq = 0
        self.prev: str | None = None
        self.dirty = False
        self.torn: tuple[int, int, Path] | None = None  # repaired: (offset, bytes, kept in)
        self.broken = False  # a failed write could not be undone: reopen (and repair) it
        try:
            self._repair_tail(quarantine)
            self._read_last_line()
        except DamagedLog:
            os.close(self.fd)
            os.replace(path, quarantine / quarantine_name(path.stem, "damaged.jsonl"))
            raise

    def _repair_tail(self, quarantine: Path) -> None:
        if self.size == 0 or os.pread(self.fd, 1, self.size - 1) == b"\n":
            return
        cut = _last_newline_before(self.fd, self.size) + 1
        torn = os.pread(self.fd, self.size - cut, cut)
        keep = quarantine / quarantine_name(self.path.stem, "torn")
        with open(os.open(keep, NEW_FILE, 0o600), "wb") as out:
            out.write(torn)
            out.flush()
            os.fsync(out.fileno())
        os.ftruncate(self.fd, cut)
        os.fsync(self.fd)
        self.torn = (cut, self.size - cut, keep)
        self.size = cut

    def _read_last_line(self) -> None:
        if self.size == 0:
            return
        start = _last_newline_before(self.fd, self.size - 1) + 1
        line = os.pread(self.fd, self.size - start, start)
        digest = verify_line(line)
        if digest is None:
            raise DamagedLog(f"{self.path}: last line at offset {start} fails its checksum")
        self.seq = int(orjson.loads(line)["seq"])
        self.prev = digest

    def append(self, events: Iterable[Event]) -> None:
        """Write events as one batch; on any error the file is left as before.

        A request is stored as what it adds to earlier ones of the file
        (`recorder.store.deltas`), and large bodies go to blobs first
        (`recorder.store.blobs`), so a line never points at a blob that is not written; a
        blob that cannot be written fails the batch.

        Should undoing a failed write fail too, the file is marked `broken`: the
        writer closes it and opens it anew, which moves the torn bytes aside.
        Whole lines of that batch which did reach the file stay, and are written
        again after them (the same event ids twice, each line verifiable).
        """
        seq, prev, lines, learnt = self.seq, self.prev, [], Batch()
        for event in events:
            seq += 1
            stored = self.transcripts.stored_form(event, seq, learnt)
            line, digest = seal(stored, seq, prev)
            if self.blobs is not None and self.blobs.move_out(stored, len(line)):
                line, digest = seal(stored, seq, prev)  # now pointing at its blob
            event["seq"], event["prev"], event["h"] = seq, prev, digest
            prev = digest
            lines.append(line)
        data = b"".join(lines)
        try:
            written = 0
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError:
            try:
                os.ftruncate(self.fd, self.size)
            except OSError:
                self.broken = True
            raise
        self.size += len(data)
        self.seq, self.prev, self.dirty = seq, prev, True
        self.transcripts.commit(learnt)

    def sync(self) -> None:
        if self.dirty:
            os.fsync(self.fd)
            self.dirty = False

    def close(self, sync: bool) -> None:
        """Sync (if asked) and close; closing twice does nothing (the fd may be reused)."""
        if self.fd < 0:
            return
        try:
            if sync:
                self.sync()
        finally:
            os.close(self.fd)
            self.fd = -1


def _whole_prefix(path: Path) -> tuple[bytes, int]:
    """The leading lines of `path` that verify and chain, and how many there are."""
    data = path.read_bytes()
    end, lines, seq, prev = 0, 0, 0, None
    while end < len(data):
        newline = data.find(b"\n", end)
        if newline < 0:
            break
        line = data[end : newline + 1]
        digest = verify_line(line)
        if digest is None:
            break
        event = orjson.loads(line)
        if event.get("seq") != seq + 1 or event.get("prev") != prev:
            break
        end, lines, seq, prev = newline + 1, lines + 1, seq + 1, digest
    return data[:end], lines


def reseal(
    session_file: SessionFile, quarantine: Path, failure: OSError
) -> tuple[SessionFile, Event, int]:
    """Replace a log whose fsync failed by a synced copy of its whole lines.

    The suspect file stays in `quarantine/` (linked before the swap, so a
    crash at any point leaves one complete log in place). The new file ends
    with an `error` event naming the failure, the kept file and any bytes
    that did not read back whole; it is returned with the file and the number
    of those bytes. Raises OSError when the disk fails again.
    """
    path = session_file.path
    kept = quarantine / quarantine_name(path.stem, "suspect.jsonl")
    whole, lines = _whole_prefix(path)
    left_behind = path.stat().st_size - len(whole)
    copy = path.with_name(f".{path.name}.resealing")  # not a *.jsonl: readers skip it
    write_aside(copy, whole)
    os.link(path, kept)
    os.replace(copy, path)
    _sync_directory(path.parent)
    reason = (
        f"an fsync of this log failed ({failure.strerror or failure}); its {lines} whole "
        f"lines were copied to a new file and synced, the original is kept as "
        f"{quarantine.name}/{kept.name}"
    )
    if left_behind:
        reason += f"; {left_behind} bytes after them did not read back whole and stay there"
    fresh = SessionFile(path, quarantine, sync_dir=True, blobs=session_file.blobs)
    event = error_event(path.stem, None, reason)
    fresh.append([event])
    fresh.sync()
    return fresh, event, left_behind


def write_aside(aside: Path, data: bytes, exclusive: bool = False) -> None:
    """A whole new log written beside its place, owner-only and synced, before it is
    linked or renamed in (so readers only ever see a complete file)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
    with open(os.open(aside, flags, 0o600), "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


def _sync_directory(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def open_session_file(
    path: Path, quarantine: Path, sync_dir: bool, blobs: BlobStore | None = None
) -> tuple[SessionFile, str | None]:
    """Open a session log for appending, repairing it first; what the writer does.

    Returns the file and, when its last line was damaged, why: the damaged file
    was moved to `quarantine` whole and a new one started with an `error` event.
    A symbolic link in the log's place is never followed (it could point anywhere):
    the link itself is moved to `quarantine` the same way.
    """
    if path.is_symlink():
        aside = quarantine / quarantine_name(path.stem, "symlink")
        os.replace(path, aside)  # the link itself, never what it points at
        reason = (
            f"{path.name} was a symbolic link, which taplog never follows; "
            f"the link was moved to {aside} and the log starts anew"
        )
        session_file = SessionFile(path, quarantine, sync_dir, blobs)
        session_file.append([error_event(path.stem, None, reason)])
        return session_file, reason
    try:
        return SessionFile(path, quarantine, sync_dir, blobs), None
    except DamagedLog as exc:
        session_file = SessionFile(path, quarantine, sync_dir, blobs)
        session_file.append([error_event(path.stem, None, str(exc))])
        return session_file, str(exc)
