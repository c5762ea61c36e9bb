"""What a data dir holds after a day, against the request bodies that were sent.

Stored bytes are every file under the data dir (session logs, blobs, anything else such
as the lock or Parquet copies), split by top-level folder. For reference, `zstd -19
--long=27` of the whole dir as one tar stream says how much information it holds: the
distance between the two is what a store that keeps only what is new could save.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench.common import dir_bytes
from taplog.recorder.store.lognames import session_logs, session_name

ZSTD = ("zstd", "-19", "--long=27", "-T2", "-q", "-c")
ZSTD_TIMEOUT = 1800


def breakdown(data_dir: Path) -> dict[str, int]:
    """Bytes per top-level entry of the data dir (`sessions`, `blobs`, …), and `total`."""
    parts: dict[str, int] = {}
    for entry in sorted(data_dir.iterdir()):
        if entry.is_dir():
            parts[entry.name + "/"] = dir_bytes(entry)
        else:
            parts[entry.name] = entry.stat().st_size
    parts["total"] = sum(parts.values())
    return parts


def session_ids(data_dir: Path) -> list[str]:
    """The sessions in the data dir, largest log first (a day is one session)."""
    logs = sorted(session_logs(data_dir / "sessions"), key=lambda p: -p.stat().st_size)
    return [session_name(p) for p in logs]


def zstd_bytes(data_dir: Path) -> int | None:
    """Bytes of the data dir tarred and compressed with `zstd -19 --long=27`; None when
    there is no zstd (the report says so)."""
    if shutil.which("zstd") is None:
        return None
    tar = subprocess.Popen(["tar", "-cf", "-", "-C", str(data_dir), "."], stdout=subprocess.PIPE)
    assert tar.stdout is not None
    zstd = subprocess.Popen(ZSTD, stdin=tar.stdout, stdout=subprocess.PIPE)
    tar.stdout.close()
    assert zstd.stdout is not None
    total = 0
    while chunk := zstd.stdout.read(1 << 20):
        total += len(chunk)
    zstd.wait(ZSTD_TIMEOUT)
    tar.wait(ZSTD_TIMEOUT)
    return total


def summary(data_dir: Path, raw: int, calls: int, compress: bool = True) -> dict[str, Any]:
    parts = breakdown(data_dir)
    out: dict[str, Any] = {
        "parts": parts,
        "raw": raw,
        "calls": calls,
        "ratio": parts["total"] / raw,
        "per_call": parts["total"] / calls,
    }
    if compress:
        out["zstd"] = zstd_bytes(data_dir)
    return out
