"""Where a fleet's shipped data lives: one bucket and prefix for every instance.

    PREFIX/blobs/<2 hex>/<sha256>.json                 large bodies, content-addressed, shared
    PREFIX/logs/instance=<I>/<session>/<sha256>.jsonl.zst  a session log, as shipped (`.jsonl`:
                                                       a plain one, as an older taplog wrote it)
    PREFIX/tables/events/                              the events of every shipped session, a
                                                       Delta Lake table (`recorder.fleet.table`)

A blob or a log is named by the SHA-256 of its bytes, written once (`If-None-Match: *`)
and never overwritten, so a round shipped again writes nothing new. The table's snapshot
names each session's log (`shipped_log`) and its events' blobs (`blob_sha256`); a log or
blob it does not name (replaced by a later round, or left by one that failed) is never
read.

Keys read from the table come from the store, so they are checked against these shapes
before they become paths of the local cache (`recorder.fleet.fetch`).
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

INSTANCE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SESSION = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_SHA = r"[0-9a-f]{64}"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_PREFIX = re.compile(r"[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*")
BLOB_KEY = re.compile(rf"blobs/[0-9a-f]{{2}}/(?P<sha>{_SHA})\.json")
LOG_KEY = re.compile(
    rf"logs/instance=(?P<instance>{INSTANCE.pattern})/{_SESSION}/"
    rf"(?P<sha>{_SHA})(?P<suffix>\.jsonl(?:\.zst)?)"
)


@dataclass(frozen=True, slots=True)
class Location:
    """`s3://BUCKET/PREFIX`: where a fleet ships to and is queried from."""

    bucket: str
    prefix: str  # "" or "a/b", without slashes at either end

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def relative(self, key: str) -> str:
        return key.removeprefix(f"{self.prefix}/") if self.prefix else key

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


def parse_location(url: str) -> Location:
    """`s3://BUCKET[/PREFIX]`, or ValueError saying what is wrong with it."""
    scheme, _, rest = url.partition("://")
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if scheme != "s3" or not _BUCKET.fullmatch(bucket):
        raise ValueError("must be s3://BUCKET/PREFIX, the bucket named as S3 allows")
    if prefix and not _PREFIX.fullmatch(prefix):
        raise ValueError("the prefix may hold only letters, digits, '.', '_', '-' and '/'")
    return Location(bucket, prefix)


def check_instance(name: str) -> None:
    if name and not INSTANCE.fullmatch(name):
        raise ValueError("must be 1 to 64 letters, digits, '.', '_' or '-', starting alphanumeric")


def default_instance() -> str:
    """The host name, made a valid instance name (`taplog` when nothing of it is left)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()).lstrip("._-")[:64]
    return name or "taplog"


def blob_key(sha256: str) -> str:
    return f"blobs/{sha256[:2]}/{sha256}.json"


def log_key(instance: str, session: str, sha256: str, suffix: str) -> str:
    """`suffix`: the log's own (`.jsonl.zst`, or `.jsonl` for a plain one)."""
    return f"logs/instance={instance}/{session}/{sha256}{suffix}"
