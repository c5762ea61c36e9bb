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
session's `CleanParts`, bounded; the next request that resends it costs a hash.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from taplog.recorder.bodies import UNPARSED
from taplog.recorder.store.deltas import LIST_FIELDS

# A search of one part (or a whole body): its bytes and parsed JSON (UNPARSED: not known),
# searched; the same bytes object when nothing was found.
Search = Callable[[bytes, Any], tuple[bytes, Any]]


class CleanParts:
    """Digests of the parts a session sent that were searched and held nothing."""

    LIMIT = 20_000

    def __init__(self) -> None:
        self._digests: OrderedDict[bytes, None] = OrderedDict()
        self._secrets: tuple[bytes, ...] = ()

    def searched(
        self,
        raw: bytes,
        parsed: Any,
        exact: bool,
        api: str,
        secrets: tuple[bytes, ...],
        search: Search,
    ) -> tuple[bytes, Any]:
        """`raw` and `parsed` as `search` leaves them, searching only the parts not known
        clean when `raw` is `parsed`'s compact JSON (`exact`), else the whole; the same
        objects when nothing was found."""
        name = LIST_FIELDS.get(api)
        if not exact or not isinstance(parsed, dict) or not isinstance(parsed.get(name), list):
            return search(raw, parsed)
        if secrets != self._secrets:  # clean under other keys says nothing about these
            self._digests.clear()
            self._secrets = secrets
        changed, body = False, {}
        for key, value in parsed.items():
            if key == name:
                items = [self._part(item, item, search) for item in value]
                if any(new is not old for new, old in zip(items, value, strict=True)):
                    changed = True
                body[key] = items
                continue
            field = self._part({key: value}, None, search)
            if field is not None:
                changed = True
                body.update(field)
            else:
                body[key] = value
        if not changed:
            return raw, parsed
        return orjson.dumps(body), body

    def _part(self, value: Any, unchanged: Any, search: Search) -> Any:
        """`value` searched, or `unchanged` when nothing was found in it."""
        part = orjson.dumps(value)
        digest = hashlib.blake2b(part, digest_size=16).digest()
        if digest in self._digests:
            self._digests.move_to_end(digest)
            return unchanged
        found, parsed = search(part, value)
        if found is part:
            self._digests[digest] = None
            if len(self._digests) > self.LIMIT:
                self._digests.popitem(last=False)
            return unchanged
        return orjson.loads(found) if parsed is UNPARSED or parsed is None else parsed
