"""Request bodies a client sent with a Content-Encoding: sent on as they came, decoded here.

aiohttp's server would decode such a body itself (`auto_decompress`) and leave the
header saying `gzip` over bytes that no longer are: a vendor honouring the header
could not read the call. taplog's connections turn that off (`proxy.runner`), so a
handler reads the client's bytes; the call goes upstream byte for byte with its
header, and taplog decodes its own copy here, for the log and for everything that
reads the JSON (API, model, stream flag, session).

Decoding is bounded and refuses what it cannot do, before anything is sent:

    the body                                      the client gets
    ────────────────────────────────────────────  ──────────────────────────────────
    a coding other than gzip (x-gzip), deflate,   400 unsupported_content_encoding
      br, zstd, identity; more than 4 codings
    not valid data of its coding (cut, garbage,   400 bad_content_encoding
      bytes after its end, a zstd window over
      the 8 MiB RFC 9659 allows)
    over `--max-body-mb` once decoded (a bomb)    413 request_too_large

Each step's output stops one byte past the limit, so a bomb costs at most the limit
in memory. The work runs on a thread: a body of many MiB never stalls the event loop.
A body without the header never comes here.
"""

from __future__ import annotations

import asyncio
import sys
import zlib
from collections.abc import Callable

import brotli
from multidict import CIMultiDictProxy

if sys.version_info >= (3, 14):
    from compression.zstd import DecompressionParameter, ZstdDecompressor, ZstdError
else:  # the same module, backported (pyproject.toml)
    from backports.zstd import DecompressionParameter, ZstdDecompressor, ZstdError

HEADER = "Content-Encoding"
MAX_CODINGS = 4  # more stacked codings than any client applies: refused, not decoded
_MAX_MEMBERS = 64  # gzip members (or zstd frames) one after another in one body
_ZSTD_WINDOW_LOG = 23  # RFC 9659: a zstd content coding uses a window of 8 MiB at most
_ALIASES = {"x-gzip": "gzip"}


class Refused(Exception):
    """The body cannot be decoded as its header says: the client's answer (see the table)."""

    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


class _TooLarge(Exception):
    """A step's output went past the limit."""


class _Bad(Exception):
    """Not data of its coding (the coding libraries' own errors mean the same)."""


def codings(headers: CIMultiDictProxy[str]) -> list[str]:
    """The codings applied to the body, in the order they were applied (identity left out)."""
    named = (
        token.strip().lower() for value in headers.getall(HEADER, ()) for token in value.split(",")
    )
    return [_ALIASES.get(name, name) for name in named if name and name != "identity"]


async def decoded(headers: CIMultiDictProxy[str], body: bytes, max_mb: float) -> bytes:
    """The body with its codings undone (the same object when there are none or it is
    empty), at most `max_mb` MiB (`--max-body-mb`); raises Refused."""
    applied = codings(headers)
    if not applied or not body:
        return body
    unknown = [name for name in applied if name not in _DECODERS]
    if unknown or len(applied) > MAX_CODINGS:
        said = repr(unknown[0]) if unknown else f"{len(applied)} codings"
        message = (
            f"the request body's Content-Encoding ({said}) is not one taplog decodes "
            f"(at most {MAX_CODINGS} of {', '.join(_DECODERS)}); nothing was sent to the vendor"
        )
        raise Refused(400, message, "unsupported_content_encoding")
    return await asyncio.to_thread(_undo, applied, body, max_mb)


def _undo(applied: list[str], body: bytes, max_mb: float) -> bytes:
    limit = int(max_mb * 1024 * 1024)  # as `Settings.max_body_bytes`
    for name in reversed(applied):  # the last coding applied is the first undone
        try:
            body = _DECODERS[name](body, limit)
        except _TooLarge:
            message = (
                f"request body is over the {max_mb:g} MiB limit (--max-body-mb) "
                f"once decoded ({name}); nothing was sent to the vendor"
            )
            raise Refused(413, message, "request_too_large") from None
        except (_Bad, zlib.error, brotli.error, ZstdError) as exc:
            message = (
                f"the request body is not valid {name} data ({exc}); nothing was sent to the vendor"
            )
            raise Refused(400, message, "bad_content_encoding") from None
    return body


def _members(
    data: bytes, limit: int, decode_one: Callable[[bytes, int], tuple[bytes, bytes]]
) -> bytes:
    """Members one after another (gzip, zstd frames): each decoded by `decode_one`
    (output, bytes after it), their output together at most `limit`."""
    parts: list[bytes] = []
    size = 0
    for _ in range(_MAX_MEMBERS):
        out, data = decode_one(data, limit - size)
        size += len(out)
        parts.append(out)
        if not data:
            return b"".join(parts) if len(parts) > 1 else parts[0]
    raise _Bad(f"more than {_MAX_MEMBERS} members")


def _inflate(data: bytes, room: int, wbits: int) -> tuple[bytes, bytes]:
    """One zlib, raw deflate or gzip member: its output (at most `room`) and what follows."""
    inflater = zlib.decompressobj(wbits)
    out = inflater.decompress(data, room + 1)
    if len(out) > room:
        raise _TooLarge
    if not inflater.eof:
        raise _Bad("the body ends before its compressed data does")
    return out, inflater.unused_data


def _gzip(data: bytes, limit: int) -> bytes:
    return _members(data, limit, lambda rest, room: _inflate(rest, room, 16 + zlib.MAX_WBITS))


def _deflate(data: bytes, limit: int) -> bytes:
    """HTTP's deflate is zlib's format; some clients send raw deflate, which is taken too."""
    wrapped = len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
    out, rest = _inflate(data, limit, zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
    if rest:
        raise _Bad("bytes after the end of the compressed data")
    return out


def _brotli(data: bytes, limit: int) -> bytes:
    decompressor = brotli.Decompressor()
    out = decompressor.process(data, output_buffer_limit=limit + 1)
    if len(out) > limit:
        raise _TooLarge
    if not decompressor.is_finished():
        if not decompressor.can_accept_more_data():  # it stopped at the limit
            raise _TooLarge
        raise _Bad("the body ends before its compressed data does")
    return out


def _zstd_frame(data: bytes, room: int) -> tuple[bytes, bytes]:
    decompressor = ZstdDecompressor(
        options={DecompressionParameter.window_log_max: _ZSTD_WINDOW_LOG}
    )
    out = decompressor.decompress(data, max_length=room + 1)
    if len(out) > room:
        raise _TooLarge
    if not decompressor.eof:
        raise _Bad("the body ends before its compressed data does")
    return out, decompressor.unused_data


def _zstd(data: bytes, limit: int) -> bytes:
    return _members(data, limit, _zstd_frame)


_DECODERS: dict[str, Callable[[bytes, int], bytes]] = {
    "gzip": _gzip,
    "deflate": _deflate,
    "br": _brotli,
    "zstd": _zstd,
}
