"""One session's log file: append-only, hash-chained, repaired on open.

A new log is a zstd stream of its lines (`recorder.store.zstd_stream`), each write
compressed with the history of the file and flushed to whole blocks; a log of an
older taplog stays plain JSON lines and is written on as such (`recorder.store.lognames`).

A crash can leave a torn last write. Opening the file detects it, moves the
cut bytes to `quarantine/` (kept, never deleted) and truncates back to the
last complete line (of a compressed log: the last whole block that ends one),
so the chain continues from there. A last complete line
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
from taplog.recorder.store.lognames import COMPRESSED, PLAIN, is_compressed, session_name
from taplog.recorder.store.rows import RowsFile, row
from taplog.recorder.store.zstd_stream import (
    FRAME_END,
    Compressor,
    compress_whole,
    whole_prefix,
)

_BLOCK = 64 * 1024


class DamagedLog(Exception):
    """The file's last complete line does not verify; it was moved aside."""


def quarantine_name(session: str, kind: str) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return f"{session}.{stamp}.{kind}"


def aside_name(path: Path, kind: str) -> str:
    """The name a whole log `path` gets in `quarantine/`, in the form it is in."""
    suffix = COMPRESSED if is_compressed(path) else PLAIN
    return quarantine_name(session_name(path), kind + suffix)


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
        self.failed_sync = False  # never written again: sealed as suspect (`reseal`)
        self.compressed = is_compressed(path)
        self._frame: Compressor | None = None  # the zstd frame this handle writes
        self._open_frame = False  # the file's last frame is not ended
        text = b""
        try:
            if self.compressed:
                text = self._repair_compressed(quarantine)
            else:
                self._repair_tail(quarantine)
                self._read_last_line()
        except DamagedLog:
            os.close(self.fd)
            os.replace(path, quarantine / aside_name(path, "damaged"))
            raise
        self.text_size = len(text) if self.compressed else self.size  # its lines' bytes
        whole = (lambda: text) if self.compressed else (lambda: os.pread(self.fd, self.size, 0))
        self.rows = RowsFile(path, self.size, self.text_size, whole)

    def _repair_tail(self, quarantine: Path) -> None:
        if self.size == 0 or os.pread(self.fd, 1, self.size - 1) == b"\n":
            return
        self._cut(quarantine, _last_newline_before(self.fd, self.size) + 1)

    def _cut(self, quarantine: Path, cut: int) -> None:
        """Move the bytes after `cut` to `quarantine/` and truncate the file there."""
        torn = os.pread(self.fd, self.size - cut, cut)
        keep = quarantine / quarantine_name(session_name(self.path), "torn")
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
        self._go_on_from(os.pread(self.fd, self.size - start, start), f"offset {start}")

    def _repair_compressed(self, quarantine: Path) -> bytes:
        """Cut a compressed log back to its last whole block that ends a line; go on from
        the line before it; its lines. A block that does not decode is damage."""
        whole = whole_prefix(os.pread(self.fd, self.size, 0))
        if whole.damage is not None:
            raise DamagedLog(f"{self.path}: the compressed stream {whole.damage}")
        if whole.length < self.size:
            self._cut(quarantine, whole.length)
        self._open_frame = whole.open_frame
        if whole.text:
            start = whole.text.rfind(b"\n", 0, len(whole.text) - 1) + 1
            self._go_on_from(whole.text[start:], f"text offset {start}")
        return whole.text

    def _go_on_from(self, line: bytes, where: str) -> None:
        digest = verify_line(line)
        if digest is None:
            raise DamagedLog(f"{self.path}: last line at {where} fails its checksum")
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
        seq, prev, lines, rows, learnt = self.seq, self.prev, [], [], Batch()
        for event in events:
            seq += 1
            stored = self.transcripts.stored_form(event, seq, learnt)
            line, digest = seal(stored, seq, prev)
            if self.blobs is not None and self.blobs.move_out(stored, len(line)):
                line, digest = seal(stored, seq, prev)  # now pointing at its blob
            event["seq"], event["prev"], event["h"] = seq, prev, digest
            prev = digest
            lines.append(line)
            rows.append(row(stored, line))
        text = b"".join(lines)
        data = self._encoded(text)
        try:
            written = 0
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError:
            self._frame = None  # its history holds what did not reach the file
            try:
                os.ftruncate(self.fd, self.size)
            except OSError:
                self.broken = True
            raise
        self.size += len(data)
        self.text_size += len(text)
        self.seq, self.prev, self.dirty = seq, prev, True
        self._open_frame = self.compressed
        self.transcripts.commit(learnt)
        self.rows.append(rows, self.size, self.text_size)

    def _encoded(self, lines: bytes) -> bytes:
        """The bytes that go on the file for these lines: themselves, or of a compressed
        log their next blocks (after ending the frame before, when this begins one)."""
        if not self.compressed:
            return lines
        begin = b""
        if self._frame is None:
            begin = FRAME_END if self._open_frame else b""
            self._frame = Compressor()
        return begin + self._frame.write(lines)

    def rest(self) -> None:
        """Let go of the compressor and its history (a few MB) while the log is idle; the
        next write ends the frame and begins a new one."""
        self._frame = None

    def let_go(self) -> None:
        """Idle: end the frame (the file reads whole with any zstd tool, and the next write
        begins a new one) and let go of the compressor and its history."""
        self.rest()
        if self.fd >= 0:
            self._end_frame()

    def _end_frame(self) -> None:
        """End the open frame, so that any zstd tool reads the file whole. Not on a file that
        must not be written again (the next opener's first write ends it), nor when the
        disk refuses the three bytes (likewise)."""
        if not self._open_frame or self.broken or self.failed_sync:
            return
        try:
            os.write(self.fd, FRAME_END)
        except OSError:
            return
        self.size += len(FRAME_END)
        self._open_frame, self.dirty = False, True
        self.rows.mark(self.size, self.text_size)

    def sync(self) -> None:
        if self.dirty:
            try:
                os.fsync(self.fd)
            except OSError:
                self.failed_sync = True
                raise
            self.dirty = False

    def close(self, sync: bool) -> None:
        """Sync (if asked) and close; closing twice does nothing (the fd may be reused)."""
        if self.fd < 0:
            return
        try:
            self.rest()
            self._end_frame()
            if sync:
                self.sync()
        finally:
            os.close(self.fd)
            self.fd = -1
            self.rows.close()


