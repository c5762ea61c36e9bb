"""One `taplog serve` per data dir: an advisory lock, released when the process ends.

The lock file says who holds it and where the data dir's serve listens, one line each:

    12345                     the pid of the process that holds (or last held) the lock
    http://127.0.0.1:9000     the base URL clients use for the serve that last recorded
                              here (`announce`, once it listens); kept by every later
                              holder, so `resume` and `prune` do not forget it

`taplog resume` records into the data dir itself, so no serve runs while it does; the new
session it prints is continued through the serve that records here, at that address
(`serve_address`). An older taplog's file holds the pid alone.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE = "taplog.lock"
_MOST = 4096  # a lock file is two short lines; nothing more is read


class DataDirBusy(RuntimeError):
    """Another process records into this data dir."""


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner, address = _lines(os.pread(fd, _MOST, 0))
            os.close(fd)
            listening = f", listening on {address}" if address else ""
            raise DataDirBusy(
                f"another taplog serve (pid {owner or 'unknown'}{listening}) is recording into "
                f"{self.path.parent}; stop it or give this one its own --data-dir"
            ) from None
        _, address = _lines(os.pread(fd, _MOST, 0))
        _write(fd, address)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def announce(data_dir: Path, base_url: str) -> None:
    """Note in the lock file where this process, which holds the lock, serves clients
    (their base URL, before `/v1`; a token as the variable it comes from, never itself)."""
    try:
        fd = os.open(data_dir / LOCK_FILE, os.O_RDWR)
    except FileNotFoundError:  # nothing holds the data dir: nothing to speak for
        return
    try:
        owner, _ = _lines(os.pread(fd, _MOST, 0))
        if owner == str(os.getpid()):  # only the holder speaks for the data dir
            _write(fd, base_url)
    finally:
        os.close(fd)


def serve_address(data_dir: Path) -> str | None:
    """The base URL of the serve that last recorded into `data_dir`, if one said it."""
    try:
        raw = (data_dir / LOCK_FILE).read_bytes()[:_MOST]
    except FileNotFoundError:
        return None
    return _lines(raw)[1]


def _lines(raw: bytes) -> tuple[str | None, str | None]:
    """The pid and the serve's address a lock file holds (either may be missing)."""
    lines = raw.decode(errors="replace").splitlines()
    owner = lines[0].strip() if lines and lines[0].strip() else None
    address = lines[1].strip() if len(lines) > 1 else ""
    return owner, address if address.startswith(("http://", "https://")) else None


def _write(fd: int, address: str | None) -> None:
    """This process as the holder, and the serve's address (overwritten, then cut to size:
    a reader never sees the file empty)."""
    text = f"{os.getpid()}\n" + (f"{address}\n" if address else "")
    os.pwrite(fd, text.encode(), 0)
    os.ftruncate(fd, len(text.encode()))
