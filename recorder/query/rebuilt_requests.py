"""Whole requests for the SQL views, rebuilt where the log stored them apart.

A request line holds only what is new in it (`recorder.store.deltas`): the rest
is in earlier lines of its file, found by `seq`. Putting a body back is a walk
over those lines, which SQL expresses badly (a window that copies every earlier
list into every row) and Python does well. So the views call
`taplog_request(source, session, seq, data)` for the rows that need it, and only
when a query reads their `data`. A log's request lines are the ones the views' `data`
reads (`recorder.query.log_rows`), a Parquet segment's are read up to the latest seq
asked for; a request is parsed and
rebuilt with the lines it builds on (its thread's earlier requests, the lines its
pointers name) when first asked for, and kept: every whole list shares its items
with the lines it came from, so a file costs about what it stores. Each call then
serialises one event. A few files are kept, the least recently asked for let go;
a file is read by one thread at a time (DuckDB may call from several).

`source` is the log (`sessions/<id>.jsonl`) or the compacted Parquet file the
row was read from, or the name a fleet's views give its table's rows; a line that
does not fit the lines before it is an error that names it, as `taplog verify` would.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import duckdb
import orjson

from taplog.recorder.events import Event
from taplog.recorder.query.log_rows import LogLines
from taplog.recorder.store.blobs import BlobError, resolve
from taplog.recorder.store.deltas import Rebuilder, TranscriptError
from taplog.recorder.store.lognames import COMPRESSED, PLAIN

FUNCTION = "taplog_request"
FILES_KEPT = 4


class RequestError(ValueError):
    """A request's stored form that cannot be put back whole."""


BlobFolder = Callable[[str | None], Path]  # a blob's SHA-256 -> the folder holding it


class Requests:
    """The function the views call, bound to where its data dir or fleet keeps blobs and
    segments."""

    def __init__(
        self,
        blob_folder: BlobFolder,
        lines: LogLines,
        segment_lines: Callable[[str, str], _Lines] | None = None,
    ) -> None:
        self._lines = lines
        self._blob_folder = blob_folder
        self._segment_lines = segment_lines or _SegmentLines
        self._files: OrderedDict[tuple[str, str], _File] = OrderedDict()
        self._lock = threading.Lock()  # DuckDB may call from several of its threads

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        con.create_function(
            FUNCTION,
            self.whole,
            [duckdb.sqltype(kind) for kind in ("VARCHAR", "VARCHAR", "BIGINT", "VARCHAR")],
            duckdb.sqltype("JSON"),  # serialised by orjson: DuckDB need not parse it to know
            side_effects=False,
        )

    def whole(self, source: str, session: str, seq: int, stored: str) -> str:
        """The request at `seq` of `session` in `source`, whole, as JSON text; `stored`
        is its line, whole already when it names no other line (a thread's first request)
        and no blob."""
        line = orjson.loads(stored)
        marker = line.get("transcript")
        names_none = isinstance(marker, dict) and not (set(marker) - {"keep", "length"})
        if names_none and not marker["keep"] and "blob" not in line:
            return stored
        with self._lock:
            try:
                event = self._file(source, session).event(seq)
            except (BlobError, TranscriptError) as exc:
                raise RequestError(
                    f"session {session} seq {seq} in {source}: {exc}; run taplog verify"
                ) from None
        if event is None:
            raise RequestError(f"no request at seq {seq} of session {session} in {source}")
        return orjson.dumps(event).decode()

    def _file(self, source: str, session: str) -> _File:
        key = (source, session)
        if key in self._files:
            self._files.move_to_end(key)
            return self._files[key]
        lines = (
            _LogRequestLines(self._lines, source)
            if source.endswith((PLAIN, COMPRESSED))
            else self._segment_lines(source, session)
        )
        found = self._files[key] = _File(lines, self._folder_of)
        while len(self._files) > FILES_KEPT:
            self._files.popitem(last=False)
        return found

    def _folder_of(self, event: Event) -> Path:
        ref = event.get("blob")
        return self._blob_folder(ref.get("sha256") if isinstance(ref, dict) else None)


def known_blobs(blobs: list[str]) -> BlobFolder:
    """Where a data dir's blobs are, given every blob file it holds (BlobError for others)."""
    folders = {Path(path).parents[1] for path in blobs}
    folder = folders.pop() if len(folders) == 1 else None
    names = {Path(path).stem for path in blobs}

    def folder_of(sha256: str | None) -> Path:
        if folder is None or sha256 not in names:
            raise BlobError(f"blob {sha256} is missing from blobs/")
        return folder

    return folder_of


