"""Whole requests for the SQL views, rebuilt where the log stored them apart.

A request line holds only what is new in it (`recorder.store.deltas`): the rest
is in earlier lines of its file, found by `seq`. Putting a body back is a walk
over those lines, which SQL expresses badly (a window that copies every earlier
list into every row) and Python does in one pass. So the views call
`taplog_request(source, session, seq)` for the rows that need it, and only when
a query reads their `data`: the first call for a file reads its request lines
once, in order, and keeps them rebuilt (every whole list shares its items with
the lines it came from, so a file costs about what it stores); each call then
serialises one event. A few files are kept, the least recently asked for let go
(a file is read by one thread at a time: DuckDB may call from several).

`source` is the log (`sessions/<id>.jsonl`) or the compacted Parquet file the
row was read from; a line that does not fit the lines before it is an error
that names it, as `taplog verify` would.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import duckdb
import orjson

from taplog.recorder.events import Event
from taplog.recorder.store.blobs import BlobError, resolve
from taplog.recorder.store.deltas import Rebuilder, TranscriptError

FUNCTION = "taplog_request"
FILES_KEPT = 4
_REQUEST_LINE = b'"type":"llm.request"'


class RequestError(ValueError):
    """A request's stored form that cannot be put back whole."""


class Requests:
    """The function the views call, bound to the blobs its data dir or fleet cache holds."""

    def __init__(self, blobs: list[str]) -> None:
        folders = {Path(path).parents[1] for path in blobs}
        self._blobs = folders.pop() if len(folders) == 1 else None
        self._blob_files = {Path(path).stem: Path(path) for path in blobs}
        self._files: OrderedDict[tuple[str, str], dict[int, Event]] = OrderedDict()
        self._lock = threading.Lock()  # DuckDB may call from several of its threads

    def register(self, con: duckdb.DuckDBPyConnection) -> None:
        con.create_function(
            FUNCTION,
            self.whole,
            [duckdb.sqltype("VARCHAR"), duckdb.sqltype("VARCHAR"), duckdb.sqltype("BIGINT")],
            duckdb.sqltype("VARCHAR"),
            side_effects=False,
        )

    def whole(self, source: str, session: str, seq: int) -> str:
        """The request at `seq` of `session` in `source`, whole, as JSON text."""
        with self._lock:
            requests = self._file(source, session)
        event = requests.get(seq)
        if event is None:
            raise RequestError(f"no request at seq {seq} of session {session} in {source}")
        return orjson.dumps(event).decode()

    def _file(self, source: str, session: str) -> dict[int, Event]:
        key = (source, session)
        if key in self._files:
            self._files.move_to_end(key)
            return self._files[key]
        rebuilder, requests = Rebuilder(), {}
        for event in _stored_requests(source, session):
            try:
                if "blob" in event:
                    resolve(self._blob_folder(event), event)
                rebuilder.rebuild(event)
            except (BlobError, TranscriptError) as exc:
                raise RequestError(
                    f"session {session} seq {event.get('seq')} in {source}: {exc}; "
                    "run taplog verify"
                ) from None
            requests[event["seq"]] = event
        self._files[key] = requests
        while len(self._files) > FILES_KEPT:
            self._files.popitem(last=False)
        return requests

    def _blob_folder(self, event: Event) -> Path:
        ref = event.get("blob")
        sha256 = ref.get("sha256") if isinstance(ref, dict) else None
        if self._blobs is None or sha256 not in self._blob_files:
            raise BlobError(f"blob {sha256} is missing from blobs/")
        return self._blobs


def _stored_requests(source: str, session: str) -> list[Event]:
    """The request events of `session` in `source`, in order, as stored."""
    if source.endswith(".parquet"):
        with duckdb.connect() as con:
            rows = con.execute(
                "SELECT data FROM read_parquet(?) WHERE session = ? AND type = 'llm.request' "
                "ORDER BY seq",
                [source, session],
            ).fetchall()
        return [orjson.loads(data) for (data,) in rows]
    requests: list[Any] = []
    with open(source, "rb") as log_file:
        for line in log_file:
            if _REQUEST_LINE in line and line.endswith(b"\n"):
                try:
                    requests.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue  # damage is `taplog verify`'s to name; the views skip it too
    return requests
