"""Request bodies parsed from where they differ from one parsed before.

An agent resends its whole history with every call, so most of a request's bytes are
the bytes of an earlier request of its thread: the same beginning, then a few new turns
and the fields after them (the system prompt, the tools, the settings). `KnownBodies`
keeps the layouts (`recorder.layouts`) of the latest large bodies of the conversations
going through; a body that starts with the same items as one of them, byte for byte, is
parsed and checked only after those items, and takes their parsed JSON and digests from
the earlier body (`Layout.grown`). Parsing costs what is new, and so does what the
recorder does with the parts after it.

The parsed items are shared between the bodies that sent them: like every parsed
request body in taplog, they are read, never changed (a changed copy is a new object).

The proxy parses each call's body here (one `KnownBodies` per process, on its event
loop), and so does the recorder process of `taplog serve --workers N` for the bodies its
workers hand over (shared by its reader threads, hence the lock).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from typing import Any

from taplog.recorder.bodies import parse_json
from taplog.recorder.layouts import LIST_FIELDS, Layout

MIN_BYTES = 16 * 1024  # a smaller body costs little to parse whole: neither kept nor built on
MAX_BYTES = 16 * 1024 * 1024  # of bodies kept (their parsed JSON takes about as much again)
MAX_BODIES = 16  # conversations under way at once, each its latest (a real day: 1 to 3)


class KnownBodies:
    """The layouts of the latest large bodies, each conversation's newest replacing the
    one it grew from, the least recently used forgotten first beyond the bounds."""

    def __init__(
        self, max_bytes: int = MAX_BYTES, max_bodies: int = MAX_BODIES, min_bytes: int = MIN_BYTES
    ) -> None:
        self.max_bytes, self.max_bodies, self.min_bytes = max_bytes, max_bodies, min_bytes
        self._layouts: OrderedDict[Layout, None] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def parse(self, raw: bytes, api: str) -> tuple[Any, Layout | None]:
        """`raw` parsed (None: not JSON), and its layout when it is the exact compact JSON
        of a body with the API's transcript list."""
        name = LIST_FIELDS.get(api)
        if name is None or len(raw) < self.min_bytes:
            return parse_json(raw), None
        with self._lock:
            known = [layout for layout in reversed(self._layouts) if layout.name == name]
        base, shared = _longest_shared(known, raw)
        grown = Layout.grown(base, raw, shared) if base is not None else None
        if grown is not None:
            self._keep(grown, base)
            return grown.body, grown
        parsed = parse_json(raw)
        layout = Layout.of(raw, parsed, api)
        if layout is not None:
            self._keep(layout, None)
        return parsed, layout

    def _keep(self, layout: Layout, grew_from: Layout | None) -> None:
        with self._lock:
            if grew_from is not None and grew_from in self._layouts:  # its conversation moved on
                del self._layouts[grew_from]
                self._bytes -= len(grew_from.raw)
            self._layouts[layout] = None
            self._bytes += len(layout.raw)
            while self._bytes > self.max_bytes or len(self._layouts) > self.max_bodies:
                forgotten, _ = self._layouts.popitem(last=False)
                self._bytes -= len(forgotten.raw)


def _longest_shared(known: list[Layout], raw: bytes) -> tuple[Layout | None, int]:
    """The known layout whose first items `raw` starts with, byte for byte, the most of
    them (the most recent among equals), and how many; (None, 0) when none shares one."""
    best, most = None, 0
    for layout in known:
        items = layout.items
        if len(items) <= most:
            continue
        with memoryview(layout.raw) as view:  # more than the best so far? (mostly: no)
            if not raw.startswith(view[: items[most][1]]):
                continue
            shared_bytes = _common_prefix(raw, view, items[most][1], items[-1][1])
        shared = bisect.bisect_right(items, shared_bytes, key=lambda span: span[1])
        best, most = layout, shared
        if shared == len(items):  # all of it: its conversation's latest
            break
    return best, most


def _common_prefix(raw: bytes, other: memoryview, start: int, limit: int) -> int:
    """How many first bytes `raw` and `other` share, knowing they share `start`, at most
    `limit`: halving down to the first difference, each half compared in place."""
    end = min(len(raw), len(other), limit)
    if raw.startswith(other[start:end], start):
        return end
    while end - start > 1:  # raw[:start] == other[:start] and raw[:end] != other[:end]
        middle = (start + end) // 2
        if raw.startswith(other[start:middle], start):
            start = middle
        else:
            end = middle
    return start
