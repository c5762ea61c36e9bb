"""Prove session logs whole (`taplog verify`) and repair torn tails (`taplog repair`).

A session log is whole when every line ends in a newline and verifies
against its own checksum `h`, its `seq` runs 1, 2, 3… without gaps, each
line's `prev` is the `h` of the line before (the first line's is null),
every line belongs to the file's session, every blob a line points at
(`recorder.store.blobs`) is there and matches its hash, and every request's resent
history rebuilds from the requests before it (`recorder.store.deltas`). Each
violation is a `Finding` that names the file, the line, its byte offset and
the reason; checking goes on after one, so a report shows all of them (up to
`MAX_FINDINGS` per file).

A last line without its newline is not damage but a write cut short by a
crash (a *torn tail*): readers skip it, and it is reported apart. `repair`
does on demand what the writer does when it opens a file
(`recorder.store.logfile.open_session_file`): the torn bytes go to `quarantine/`
and the file is cut back to its last whole line; a file whose last whole line
fails its checksum is set aside whole and the session starts anew with an
`error` event. Damage in the middle of a file is reported and left alone:
nothing is ever truncated away but a torn tail. A compressed log
(`recorder.store.zstd_stream`) is read up to its last whole block: bytes after it
that end no line are its torn tail, and a whole block that does not decode is
damage, named by its byte in the file, which `repair` sets aside as the writer
would (the lines after it cannot be read).

The checksum is a plain hash, not a signature: it proves a log complete and
free of accidental damage, and catches any edit that does not also rewrite
every later line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from taplog.recorder.events import verify_line
from taplog.recorder.sessions import SESSION_ID
from taplog.recorder.store import blobs
from taplog.recorder.store.deltas import Rebuilder
from taplog.recorder.store.lock import DataDirLock
from taplog.recorder.store.logfile import open_session_file
from taplog.recorder.store.lognames import is_compressed, log_path, session_logs, session_name
from taplog.recorder.store.zstd_stream import whole_prefix

MAX_FINDINGS = 20


class UnknownSessions(ValueError):
    """Session names that are not ids, or that have no log in the data dir."""


@dataclass(frozen=True)
class Finding:
    path: Path
    line: int  # 1-based
    offset: int  # byte offset of the line's first byte
    reason: str
    torn: bool = False  # a torn last line: a write cut short, not damage

    def __str__(self) -> str:
        return f"{self.path}:{self.line} (byte {self.offset}): {self.reason}"


@dataclass
class Report:
    """What checking one session log found."""

    path: Path
    lines: int = 0  # whole lines read
    size: int = 0  # bytes
    damage: list[Finding] = field(default_factory=list)
    more_damage: int = 0  # findings beyond MAX_FINDINGS, counted only
    torn: Finding | None = None
    repaired: str | None = None  # what `repair` did to the file, if anything

    @property
    def ok(self) -> bool:
        return not self.damage and not self.more_damage

    def _damaged(self, line: int, offset: int, reasons: list[str]) -> None:
        if len(self.damage) < MAX_FINDINGS:
            self.damage.append(Finding(self.path, line, offset, "; ".join(reasons)))
        else:
            self.more_damage += 1


class _Chain:
    """What the next line must carry to continue the chain; unknown after damage."""

    def __init__(self) -> None:
        self.seq: int | None = 1
        self.prev: str | None = None
        self.known = True

    def check(self, event: dict, digest: str) -> list[str]:
        reasons = []
        seq = event.get("seq")
        if self.known and seq != self.seq:
            reasons.append(f"seq {seq!r} where {self.seq} was expected")
        if self.known and event.get("prev") != self.prev:
            reasons.append("prev is not the hash of the line before: the chain is broken")
        self.seq = seq + 1 if isinstance(seq, int) else None
        self.prev, self.known = digest, isinstance(seq, int)
        return reasons

    def lost(self) -> None:
        self.known = False


def verify_file(path: Path, session: str | None = None, blobs_folder: Path | None = None) -> Report:
    """Check one session log: checksums, the chain, gapless seq, blobs, transcripts, a torn tail.

    The log is of session `session` (default: its file's name) and its blobs are in
    `blobs_folder` (default: its data dir's), for a copy kept elsewhere (a fleet's cache).
    """
    report, chain, offset = Report(path), _Chain(), 0
    session = session_name(path) if session is None else session
    contents = _Contents(blobs.blobs_folder(path) if blobs_folder is None else blobs_folder)
    if is_compressed(path):
        return _verify_compressed(path, report, session, chain, contents)
    with open(path, "rb") as log_file:
        for number, line in enumerate(log_file, start=1):
            start, offset = offset, offset + len(line)
            if not line.endswith(b"\n"):
                reason = (
                    f"torn last line ({len(line)} bytes without a newline): a write cut short "
                    "by a crash; readers skip it, `taplog repair` moves it to quarantine/"
                )
                report.torn = Finding(path, number, start, reason, torn=True)
                break
            report.lines = number
            reasons = _check_line(line, session, chain, contents)
            if reasons:
                report._damaged(number, start, reasons)
    report.size = offset
    return report


def _verify_compressed(
    path: Path, report: Report, session: str, chain: _Chain, contents: _Contents
) -> Report:
    """A compressed log: its lines up to its last whole block, then what follows them:
    a torn last write, or blocks that do not decode (damage, named by compressed byte)."""
    data = path.read_bytes()
    whole = whole_prefix(data)
    offset = 0
    for number, line in enumerate(whole.text.splitlines(keepends=True), start=1):
        report.lines = number
        reasons = _check_line(line, session, chain, contents)
        if reasons:
            report._damaged(number, offset, reasons)
        offset += len(line)
    report.size = offset
    after = report.lines + 1
    if whole.damage is not None:
        report._damaged(after, whole.length, [f"the compressed stream {whole.damage}"])
    elif whole.length < len(data):
        reason = (
            f"torn last write ({len(data) - whole.length} bytes of the compressed stream at "
            f"byte {whole.length} that end no line): a write cut short by a crash; readers "
            "skip it, `taplog repair` moves it to quarantine/"
        )
        report.torn = Finding(path, after, whole.length, reason, torn=True)
    return report


class _Contents:
    """What lines point at or build on: each blob checked once, transcripts rebuilt in order."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.blobs_seen: dict[str, str | None] = {}
        self.transcripts = Rebuilder()

    def problems(self, event: dict) -> list[str]:
        if "blob" in event:
            key = orjson.dumps(event["blob"]).decode()
            if key not in self.blobs_seen:
                self.blobs_seen[key] = blobs.check(self.folder, event["blob"])
            if self.blobs_seen[key] is not None:
                return [str(self.blobs_seen[key])]
        if "transcript" in event:
            try:
                self.transcripts.rebuild(blobs.resolve(self.folder, event))
            except ValueError as exc:  # TranscriptError, BlobError
                return [str(exc)]
        return []


def _check_line(line: bytes, session: str, chain: _Chain, contents: _Contents) -> list[str]:
    digest = verify_line(line)
    if digest is None:
        chain.lost()
        return ["line fails its checksum"]
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        event = None
    if not isinstance(event, dict):
        chain.lost()
        return ["line is not a JSON object"]
    reasons = chain.check(event, digest)
    if event.get("session") != session:
        reasons.append(f"belongs to session {event.get('session')!r}, not {session!r}")
    return reasons + contents.problems(event)


def session_paths(data_dir: Path, sessions: Iterable[str] = ()) -> list[Path]:
    """The logs of the named sessions, or of every session when none is named."""
    folder = data_dir / "sessions"
    names = list(sessions)
    if not names:
        return session_logs(folder)
    bad = [name for name in names if not SESSION_ID.fullmatch(name)]
    if bad:
        raise UnknownSessions(f"not a session id: {bad[0]!r}")
    missing = [name for name in names if not log_path(folder, name).is_file()]
    if missing:
        raise UnknownSessions(f"no log for session {missing[0]!r} in {folder}")
    return [log_path(folder, name) for name in names]


def verify(data_dir: Path, sessions: Iterable[str] = ()) -> list[Report]:
    """Check the named sessions' logs, or every log in the data dir."""
    return [verify_file(path) for path in session_paths(data_dir, sessions)]


def repair(data_dir: Path, sessions: Iterable[str] = ()) -> list[Report]:
    """Repair torn tails (and set damaged last lines aside) as the writer would on open.

    Takes the data dir's lock, so it refuses to run beside `taplog serve`
    (which repairs the files it opens itself). Returns each file's report
    after repair; `repaired` says what was done.
    """
    paths = session_paths(data_dir, sessions)
    quarantine = data_dir / "quarantine"
    lock = DataDirLock(data_dir)
    lock.acquire()
    try:
        quarantine.mkdir(exist_ok=True, mode=0o700)
        reports = []
        for path in paths:
            before = verify_file(path)
            # the last line, or the compressed blocks after it (the writer's repair on open)
            last_damaged = bool(before.damage) and before.damage[-1].line >= before.lines
            repaired = None
            if before.torn is not None or last_damaged:
                repaired = _repair_file(path, quarantine)
            report = verify_file(path)
            report.repaired = repaired
            reports.append(report)
        return reports
    finally:
        lock.release()


def _repair_file(path: Path, quarantine: Path) -> str | None:
    session_file, damage = open_session_file(path, quarantine, sync_dir=True)
    torn = session_file.torn
    session_file.close(sync=True)
    done = []
    if torn is not None:
        offset, size, kept = torn
        done.append(f"torn last line ({size} bytes at byte {offset}) moved to {kept}")
    if damage is not None:
        done.append(f"{damage}: the file was moved to {quarantine}, the session starts anew")
    return "; ".join(done) or None
