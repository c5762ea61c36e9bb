"""Where a session's log lives, and how its lines are read back from either form.

    sessions/<id>.jsonl.zst   a log written by this taplog (`recorder.store.zstd_stream`)
    sessions/<id>.jsonl       a log of an older taplog, or copied in by hand

Both are read alike. A session whose log is plain goes on being written plain
(`taplog migrate` compresses it). Should both exist, as when a migration was
cut short before it removed the plain original, the plain one is the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from taplog.recorder.store.zstd_stream import Decoder

PLAIN = ".jsonl"
COMPRESSED = ".jsonl.zst"
_CHUNK = 1 << 20


def session_name(path: Path) -> str:
    """The session a log file holds: its name without `.jsonl` or `.jsonl.zst`."""
    name = path.name
    return name.removesuffix(COMPRESSED) if name.endswith(COMPRESSED) else path.stem


def is_compressed(path: Path) -> bool:
    """By its name: a session's log, or a copy of one renamed (`run-7.zst`)."""
    return path.suffix == ".zst"


def session_logs(folder: Path, pattern: str = "*") -> list[Path]:
    """The session logs in `folder` (whose session matches the glob `pattern`), one per
    session, in session order."""
    found = {session_name(path): path for path in folder.glob(pattern + COMPRESSED)}
    found.update((path.stem, path) for path in folder.glob(pattern + PLAIN))
    return [found[session] for session in sorted(found)]


def log_path(folder: Path, session: str) -> Path:
    """Session `session`'s log in `folder`: the one there, else where a new one goes."""
    plain = folder / f"{session}{PLAIN}"
    return plain if plain.exists() or plain.is_symlink() else folder / f"{session}{COMPRESSED}"


def log_exists(folder: Path, session: str) -> bool:
    return log_path(folder, session).exists()


def read_text(path: Path) -> bytes:
    """A whole log's lines as bytes (of a compressed log, up to its last whole block)."""
    data = path.read_bytes()
    return Decoder().feed(data) if is_compressed(path) else data


def iter_lines(path: Path) -> Iterator[bytes]:
    """A log's lines, each with its newline; a torn last line comes without one.

    A compressed log is decoded a megabyte at a time, so memory stays with the
    longest line, not the file. Raises DamagedStream where it does not decode.
    """
    with open(path, "rb") as log_file:
        if not is_compressed(path):
            yield from log_file
            return
        decoder, rest = Decoder(), b""
        while chunk := log_file.read(_CHUNK):
            for _, text in decoder.blocks(chunk):
                text = rest + text
                end = text.rfind(b"\n") + 1
                yield from text[:end].splitlines(keepends=True)
                rest = text[end:]
        if rest:
            yield rest
