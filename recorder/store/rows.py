"""A session log's typed fields, kept beside it as they are written: `rows/<session>.rows`.

Most questions asked of the logs (the sessions list, counts, tokens, costs, the
timeline) need a few small fields of each event, `TYPED_FIELDS`. Reading them from a
log means parsing every line, bodies and all: a tenth of a second for a long day's
log, seconds for a list of such days. So the writer keeps, beside each log, those
fields of each line it writes, one JSON object a line, and after each write a mark
with the log's size then, in file bytes and in text bytes (`{"@":[12345,67890]}`). A
reader takes the rows up to the last mark when that mark names the log's size as it
finds it, and reads the log itself otherwise: the rows are a copy, never the record.

A rows file always begins at its log's start (`HEADER`). When the writer opens a log
whose rows end before it (a crash between the two writes), it adds the rows of the
lines after them; when they do not fit it (a log cut by a repair, or started anew), it
writes them afresh from the log. A rows file that cannot be written is removed, and
readers read the log.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.events import Event
from taplog.recorder.store.lognames import session_name

ROWS_DIR = "rows"
HEADER = b'{"@":[0,0],"rows":1}\n'  # a new format of rows: a new number, and rows rewritten
_MARK = re.compile(rb'(?<=\n)\{"@":\[(\d+),(\d+)\]\}\n')  # a line of its own
_MARKS = re.compile(rb'\n\{"@":\[\d+,\d+\]\}(?=\n)')  # each with the newline before it

# Event fields with a column of their own in the SQL views (recorder.query.views): JSON
# name -> SQL type; a nested object's fields by name.
TYPED_FIELDS: dict[str, Any] = {
    "v": "INTEGER",
    "seq": "BIGINT",
    "ts": "VARCHAR",
    "session": "VARCHAR",
    "epoch": "BIGINT",
    "type": "VARCHAR",
    "id": "VARCHAR",
    "exchange": "VARCHAR",
    "api": "VARCHAR",
    "provider": "VARCHAR",
    "model": "VARCHAR",
    "method": "VARCHAR",
    "path": "VARCHAR",
    "stream": "BOOLEAN",
    "attempt": "INTEGER",
    "status": "INTEGER",
    "outcome": "VARCHAR",
    "error": "VARCHAR",
    "latency_ms": "DOUBLE",
    "ttfb_ms": "DOUBLE",
    "response_id": "VARCHAR",
    "finish_reason": "VARCHAR",
    "usage": {
        "input_tokens": "BIGINT",
        "output_tokens": "BIGINT",
        "cached_tokens": "BIGINT",
        "cache_write_tokens": "BIGINT",
        "reasoning_tokens": "BIGINT",
    },
    "cost_usd": "DOUBLE",
    "call_id": "VARCHAR",
    "name": "VARCHAR",
    "is_error": "BOOLEAN",
    "duration_ms": "DOUBLE",
    "server": "BOOLEAN",
    "flags": ["VARCHAR"],
    "source": "VARCHAR",
    "user_agent": "VARCHAR",
    "reason": "VARCHAR",
    "from_provider": "VARCHAR",
    "from_model": "VARCHAR",
    "to_provider": "VARCHAR",
    "to_model": "VARCHAR",
    "origin": "VARCHAR",  # the session a fork was made from
    "at": "BIGINT",  # the origin's seq it was made at
    "resumed_from": "VARCHAR",
    "blob": {"sha256": "VARCHAR"},
    "transcript": {"keep": "BIGINT"},
}


def rows_path(log: Path) -> Path:
    """Where the rows of the log `log` (in `sessions/`) are kept."""
    return log.parent.parent / ROWS_DIR / f"{session_name(log)}.rows"


_NESTED = {name: kind for name, kind in TYPED_FIELDS.items() if isinstance(kind, dict)}


def picked(event: dict[str, Any]) -> dict[str, Any]:
    """The typed fields of an event, as it holds them (nested ones as nested dicts)."""
    found = {name: value for name, value in event.items() if name in TYPED_FIELDS}
    for name, fields in _NESTED.items():
        value = found.get(name)
        if isinstance(value, dict):
            found[name] = {key: each for key, each in value.items() if key in fields}
    return found


def row(event: Event, line: bytes) -> bytes:
    """The row of an event as its `line` holds it (the writer's events always have some
    typed fields)."""
    if "sanitised" in event:  # the line holds what the event could not: read it from there
        event = orjson.loads(line)
    return orjson.dumps(picked(event)) + b"\n"


def rows_of(lines: Iterable[bytes]) -> Iterator[bytes]:
    """The rows of a log's lines; a torn line, or one that is not a JSON object, has none
    (readers skip them), nor has an object with no typed field."""
    for line in lines:
        if not line.endswith(b"\n"):
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        found = picked(event) if isinstance(event, dict) else None
        if found:  # an object with none of the fields has no row
            yield orjson.dumps(found) + b"\n"


def read_rows(log: Path) -> bytes | None:
    """The rows of `log` (JSON lines), when its rows file holds all of it; None when the
    log must be read itself."""
    try:
        fd = os.open(rows_path(log), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with open(fd, "rb") as rows_file:
        data = rows_file.read()
    last = _MARK.match(data, data.rfind(b'\n{"@":[') + 1)  # rows never begin so
    if not data.startswith(HEADER) or last is None or last.start() < len(HEADER):
        return None
    try:
        if int(last[1]) != log.stat().st_size:
            return None
    except OSError:
        return None
    return _MARKS.sub(b"", data[len(HEADER) - 1 : last.start()])[1:]


def write_rows(log: Path, text: bytes) -> None:
    """The rows of a whole log a tool has just put in place (a migration, a fork), from
    its lines `text`: readers list it from them, as they do a log the writer wrote. Any
    rows of the log that was there before go first; rows that cannot be written are
    none (readers read the log)."""
    rows_path(log).unlink(missing_ok=True)
    RowsFile(log, log.stat().st_size, len(text), lambda: text).close()


def _last_mark(fd: int) -> tuple[int, int, int] | None:
    """The log's size (file, text) the rows file's last mark names, and where it ends; None
    when it has none or is not a rows file of this format. Read from its end."""
    end = os.fstat(fd).st_size
    if os.pread(fd, len(HEADER), 0) != HEADER:
        return None
    for tail in (1 << 16, end):  # the last write's rows, most often
        start = max(len(HEADER) - 1, end - tail)
        marks = list(_MARK.finditer(os.pread(fd, end - start, start)))
        if marks:
            return int(marks[-1][1]), int(marks[-1][2]), start + marks[-1].end()
    return None


def _mark(size: int, text_size: int) -> bytes:
    return b'{"@":[%d,%d]}\n' % (size, text_size)


class RowsFile:
    """The rows file of a log open for writing, brought up to the log when opened."""

    def __init__(self, log: Path, size: int, text_size: int, text: Callable[[], bytes]):
        """`size` and `text_size`: the log's, as opened; `text()` its whole lines."""
        self.path = rows_path(log)
        self.fd = -1
        try:
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            self._open(size, text_size, text)
        except OSError:
            self.drop()

    def _open(self, size: int, text_size: int, text: Callable[[], bytes]) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ELOOP):
                raise
            return self._rewrite(size, text_size, text())
        last = _last_mark(fd)
        if last is None or last[0] > size or last[1] > text_size:
            os.close(fd)
            return self._rewrite(size, text_size, text())
        self.fd = fd
        os.ftruncate(fd, last[2])  # rows a crash left without their mark
        if last != (size, text_size):  # the log has lines the rows lack
            rest = text()[last[1] : text_size].splitlines(keepends=True)
            new = b"".join(rows_of(rest))
            self._write(new + _mark(size, text_size))
        return None

    def _rewrite(self, size: int, text_size: int, text: bytes) -> None:
        """A new rows file for the whole log, put in place whole."""
        partial = self.path.with_name(self.path.name + ".partial")
        partial.unlink(missing_ok=True)  # whatever was there: never written through
        self.path.unlink(missing_ok=True)  # a link planted in its place goes, not its target
        self.fd = os.open(partial, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            rows = rows_of(text[:text_size].splitlines(keepends=True))
            self._write(HEADER + b"".join(rows) + _mark(size, text_size))
            if self.fd >= 0:  # written whole
                os.replace(partial, self.path)
        finally:
            partial.unlink(missing_ok=True)  # left only when it could not be put in place

    def append(self, rows: list[bytes], size: int, text_size: int) -> None:
        """The rows of lines just written, and the log's size after them."""
        self._write(b"".join(rows) + _mark(size, text_size))

    def mark(self, size: int, text_size: int) -> None:
        """The log's size after a write of no lines (the end of a compressed frame)."""
        self._write(_mark(size, text_size))

    def _write(self, data: bytes) -> None:
        if self.fd < 0:
            return
        try:
            written = 0
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError:
            self.drop()

    def drop(self) -> None:
        """Stop keeping rows for this log, and remove them: readers read the log."""
        self.close()
        with contextlib.suppress(OSError):
            self.path.unlink()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
