"""Large bodies beside the log: content-addressed blobs that lines point at.

A log line holding a body of many megabytes is slow for every reader and for
DuckDB, which reads JSON lines whole. So the writer thread moves the body
fields of an `llm.request` or `llm.response` (`body`, `body_raw`, `body_b64`
and, for a stream, `sse`) out of the line when together they serialise to
more than the inline limit (setting `body_inline_max_kb`). They go, as one
JSON object and exactly as they would have sat in the line, to

    DATA_DIR/blobs/<first 2 hex digits>/<sha256 of the file>.json

and the event carries `"blob": {"sha256", "size", "fields"}` in their place,
so the hash chain covers the reference and the reference covers the content.
A blob is written whole (temp file, fsync, rename, fsync of its folder; no
fsync under the `never` policy) before the line that points at it, so no line
ever names a blob that is not on disk; identical content is stored once.

Readers put the fields back (`resolve`), checking the blob's hash, so every
consumer sees the event as if it had been written inline; the SQL views do
the same with `json_merge_patch` (see `recorder.query.connect`).

A large stream is not built in memory first: `BlobWriter` writes its blob as
it is read (hashed on the way, named by its hash once whole), and `Spool`
keeps the stream's raw chunks on disk meanwhile, so they can be let go of in
memory and still be had again should the blob fail to be written.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.events import LLM_REQUEST, LLM_RESPONSE, Event
from taplog.recorder.vendors.sse import Text

# A file taplog creates under the data dir: new, never through a symbolic link.
NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW

BLOBS_DIR = "blobs"
MOVABLE_FIELDS = ("body", "body_raw", "body_b64", "sse")
_CARRIERS = frozenset({LLM_REQUEST, LLM_RESPONSE})
SLICE = 1 << 20  # strings longer than this are written in slices, never copied whole
_names = itertools.count()  # unique names for files being written


class BlobError(ValueError):
    """A referenced blob is missing or does not match its hash."""


def blob_path(folder: Path, sha256: str) -> Path:
    return folder / sha256[:2] / f"{sha256}.json"


def blobs_folder(session_log: Path) -> Path:
    """The blobs of the data dir a session log (`DATA_DIR/sessions/<id>.jsonl`) lives in."""
    return session_log.parent.parent / BLOBS_DIR


class BlobStore:
    """The writer thread's side: moves large body fields out of events before they are sealed."""

    def __init__(self, folder: Path, inline_max: int, sync: bool) -> None:
        self.folder = folder
        self.inline_max = inline_max
        self.sync = sync

    def move_out(self, event: Event, line_size: int) -> bool:
        """Store the body fields of `event` in a blob if they are too large to stay in
        its line (of `line_size` bytes), and put a reference in their place.

        Raises OSError when the blob cannot be written; the event is then unchanged.
        """
        if line_size <= self.inline_max or event["type"] not in _CARRIERS or "blob" in event:
            return False
        fields = {name: event[name] for name in MOVABLE_FIELDS if event.get(name) is not None}
        try:
            content = orjson.dumps(fields)
        except TypeError:  # not serialisable as is: left inline, sanitised by `seal`
            return False
        if len(content) <= self.inline_max:
            return False
        sha256 = hashlib.sha256(content).hexdigest()
        if not self._stored(sha256, len(content)):
            writer = self.writer()
            try:
                writer.write(content)
            except OSError:
                writer.abort()
                raise
            writer.finish([])
        for name in fields:
            del event[name]
        event["blob"] = {"sha256": sha256, "size": len(content), "fields": list(fields)}
        return True

    def _stored(self, sha256: str, size: int) -> bool:
        """The same content is there already, whole."""
        try:
            return blob_path(self.folder, sha256).stat().st_size == size
        except FileNotFoundError:
            return False

    def writer(self) -> BlobWriter:
        """A blob to write piece by piece; it gets its name (its hash) at `finish`."""
        return BlobWriter(self)

    def spool(self, chunks: list[tuple[float, bytes]]) -> Spool:
        """`chunks` (arrival time, bytes) kept on disk until `Spool.remove`."""
        return Spool(self.folder / f".spool.{os.getpid()}.{next(_names)}", chunks)

    def _place(self, partial: Path, sha256: str, size: int) -> None:
        """Move a whole blob to its name (unless that content is there already)."""
        path = blob_path(self.folder, sha256)
        if self._stored(sha256, size):
            partial.unlink(missing_ok=True)
            return
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._sync_dir(path.parent.parent)
        os.replace(partial, path)
        self._sync_dir(path.parent)

    def _sync_dir(self, folder: Path) -> None:
        if self.sync:
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


