"""Server-sent events: lossless byte splitting, block parsing, and the shared result types.

Contracts:

* `SseSplitter` turns arbitrary byte chunks into raw event blocks. It is lossless
  (``b"".join(blocks) + flush()`` is exactly the bytes fed), chunk boundaries never change
  the blocks it returns, and it runs in linear time: each byte is scanned once, except a
  trailing ``\\r`` that is re-read when the next chunk shows whether ``\\n`` follows it.
* Sizes are bounded: a block (finished or pending) larger than ``max_event_bytes`` raises
  `SseTooLarge`; the splitter is then unusable and the caller should stop recording.
* `parse_block` applies the WHATWG field rules to one block and never raises.
* `Reassembled` and `Summary` are the neutral results of the per-API modules
  (the `wire` module of `openai_chat`, `openai_responses`, `anthropic`), which all expose
  ``reassemble(events) -> Reassembled``, ``summarize(body) -> Summary``, and a
  ``Progress`` that judges a stream event by event (`recorder.vendors.watch`).
* Reassembly is linear however many deltas an answer has: strings grow through `Pieces`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "MalformedEvent",
    "Pieces",
    "Reassembled",
    "SseEvent",
    "SseSplitter",
    "SseTooLarge",
    "Summary",
    "Text",
    "as_int",
    "as_list",
    "as_str",
    "dig",
    "event_bytes",
    "extend",
    "load_object",
    "parse_block",
    "summary",
    "typed_event",
    "typed_payloads",
]

_LINE_END = re.compile(rb"\r\n|\r|\n")
_LINE_SPLIT = re.compile(r"\r\n|\r|\n")


class SseTooLarge(Exception):
    """An event block exceeded ``max_event_bytes``; the stream cannot be recorded safely."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"SSE event block of at least {size} bytes exceeds limit {limit}")
        self.size = size
        self.limit = limit


class MalformedEvent(ValueError):
    """A stream event whose data is not what its API sends (not a JSON object)."""

    def __init__(self, data: bytes) -> None:
        shown = data[:200].decode(errors="replace")
        super().__init__(f"the vendor sent a malformed event: {shown!r}")