class _File:
    """One log's (or segment's) request lines, each parsed and rebuilt when first needed:
    a request needs the lines its marker names (its base, the lines its pointers point
    at) and theirs, not the whole file. A version-3 line builds on the previous request
    of its API, so a file holding one is rebuilt whole, in order, once."""

    def __init__(self, lines: _Lines, blob_folder: Callable[[Event], Path]):
        self._lines = lines
        self._seqs: set[int] = set()  # of the request lines loaded
        self._upto: int | None = 0  # the lines up to this seq are loaded (None: all)
        self._blob_folder = blob_folder
        self._parsed: dict[int, Event] = {}  # parsed, not rebuilt yet
        self._events: dict[int, Event] = {}  # rebuilt
        self._rebuilder = Rebuilder()

    def event(self, seq: int) -> Event | None:
        self._loaded(seq)  # a request builds only on requests before it
        if seq not in self._seqs:
            return None
        needed, in_order = self._needed(seq)
        if in_order:  # version-3 deltas: every request, in order, from the lines again
            self._parsed, self._events, self._rebuilder = {}, {}, Rebuilder()
            needed = {each for each in self._seqs if each <= seq}
        for each in sorted(needed - self._events.keys()):
            event = self._stored(each)
            if "blob" in event:
                resolve(self._blob_folder(event), event)
            self._rebuilder.rebuild(event)
            self._events[each] = self._parsed.pop(each)
        return self._events.get(seq)

    def _needed(self, seq: int) -> tuple[set[int], bool]:
        """The requests `seq` builds on, itself included, not yet rebuilt; and whether one
        of them is a version-3 delta."""
        needed, todo = set(), [seq]
        while todo:
            each = todo.pop()
            if each in needed or each in self._events or each not in self._seqs:
                continue  # one not in the file: `Rebuilder` names it
            needed.add(each)
            marker = self._stored(each).get("transcript")
            if not isinstance(marker, dict):
                continue
            if "base" not in marker and marker.get("keep"):
                return needed, True
            named = [marker.get("base"), *dict(marker.get("fields") or {}).values()]
            for pointer in marker.get("items") or ():
                if isinstance(pointer, list) and len(pointer) == 3:
                    named.append(pointer[1])
            todo += [n for n in named if isinstance(n, int)]
        return needed, False

    def _loaded(self, seq: int) -> None:
        if self._upto is not None and seq > self._upto:
            seqs, whole = self._lines.load(self._upto, seq)
            self._seqs.update(seqs)
            self._upto = None if whole else seq

    def _stored(self, seq: int) -> Event:
        """Line `seq` parsed as stored (or as rebuilt, once it is)."""
        if seq in self._events:
            return self._events[seq]
        if seq not in self._parsed:
            self._parsed[seq] = orjson.loads(self._lines.text(seq))
        return self._parsed[seq]


class _Lines(Protocol):
    """Where a `_File` reads its request lines."""

    def load(self, after: int, upto: int) -> tuple[Iterable[int], bool]:
        """The seqs of the request lines past `after`, at least up to `upto`, and whether
        they are all the file holds."""

    def text(self, seq: int) -> bytes | str:
        """Request line `seq`, as stored."""


class _LogRequestLines:
    """A log's request lines, read and kept by the views' `LogLines`."""

    def __init__(self, lines: LogLines, source: str) -> None:
        self._lines, self._source = lines, source
        self._known = 0  # request lines handed over so far

    def load(self, after: int, upto: int) -> tuple[Iterable[int], bool]:
        seqs, whole = self._lines.requests(self._source, upto, self._known)
        self._known += len(seqs)
        return seqs, whole

    def text(self, seq: int) -> bytes | str:
        found = self._lines.text(self._source, seq)
        if found is None:
            raise RequestError(f"no line at seq {seq} in {self._source}")
        return found


class _SegmentLines:
    """A session's request lines in a Parquet segment (which holds many sessions' rows),
    read by the range of seqs asked for."""

    def __init__(self, segment: str, session: str) -> None:
        self._segment, self._session = segment, session
        self._lines: dict[int, str] = {}

    def load(self, after: int, upto: int) -> tuple[Iterable[int], bool]:
        with duckdb.connect() as con:
            found = con.execute(
                "SELECT seq, data FROM read_parquet(?) WHERE session = ? "
                "AND type = 'llm.request' AND seq > ? AND seq <= ?",
                [self._segment, self._session, after, upto],
            ).fetchall()
        self._lines.update(found)
        return [seq for seq, _ in found], False

    def text(self, seq: int) -> bytes | str:
        return self._lines[seq]
