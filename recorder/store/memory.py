"""Give freed memory back to the operating system after a large answer.

CPython returns a freed large object to the C allocator, and glibc keeps the
pages for the thread that freed them (one heap per thread). A large answer
taken in on the event loop's thread and recorded on the writer thread would
so stay counted twice against the process, long after it was written.
`malloc_trim` hands the free pages back; elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from typing import Any


def _glibc() -> Any:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None  # musl, macOS: not there


_LIBC = _glibc()


def give_back_memory() -> None:
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
