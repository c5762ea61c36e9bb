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

Secrets are scrubbed event by event: an echoed key cannot straddle two chunks. Redaction
(`recorder.redaction_streams`) comes after, over the whole stream: a finding can.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import orjson

from taplog.recorder.redaction import Redaction
from taplog.recorder.redaction_streams import StreamRedaction
from taplog.recorder.secrets_by_value import scrub
from taplog.recorder.store.blobs import SLICE, BlobStore, write_json
from taplog.recorder.store.memory import give_back_memory
from taplog.recorder.vendors.sse import Reassembled, SseEvent, SseSplitter, parse_block
from taplog.recorder.vendors.watch import whole_event

log = logging.getLogger("taplog.recorder")

Chunk = tuple[float, bytes]  # (milliseconds since the call started, bytes)


def stream_fields(
    chunks: list[Chunk],
    secrets: tuple[bytes, ...],
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
    chunks: list[Chunk], secrets: tuple[bytes, ...], module: Any, redaction: Redaction | None
) -> tuple[dict[str, Any], dict | None]:
    whole = b"".join(chunk for _, chunk in chunks)
    # One look at the whole stream: mostly nothing to redact, so no event is looked at again.
    found = scrub(whole, secrets) is not whole
    timed = [(at, scrub(raw, secrets) if found else raw) for at, raw in _blocks(chunks)]
    result = module.reassemble(_parsed(raw for _, raw in timed)) if module is not None else None
    if redaction and _may_find(redaction, whole, result):
        plan = StreamRedaction(redaction, module)
        plan.scan(raw for _, raw in timed)
        timed = [(at, plan.apply(index, raw)) for index, (at, raw) in enumerate(timed)]
        if module is not None:
            result = module.reassemble(_parsed(raw for _, raw in timed))
    fields: dict[str, Any] = {"sse": [_sse_entry(at, raw) for at, raw in timed]}
    if result is None:
        return fields, None
    body = _scrubbed(result.body, secrets)
    if redaction and body is not None:
        body = redaction.value(body)
    fields.update(body=body, stream_complete=result.complete)
    return {**fields, **_flaws(result)}, body


def _may_find(redaction: Redaction, whole: bytes, result: Reassembled | None) -> bool:
    """Whether a stream may hold something to redact: in an event of its own (its bytes),
    or split across events (then whole only in the reassembled answer's text)."""
    if redaction.may_find(whole):
        return True
    body = result.body if result is not None else None
    return body is not None and redaction.value(body) is not body


def _scrubbed(body: dict | None, secrets: tuple[bytes, ...]) -> dict | None:
    """The reassembled answer, scrubbed whole: a key the vendor streamed back in pieces
    is whole only here (each piece alone has no shape to find)."""
    if body is None:
        return None
    raw = orjson.dumps(body)
    clean = scrub(raw, secrets)
    return body if clean is raw else orjson.loads(clean)


def _into_blob(
    chunks: Callable[[], Iterable[Chunk]],
    secrets: tuple[bytes, ...],
    module: Any,
    blobs: BlobStore,
    redaction: Redaction | None,
) -> tuple[dict[str, Any], dict | None]:
    """Write `{"sse": [...], "body": ...}` to a blob while reading the stream once (twice
    with redaction: first to find what to redact)."""
    writer = blobs.writer()
    plan = StreamRedaction(redaction, module) if redaction else None
    if plan is not None:
        plan.scan(scrub(block, secrets) for _, block in _blocks(chunks()))

    def events() -> Iterator[SseEvent]:
        separator = b""
        for index, (at, block) in enumerate(_blocks(chunks())):
            raw = scrub(block, secrets)
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
        result = module.reassemble(events(), longer_than=SLICE)
        writer.write(b'],"body":')
        write_json(result.body, writer.write)
        writer.write(b"}")
        fields: dict[str, Any] = {"blob": writer.finish(["sse", "body"])}
    except BaseException:
        writer.abort()
        raise
    fields["stream_complete"] = result.complete
    return {**fields, **_flaws(result)}, result.body


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
