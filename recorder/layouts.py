"""Where the parts of a request body lie in its bytes: each transcript item, each other field.

A body whose compact JSON is its exact bytes (what the official SDKs send) is stored
parsed, searched for secrets part by part (`recorder.scrub_parts`) and stored as what it
adds to earlier requests (`recorder.store.deltas`). All three need the same facts about
each part: its bytes, their size and a digest of them. A `Layout` holds them, found with
one serialisation of the body (which proves it exact at the same time) and one hash of
each part, however many ask:

    {"model":"…","messages":[{…},{…},…],"system":[…],"tools":[…]}
                              └item 0┘ └item 1┘    └field┘   └field┘

The parts are stretches of the bytes the vendor received, so what is said of them is
said of those bytes. `chain()[i]` digests items 0..i together: two requests share their
first i+1 items exactly when their chains agree at i.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.bodies import HEADROOM
from taplog.recorder.events import Event
from taplog.recorder.vendors.apis import API_MODULES, conversation

# API -> the request field that holds its transcript (`recorder.vendors.apis.conversation`)
LIST_FIELDS = {api: module.TURNS for api in API_MODULES if (module := conversation(api))}


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass(slots=True, eq=False)
class Layout:
    """The parts of `raw`, the exact compact JSON of `body`, whose `name` field is a list."""

    raw: bytes
    body: dict[str, Any]
    name: str  # the transcript's field
    items: list[tuple[int, int]]  # each item's (start, end) in `raw`
    fields: dict[str, tuple[int, int, int]]  # each other field's (key start, value start, end)
    digests: list[bytes] = field(default_factory=list)  # of the first items, as far as asked
    links: list[bytes] = field(default_factory=list)  # `chain()`, as far as asked
    field_digests: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def of(cls, raw: bytes, parsed: Any, api: str) -> Layout | None:
        """The layout of `raw` when `parsed` is its exact compact JSON and holds the API's
        transcript as a list; None otherwise (the body is then stored and searched whole)."""
        name = LIST_FIELDS.get(api)
        if name is None or not isinstance(parsed, dict) or not isinstance(parsed.get(name), list):
            return None
        try:
            return cls._found(raw, parsed, name)
        except TypeError:  # orjson.JSONEncodeError: nested too deeply, or a huge integer
            return None

    @classmethod
    def build(cls, body: Any, name: str) -> Layout | None:
        """`body`'s layout in its compact JSON; None when it has no list `name`, or when it
        cannot be serialised inside a log line (too deep, a huge integer)."""
        if not isinstance(body, dict) or not isinstance(body.get(name), list):
            return None
        try:
            return cls._found(_dumps_at(body, 0), body, name)
        except TypeError:
            return None

    @classmethod
    def _found(cls, raw: bytes, body: dict[str, Any], name: str) -> Layout | None:
        """Each part serialised at its depth and found in `raw` in turn; None at the
        first part `raw` does not hold where it should."""
        items: list[tuple[int, int]] = []
        fields: dict[str, tuple[int, int, int]] = {}
        field_at, item_at, dumps = _Nest(1), _Nest(2), orjson.dumps
        at = 1
        if not raw.startswith(b"{"):
            return None
        for key, value in body.items():
            if at > 1:
                if not raw.startswith(b",", at):
                    return None
                at += 1
            start, data = at, orjson.dumps(key)
            if not raw.startswith(data, at) or not raw.startswith(b":", at + len(data)):
                return None
            at += len(data) + 1
            if key != name:
                data = field_at.dumps(value)
                if not raw.startswith(data, at):
                    return None
                fields[key] = (start, at, at + len(data))
                at += len(data)
                continue
            if not raw.startswith(b"[", at):
                return None
            at += 1
            inner, outer, levels = item_at.inner, item_at.outer, item_at.levels
            for item in value:  # the loop of the whole: kept to plain local operations
                if items:
                    if not raw.startswith(b",", at):
                        return None
                    at += 1
                inner[0] = item
                data = dumps(outer)[levels:-levels]
                if not raw.startswith(data, at):
                    return None
                end = at + len(data)
                items.append((at, end))
                at = end
            if not raw.startswith(b"]", at):
                return None
            at += 1
        if at != len(raw) - 1 or not raw.startswith(b"}", at):
            return None
        return cls(raw, body, name, items, fields)

    def item(self, position: int) -> bytes:
        start, end = self.items[position]
        return self.raw[start:end]

    def item_size(self, position: int) -> int:
        start, end = self.items[position]
        return end - start

    def item_digest(self, position: int) -> bytes:
        digests = self.digests
        while len(digests) <= position:
            digests.append(digest(self.item(len(digests))))
        return digests[position]

    def chain(self) -> list[bytes]:
        """Per item, a digest of it and every item before it."""
        links = self.links
        link = links[-1] if links else b""
        for position in range(len(links), len(self.items)):
            link = digest(link + self.item_digest(position))
            links.append(link)
        return links

    def field_part(self, key: str) -> bytes:
        """The field as a body of its own, `{"key":value}`: a search for named values
        (`"password": …`) needs the name."""
        start, _, end = self.fields[key]
        return b"{" + self.raw[start:end] + b"}"

    def value_size(self, key: str) -> int:
        _, start, end = self.fields[key]
        return end - start

    def value_digest(self, key: str) -> bytes:
        found = self.field_digests.get(key)
        if found is None:
            _, start, end = self.fields[key]
            found = self.field_digests[key] = digest(self.raw[start:end])
        return found


class LaidOut(dict):
    """An `llm.request` event whose body's layout is known, for the writer's deltas: the
    layout travels in memory only, never into the log."""

    __slots__ = ("layout",)

    def __init__(self, event: Event, layout: Layout) -> None:
        super().__init__(event)
        self.layout = layout

    def __reduce__(self) -> tuple[Any, ...]:  # pickled or copied, it is the event alone
        return (dict, (dict(self),))


def layout_of(event: Event, name: str) -> Layout | None:
    """The layout of `event`'s body: the one it carries, else found now."""
    body = event["body"]
    layout = event.layout if isinstance(event, LaidOut) else None
    if layout is not None and layout.body is body and layout.name == name:
        return layout
    return Layout.build(body, name)


def _dumps_at(value: Any, depth: int) -> bytes:
    """`value`'s compact JSON, as it would serialise `depth` levels into a body inside a
    log line (raises TypeError where the whole would)."""
    return _Nest(depth).dumps(value)


class _Nest:
    """Lists nested as deep as a log line holds a body's part at `depth`: a part
    serialised inside them fails where it would fail in the line. Made once for many
    parts, on one thread."""

    def __init__(self, depth: int) -> None:
        self.levels = HEADROOM + depth
        self.inner: list[Any] = [None]
        self.outer = self.inner
        for _ in range(self.levels - 1):
            self.outer = [self.outer]

    def dumps(self, value: Any) -> bytes:
        """`value`'s compact JSON, serialised at this depth (raises TypeError where the
        log line would)."""
        self.inner[0] = value
        try:
            return orjson.dumps(self.outer)[self.levels : -self.levels]
        finally:
            self.inner[0] = None