def _whole_prefix(path: Path) -> tuple[bytes, int, int]:
    """The leading lines of `path` that verify and chain, how many there are, and how
    many bytes of the file (of a compressed one: of its text, or blocks that do not
    decode) come after them."""
    data = path.read_bytes()
    after = 0
    if is_compressed(path):
        whole = whole_prefix(data)
        data, after = whole.text, len(data) - whole.length
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
    return data[:end], lines, after + len(data) - end


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
    kept = quarantine / aside_name(path, "suspect")
    whole, lines, left_behind = _whole_prefix(path)
    copy = path.with_name(f".{path.name}.resealing")  # not a log's name: readers skip it
    write_aside(copy, compress_whole(whole) if session_file.compressed else whole)
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
    event = error_event(session_name(path), None, reason)
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
        aside = quarantine / quarantine_name(session_name(path), "symlink")
        os.replace(path, aside)  # the link itself, never what it points at
        reason = (
            f"{path.name} was a symbolic link, which taplog never follows; "
            f"the link was moved to {aside} and the log starts anew"
        )
        path = path.with_name(session_name(path) + COMPRESSED)  # a new log is compressed
        session_file = SessionFile(path, quarantine, sync_dir, blobs)
        session_file.append([error_event(session_name(path), None, reason)])
        return session_file, reason
    try:
        return SessionFile(path, quarantine, sync_dir, blobs), None
    except DamagedLog as exc:
        session_file = SessionFile(path, quarantine, sync_dir, blobs)
        session_file.append([error_event(session_name(path), None, str(exc))])
        return session_file, str(exc)
