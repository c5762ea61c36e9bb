"""SSE splitting and block parsing: chunk boundaries must never matter, nothing is lost."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taplog.recorder.vendors.sse import SseEvent, SseSplitter, SseTooLarge, parse_block

NEWLINES = [b"\n", b"\r\n", b"\r"]


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def run(chunks: list[bytes], limit: int = 16 * 1024 * 1024) -> tuple[list[bytes], bytes]:
    splitter = SseSplitter(max_event_bytes=limit)
    blocks: list[bytes] = []
    for chunk in chunks:
        blocks.extend(splitter.feed(chunk))
    return blocks, splitter.flush()


def events(blocks: list[bytes]) -> list[SseEvent]:
    return [e for e in map(parse_block, blocks) if e is not None]


# --- strategies --------------------------------------------------------------------

field_value = st.text(
    st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=20
)
line = st.one_of(
    st.builds(lambda v: "data: " + v, field_value),
    st.builds(lambda v: "data:" + v, field_value),
    st.builds(lambda v: "event: " + v, field_value),
    st.builds(lambda v: "id: " + v, field_value),
    st.builds(lambda v: ":" + v, field_value),
    st.just("retry: 1000"),
    st.just("data"),
)


@st.composite
def stream(draw: st.DrawFn) -> bytes:
    """A valid SSE stream with any mix of line endings, optionally an unterminated tail."""
    out = b""
    for _ in range(draw(st.integers(0, 6))):
        for text in draw(st.lists(line, min_size=1, max_size=4)):
            out += text.encode() + draw(st.sampled_from(NEWLINES))
        out += draw(st.sampled_from(NEWLINES))
    if draw(st.booleans()):
        out += draw(line).encode()
    return out


# --- splitting ---------------------------------------------------------------------


@given(stream(), st.lists(st.integers(0, 10_000), max_size=30))
@settings(max_examples=300)
def test_random_splits_give_same_blocks(data: bytes, cuts: list[int]) -> None:
    whole = run([data])
    assert run(split_at(data, cuts)) == whole
    assert run([bytes([b]) for b in data]) == whole


@given(st.binary(max_size=300), st.lists(st.integers(0, 1000), max_size=20))
@settings(max_examples=300)
def test_lossless_and_never_crashes_on_random_bytes(data: bytes, cuts: list[int]) -> None:
    blocks, rest = run(split_at(data, cuts))
    assert b"".join(blocks) + rest == data
    assert (blocks, rest) == run([data])
    for block in [*blocks, rest]:
        parse_block(block)


@given(st.binary(max_size=200), st.integers(1, 40), st.lists(st.integers(0, 1000), max_size=10))
def test_random_bytes_only_ever_raise_too_large(data: bytes, limit: int, cuts: list) -> None:
    try:
        blocks, rest = run(split_at(data, cuts), limit)
    except SseTooLarge:
        return
    assert all(len(b) <= limit for b in blocks)
    assert len(rest) <= limit


def blocks_by_definition(data: bytes) -> tuple[list[bytes], bytes]:
    """The blocks as the SSE spec defines them, one line at a time: a block ends with its
    first empty line (the oracle for the splitter's search for blank lines)."""
    blocks, start, line_start = [], 0, 0
    for match in re.finditer(rb"\r\n|\r|\n", data):
        if match.start() == line_start:
            blocks.append(data[start : match.end()])
            start = match.end()
        line_start = match.end()
    return blocks, data[start:]


@given(
    st.lists(
        st.sampled_from([b"data: x", b"event: y", b":", b"\n", b"\n\n", b"\r\n"]), max_size=40
    ),
    st.lists(st.integers(0, 10_000), max_size=30),
)
@settings(max_examples=300)
def test_blocks_are_those_the_spec_defines_whatever_the_chunks(parts: list, cuts: list) -> None:
    """Blank lines anywhere (opening the stream, several in a row, split between chunks),
    in LF-only chunks and beside chunks with CRs: the blocks the spec defines."""
    data = b"".join(parts)
    assert run(split_at(data, cuts)) == blocks_by_definition(data)


@pytest.mark.parametrize(
    "terminator",
    [b"\n\n", b"\r\n\r\n", b"\r\r", b"\r\n\n", b"\n\r\n", b"\r\n\r", b"\n\r", b"\r\n\r\n"],
)
def test_every_blank_line_form_ends_a_block(terminator: bytes) -> None:
    data = b"data: one" + terminator + b"data: two" + terminator
    blocks, rest = run([data])
    if terminator.endswith(b"\r"):  # the final CR might still be the start of a CRLF
        blocks, rest = [*blocks, rest], b""
    assert rest == b""
    assert blocks == [b"data: one" + terminator, b"data: two" + terminator]
    assert events(blocks) == [SseEvent(None, "one"), SseEvent(None, "two")]
    assert run([bytes([b]) for b in data]) == run([data])


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    assert run([b"data: a\r", b"\n\r", b"\n"]) == ([b"data: a\r\n\r\n"], b"")
    # a lone trailing CR is held back until the next byte says what it was
    splitter = SseSplitter()
    assert splitter.feed(b"data: a\r\r") == []
    assert splitter.feed(b"data") == [b"data: a\r\r"]
    assert splitter.flush() == b"data"


def test_unterminated_tail_is_flushed() -> None:
    splitter = SseSplitter()
    assert splitter.feed(b"data: 1\n\ndata: 2\n") == [b"data: 1\n\n"]
    assert splitter.flush() == b"data: 2\n"
    assert splitter.flush() == b""


def test_too_large_pending_block_raises() -> None:
    splitter = SseSplitter(max_event_bytes=10)
    assert splitter.feed(b"data: 1\n\n") == [b"data: 1\n\n"]
    splitter.feed(b"data: 12")
    with pytest.raises(SseTooLarge):
        splitter.feed(b"345")


def test_too_large_complete_block_raises_whatever_the_chunking() -> None:
    with pytest.raises(SseTooLarge):
        run([b"data: 0123456789\n\n"], limit=10)
    with pytest.raises(SseTooLarge):
        run([b"data: 0123", b"456789\n\n"], limit=10)
    assert run([b"data: 12\n\n"], limit=10) == ([b"data: 12\n\n"], b"")


def test_linear_time_on_a_big_event_in_small_chunks() -> None:
    splitter = SseSplitter()
    payload = b"data: " + b"x" * 4_000_000 + b"\n\n"
    blocks = []
    for i in range(0, len(payload), 1000):
        blocks += splitter.feed(payload[i : i + 1000])
    assert blocks == [payload]


# --- parsing -----------------------------------------------------------------------


def test_parse_fields_per_whatwg() -> None:
    raw = b": comment\r\nevent: message_start\r\nid: 7\r\nretry: 5\r\ndata: {\r\ndata:  x\r\n\r\n"
    assert parse_block(raw) == SseEvent(event="message_start", data="{\n x", id="7")


def test_parse_field_without_colon_and_no_space() -> None:
    assert parse_block(b"data\ndata:a\n\n") == SseEvent(event=None, data="\na")
    assert parse_block(b"event:ping\n\n") == SseEvent(event="ping", data="")


def test_parse_comment_only_and_empty_blocks_are_none() -> None:
    assert parse_block(b": keep-alive\n\n") is None
    assert parse_block(b"\n") is None
    assert parse_block(b"retry: 10\n\n") is None
    assert parse_block(b"") is None


def test_parse_ignores_ids_with_nul_and_unknown_fields() -> None:
    assert parse_block(b"id: a\x00b\nfoo: bar\ndata: x\n\n") == SseEvent(None, "x", None)


def test_parse_invalid_utf8_is_replaced() -> None:
    assert parse_block(b"data: \xff\xfe ok\n\n") == SseEvent(None, "\ufffd\ufffd ok")


def test_parse_mixed_line_ends() -> None:
    assert parse_block(b"data: a\rdata: b\r\ndata: c\n\n") == SseEvent(None, "a\nb\nc")


value_bytes = st.binary(max_size=24).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))


