"""A session log as the SQL views read it: its typed fields first, its lines when asked.

A log's lines hold request bodies, answers and tool results: megabytes a call on a long
day. Most queries (`sessions`, counts and sums, the timeline) need only the few fields
the views type (`recorder.store.rows.TYPED_FIELDS`), so `read_logs` hands DuckDB just
those, into `log_rows` once a connection: the rows the writer kept beside the log
(`recorder.store.rows`) when they hold all of it, else the fields of each line, read in
Python one at a time. A long day's 50 MB log is 3 MB of rows (DuckDB's own JSON reader
would hold about the whole file, and keep that memory after).

A row's `data` is `taplog_line(source, seq)`: the line as stored, from `LogLines`,
asked for only when a query reads it. A log is read as far as the seqs asked for (a
session's first requests, which its list shows, cost its first lines) and its lines
kept compressed; a few logs are kept, the least recently asked for let go; DuckDB may
call from several threads.
"""

from __future__ import annotations

import contextlib
import re
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import duckdb
import orjson

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

from taplog.recorder.query.views import sql_list, typed_log_rows
from taplog.recorder.store.lognames import iter_lines
from taplog.recorder.store.rows import read_rows, rows_of
from taplog.recorder.store.zstd_stream import DamagedStream

LINE = "taplog_line"
FILES_KEPT = 4
CHUNK = 1 << 18
CHUNK_LEVEL = 1  # zstd's fastest: the lines are read back many times a query
_REQUEST_LINE = b'"type":"llm.request"'
_SEQ = re.compile(rb'^\{"v":\d+,"seq":(\d+),')


class LogLines:
    """The function the views call for a log row's `data`, and the request lines the
    rebuild reads (`recorder.query.rebuilt_requests`)."""

    def __init__(self) -> None:
        self._files: OrderedDict[str, _Log] = OrderedDict()
        self._lock = threading.Lock()

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        con.create_function(
            LINE,
            self.line,
            [duckdb.sqltype("VARCHAR"), duckdb.sqltype("BIGINT")],
            duckdb.sqltype("JSON"),  # as written: DuckDB need not parse it to know
            side_effects=False,
        )

    def line(self, source: str, seq: int) -> str | None:
        """Line `seq` of the log `source`, as stored, without its newline."""
        found = self.text(source, seq)
        return None if found is None else found.decode().rstrip("\n")

    def text(self, source: str, seq: int) -> bytes | None:
        """Line `seq` of the log `source`, as stored."""
        with self._lock:
            return self._log(source).upto(seq).text(seq)

    def requests(self, source: str, seq: int, known: int) -> tuple[list[int], bool]:
        """The seqs of the request lines of the log `source`, in the file's order, past
        the first `known`: at least up to `seq`; and whether they are all it holds."""
        with self._lock:
            log = self._log(source).upto(seq)
            return log.requests[known:], log.done

    def _log(self, source: str) -> _Log:
        if source in self._files:
            self._files.move_to_end(source)
            return self._files[source]
        found = self._files[source] = _Log(Path(source))
        while len(self._files) > FILES_KEPT:
            self._files.popitem(last=False)
        return found


class _Log:
    """One log's lines by seq, read from its start as far as asked (a session's first
    requests, which its list shows, cost its first lines, not the file), and kept
    compressed in chunks of about `CHUNK` bytes: a long day's lines take a tenth of
    their size, and a line costs the decompressing of its chunk (the last one is kept)."""

    def __init__(self, path: Path) -> None:
        self.requests: list[int] = []  # the seqs of its `llm.request` lines
        self.done = False
        self._where: dict[int, tuple[int, int, int]] = {}  # seq -> (chunk, start, end)
        self._chunks: list[bytes] = []  # compressed, but for the one being filled
        self._filling = bytearray()
        self._last = 0  # the highest seq read
        self._opened: tuple[int, bytes] = (-1, b"")  # the chunk decompressed last
        self._rest = _numbered(path)

    def upto(self, seq: int) -> _Log:
        while not self.done and self._last < seq:
            numbered = next(self._rest, None)
            if numbered is None:
                self.done = True
                break
            found, line = numbered
            start = len(self._filling)
            self._filling += line
            self._where[found] = (len(self._chunks), start, len(self._filling))
            if _REQUEST_LINE in line:
                self.requests.append(found)
            if len(self._filling) >= CHUNK:
                self._chunks.append(zstd.compress(self._filling, CHUNK_LEVEL))
                self._filling = bytearray()
            self._last = max(self._last, found)
        return self

    def text(self, seq: int) -> bytes | None:
        if seq not in self._where:
            return None
        chunk, start, end = self._where[seq]
        if chunk == len(self._chunks):
            return bytes(self._filling[start:end])
        if self._opened[0] != chunk:
            self._opened = (chunk, zstd.decompress(self._chunks[chunk]))
        return self._opened[1][start:end]


def _numbered(log: Path) -> Iterator[tuple[int, bytes]]:
    """(seq, line) for each whole line of `log` that has a seq, in the file's order."""
    with contextlib.suppress(DamagedStream):  # the typed read stops there too
        for line in iter_lines(log):
            if not line.endswith(b"\n"):
                continue  # a torn last line, being written: not a row
            numbered = _SEQ.match(line)
            if numbered:
                yield int(numbered[1]), line
                continue
            try:  # an older line's keys may come in another order
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # damage is `taplog verify`'s to name; the views skip it too
            if isinstance(event, dict) and isinstance(event.get("seq"), int):
                yield event["seq"], line


# Each log row with its line as `data`, in the columns of `events` (and `source_file`).
LOGGED_EVENTS = (
    f"SELECT * EXCLUDE (source_file), {LINE}(source_file, seq) AS data, source_file FROM log_rows"
)


def read_logs(con: duckdb.DuckDBPyConnection, logs: list[str]) -> LogLines:
    """Give `con` the logs' typed rows, as the table `log_rows`, and their lines, as the
    function `taplog_line` (`LOGGED_EVENTS` reads both)."""
    lines = LogLines()
    lines.register(con)
    if not logs:
        return lines
    with tempfile.NamedTemporaryFile(prefix="taplog-rows-", suffix=".jsonl") as rows:
        _typed_rows(logs, rows)
        rows.flush()
        typed = typed_log_rows(f"read_ndjson_objects({sql_list([rows.name])})")
        con.execute(f"CREATE TEMP TABLE log_rows AS {typed}")
    return lines


def _typed_rows(logs: list[str], out: IO[bytes]) -> None:
    """Write to `out` one JSON line per event of `logs`: its typed fields and its log as
    `source_file`; from the rows the writer kept beside a log (`recorder.store.rows`) when
    they hold all of it, else from its lines. Lines that are not JSON objects (a torn last
    line being written, damage) have none, and a compressed log is read up to damage."""
    for log in logs:
        named = b',"source_file":' + orjson.dumps(log) + b"}\n"
        kept = read_rows(Path(log))
        if kept is None:
            found = []
            with contextlib.suppress(DamagedStream):
                found.extend(rows_of(iter_lines(Path(log))))
            kept = b"".join(found)
        out.write(kept.replace(b"}\n", named))  # a row is an object on a line of its own
