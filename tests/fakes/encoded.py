"""Clients that send their request bodies with a Content-Encoding, as some agents do.

The official SDKs send plain JSON; given an HTTP transport of their own HTTP library
that compresses each body (as a client configured so would), they speak to taplog as
such an agent does. `sent` keeps the exact bytes of every body that went out.
"""

from __future__ import annotations

import gzip
import sys
import zlib
from collections.abc import Callable
from typing import Any

import brotli
import httpx
import httpx2

from tests.fakes.clients import anthropic_at, openai_at

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

COMPRESS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": lambda data: gzip.compress(data, mtime=0),
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstd.compress,
}


class Encoding:
    """The bodies a client sent, each encoded with `coding` (several: comma-separated,
    applied in that order)."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.sent: list[bytes] = []

    def encode(self, body: bytes) -> bytes:
        for name in self.coding.split(","):
            body = COMPRESS[name.strip()](body)
        return body

    def transport(self, http: Any) -> Any:
        """A transport of `http` (httpx, or the anthropic SDK's httpx2) that encodes bodies."""
        encoding = self

        class Transport(http.HTTPTransport):
            def handle_request(self, request: Any) -> Any:
                plain = request.read()
                if not plain:
                    return super().handle_request(request)
                wire = encoding.encode(plain)
                encoding.sent.append(wire)
                headers = [
                    (name, value)
                    for name, value in request.headers.multi_items()
                    if name.lower() != "content-length"
                ]
                headers.append(("content-encoding", encoding.coding))
                encoded = http.Request(
                    request.method,
                    request.url,
                    headers=headers,
                    content=wire,
                    extensions=request.extensions,
                )
                return super().handle_request(encoded)

        return Transport()


def encoding_sdk(api: str, base: str, encoding: Encoding) -> Any:
    """The official SDK for `api` ("openai" or "anthropic") at `base`, its bodies encoded."""
    http = httpx2 if api == "anthropic" else httpx
    http_client = http.Client(transport=encoding.transport(http))
    if api == "anthropic":
        return anthropic_at(base, http_client=http_client)
    return openai_at(base, http_client=http_client)
