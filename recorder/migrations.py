"""Format versions: older events upgraded by small named functions, files by `taplog migrate`.

Writers write only `FORMAT_VERSION`. A format change adds one function to
`MIGRATIONS`, keyed by the version it upgrades *from*, that turns an event of
that version into one of the next (and bumps `FORMAT_VERSION`); `upgrade`
applies them in order, so readers see current events whatever the file holds.
Version 2 added blob references (`recorder.store.blobs`) and transcript deltas
(`recorder.store.deltas`): a version-1 event is a valid version-2 event as it
is, so its migration only renumbers it, while a taplog that knows only
version 1 refuses the newer lines instead of reading them without their
bodies or with only a turn's worth of history. Version 3 added the envelope's `epoch`
(a fleet's owner epoch of the session, `proxy.coordination.leases`) and the
`session.resumed` event; a version-2 line held no lease, so it upgrades to a null epoch.
Version 4 lets a request build on any earlier one of its file and point at large
values the file already holds (`recorder.store.deltas`); a version-3 delta, on the
previous request of its API, is read as it is.

`migrate_data_dir` rewrites the files that hold older events, and the plain
logs (an older taplog's `<id>.jsonl`): every event read whole, upgraded, stored
as the current writer stores it (so a version-3 log of interleaved threads
shrinks to what is new in each request), resealed into a new hash chain (`seq`
kept) and compressed (`<id>.jsonl.zst`, `recorder.store.zstd_stream`), written
aside and moved into place with its typed rows beside it (`recorder.store.rows`), the
original kept in `quarantine/` (never deleted).
It takes the data dir's lock: files are not rewritten under a running `taplog serve`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from taplog.recorder import events as format_
from taplog.recorder.events import Event, seal
from taplog.recorder.store.blobs import BLOBS_DIR, BlobStore
from taplog.recorder.store.deltas import Batch, Ledger
from taplog.recorder.store.lock import DataDirLock
from taplog.recorder.store.logfile import aside_name, write_aside
from taplog.recorder.store.lognames import COMPRESSED, is_compressed, session_name
from taplog.recorder.store.reader import read_events, session_files
from taplog.recorder.store.rows import write_rows
from taplog.recorder.store.zstd_stream import compress_whole

Migration = Callable[[Event], Event]

DEFAULT_INLINE_MAX = 1024 * 1024  # `taplog serve --body-inline-max-kb`'s default
_STORED_APART = ("prev", "h", "blob", "transcript")  # a line's seal, and how it was stored


def _blobs_and_deltas_added(event: Event) -> Event:
    """1 -> 2: bodies may sit in blobs, histories be deltas; a version-1 event is whole."""
    return event


def _epoch_added(event: Event) -> Event:
    """2 -> 3: the envelope names the owner epoch; a version-2 line was written under no
    lease, so its epoch is unknown (null)."""
    event["epoch"] = None
    return event


def _deltas_on_any_request(event: Event) -> Event:
    """3 -> 4: a request may build on any earlier one; a version-3 delta is one on the
    previous request of its API, which readers still read."""
    return event


# version -> the function that upgrades an event of that version to the next one.
MIGRATIONS: dict[int, Migration] = {
    1: _blobs_and_deltas_added,
    2: _epoch_added,
    3: _deltas_on_any_request,
}


def upgrade(event: Event) -> Event:
    """`event` at the current format version."""
    version = event.get("v", 1)
    while version < format_.FORMAT_VERSION:
        event = MIGRATIONS[version](event)
        version += 1
        event["v"] = version
    return event


def outdated(path: Path) -> bool:
    """A plain log, or one holding events of an older format version."""
    if not is_compressed(path):
        return True
    events = read_events(path, as_stored=True)
    return any(event.get("v", 1) < format_.FORMAT_VERSION for event in events)


def migrate_data_dir(data_dir: Path) -> list[Path]:
    """Rewrite every session file that is plain or holds older events; returns the files
    rewritten (as they were named)."""
    lock = DataDirLock(data_dir)
    lock.acquire()
    try:
        rewritten = [path for path in session_files(data_dir) if outdated(path)]
        blobs = BlobStore(data_dir / BLOBS_DIR, DEFAULT_INLINE_MAX, sync=True)
        for path in rewritten:
            _rewrite(path, data_dir / "quarantine", blobs)
        return rewritten
    finally:
        lock.release()


def _rewrite(path: Path, quarantine: Path, blobs: BlobStore) -> None:
    lines, prev, ledger = [], None, Ledger()
    for event in read_events(path):  # whole: blobs and resent history put back
        batch, seq = Batch(), event["seq"]
        whole = {k: v for k, v in upgrade(event).items() if k not in _STORED_APART}
        stored = ledger.stored_form(whole, seq, batch)
        line, digest = seal(stored, seq, prev)
        if blobs.move_out(stored, len(line)):
            line, digest = seal(stored, seq, prev)
        ledger.commit(batch)
        lines.append(line)
        prev = digest
    compressed = path.with_name(session_name(path) + COMPRESSED)
    aside = path.with_name(f".{compressed.name}.migrating")
    text = b"".join(lines)
    write_aside(aside, compress_whole(text))
    quarantine.mkdir(parents=True, exist_ok=True)
    os.link(path, quarantine / aside_name(path, f"v{_oldest(path)}"))
    os.replace(aside, compressed)
    if compressed != path:  # a plain log: readers take it while it is there
        path.unlink()
    write_rows(compressed, text)


def _oldest(path: Path) -> int:
    return min(event.get("v", 1) for event in read_events(path, as_stored=True))
