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
the same with `json_merge_patch` (see `recorder.query`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson

from recorder.events import LLM_REQUEST, LLM_RESPONSE, Event

BLOBS_DIR = "blobs"
MOVABLE_FIELDS = ("body", "body_raw", "body_b64", "sse")
_CARRIERS = frozenset({LLM_REQUEST, LLM_RESPONSE})


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
        self._store(sha256, content)
        for name in fields:
            del event[name]
        event["blob"] = {"sha256": sha256, "size": len(content), "fields": list(fields)}
        return True

    def _store(self, sha256: str, content: bytes) -> None:
        path = blob_path(self.folder, sha256)
        try:
            if path.stat().st_size == len(content):
                return  # the same content, already stored whole
        except FileNotFoundError:
            pass
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._sync_dir(path.parent.parent)
        partial = path.with_name(f".{sha256}.{os.getpid()}.partial")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            written = 0
            while written < len(content):
                written += os.write(fd, content[written:])
            if self.sync:
                os.fsync(fd)
        except OSError:
            os.close(fd)
            partial.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(partial, path)
        self._sync_dir(path.parent)

    def _sync_dir(self, folder: Path) -> None:
        if self.sync:
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


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
