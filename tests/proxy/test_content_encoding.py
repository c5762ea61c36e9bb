"""taplog's own decoding of request bodies (`proxy.content_encoding`): each coding in the
forms clients send, bounded, and refused with the answer its table gives."""

from __future__ import annotations

import asyncio
import gzip
import zlib

import brotli
import pytest
from multidict import CIMultiDict, CIMultiDictProxy

from taplog.proxy.content_encoding import Refused, codings, decoded
from tests.fakes.encoded import COMPRESS, zstd

BODY = b'{"model":"gpt-4.1","messages":[{"role":"user","content":"hi"}]}'


def _headers(*values: str) -> CIMultiDictProxy[str]:
    return CIMultiDictProxy(CIMultiDict([("Content-Encoding", value) for value in values]))


def _decode(data: bytes, *values: str, max_mb: float = 1) -> bytes:
    return asyncio.run(decoded(_headers(*values), data, max_mb))


def _refusal(data: bytes, *values: str, max_mb: float = 1) -> Refused:
    with pytest.raises(Refused) as refused:
        _decode(data, *values, max_mb=max_mb)
    return refused.value


def _streamed_zstd(data: bytes, window_log: int) -> bytes:
    """A zstd frame of unknown size: its window stays as large as asked."""
    packer = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: window_log})
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("wire", "header"),
    [
        (COMPRESS["gzip"](BODY), "gzip"),
        (COMPRESS["gzip"](BODY), "X-GZip"),
        (zlib.compress(BODY), "deflate"),
        (zlib.compress(BODY)[2:-4], "deflate"),  # raw deflate, as some clients send it
        (brotli.compress(BODY), "br"),
        (zstd.compress(BODY), "zstd"),
        (_streamed_zstd(BODY, 23), "zstd"),
        (brotli.compress(gzip.compress(BODY)), "gzip, br"),
        (BODY, "identity"),
    ],
)
def test_every_coding_is_undone(wire, header):
    assert _decode(wire, header) == BODY


def test_gzip_members_and_zstd_frames_one_after_another_are_one_body():
    assert _decode(gzip.compress(BODY) + gzip.compress(BODY), "gzip") == BODY * 2
    assert _decode(zstd.compress(BODY) + zstd.compress(BODY), "zstd") == BODY * 2


def test_several_header_lines_are_one_list_in_the_order_applied():
    assert codings(_headers("gzip", "identity, br")) == ["gzip", "br"]
    assert _decode(brotli.compress(gzip.compress(BODY)), "gzip", "br") == BODY


def test_nothing_to_decode_is_the_body_itself():
    assert _decode(b"", "gzip") == b""
    plain = bytes(BODY)
    assert _decode(plain, "identity") is plain


@pytest.mark.parametrize("coding", sorted(COMPRESS))
def test_a_bomb_stops_at_the_limit(coding):
    bomb = COMPRESS[coding](b"\0" * (3 * 2**20))
    refused = _refusal(bomb, coding)
    assert (refused.status, refused.code) == (413, "request_too_large")
    assert str(refused).startswith("request body is over the 1 MiB limit (--max-body-mb)")


def test_a_body_exactly_at_the_limit_is_taken():
    exact = b"a" * 2**20
    assert _decode(COMPRESS["gzip"](exact), "gzip") == exact


@pytest.mark.parametrize(
    ("wire", "header"),
    [
        (b"not gzip at all", "gzip"),
        (gzip.compress(BODY)[:-6], "gzip"),  # cut
        (gzip.compress(BODY) + b"trailing", "gzip"),
        (zlib.compress(BODY) + b"trailing", "deflate"),
        (brotli.compress(BODY)[:-2], "br"),
        (b"\x28\xb5\x2f\xfd garbage", "zstd"),
        (zstd.compress(BODY)[:-3], "zstd"),
        (_streamed_zstd(BODY, 24), "zstd"),  # a window over RFC 9659's 8 MiB
        (gzip.compress(BODY) * 65, "gzip"),  # more members than any client sends
    ],
)
def test_a_body_not_in_its_coding_is_refused_400(wire, header):
    refused = _refusal(wire, header)
    assert (refused.status, refused.code) == (400, "bad_content_encoding")
    assert f"not valid {header} data" in str(refused)


@pytest.mark.parametrize("header", ["compress", "gzip, snappy", "gzip, gzip, gzip, gzip, gzip"])
def test_an_unknown_or_excessive_coding_is_refused_400(header):
    refused = _refusal(COMPRESS["gzip"](BODY), header)
    assert (refused.status, refused.code) == (400, "unsupported_content_encoding")