@st.composite
def lf_block(draw: st.DrawFn) -> bytes:
    """A block with LF line ends: mostly as vendors write them (`data: …` alone, or after
    `event: …`), which `parse_block` reads straight from the bytes, else any lines."""
    shape = draw(st.sampled_from(["data", "event+data", "lines"]))
    if shape == "data":
        return b"data: " + draw(value_bytes) + b"\n\n"
    if shape == "event+data":
        return b"event: " + draw(value_bytes) + b"\ndata: " + draw(value_bytes) + b"\n\n"
    return b"".join(text.encode() + b"\n" for text in draw(st.lists(line, max_size=4))) + b"\n"


@given(lf_block())
def test_a_block_reads_the_same_whatever_its_line_ends(raw: bytes) -> None:
    """The shortcut for vendors' usual blocks agrees with the full rules, which a CRLF
    block always goes through."""
    assert parse_block(raw) == parse_block(raw.replace(b"\n", b"\r\n"))


@given(stream(), st.lists(st.integers(0, 10_000), max_size=30))
def test_events_survive_splitting(data: bytes, cuts: list[int]) -> None:
    blocks, _ = run(split_at(data, cuts))
    assert events(blocks) == events(run([data])[0])
    for event in events(blocks):
        assert "\r" not in event.data
