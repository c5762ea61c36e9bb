"""What a data dir holds as its readers see it: a compressed session log decoded.

Tests that look for a secret on disk, or read a log's lines, read through this, so
compression can never hide what a file holds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from taplog.recorder.store.lognames import is_compressed, log_path, read_text, session_logs
from taplog.recorder.store.zstd_stream import compress_whole


def readable(path: Path) -> bytes:
    """A file's bytes; a compressed log's lines (what `zstdcat` prints)."""
    return read_text(path) if is_compressed(path) else path.read_bytes()


def log_of(data_dir: Path, session: str) -> Path:
    """Session `session`'s log in a data dir (where a new one would go, if none)."""
    return log_path(data_dir / "sessions", session)


def logs(data_dir: Path) -> list[Path]:
    """Every session log of a data dir."""
    return session_logs(data_dir / "sessions")


def log_lines(data_dir: Path, session: str) -> list[bytes]:
    return readable(log_of(data_dir, session)).splitlines()


def edit_log(path: Path, change: Callable[[bytes], bytes]) -> None:
    """Rewrite a log's lines (as a hand would, or damage), keeping its form."""
    text = change(readable(path))
    path.write_bytes(compress_whole(text) if is_compressed(path) else text)