class SseSplitter:
    """Bytes in, complete raw event blocks out.

    Lossless: ``b"".join(all blocks returned by feed()) + flush()`` equals all bytes fed.
    Each block includes its terminating blank line (``\\n\\n``, ``\\r\\n\\r\\n``, ``\\r\\r``
    or any mix of the three line ends).
    """

    def __init__(self, max_event_bytes: int | None = 16 * 1024 * 1024) -> None:
        # None: no limit, for reading back what was already received and recorded
        self._max = max_event_bytes if max_event_bytes is not None else float("inf")
        self._buf = bytearray()
        self._scan = 0  # where the next line-end search starts
        self._line_start = 0  # start of the current (unterminated) line

    def feed(self, chunk: bytes) -> list[bytes]:
        """Add a chunk; return every block it completed, in order."""
        buf = self._buf
        buf += chunk
        if self._scan == len(buf) - len(chunk) and b"\r" not in chunk:
            return self._feed_lf(buf)
        blocks: list[bytes] = []
        start = 0
        end = len(buf)
        for m in _LINE_END.finditer(buf, self._scan):
            s, e = m.span()
            if e == end and buf[s] == 0x0D and e - s == 1:
                # A lone trailing CR may be the first half of CRLF: decide next time.
                self._scan = s
                break
            if s == self._line_start:  # empty line: the block ends here
                if e - start > self._max:
                    raise SseTooLarge(e - start, self._max)
                blocks.append(bytes(buf[start:e]))
                start = e
            self._line_start = e
        else:
            self._scan = end
        if start:
            del buf[:start]
            self._scan -= start
            self._line_start -= start
        if len(buf) > self._max:
            raise SseTooLarge(len(buf), self._max)
        return blocks

    def _feed_lf(self, buf: bytearray) -> list[bytes]:
        """`feed` when what is left to scan has no CR (as vendors send): every line ends
        with LF, so a block ends at each LF that follows an LF (or opens a line), found
        per block rather than per line."""
        scan, end = self._scan, len(buf)
        ends = [scan + 1] if scan == self._line_start and buf[scan : scan + 1] == b"\n" else []
        at = scan
        while (lf := buf.find(b"\n\n", at)) >= 0:
            ends.append(lf + 2)
            at = lf + 1
        blocks: list[bytes] = []
        start = 0
        for block_end in ends:
            if block_end - start > self._max:
                raise SseTooLarge(block_end - start, self._max)
            blocks.append(bytes(buf[start:block_end]))
            start = block_end
        last_lf = buf.rfind(b"\n", scan)
        if last_lf >= 0:
            self._line_start = last_lf + 1
        if start:
            del buf[:start]
            self._line_start -= start
        self._scan = end - start
        if end - start > self._max:
            raise SseTooLarge(end - start, self._max)
        return blocks

    def flush(self) -> bytes:
        """Return (and forget) bytes not yet terminated by a blank line, b"" if none.

        They may hold a whole block whose final ``\\r`` was waiting for a possible ``\\n``.
        """
        rest = bytes(self._buf)
        self._buf.clear()
        self._scan = self._line_start = 0
        return rest


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One parsed event; ``data`` lines are joined with ``\\n`` as the SSE spec says."""

    event: str | None
    data: str
    id: str | None = None


def parse_block(raw: bytes) -> SseEvent | None:
    """Parse one raw block; None when it carries no event, data or id field (comments only).

    Unlike a browser, an event with no ``data`` line is still returned: a recorder keeps it.
    """
    if raw.endswith(b"\n\n") and b"\r" not in raw:  # how vendors write: read from the bytes
        lines = raw.count(b"\n")
        if lines == 2 and raw.startswith(b"data: "):
            return SseEvent(event=None, data=raw[6:-2].decode(errors="replace"))
        if lines == 3 and raw.startswith(b"event: "):
            end = raw.index(b"\n")
            if raw.startswith(b"data: ", end + 1):
                name, data = raw[7:end].decode(errors="replace"), raw[end + 7 : -2]
                return SseEvent(event=name, data=data.decode(errors="replace"))
    text = raw.decode("utf-8", errors="replace").removeprefix("\ufeff")
    event: str | None = None
    event_id: str | None = None
    data: list[str] = []
    for line in _LINE_SPLIT.split(text):
        if not line or line[0] == ":":
            continue
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            event_id = value
    if event is None and event_id is None and not data:
        return None
    return SseEvent(event=event, data="\n".join(data), id=event_id)


@dataclass(slots=True)
class Reassembled:
    """A stream folded back into the body the API returns without streaming."""

    body: dict | None  # the non-streaming response shape; None if nothing usable arrived
    complete: bool  # the API's terminal marker arrived
    error: dict | None  # in-band error object, if one arrived
    unparsed: int = 0  # events whose data was not a JSON object (skipped)


@dataclass(slots=True)
class Summary:
    """Vendor-neutral facts about one response; token counts use OpenTelemetry meanings."""

    response_id: str | None
    model: str | None
    finish_reason: str | None
    input_tokens: int | None  # all input tokens, cached ones included
    output_tokens: int | None
    cached_tokens: int | None  # cache reads
    cache_write_tokens: int | None
    reasoning_tokens: int | None


def summary(body: Any, finish_reason: str | None, usage: Mapping[str, tuple[str, ...]]) -> Summary:
    """An answer's facts: its id, model and `finish_reason`, and each token count where
    `usage` (Summary field -> path in the body's `usage`) says; odd or missing ones: None."""
    counts = dig(body, "usage")
    return Summary(
        response_id=as_str(dig(body, "id")),
        model=as_str(dig(body, "model")),
        finish_reason=finish_reason,
        **{name: as_int(dig(counts, *path)) for name, path in usage.items()},
    )


class Pieces:
    """Strings that streams build from many deltas: appended in pieces, joined once.

    `s = s + delta` on every delta copies the whole string each time, which is
    quadratic in the answer: minutes for a long one, while the client waits for
    its end. `append` keeps the pieces; `join` writes each string into its dict.
    A field set another way meanwhile must be `drop`ped, or `join` overwrites it.
    """

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: dict[tuple[int, str], tuple[dict, str, list[str]]] = {}

    def append(self, target: dict, name: str, piece: str) -> None:
        key = (id(target), name)
        entry = self._parts.get(key)
        if entry is None:
            earlier = target.get(name)
            entry = self._parts[key] = (target, name, [earlier] if isinstance(earlier, str) else [])
        entry[2].append(piece)

    def drop(self, target: dict, name: str) -> None:
        self._parts.pop((id(target), name), None)

    def join(self, longer_than: int | None = None) -> None:
        """Write each string into its dict; one over `longer_than` characters is left in
        its pieces (`Text`), for a writer that needs it only once and never whole."""
        for target, name, parts in self._parts.values():
            if longer_than is not None and sum(map(len, parts)) > longer_than:
                target[name] = Text(parts)
            else:
                target[name] = "".join(parts)
        self._parts.clear()


@dataclass(frozen=True, slots=True)
class Text:
    """A long string of a large stream's answer, kept in the pieces it came in: the blob
    writer writes them one by one (`recorder.store.blobs.write_json`), nothing joins them."""

    parts: list[str]

    def __len__(self) -> int:
        return sum(map(len, self.parts))


def extend(target: dict, name: str, items: list) -> None:
    """Add `items` to the list `target[name]` in place (a list of its own, never the event's)."""
    current = target.get(name)
    if isinstance(current, list):
        current.extend(items)
    else:
        target[name] = list(items)


def load_object(data: str | bytes) -> dict | None:
    """Decode an event's data as a JSON object; None if it is not one."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def event_bytes(name: str | None, data: Any) -> bytes:
    """One event as the vendors write it: its `event:` line (if named), one `data:` line of
    compact JSON, the blank line."""
    head = b"event: " + name.encode() + b"\n" if name is not None else b""
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


def typed_event(name: str, data: dict) -> bytes:
    """A named event whose data says its type too (Anthropic's and Responses' events)."""
    return event_bytes(name, {"type": name, **data})


def typed_payloads(events: Iterable[SseEvent], result: Reassembled) -> Iterator[tuple[Any, dict]]:
    """Each event's JSON object with its type (its `type` field, else the SSE event name).

    Events whose data is not a JSON object are counted in `result.unparsed` and skipped.
    """
    for event in events:
        data = load_object(event.data)
        if data is None:
            result.unparsed += 1
            continue
        yield (data.get("type") if isinstance(data.get("type"), str) else event.event), data


def as_list(value: Any) -> list:
    """`value` if it is a list, else an empty one: odd bodies never raise."""
    return value if isinstance(value, list) else []


def dig(obj: Any, *path: str | int) -> Any:
    """Follow dict keys / list indexes, returning None at the first missing or mistyped step.

    Bodies come from orjson (plain dicts and lists), so exact type checks do; this
    runs several times per recorded answer.
    """
    for key in path:
        if type(key) is int:
            if type(obj) is not list:
                return None
            try:
                obj = obj[key]
            except IndexError:
                return None
        elif type(obj) is dict:
            obj = obj.get(key)
        else:
            return None
    return obj


def as_int(value: Any) -> int | None:
    """Token counts: an int (not a bool) or None."""
    return value if type(value) is int else None


def as_str(value: Any) -> str | None:
    """A string field or None."""
    return value if isinstance(value, str) else None
