"""A new session that starts where another one was at some step: `taplog fork`.

The new file's first events are copies of the origin's events `1..at`, with
their `seq`, `id`, `ts` and payloads kept and only `session` changed, sealed
into a new hash chain; then one `session.forked` event names the origin, the
point (`at`) and the hash of the origin's line there, so the copy can be
checked against the original. A client continues the fork by naming it
(`X-Taplog-Session: NEW` or `/s/NEW/`): the writer appends to the file and
pairs the tool results it then sends with the tool calls in the copied prefix.

The origin is only read, never written. The new file is written aside and
linked into place, so it appears whole or not at all and never replaces an
existing session; its typed rows are then written beside it
(`recorder.store.rows`), so that readers list it as fast as a recorded one.
"""

from __future__ import annotations

import os
from pathlib import Path

from taplog.recorder.events import Event, seal, session_forked
from taplog.recorder.sessions import InvalidSessionId, check_session_id
from taplog.recorder.store.logfile import write_aside
from taplog.recorder.store.lognames import COMPRESSED, log_exists, log_path, session_name
from taplog.recorder.store.reader import read_events
from taplog.recorder.store.rows import write_rows
from taplog.recorder.store.zstd_stream import compress_whole


class ForkError(ValueError):
    """The fork cannot be made; the message says why."""


def fork_session(data_dir: Path, session: str, at: int, new: str | None = None) -> str:
    """Fork `session` after its event `at` into session `new`; returns the new id."""
    sessions = data_dir / "sessions"
    origin = log_path(sessions, session)
    if not origin.is_file():
        raise ForkError(f"no session {session!r} in {data_dir}")
    # Copied as stored: blob references stay references to the same blobs.
    prefix = [event for event in read_events(origin, as_stored=True) if event["seq"] <= at]
    if not prefix or prefix[-1]["seq"] != at:
        last = prefix[-1]["seq"] if prefix else 0
        raise ForkError(f"session {session!r} has no event {at} (its last is {last})")
    new = new or f"{session}-fork{at}-{os.urandom(3).hex()}"
    try:
        check_session_id(new)
    except InvalidSessionId as exc:
        raise ForkError(str(exc)) from None
    forked = session_forked(new, origin=session, at=at, origin_hash=prefix[-1]["h"])
    if log_exists(sessions, new):
        raise ForkError(f"session {new!r} already exists")
    _write_new(sessions / f"{new}{COMPRESSED}", [*(_copy(e, new) for e in prefix), forked])
    return new


def _copy(event: Event, session: str) -> Event:
    copied = {key: value for key, value in event.items() if key not in ("prev", "h")}
    copied["session"] = session
    return copied


def _write_new(path: Path, events: list[Event]) -> None:
    lines, prev = [], None
    for seq, event in enumerate(events, start=1):
        line, prev = seal(event, seq, prev)  # the origin's seqs are gapless from 1: kept
        lines.append(line)
    aside = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = b"".join(lines)
    write_aside(aside, compress_whole(text), exclusive=True)
    try:
        os.link(aside, path)
    except FileExistsError:
        raise ForkError(f"session {session_name(path)!r} already exists") from None
    finally:
        aside.unlink()
    write_rows(path, text)
