"""A session log's bytes on disk: a zstd stream of its lines, readable after every write.

A day of an agent's calls is mostly text the log already holds in another form:
the answer streamed as events and then resent in the next request, a tool's
output in its `tool.post` and in the request that carries it, the same reminder
text every turn. Log format 4 stores what a request adds once; compressing the
lines with the history of the file takes the rest (a real-size day: 52 MB of
lines, 3.8 MB on disk).

    <id>.jsonl.zst = frame, frame, …     one frame per opening of the file
    frame          = header, block, …    each write ends with a flushed block

Every write of the writer ends on a block boundary, so the file decodes to whole
lines up to its last write while it is still open (`zstdcat` prints them all,
then says "premature end" of the open frame; DuckDB reads them without a word).
Before a new frame is begun, the open one is ended with an empty last block:
frames then concatenate as zstd defines, and any zstd tool reads the file.

A crash can cut the last write short: `whole_prefix` finds where the last whole
block that ends a line ends, which is where the writer cuts the file back.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass

if sys.version_info >= (3, 14):
    from compression.zstd import CompressionParameter, ZstdCompressor, ZstdDecompressor, ZstdError
else:
    from backports.zstd import CompressionParameter, ZstdCompressor, ZstdDecompressor, ZstdError

MAGIC = b"\x28\xb5\x2f\xfd"
FRAME_END = b"\x01\x00\x00"  # an empty raw block marked last: ends an open frame
LEVEL = 3  # zstd's default: at the speed of the disk, within 10% of level 19 here
WINDOW_LOG = 21  # 2 MB of history: a call's answer and the request that resends it
_MAX_BLOCK = 128 * 1024  # RFC 8878 3.1.1.2.4: no block holds more


class DamagedStream(ValueError):
    """Bytes in the middle of a compressed log that do not decode."""


_OPTIONS = {
    CompressionParameter.compression_level: LEVEL,
    CompressionParameter.window_log: WINDOW_LOG,
    CompressionParameter.checksum_flag: 0,  # every line carries its own
    CompressionParameter.content_size_flag: 0,  # unknown until the frame ends
}


class Compressor:
    """One frame being written: each `write` is compressed with the frame's history and
    flushed, so what it returns ends on a block boundary."""

    def __init__(self) -> None:
        self._frame = ZstdCompressor(options=_OPTIONS)

    def write(self, data: bytes) -> bytes:
        return self._frame.compress(data, mode=ZstdCompressor.FLUSH_BLOCK)


def compress_whole(data: bytes) -> bytes:
    """A whole log in one ended frame (a copy written aside, then renamed into place)."""
    return Compressor().write(data) + FRAME_END


class Decoder:
    """Decodes a log's bytes as they come, a whole block at a time, across frames.

    Bytes of a block not yet whole are kept for the next `feed`: a reader never sees
    text of a write that is still under way or was cut short (a raw block would
    otherwise give out its part). `whole` counts the bytes of whole blocks read,
    `open_frame` says whether the last frame read is still open.
    """

    def __init__(self) -> None:
        self._frame = ZstdDecompressor()
        self._buffer = b""
        self._header = b""  # of the frame whose first block is not yet whole
        self._checksum = -1  # bytes after the frame's last block; -1: between frames
        self.whole = 0
        self.open_frame = False

    def feed(self, data: bytes) -> bytes:
        return b"".join(text for _, text in self.blocks(data))

    def blocks(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        """Each whole block these bytes complete: (bytes of whole blocks so far, its text)."""
        buffer, at = self._buffer + data, 0
        try:
            while True:
                if self._checksum < 0:  # a frame begins here
                    start = buffer[at : at + 5]
                    if not (start.startswith(MAGIC) or MAGIC.startswith(start)):
                        raise DamagedStream(f"has no zstd frame at byte {self.whole}")
                    if len(start) < 5 or len(buffer) - at < _frame_header_size(start[4]):
                        break
                    size = _frame_header_size(start[4])
                    self._header, at = buffer[at : at + size], at + size
                    self._checksum = 4 if start[4] & 0x04 else 0
                if len(buffer) - at < 3:
                    break
                block = int.from_bytes(buffer[at : at + 3], "little")
                last, kind, length = bool(block & 1), (block >> 1) & 3, block >> 3
                if kind == 3 or length > _MAX_BLOCK:
                    raise DamagedStream(f"has no zstd block at byte {self.whole}")
                end = at + 3 + (1 if kind == 1 else length) + (self._checksum if last else 0)
                if end > len(buffer):
                    break
                whole = self._header + buffer[at:end]
                text = self._decode(whole, last)
                self._header, at = b"", end
                self.whole += len(whole)
                self.open_frame = not last
                yield self.whole, text
        finally:
            self._buffer = buffer[at:]

    def _decode(self, block: bytes, last: bool) -> bytes:
        try:
            text = self._frame.decompress(block)
        except ZstdError as exc:
            raise DamagedStream(f"does not decode at byte {self.whole}: {exc}") from None
        if last:
            self._frame, self._checksum = ZstdDecompressor(), -1
        return text


@dataclass(frozen=True, slots=True)
class WholePrefix:
    """The part of a log's bytes a writer may go on from."""

    length: int  # bytes of whole blocks, their text ending at a line's end
    text: bytes  # what they decode to
    open_frame: bool  # the last frame in them is not ended
    damage: str | None = None  # why the bytes after them do not decode


def whole_prefix(data: bytes) -> WholePrefix:
    """The longest run of whole blocks from the start whose text ends at a line's end.

    What follows it was cut short (a write the crash interrupted), unless what
    follows does not decode: that is damage, not a tear, and `damage` says so.
    """
    decoder, texts, good, damage = Decoder(), [], (0, 0, False), None
    try:
        for whole, text in decoder.blocks(data):
            texts.append(text)
            if text.endswith(b"\n") or (not text and good[0] == len(texts) - 1):
                good = (len(texts), whole, decoder.open_frame)
    except DamagedStream as exc:
        damage = str(exc)
    count, length, open_frame = good
    return WholePrefix(length, b"".join(texts[:count]), open_frame, damage)


def _frame_header_size(descriptor: int) -> int:
    """Magic, descriptor, window, dictionary id and content size fields (RFC 8878 3.1.1.1)."""
    single_segment = bool(descriptor & 0x20)
    content_size = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    dictionary = (0, 1, 2, 4)[descriptor & 0x03]
    return 4 + 1 + (0 if single_segment else 1) + dictionary + content_size
