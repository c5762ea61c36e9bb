"""Resent history stored once: a request as what it adds to an earlier one of its file.

Agents resend their whole history every turn, and one session interleaves
threads: the main agent, its sub-agents, a small model's side calls. Logging
every request body whole grows with the square of a session's length; a delta
on the request just before is no better once threads interleave. So the writer
stores the list of a request (`messages` for Chat and Anthropic Messages,
`input` for Responses) as what it adds to the earlier request of the same API
*in the same file* that it shares the longest beginning with, and each large
value the file already holds (a system prompt, the tool list, a long tool
result met again) as a pointer to where it first stood, `null` in its place:

    "body": {"system": null, "messages": [items from position K on], "model": …},
    "transcript": {"base": S, "keep": K, "length": N,
                   "fields": {"system": S1}, "items": [[i, S2, j]]}

The whole list (N items) is request S's first K items followed by the ones in
`body` (K is 0 and `base` absent when no earlier request shares a beginning);
item i of those is item j of request S2's whole list; a body field named in
`fields` is the same field of request S1. Requests are named by their `seq`.
Moving a cache marker to the newest message, a sub-agent's turn between two of
the main agent's, a system prompt resent with every call: each costs only what
is new. Items and values are compared by their compact JSON, so the bytes come
back exactly; only bodies the log rebuilds from `body` alone (no `body_raw`)
are stored this way. A file never depends on another: a reopened file starts
afresh (the writer's memory of it is gone), and a fork copies the lines it
builds on with their `seq`.

A version-3 line has no `base`, `fields` or `items`: its K counts from the
previous request of the same API in the file, which `Rebuilder` still reads.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from taplog.recorder.events import LLM_REQUEST, Event
from taplog.recorder.layouts import LIST_FIELDS, Layout, layout_of

PIECE_MIN_BYTES = 512  # a smaller value met again is cheaper written out than pointed at
MAX_HEADS = 128  # earlier requests a new one may build on, per API: the latest of each thread


class TranscriptError(ValueError):
    """A stored transcript delta that does not fit the requests before it."""


def _list_field(event: Event) -> str | None:
    """The field holding the event's transcript, when it can be stored as a delta."""
    if event["type"] != LLM_REQUEST or "body_raw" in event or "transcript" in event:
        return None
    name = LIST_FIELDS.get(event.get("api") or "")
    body = event.get("body")
    if name is None or not isinstance(body, dict) or not isinstance(body.get(name), list):
        return None
    return name


@dataclass(slots=True)
class _Head:
    """A written request later ones may build on: `chain[i]` stands for its first i+1 items."""

    seq: int
    chain: list[bytes]