class BlobWriter:
    """One blob written as it is built: hashed on the way, synced per policy, and put
    under its hash only when whole (so no line can name half a blob)."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self.partial = store.folder / f".blob.{os.getpid()}.{next(_names)}.partial"
        self.fd = os.open(self.partial, NEW_FILE, 0o600)
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.hash.update(data)
        view, written = memoryview(data), 0
        while written < len(data):
            written += os.write(self.fd, view[written:])
        self.size += len(data)

    def finish(self, fields: list[str]) -> dict[str, Any]:
        """Sync, name it by its hash; the reference a line puts in place of `fields`."""
        try:
            if self.store.sync:
                os.fsync(self.fd)
        except OSError:
            self.abort()
            raise
        os.close(self.fd)
        self.fd = -1
        sha256 = self.hash.hexdigest()
        try:
            self.store._place(self.partial, sha256, self.size)
        except OSError:
            self.partial.unlink(missing_ok=True)
            raise
        return {"sha256": sha256, "size": self.size, "fields": fields}

    def abort(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.partial.unlink(missing_ok=True)


_CHUNK_HEAD = struct.Struct("<dQ")  # arrival time (ms), length


class Spool:
    """A stream's raw chunks on disk while its blob is built from them (never synced:
    it only has to outlive the blob, not a crash)."""

    def __init__(self, path: Path, chunks: list[tuple[float, bytes]]) -> None:
        self.path = path
        with open(os.open(path, NEW_FILE, 0o600), "wb") as out:
            try:
                for at, chunk in chunks:
                    out.write(_CHUNK_HEAD.pack(at, len(chunk)))
                    out.write(chunk)
            except OSError:
                path.unlink(missing_ok=True)
                raise

    def chunks(self) -> Iterator[tuple[float, bytes]]:
        with open(self.path, "rb") as spooled:
            while head := spooled.read(_CHUNK_HEAD.size):
                at, length = _CHUNK_HEAD.unpack(head)
                yield at, spooled.read(length)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def write_json(value: Any, write: Callable[[bytes], None]) -> None:
    """`value` as JSON, as `orjson.dumps` writes it, in pieces: long strings (and the
    `Text` that a large stream's reassembly leaves) go out in slices, never whole."""
    if isinstance(value, Text):
        write(b'"')
        for part in value.parts:
            _write_string_body(part, write)
        write(b'"')
    elif isinstance(value, str) and len(value) > SLICE:
        write(b'"')
        _write_string_body(value, write)
        write(b'"')
    elif isinstance(value, dict) and _holds_long(value):
        write(b"{")
        for n, (key, item) in enumerate(value.items()):
            write(b',"' if n else b'"')
            write(orjson.dumps(key)[1:])
            write(b":")
            write_json(item, write)
        write(b"}")
    elif isinstance(value, list) and _holds_long(value):
        write(b"[")
        for n, item in enumerate(value):
            if n:
                write(b",")
            write_json(item, write)
        write(b"]")
    else:
        write(orjson.dumps(value))


def _write_string_body(text: str, write: Callable[[bytes], None]) -> None:
    for start in range(0, len(text), SLICE):  # escaping is per character: slices agree
        write(orjson.dumps(text[start : start + SLICE])[1:-1])


def _holds_long(value: Any) -> bool:
    if isinstance(value, Text) or (isinstance(value, str) and len(value) > SLICE):
        return True
    if isinstance(value, dict):
        return any(_holds_long(item) for item in value.values())
    if isinstance(value, list):
        return any(_holds_long(item) for item in value)
    return False


def load(folder: Path, ref: Any) -> dict[str, Any]:
    """The fields a blob reference stands for, checked against its hash."""
    if not isinstance(ref, dict) or not isinstance(ref.get("sha256"), str):
        raise BlobError(f"malformed blob reference {ref!r}")
    path = blob_path(folder, ref["sha256"])
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        raise BlobError(f"blob {path} is missing") from None
    actual = hashlib.sha256(content).hexdigest()
    if actual != ref["sha256"]:
        raise BlobError(f"blob {path} was changed: its content hashes to {actual}")
    fields = orjson.loads(content)
    if not isinstance(fields, dict):
        raise BlobError(f"blob {path} is not a JSON object")
    return fields


def resolve(folder: Path, event: Event) -> Event:
    """`event` with the fields its blob holds put back (as if written inline)."""
    ref = event.get("blob")
    if ref is not None:
        event.update(load(folder, ref))
    return event


def check(folder: Path, ref: Any) -> str | None:
    """Why a referenced blob is not sound (missing, changed), or None."""
    try:
        load(folder, ref)
    except ValueError as exc:  # BlobError, or JSON that does not parse
        return str(exc)
    return None
