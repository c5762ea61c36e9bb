"""Reading session logs back: line by line, verified, tolerant of a torn tail.

A log is plain JSON lines or a zstd stream of them (`recorder.store.lognames`);
both read alike. A last line without its newline is a write cut short by a crash: it is
skipped (the writer repairs it when it opens the file again). Anything else
that does not parse or verify is damage and raises `DamagedLine`, naming the
file and byte offset; it is never skipped silently. Bodies stored beside the
log (`recorder.store.blobs`) are put back into their events, checked against their
hash, and so is history a request resent (`recorder.store.deltas`); a blob
that is missing or changed is damage too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import orjson

from taplog.recorder.events import EVENT_TYPES, FORMAT_VERSION, Event, verify_line
from taplog.recorder.store.blobs import BlobError, blobs_folder, resolve
from taplog.recorder.store.deltas import Rebuilder, TranscriptError
from taplog.recorder.store.lognames import (
    is_compressed,
    iter_lines,
    log_path,
    session_logs,
    session_name,
)
from taplog.recorder.store.zstd_stream import DamagedStream, Decoder


class DamagedLine(ValueError):
    """A line in the middle of a log that does not parse or verify."""


class UnsupportedEvent(ValueError):
    """An event from a newer format, or of a type this reader does not know."""


def _check_known(event: Event, where: str) -> None:
    if event.get("v", 0) > FORMAT_VERSION:
        raise UnsupportedEvent(
            f"{where}: format version {event['v']} is newer than this taplog reads "
            f"({FORMAT_VERSION}); upgrade taplog"
        )
    if event.get("type") not in EVENT_TYPES and not event.get("ignorable"):
        raise UnsupportedEvent(f"{where}: unknown event type {event.get('type')!r}")


def parse_line(line: bytes, where: str) -> Event:
    """One whole log line, verified and parsed as stored; `where` names it in errors."""
    if verify_line(line) is None:
        raise DamagedLine(f"{where}: line fails its checksum")
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        raise DamagedLine(f"{where}: line is not a JSON object")
    _check_known(event, where)
    return event


class _Restorer:
    """Puts back, line by line from a file's start, what the writer stored apart:
    bodies kept in blobs and history resent from the previous request."""

    def __init__(self, path: Path) -> None:
        self._blobs, self._transcripts = blobs_folder(path), Rebuilder()

    def __call__(self, event: Event, where: str) -> Event:
        try:
            self._transcripts.rebuild(resolve(self._blobs, event))
        except (BlobError, TranscriptError) as exc:
            raise DamagedLine(f"{where}: {exc}") from None
        return event


def read_events(path: Path, as_stored: bool = False) -> Iterator[Event]:
    """The events of one session file, in order, as they were recorded: bodies kept in
    blobs and resent history stored once are put back, unless `as_stored` (for copying
    lines as they are)."""
    restore = None if as_stored else _Restorer(path)
    offset, number = 0, 0
    try:
        for number, line in enumerate(iter_lines(path), start=1):
            where = f"{path}:{number} (byte {offset})"
            offset += len(line)
            if not line.endswith(b"\n"):
                return  # torn tail of an interrupted write
            event = parse_line(line, where)
            yield event if restore is None else restore(event, where)
    except DamagedStream as exc:
        raise DamagedLine(f"{path}: the compressed stream {exc} (lines read: {number})") from None


class LogRewritten(RuntimeError):
    """A followed log became shorter than what was read of it (repaired or replaced)."""


class LogFollower:
    """The events of a session file as it grows, after a given seq; whole lines only.

    Each `poll` reads just the bytes appended since the last one (a size check when
    nothing changed), so a reader can poll often; a line still being written is kept
    for the next poll.
    """

    def __init__(self, path: Path, after_seq: int = 0) -> None:
        self.path = path
        self.after_seq = after_seq
        self._offset = 0  # bytes of the file read
        self._text_offset = 0  # of the lines they hold, up to the last whole one
        self._partial = b""  # the start of a line still being written
        self._decoder = Decoder() if is_compressed(path) else None
        self._line = 0
        self._restore = _Restorer(path)  # from the first line: deltas build on earlier ones

    def has_more(self) -> bool:
        """Whether the file changed size since the last poll (a `stat`, nothing read)."""
        return self.path.stat().st_size != self._offset

    def poll(self) -> list[Event]:
        size = self.path.stat().st_size
        if size < self._offset:
            raise LogRewritten(f"{self.path} was cut back or replaced while being followed")
        if size == self._offset:
            return []
        with open(self.path, "rb") as log_file:
            log_file.seek(self._offset)
            chunk = log_file.read(size - self._offset)
        self._offset += len(chunk)
        if self._decoder is not None:
            try:
                chunk = self._decoder.feed(chunk)
            except DamagedStream as exc:
                raise DamagedLine(f"{self.path}: the compressed stream {exc}") from None
        text = self._partial + chunk
        end = text.rfind(b"\n") + 1
        self._partial = text[end:]
        events = []
        for line in text[:end].splitlines(keepends=True):
            self._line += 1
            where = f"{self.path}:{self._line} (byte {self._text_offset})"
            event = self._restore(parse_line(line, where), where)
            self._text_offset += len(line)
            if event.get("seq", 0) > self.after_seq:
                events.append(event)
                self.after_seq = event["seq"]
        return events


def session_files(data_dir: Path) -> list[Path]:
    return session_logs(data_dir / "sessions")


def read_session(data_dir: Path, session: str) -> list[Event]:
    return list(read_events(log_path(data_dir / "sessions", session)))


def read_all(data_dir: Path) -> dict[str, list[Event]]:
    """Every session's events, by session id."""
    return {session_name(path): list(read_events(path)) for path in session_files(data_dir)}


def pairing_events(path: Path) -> Iterator[Event]:
    """The events tool pairing restores from (tool calls, results, a fork's mark) of a session
    file, skipping everything else unparsed.

    Used to restore pairing state after a restart: lines that do not verify
    are left for the writer's repair and the full readers to report.
    """
    with contextlib.suppress(DamagedStream):  # the writer's repair reports it
        for line in iter_lines(path):
            if (b'"type":"tool.' in line or b'"type":"session.forked"' in line) and verify_line(
                line
            ):
                yield orjson.loads(line)
