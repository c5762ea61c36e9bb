"""The object store, S3's API through boto3: write once, verify, read, list.

boto3 is imported only when a store is opened (shipping or a fleet query), never at
start-up. It reads the endpoint and credentials from the standard variables itself
(`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, and the region from
`AWS_REGION`); taplog never holds, logs or prints them. botocore's own loggers are kept
at WARNING, since at DEBUG they print signed request headers.

What goes wrong, translated once:

    botocore / OS error                                  raised as       what to do
    ─────────────────────────────────────────────────    ─────────────   ─────────────────
    connection refused or reset, timeout, 5xx, 429,      StoreError      try again later
    403 (keys, policy), missing bucket or credentials                    (the next round)
    412 on a write (the key exists) with other bytes     Conflict        stop: the data is
                                                                         not what was meant
    an object whose size or checksum is not ours         Conflict

Messages name the operation, the key and the store's error code, never a credential.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from taplog.recorder.fleet.layout import Location

CONNECT_SECONDS = 3.0
READ_SECONDS = 60.0
_QUIET = ("botocore", "boto3", "s3transfer", "urllib3")


class StoreError(Exception):
    """The store could not be reached or refused the request: try again later."""


class Conflict(StoreError):
    """A key holds bytes other than the ones meant for it."""


@dataclass(frozen=True, slots=True)
class Digest:
    """A file's size and checksums: SHA-256 names it, MD5 is what S3 checks and returns."""

    size: int
    sha256: str
    md5: str

    @classmethod
    def of_file(cls, path: Path) -> Digest:
        sha, md5, size = hashlib.sha256(), hashlib.md5(), 0
        with open(path, "rb") as source:
            while chunk := source.read(1 << 20):
                sha.update(chunk)
                md5.update(chunk)
                size += len(chunk)
        return cls(size, sha.hexdigest(), md5.hexdigest())


def _reason(operation: str, key: str, exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    code = response.get("Error", {}).get("Code") or type(exc).__name__
    return f"{operation} {key}: {code}"


class Store:
    """One bucket and prefix; keys are relative to the prefix."""

    def __init__(self, location: Location) -> None:
        import boto3
        from botocore.config import Config

        for name in _QUIET:
            logging.getLogger(name).setLevel(logging.WARNING)
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        config = Config(
            connect_timeout=CONNECT_SECONDS,
            read_timeout=READ_SECONDS,
            retries={"max_attempts": 2, "mode": "standard"},
            # S3-compatible stores differ in the newer flexible checksums; Content-MD5 is
            # checked by all of them.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            s3={"addressing_style": "path" if endpoint else "auto"},
        )
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        self._s3 = boto3.session.Session().client("s3", region_name=region, config=config)
        self.location = location

    def _call(self, operation: str, key: str, **kwargs: Any) -> Any:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(self._s3, operation)(Bucket=self.location.bucket, **kwargs)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status == 412:
                raise Conflict(_reason(operation, key, exc)) from None
            raise StoreError(_reason(operation, key, exc)) from None
        except (BotoCoreError, OSError) as exc:
            raise StoreError(_reason(operation, key, exc)) from None

    def check(self) -> None:
        """The bucket is there and these keys may use it."""
        self._call("head_bucket", self.location.bucket)

    def put_once(self, key: str, path: Path, digest: Digest) -> bool:
        """Write `path` at `key` unless the key exists; either way verify what is there.

        True when this call wrote it. Conflict when the key holds other bytes.
        """
        full = self.location.key(key)
        md5 = base64.b64encode(bytes.fromhex(digest.md5)).decode()
        try:
            with open(path, "rb") as body:
                self._call(
                    "put_object",
                    key,
                    Key=full,
                    Body=body,
                    ContentLength=digest.size,
                    ContentMD5=md5,
                    Metadata={"sha256": digest.sha256},
                    IfNoneMatch="*",
                )
            written = True
        except Conflict:
            written = False
        self.verify(key, digest)
        return written

    def verify(self, key: str, digest: Digest) -> None:
        """The object at `key` has the size of `digest`, and its SHA-256 (in the metadata
        taplog wrote) or its MD5 (the ETag of an object written whole, unencrypted)."""
        head = self._call("head_object", key, Key=self.location.key(key))
        etag = str(head.get("ETag", "")).strip('"')
        same = head.get("Metadata", {}).get("sha256") == digest.sha256 or etag == digest.md5
        if head.get("ContentLength") != digest.size or not same:
            raise Conflict(f"{key}: the store holds other bytes ({head.get('ContentLength')} B)")

    def get(self, key: str, target: Path) -> int:
        """The object at `key` into the file `target` (replaced whole); its size."""
        from botocore.exceptions import BotoCoreError

        answer = self._call("get_object", key, Key=self.location.key(key))
        partial = target.with_name(target.name + ".partial")
        size = 0
        try:
            with open(partial, "wb") as out:
                for chunk in answer["Body"].iter_chunks(1 << 20):
                    out.write(chunk)
                    size += len(chunk)
        except (BotoCoreError, OSError) as exc:  # a read cut short
            partial.unlink(missing_ok=True)
            raise StoreError(_reason("get_object", key, exc)) from None
        if size != answer.get("ContentLength", size):
            partial.unlink(missing_ok=True)
            raise StoreError(f"get_object {key}: cut short at {size} B")
        os.replace(partial, target)
        return size

    def read(self, key: str) -> bytes:
        from botocore.exceptions import BotoCoreError

        answer = self._call("get_object", key, Key=self.location.key(key))
        try:
            return answer["Body"].read()
        except (BotoCoreError, OSError) as exc:  # a read cut short
            raise StoreError(_reason("get_object", key, exc)) from None

    def keys(self, under: str) -> Iterator[str]:
        """Every key under `under` (relative to the prefix), in the store's order."""
        token: dict[str, str] = {}
        while True:
            page = self._call("list_objects_v2", under, Prefix=self.location.key(under), **token)
            for item in page.get("Contents", []):
                yield self.location.relative(item["Key"])
            if not page.get("IsTruncated"):
                return
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def delete(self, key: str) -> None:
        self._call("delete_object", key, Key=self.location.key(key))
