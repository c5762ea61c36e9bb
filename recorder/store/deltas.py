"""Resent history stored once: a request's transcript as a delta on the one before.

Agents resend their whole history every turn, so logging every request body
whole grows with the square of a session's length. So the writer stores the
list of a request (`messages` for Chat and Anthropic Messages, `input` for
Responses) as what it adds to the list of the previous request of the same
API *in the same file*, with a marker beside the body:

    "body": {"messages": [the items from position K on], "model": …, …},
    "transcript": {"keep": K, "length": N}

The whole list (N items) is the previous one's first K items followed by the
ones in the body. K is the longest common prefix, so an agent that edits its
latest turns (moves a cache marker, say) costs only what changed; it never
falls below the previous request's own K (else K is 0 and the list is stored
whole), which keeps the SQL views' rebuild a plain window (`recorder.query.connect`).
K is 0 for the first request in a file and after the writer reopens it, so a
file never depends on what another process remembered. Only bodies that the
log rebuilds from `body` alone (no `body_raw`) are stored this way; their
bytes come back exactly because items are compared by their compact JSON.

Readers put the whole list back (`Rebuilder`), checking K and N.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import orjson

from taplog.recorder.events import LLM_REQUEST, Event
from taplog.recorder.vendors.apis import API_MODULES, conversation

# API -> the request field that holds its transcript (`recorder.vendors.apis.conversation`)
LIST_FIELDS = {api: module.TURNS for api in API_MODULES if (module := conversation(api))}


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


@dataclass
class _Written:
    digests: list[bytes] = field(default_factory=list)  # of the whole list's items
    keep: int = 0


class Ledger:
    """The writer's side, one per open log file: the last list written for each API."""

    def __init__(self) -> None:
        self.last: dict[str, _Written] = {}

    def stored_form(self, event: Event, learnt: dict[str, _Written]) -> Event:
        """`event` as its line stores it: a copy holding the delta, or the event itself.

        `learnt` collects what this batch adds; `commit` it once the batch is written.
        """
        name = _list_field(event)
        if name is None:
            return event
        items = event["body"][name]
        try:
            digests = [hashlib.blake2b(orjson.dumps(i), digest_size=16).digest() for i in items]
        except TypeError:  # not serialisable as is: stored whole, for `seal` to sanitise
            return event
        before = learnt.get(event["api"]) or self.last.get(event["api"]) or _Written()
        keep = 0
        for old, new in zip(before.digests, digests, strict=False):
            if old != new:
                break
            keep += 1
        if keep < before.keep:  # an edit further back than the last turn: start afresh
            keep = 0
        learnt[event["api"]] = _Written(digests, keep)
        return {
            **event,
            "body": {**event["body"], name: items[keep:]},
            "transcript": {"keep": keep, "length": len(items)},
        }

    def commit(self, learnt: dict[str, _Written]) -> None:
        self.last.update(learnt)


class Rebuilder:
    """The reader's side, one per file read in order: puts whole lists back."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[list[Any], int]] = {}  # api -> (whole list, its keep)

    def rebuild(self, event: Event) -> None:
        marker = event.get("transcript")
        if marker is None or event.get("type") != LLM_REQUEST:
            return
        api = event.get("api") or ""
        name, body = LIST_FIELDS.get(api), event.get("body")
        if name is None or not isinstance(body, dict) or not isinstance(body.get(name), list):
            raise TranscriptError("a transcript marker on a request without a transcript")
        keep, length = marker.get("keep"), marker.get("length")
        before, before_keep = self.last.get(api, ([], 0))
        if not isinstance(keep, int) or not (keep == 0 or before_keep <= keep <= len(before)):
            raise TranscriptError(
                f"transcript keeps {keep!r} items of a previous list of {len(before)} "
                f"(which kept {before_keep})"
            )
        whole = before[:keep] + body[name]
        if len(whole) != length:
            raise TranscriptError(f"transcript has {len(whole)} items, its marker says {length}")
        self.last[api] = (whole, keep)
        body[name] = list(whole)  # the caller's to change
