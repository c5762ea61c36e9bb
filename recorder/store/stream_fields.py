"""A streamed answer's fields in its `llm.response`: every raw event with its arrival time
(`sse`), and the answer reassembled into the API's non-stream shape (`body`).

A stream that fits the inline limit is built in memory and goes into its line
(or, if the line outgrows the limit, into a blob when the line is written). A
larger one is never built whole in memory: its chunks go to a spool on disk
and are let go of, then its blob is written from the spool event by event,
the reassembled text in the pieces it came in (`recorder.store.blobs.write_json`),
so a stream of many megabytes costs about its own size in memory, once.
Should the blob fail to be written (a full disk), the stream is built in
memory from the spool after all, and the line's own retries take over: a
large answer is never lost to save memory.

Secrets are scrubbed event by event (`recorder.secrets_by_value`). A key the vendor echoes
in pieces, each in an event of its own, is whole only in the reassembled answer (or in the
one event some APIs send at the end with the whole text). So when a secret came back, in
an event or in the reassembled answer, the events that carry its pieces are rewritten
(`recorder.redaction_streams` with `SecretFinder`), as redaction rewrites a finding split
across events. Finding out costs nothing more: both are scrubbed anyway. A large stream's
answer is searched in slices, its long texts never joined (and by value only); in the rare
large stream where a secret came back, the blob is written again from the spool.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from taplog.recorder.redaction import Redaction
from taplog.recorder.redaction_streams import Finder, Finders, StreamRedaction
from taplog.recorder.secrets_by_value import SecretFinder, Secrets, known, scrub
from taplog.recorder.store.blobs import SLICE, BlobStore, write_json
from taplog.recorder.store.memory import give_back_memory
from taplog.recorder.vendors.sse import Reassembled, SseEvent, SseSplitter, Text, parse_block
from taplog.recorder.vendors.watch import whole_event

log = logging.getLogger("taplog.recorder")

Chunk = tuple[float, bytes]  # (milliseconds since the call started, bytes)


def stream_fields(
    chunks: list[Chunk],
    secrets: Secrets,
    module: Any,
    blobs: BlobStore | None,
    redaction: Redaction | None = None,
) -> tuple[dict[str, Any], dict | None]:
    """The event's fields for a streamed answer, and its reassembled body (for the summary
    and the tool events). A large stream empties `chunks` as it goes."""
    if blobs is not None and sum(len(chunk) for _, chunk in chunks) > blobs.inline_max:
        try:
            spool = blobs.spool(chunks)
        except OSError as exc:
            log.warning("recorder: cannot spool a large stream (%s); it is built in memory", exc)
        else:
            chunks.clear()  # on disk now: the memory can go, back to the OS (it was
            give_back_memory()  # taken on the event loop's thread, not reusable here)
            try:
                return _into_blob(spool.chunks, secrets, module, blobs, redaction)
            except OSError as exc:
                log.warning("recorder: cannot write a large stream's blob (%s); retrying", exc)
                chunks.extend(spool.chunks())
            finally:
                spool.remove()
    return _in_memory(chunks, secrets, module, redaction)


def stream_body(module: Any, data: bytes) -> dict | None:
    """A whole stream's body, reassembled into the API's non-stream shape."""
    return module.reassemble(_parsed(raw for _, raw in _blocks([(0.0, data)]))).body


def _in_memory(
    chunks: list[Chunk], secrets: Secrets, module: Any, redaction: Redaction | None
) -> tuple[dict[str, Any], dict | None]:
    whole = b"".join(chunk for _, chunk in chunks)
    # One look at the whole stream: mostly nothing to scrub, so no event is looked at again.
    found = scrub(whole, secrets) is not whole
    timed = [(at, scrub(raw, secrets) if found else raw) for at, raw in _blocks(chunks)]
    result = module.reassemble(_parsed(raw for _, raw in timed)) if module is not None else None
    body = _scrubbed(result.body, secrets) if result is not None else None
    # A secret came back: its pieces may be in other events too (beside the whole text
    # an API sends at the end), or it is whole only in the answer the events build.
    echoed = found or (result is not None and body is not result.body)
    finder = _finder(secrets if echoed else None, redaction, whole, result)
    if finder is not None:
        plan = StreamRedaction(finder, module)
        plan.scan(raw for _, raw in timed)
        timed = [(at, plan.apply(index, raw)) for index, (at, raw) in enumerate(timed)]
        if module is not None:
            result = module.reassemble(_parsed(raw for _, raw in timed))
            body = _scrubbed(result.body, secrets)
    fields: dict[str, Any] = {"sse": [_sse_entry(at, raw) for at, raw in timed]}
    if result is None:
        return fields, None
    if redaction and body is not None:
        body = redaction.value(body)
    fields.update(body=body, stream_complete=result.complete)
    return {**fields, **_flaws(result)}, body


def _finder(
    secrets: Secrets | None,
    redaction: Redaction | None,
    whole: bytes | None,
    result: Reassembled | None,
) -> Finder | None:
    """What the events must be searched for across their bounds: the call's secrets when
    one was sent in pieces (`secrets`), what redaction may find (`whole`: the raw stream,
    None when not known: then it is searched)."""
    found: list[Finder] = [] if secrets is None else [SecretFinder(secrets)]
    if redaction and (whole is None or _may_find(redaction, whole, result)):
        found.append(redaction)
    return None if not found else found[0] if len(found) == 1 else Finders(*found)


def _may_find(redaction: Redaction, whole: bytes, result: Reassembled | None) -> bool:
    """Whether a stream may hold something to redact: in an event of its own (its bytes),
    or split across events (then whole only in the reassembled answer's text)."""
    if redaction.may_find(whole):
        return True
    body = result.body if result is not None else None
    return body is not None and redaction.value(body) is not body


def _scrubbed(body: dict | None, secrets: Secrets) -> dict | None:
    """The reassembled answer, scrubbed whole: a key the vendor streamed back in pieces
    is whole only here (each piece alone has no shape to find)."""
    if body is None:
        return None
    raw = orjson.dumps(body)
    clean = scrub(raw, secrets)
    return body if clean is raw else orjson.loads(clean)


def _holds(body: dict | None, secrets: Secrets) -> bool:
    """Whether a large stream's answer holds a secret: its long texts (`Text`) are searched
    by value only, in slices that overlap by more than a key, never joined (the shapes'
    literals would cost as much again as the stream's own scrub); the rest by shape too."""
    texts: list[Text] = []

    def set_aside(value: Any) -> str:
        if not isinstance(value, Text):
            raise TypeError(f"not JSON: {type(value).__name__}")
        texts.append(value)
        return ""

    raw = orjson.dumps(body, default=set_aside, option=orjson.OPT_PASSTHROUGH_DATACLASS)
    if scrub(raw, secrets) is not raw:
        return True
    found = known(secrets)
    overlap = max(map(len, found.plain), default=0) * 2 + 64
    return bool(found) and any(
        found.appears(window.encode("utf-8", "surrogatepass"))
        for text in texts
        for window in _slices(text.parts, overlap)
    )


def _slices(parts: list[str], overlap: int) -> Iterator[str]:
    """`parts` joined in slices of about `SLICE` characters, each opening with the last
    `overlap` characters of the one before."""
    buffer: list[str] = []
    size, carry = 0, ""
    for part in parts:
        buffer.append(part)
        size += len(part)
        if size >= SLICE:
            window = carry + "".join(buffer)
            yield window
            buffer, size, carry = [], 0, window[-overlap:]
    yield carry + "".join(buffer)


class _Echoed(Exception):
    """A secret came back in a large stream: its pieces may be in other events."""


def _into_blob(
    chunks: Callable[[], Iterable[Chunk]],
    secrets: Secrets,
    module: Any,
    blobs: BlobStore,
    redaction: Redaction | None,
) -> tuple[dict[str, Any], dict | None]:
    """Write `{"sse": [...], "body": ...}` to a blob while reading the stream once (twice
    with redaction: first to find what to redact); a stream that sent a secret back is
    written again, its events searched first for the secret's pieces."""
    try:
        return _write_blob(chunks, secrets, module, blobs, _finder(None, redaction, None, None))
    except _Echoed:
        finder = _finder(secrets, redaction, None, None)
        return _write_blob(chunks, secrets, module, blobs, finder, echoed=True)


def _write_blob(
    chunks: Callable[[], Iterable[Chunk]],
    secrets: Secrets,
    module: Any,
    blobs: BlobStore,
    finder: Finder | None,
    echoed: bool = False,
) -> tuple[dict[str, Any], dict | None]:
    """One try at the blob. `echoed`: a secret came back, `finder` looks for its pieces,
    and the answer is reassembled whole (its texts joined: a rare stream) and scrubbed."""
    writer = blobs.writer()
    plan = StreamRedaction(finder, module) if finder is not None else None
    if plan is not None:
        plan.scan(scrub(block, secrets) for _, block in _blocks(chunks()))
    scrubbed = False  # whether an event held a secret

    def events() -> Iterator[SseEvent]:
        nonlocal scrubbed
        separator = b""
        for index, (at, block) in enumerate(_blocks(chunks())):
            raw = scrub(block, secrets)
            scrubbed = scrubbed or raw is not block
            if plan is not None:
                raw = plan.apply(index, raw)
            writer.write(separator)
            write_json(_sse_entry(at, raw), writer.write)  # a long event in slices
            separator = b","
            yield from _parsed((raw,))

    try:
        writer.write(b'{"sse":[')
        if module is None:
            for _ in events():
                pass
            writer.write(b"]}")
            return {"blob": writer.finish(["sse"])}, None
        result = module.reassemble(events(), longer_than=None if echoed else SLICE)
        body = _scrubbed(result.body, secrets) if echoed else result.body
        if not echoed and (scrubbed or _holds(body, secrets)):
            raise _Echoed
        writer.write(b'],"body":')
        write_json(body, writer.write)
        writer.write(b"}")
        fields: dict[str, Any] = {"blob": writer.finish(["sse", "body"])}
    except BaseException:
        writer.abort()
        raise
    fields["stream_complete"] = result.complete
    return {**fields, **_flaws(result)}, body


def _flaws(result: Reassembled) -> dict[str, Any]:
    """What was wrong with the stream as the vendor sent it: its in-band error, events
    that were not JSON objects (passed on as sent, where nothing could be done)."""
    flaws: dict[str, Any] = {}
    if result.error is not None:
        flaws["stream_error"] = result.error
    if result.unparsed:
        flaws["malformed_events"] = result.unparsed
    return flaws


def _blocks(chunks: Iterable[Chunk]) -> Iterator[tuple[float, bytes]]:
    """The stream's raw event blocks, each with the arrival time of the chunk that ended
    it; bytes after the last blank line come last, as they are."""
    splitter = SseSplitter(max_event_bytes=None)
    last = 0.0
    for at, chunk in chunks:
        last = at
        for block in splitter.feed(chunk):
            yield at, block
    rest = splitter.flush()
    if rest:
        yield last, rest


def _parsed(blocks: Iterable[bytes]) -> Iterator[SseEvent]:
    """The events for reassembly: every whole block, and a last one without its blank
    line only if it is whole (half an event, cut off, is not a malformed one)."""
    for raw in blocks:
        event = parse_block(raw) if _ended(raw) or whole_event(raw) else None
        if event is not None:
            yield event


def _ended(block: bytes) -> bool:
    return block.endswith((b"\n\n", b"\r\r", b"\r\n\r\n", b"\n\r\n", b"\r\n\n"))


def _sse_entry(offset_ms: float, raw: bytes) -> dict[str, Any]:
    """One raw SSE event block, exact to the byte, with its arrival time."""
    try:
        return {"t_ms": round(offset_ms, 3), "raw": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"t_ms": round(offset_ms, 3), "raw_b64": base64.b64encode(raw).decode("ascii")}
