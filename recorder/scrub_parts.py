"""A request body searched for secrets part by part, and each part a session sent before
with nothing found in it not searched again.

Searching a body (secrets by value, credential shapes, the redaction detectors) is a
pass over each of its bytes, and an agent resends its whole history with every call: a
day of Claude Code is half a gigabyte of requests for a few megabytes of new text. A
body whose compact JSON is its exact bytes (what the official SDKs send) is searched as
its parts instead: each item of its transcript, and each other top-level field with its
name (which a search for `"password": "…"` needs). The parts are stretches of the body's
bytes, and no finding spans two of them (a token lies inside one JSON string, a named
value inside one object), so the body comes out as a whole search would leave it. A part
searched clean is remembered by its digest, with the secrets it was searched for, in the
session's `CleanParts`, bounded; the next request that resends it costs a hash. The
parts, their bytes and digests come from the body's `recorder.layouts.Layout`, which the
log's deltas read too: each part is serialised and hashed once for both.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from taplog.recorder.bodies import UNPARSED
from taplog.recorder.layouts import Layout

# A search of one part (or a whole body): its bytes and parsed JSON (UNPARSED: not known),
# searched; the same bytes object when nothing was found.
Search = Callable[[bytes, Any], tuple[bytes, Any]]
CLEAN = object()  # a part searched (now or before) in which nothing was found


class CleanParts:
    """Digests of the parts a session sent that were searched and held nothing: an item's
    digest, a field's name and digest (a value clean under one name may not be under
    another); and of the transcripts whose items all were (by `Layout.chain`), so that a
    body grown from one (`Layout.grown`) looks only at the items after those it took."""

    LIMIT = 20_000
    RUNS = 1_000

    def __init__(self) -> None:
        self._digests: OrderedDict[bytes | tuple[str, bytes], None] = OrderedDict()
        self._runs: OrderedDict[bytes, None] = OrderedDict()
        self._secrets: tuple[bytes, ...] = ()

    def searched(
        self,
        raw: bytes,
        parsed: Any,
        layout: Layout | None,
        secrets: tuple[bytes, ...],
        search: Search,
    ) -> tuple[bytes, Any]:
        """`raw` and `parsed` as `search` leaves them, searching only the parts not known
        clean when the parts of `raw` are known (`layout`), else the whole; the same
        objects when nothing was found."""
        if layout is None:
            return search(raw, parsed)
        if secrets != self._secrets:  # clean under other keys says nothing about these
            self._digests.clear()
            self._runs.clear()
            self._secrets = secrets
        changed, body = False, {}
        for key, value in parsed.items():
            if key == layout.name:
                items = value[: self._clean_run(layout)]
                for at in range(len(items), len(value)):
                    known = layout.item_digest(at)
                    found = (
                        CLEAN
                        if self._clean(known)
                        else self._search(known, layout.item(at), value[at], search)
                    )
                    items.append(value[at] if found is CLEAN else found)
                    changed = changed or found is not CLEAN
                if not changed and value:
                    self._remember(self._runs, layout.chain()[-1], self.RUNS)
                body[key] = items
                continue
            known = (key, layout.value_digest(key))
            found = (
                CLEAN
                if self._clean(known)
                else self._search(known, layout.field_part(key), {key: value}, search)
            )
            if found is CLEAN:
                body[key] = value
            else:
                changed = True
                body.update(found)
        if not changed:
            return raw, parsed
        return orjson.dumps(body), body

    def _clean_run(self, layout: Layout) -> int:
        """How many first items are known clean together: those `layout` took from an
        earlier body, when that body's items all were."""
        if layout.grown_from in self._runs:
            self._runs.move_to_end(layout.grown_from)
            return layout.inherited
        return 0

    def _clean(self, known: bytes | tuple[str, bytes]) -> bool:
        if known in self._digests:
            self._digests.move_to_end(known)
            return True
        return False

    def _search(
        self, known: bytes | tuple[str, bytes], data: bytes, value: Any, search: Search
    ) -> Any:
        """`value`, whose bytes are `data`, searched: CLEAN (and remembered so) when nothing
        was found in it."""
        found, parsed = search(data, value)
        if found is data:
            self._remember(self._digests, known, self.LIMIT)
            return CLEAN
        return orjson.loads(found) if parsed is UNPARSED or parsed is None else parsed

    @staticmethod
    def _remember(memory: OrderedDict[Any, None], known: Any, limit: int) -> None:
        memory[known] = None
        if len(memory) > limit:
            memory.popitem(last=False)
