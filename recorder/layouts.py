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
from collections.abc import Iterable
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
    inherited: int = 0  # first items taken from an earlier layout (`grown`)
    grown_from: bytes | None = None  # that layout's `chain()[-1]`, when it was known

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
            return cls._found(_Nest(0).dumps(body), body, name)
        except TypeError:
            return None

    @classmethod
    def _found(cls, raw: bytes, body: dict[str, Any], name: str) -> Layout | None:
        """Each part of `body` serialised where it sits and found in `raw` in turn; None at
        the first one that is not there."""
        keys = list(body)
        at = keys.index(name)
        before = [(key, body[key]) for key in keys[:at]]
        after = [(key, body[key]) for key in keys[at + 1 :]]
        finder, items, fields = _Finder(raw, 0), [], {}
        found = (
            finder.token(b"{")
            and finder.fields(before, fields, first=True)
            and (not before or finder.token(b","))
            and finder.token(orjson.dumps(name) + b":[")
            and finder.items(body[name], items, first=True)
            and finder.token(b"]")
            and finder.fields(after, fields, first=False)
            and finder.token(b"}")
            and finder.at == len(raw)
        )
        return cls(raw, body, name, items, fields) if found else None

    @classmethod
    def grown(cls, base: Layout, raw: bytes, shared: int) -> Layout | None:
        """The layout of `raw`, whose first `shared` items (at least one) are `base`'s byte
        for byte, with the body parsed: only what lies between them and the fields at its
        end that are `base`'s byte for byte too (the system prompt, the tools, …) is
        parsed and serialised; the rest is `base`'s (parsed JSON, digests). None when
        `raw` is not its body's exact compact JSON.

        `raw` up to the end of the last shared item is `base`'s, so a JSON parser is in
        the same state there: inside the transcript, after an item. The bytes between,
        behind an opening that leaves a parser in that state and before a `}` that ends
        the body, parse only if they leave it in the state `base` is in where its kept
        fields begin (inside the body, after a value); they parse as `raw`'s parse would
        parse them, and the kept fields as `base`'s."""
        name, cut = base.name, base.items[shared - 1][1]
        kept = _kept_fields(base, raw, cut)
        moved = len(raw) - len(base.raw)  # where `base`'s kept fields lie in `raw`
        end = kept[0][1][0] - 1 + moved if kept else len(raw) - 1  # the comma, or the `}`
        try:
            rest = orjson.loads(b'{"_":[0' + raw[cut:end] + b"}")
        except orjson.JSONDecodeError:
            return None
        head = {}
        for key, value in base.body.items():
            if key == name:
                break
            head[key] = value
        added = rest.pop("_", None)
        tail = {key: base.body[key] for key, _ in kept}
        if not isinstance(added, list) or not _distinct(name, head, rest, tail):
            return None  # a key twice: its compact JSON cannot be `raw`
        finder, items = _Finder(raw, cut), base.items[:shared]
        fields = {key: base.fields[key] for key in head}
        try:
            found = (
                finder.items(added[1:], items, first=False)
                and finder.token(b"]")
                and finder.fields(rest.items(), fields, first=False)
                and finder.at == end
                and raw.startswith(b"}" if not kept else b",", end)
            )
        except TypeError:  # too deep for a log line, or a huge integer
            return None
        if not found:
            return None
        for key, (key_start, value_start, value_end) in kept:
            fields[key] = (key_start + moved, value_start + moved, value_end + moved)
        body = {**head, name: base.body[name][:shared] + added[1:], **rest, **tail}
        layout = cls(raw, body, name, items, fields, base.digests[:shared], base.links[:shared])
        layout.inherited = shared
        if len(base.links) == len(base.items):
            layout.grown_from = base.links[-1]
        for key in (*head, *tail):
            if key in base.field_digests:
                layout.field_digests[key] = base.field_digests[key]
        return layout

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


def _kept_fields(base: Layout, raw: bytes, cut: int) -> list[tuple[str, tuple[int, int, int]]]:
    """The fields at the end of `base`, after its transcript, that `raw` ends with byte for
    byte (the most of them), each with its place in `base`; none that would reach back
    before `cut` in `raw`."""
    after = [(key, span) for key, span in base.fields.items() if span[0] > base.items[-1][1]]
    moved = len(raw) - len(base.raw)
    with memoryview(base.raw) as view:
        for at, (_, (key_start, _, _)) in enumerate(after):
            comma = key_start - 1
            if comma + moved > cut and raw.endswith(view[comma:]):
                return after[at:]
    return []


def _distinct(name: str, *groups: dict[str, Any]) -> bool:
    """No key in two of the groups, nor the transcript's name in any."""
    seen = {name}
    for group in groups:
        if not seen.isdisjoint(group):
            return False
        seen.update(group)
    return True


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


class _Finder:
    """Walks `raw` from `at`, finding one part after another serialised where it sits in
    a body; each step says whether it was there."""

    def __init__(self, raw: bytes, at: int) -> None:
        self.raw, self.at = raw, at
        self._field, self._item = _Nest(1), _Nest(2)

    def token(self, token: bytes) -> bool:
        if not self.raw.startswith(token, self.at):
            return False
        self.at += len(token)
        return True

    def fields(
        self, pairs: Iterable[tuple[str, Any]], found: dict[str, tuple[int, int, int]], first: bool
    ) -> bool:
        """`"key":value` for each pair, a comma before each but a `first`."""
        for key, value in pairs:
            if not (first or self.token(b",")):
                return False
            start, first = self.at, False
            if not (self.token(orjson.dumps(key)) and self.token(b":")):
                return False
            value_start = self.at
            if not self.token(self._field.dumps(value)):
                return False
            found[key] = (start, value_start, self.at)
        return True

    def items(self, values: list[Any], found: list[tuple[int, int]], first: bool) -> bool:
        """Each transcript item, a comma before each but a `first`. (The loop of the whole
        body: kept to plain local operations.)"""
        raw, at, dumps = self.raw, self.at, orjson.dumps
        nest = self._item
        inner, outer, levels = nest.inner, nest.outer, nest.levels
        try:
            for item in values:
                if not first:
                    if not raw.startswith(b",", at):
                        return False
                    at += 1
                first = False
                inner[0] = item
                data = dumps(outer)[levels:-levels]
                if not raw.startswith(data, at):
                    return False
                found.append((at, at + len(data)))
                at += len(data)
        finally:
            inner[0] = None
        self.at = at
        return True