def _shared_beginning(a: list[bytes], b: list[bytes]) -> int:
    """How many first items two lists share, from their chains (a binary search)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[middle - 1] == b[middle - 1]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass
class Batch:
    """What one batch of lines adds to a `Ledger`: kept apart until the batch is written."""

    heads: dict[str, OrderedDict[int, _Head]] = field(default_factory=dict)
    items: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    fields: dict[tuple[str, bytes], int] = field(default_factory=dict)


class Ledger:
    """The writer's side, one per open log file: what it holds that later requests may
    point at. Each API keeps the latest request of each thread (at most `MAX_HEADS`, the
    least recently built on forgotten first)."""

    def __init__(self) -> None:
        self.heads: dict[str, OrderedDict[int, _Head]] = {}
        self.items: dict[bytes, tuple[int, int]] = {}  # item digest -> (seq, position)
        self.fields: dict[tuple[str, bytes], int] = {}  # (field, value digest) -> seq

    def stored_form(self, event: Event, seq: int, batch: Batch) -> Event:
        """`event`, line `seq` of the file, as its line stores it: a copy holding what is
        new, or the event itself. `commit` the batch once its lines are written."""
        name = _list_field(event)
        if name is None:
            return event
        layout = layout_of(event, name)
        if layout is None:  # not serialisable as is: stored whole, for `seal` to sanitise
            return event
        body, api, chain = event["body"], event["api"], layout.chain()
        heads = batch.heads.get(api)
        if heads is None:
            heads = batch.heads[api] = OrderedDict(self.heads.get(api, {}))
        base, keep = None, 0
        for head in reversed(heads.values()):  # the most recent first, among equals
            other = head.chain
            if len(other) <= keep or len(chain) <= keep or other[keep] != chain[keep]:
                continue  # it shares no more than the best so far (most heads: nothing)
            base, keep = head, _shared_beginning(other, chain)
        if base is not None:
            del heads[base.seq]  # this request is now its thread's latest
        heads[seq] = _Head(seq, chain)
        while len(heads) > MAX_HEADS:
            heads.popitem(last=False)
        marker: dict[str, Any] = {"keep": keep, "length": len(chain)}
        if base is not None:
            marker = {"base": base.seq, **marker}
        stored_body = {}
        for key, value in body.items():
            if key == name:
                stored_body[key] = self._new_items(layout, keep, seq, batch)
                continue
            stored_body[key] = value
            if layout.value_size(key) >= PIECE_MIN_BYTES:
                piece = (key, layout.value_digest(key))
                first = batch.fields.get(piece) or self.fields.get(piece)
                if first is None:
                    batch.fields[piece] = seq
                else:
                    stored_body[key] = None
                    marker.setdefault("fields", {})[key] = first
        items, pointers = stored_body[name]
        stored_body[name] = items
        if pointers:
            marker["items"] = pointers
        return {**event, "body": stored_body, "transcript": marker}

    def _new_items(
        self, layout: Layout, keep: int, seq: int, batch: Batch
    ) -> tuple[list[Any], list[list[int]]]:
        """The items after the first `keep`, large ones an earlier line holds as pointers."""
        stored, pointers, met = [], [], {}
        items = layout.body[layout.name]
        for position in range(keep, len(items)):
            if layout.item_size(position) < PIECE_MIN_BYTES:
                stored.append(items[position])
                continue
            digest = layout.item_digest(position)
            first = batch.items.get(digest) or self.items.get(digest)
            if first is None:
                met.setdefault(digest, (seq, position))
                stored.append(items[position])
            else:
                pointers.append([position - keep, *first])
                stored.append(None)
        batch.items.update(met)  # later requests may point at these, not this one itself
        return stored, pointers

    def commit(self, batch: Batch) -> None:
        self.heads.update(batch.heads)
        self.items.update(batch.items)
        self.fields.update(batch.fields)


class Rebuilder:
    """The reader's side, one per file read in order: puts whole bodies back."""

    def __init__(self) -> None:
        self.bodies: dict[int, tuple[dict[str, Any], str]] = {}  # seq -> (whole body, list field)
        self.last: dict[str, int] = {}  # api -> seq of its latest request (version-3 lines)

    def rebuild(self, event: Event) -> None:
        marker = event.get("transcript")
        if marker is None or event.get("type") != LLM_REQUEST:
            return
        api = event.get("api") or ""
        name, body = LIST_FIELDS.get(api), event.get("body")
        if name is None or not isinstance(body, dict) or not isinstance(body.get(name), list):
            raise TranscriptError("a transcript marker on a request without a transcript")
        keep, length = marker.get("keep"), marker.get("length")
        base = marker.get("base", self.last.get(api) if keep else None)
        before = self._list(base, "base") if base is not None else []
        if not isinstance(keep, int) or not 0 <= keep <= len(before):
            raise TranscriptError(
                f"transcript keeps {keep!r} items of request {base} which has {len(before)}"
            )
        items = list(body[name])
        for position, seq, at in marker.get("items", ()):
            source = self._list(seq, "item")
            if not (0 <= position < len(items) and 0 <= at < len(source)):
                raise TranscriptError(f"transcript points at item {at} of request {seq}: none")
            items[position] = source[at]
        for key, seq in marker.get("fields", {}).items():
            source_body, _ = self._body(seq, "field")
            if key not in source_body or key not in body:
                raise TranscriptError(f"transcript points at field {key!r} of request {seq}: none")
            body[key] = source_body[key]
        whole = before[:keep] + items
        if len(whole) != length:
            raise TranscriptError(f"transcript has {len(whole)} items, its marker says {length}")
        self.bodies[event["seq"]] = ({**body, name: whole}, name)  # as recorded, for later
        self.last[api] = event["seq"]
        body[name] = list(whole)  # the caller's to change

    def _body(self, seq: Any, what: str) -> tuple[dict[str, Any], str]:
        found = self.bodies.get(seq) if isinstance(seq, int) else None
        if found is None:
            raise TranscriptError(f"transcript's {what} names request {seq!r}, not before it")
        return found

    def _list(self, seq: Any, what: str) -> list[Any]:
        body, name = self._body(seq, what)
        return body[name]
