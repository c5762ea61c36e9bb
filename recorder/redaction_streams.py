"""Redaction of a streamed answer's raw events, where a finding may be split across them.

An answer streams its text in pieces: an email may arrive as "jo", "hn@exa", "mple.com",
each harmless alone, and so may a key the vendor echoes. So the pieces of each text the
stream builds (a message's content, a tool call's arguments; which fields those are is the
API's to say: its wire module's `text_deltas`) are joined and searched as the whole text;
a finding is then cut out of every event that carries a part of it: the event holding its
start gets the marker in place of its part, the others lose theirs. Each rewritten event
is valid JSON again, and reassembling the rewritten events gives the redacted text.

Other strings (the whole text in a `done` event, a tool call's name, an error) are redacted
event by event, and an event whose data is not JSON as text. Events with nothing to
redact keep their exact bytes.

Two passes over the blocks: `scan` finds what to rewrite, `apply` rewrites one block; a
stream on disk (a spool) is read twice rather than held in memory.

What is found is a `Finder`'s to say: the redaction rules in force (`recorder.redaction`),
the secrets of the call (`recorder.secrets_by_value.SecretFinder`), or both (`Finders`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import orjson

from taplog.recorder.vendors.sse import load_object, parse_block

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
Edit = tuple[int, int, str]  # (start, end, replacement) within one piece


class Marked(Protocol):
    """What found something: its marker takes the finding's place."""

    @property
    def marker(self) -> str: ...


class Finder(Protocol):
    """What a stream is searched for: in a text (`spans`, apart and in order), in an
    event's bytes at a first look (`may_find`), and replaced in a JSON value or a text
    (the same object when nothing is found)."""

    def spans(self, text: str) -> Sequence[tuple[int, int, Marked]]: ...

    def may_find(self, raw: bytes) -> bool: ...

    def value(self, value: Any) -> Any: ...

    def text(self, text: str) -> str: ...


class Finders:
    """Several finders as one: spans that overlap are joined (the first one's marker),
    values and texts go through each in turn."""

    def __init__(self, *finders: Finder) -> None:
        self.finders = finders

    def spans(self, text: str) -> list[tuple[int, int, Marked]]:
        found = sorted(
            (span for finder in self.finders for span in finder.spans(text)),
            key=lambda span: (span[0], -span[1]),
        )
        joined: list[tuple[int, int, Marked]] = []
        for start, end, marked in found:
            if joined and start < joined[-1][1]:
                first, last, kept = joined[-1]
                joined[-1] = (first, max(last, end), kept)
            else:
                joined.append((start, end, marked))
        return joined

    def may_find(self, raw: bytes) -> bool:
        return any(finder.may_find(raw) for finder in self.finders)

    def value(self, value: Any) -> Any:
        for finder in self.finders:
            value = finder.value(value)
        return value

    def text(self, text: str) -> str:
        for finder in self.finders:
            text = finder.text(text)
        return text


class StreamRedaction:
    """What to rewrite in a stream's event blocks, found by `scan`, done by `apply`."""

    def __init__(self, finder: Finder, module: Any) -> None:
        self.finder = finder
        self.module = module
        self.dirty: set[int] = set()  # blocks to rewrite
        self.edits: dict[tuple[int, int], list[Edit]] = {}  # (block, piece) -> its edits

    def scan(self, blocks: Iterable[bytes]) -> None:
        """Read every block once: the texts built from pieces, and the blocks to rewrite."""
        texts: dict[str, list[tuple[int, int, str]]] = {}  # text -> (block, piece, piece text)
        for index, raw in enumerate(blocks):
            data = _data(raw)
            if data is None:
                if self.finder.may_find(raw) and self._redacted_text(raw) is not None:
                    self.dirty.add(index)
                continue
            for number, (channel, holder, name) in enumerate(self._deltas(data)):
                texts.setdefault(repr(channel), []).append((index, number, holder[name]))
            if self.finder.may_find(raw) and self.finder.value(data) is not data:
                self.dirty.add(index)
        for pieces in texts.values():
            self._cut(pieces)

    def apply(self, index: int, raw: bytes) -> bytes:
        """Block `index` as the log keeps it: rewritten if anything in it is redacted."""
        if index not in self.dirty:
            return raw
        data = _data(raw)
        if data is None:
            return self._redacted_text(raw) or raw
        for number, (_, holder, name) in enumerate(self._deltas(data)):
            edits = self.edits.get((index, number))
            if edits:
                holder[name] = _edited(holder[name], edits)
        return _rebuilt(raw, self.finder.value(data), self.finder)

    def _deltas(self, data: dict) -> list[tuple[Any, dict, str]]:
        deltas = getattr(self.module, "text_deltas", None)
        if deltas is None:
            return []
        return [d for d in deltas(data) if isinstance(d[1].get(d[2]), str)]

    def _cut(self, pieces: list[tuple[int, int, str]]) -> None:
        """Find in the joined text, and cut each finding out of the pieces it spans."""
        whole = "".join(text for _, _, text in pieces)
        spans = self.finder.spans(whole)
        if not spans:
            return
        starts, at = [], 0
        for _, _, text in pieces:
            starts.append(at)
            at += len(text)
        for start, end, found in spans:
            marked = False
            for (index, number, text), offset in zip(pieces, starts, strict=True):
                low, high = max(start, offset), min(end, offset + len(text))
                if low >= high:
                    continue
                replacement = "" if marked else found.marker
                marked = True
                edit = (low - offset, high - offset, replacement)
                self.edits.setdefault((index, number), []).append(edit)
                self.dirty.add(index)

    def _redacted_text(self, raw: bytes) -> bytes | None:
        """A block that is not JSON, redacted as text; None when nothing was found."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
        redacted = self.finder.text(text)
        return None if redacted is text else redacted.encode()


def _data(raw: bytes) -> dict | None:
    event = parse_block(raw)
    if event is None or not event.data.startswith("{"):
        return None
    return load_object(event.data)


def _edited(text: str, edits: list[Edit]) -> str:
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _rebuilt(raw: bytes, data: dict, finder: Finder) -> bytes:
    """The block with its data as one line of compact JSON, its other lines (event name,
    id, comments) redacted as text, its line ends kept."""
    out: list[str] = []
    wrote = False
    for line in _LINES.findall(raw.decode("utf-8", "replace")):
        content = line.rstrip("\r\n")
        if content == "data" or content.startswith("data:"):
            if not wrote:
                end = line[len(content) :] or "\n"
                out.append("data: " + orjson.dumps(data).decode() + end)
                wrote = True
            continue
        out.append(finder.text(line))
    return "".join(out).encode()
