"""What a fleet query reads: the events table's current snapshot, and the blobs and logs
it names, fetched into a local cache when first needed.

The table (`recorder.fleet.table`) is read where it is: its log says which files make
the snapshot, and a query reads of them only the partitions and byte ranges it needs
(`recorder.fleet.views`). Blobs and session logs are whole objects named by the SHA-256
of their bytes, so they are fetched into the cache folder (`~/.cache/taplog/fleet/
BUCKET/PREFIX/` unless told otherwise), checked against their key's hash, and never
fetched again: a blob when a query first reads the body it holds, the logs (and every
blob) when `taplog verify --fleet` asks for them (`logs=True`). Keys come from the store,
so they are checked against the layout's shapes (`recorder.fleet.layout`) before they
become paths.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from taplog.recorder.fleet import layout, table
from taplog.recorder.fleet.store import Digest, Store, StoreError
from taplog.recorder.store.blobs import BlobError

if TYPE_CHECKING:
    from deltalake import DeltaTable

FETCHERS = 8


class ShippedBlobs:
    """The fleet's blobs, each fetched into the cache when first asked for."""

    def __init__(self, store: Store, cache: Path) -> None:
        self._store, self._cache = store, cache
        self.folder = cache / "blobs"
        self._lock = threading.Lock()  # DuckDB may ask from several threads at once

    def folder_of(self, sha256: str | None) -> Path:
        """The folder holding blob `sha256`, fetched first when it is not there yet
        (`recorder.query.rebuilt_requests.BlobFolder`)."""
        key = layout.blob_key(sha256 or "")
        if not layout.BLOB_KEY.fullmatch(key):
            raise BlobError(f"blob {sha256!r} is not a blob's name")
        if not (self._cache / key).exists():
            with self._lock:
                try:
                    _fetch_one(self._store, key, self._cache / key)
                except StoreError as exc:
                    raise BlobError(f"blob {sha256} could not be fetched ({exc})") from None
        return self.folder

    def fields(self, sha256: str) -> str:
        """The fields blob `sha256` holds, as JSON text."""
        return (self.folder_of(sha256) / sha256[:2] / f"{sha256}.json").read_text()


@dataclass
class Fleet:
    """The events table's snapshot (None when nothing was shipped), the blobs as they are
    needed, and each session's log when they were asked for."""

    table: DeltaTable | None
    blobs: ShippedBlobs
    logs: dict[str, dict[str, str]] = field(default_factory=dict)  # instance -> session -> log

    @property
    def blobs_folder(self) -> Path:
        return self.blobs.folder


def default_cache(location: layout.Location) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "taplog" / "fleet" / location.bucket / (location.prefix or "_")


def fetch(location: layout.Location, cache: Path, logs: bool = False) -> Fleet:
    """The fleet's shipped data as of now (StoreError when the store fails); with `logs`,
    each session's log as shipped and every blob, in `cache`."""
    store = Store(location)
    fleet = Fleet(table.open_table(location), ShippedBlobs(store, cache))
    if logs and fleet.table is not None:
        named = table.dataset(fleet.table).to_table(
            columns=["instance", "session", "shipped_log", "blob_sha256"]
        )
        wanted: set[str] = set()
        for row in named.group_by(["instance", "session", "shipped_log"]).aggregate([]).to_pylist():
            key = _log(row["instance"], row["session"], row["shipped_log"])
            fleet.logs.setdefault(row["instance"], {})[row["session"]] = str(cache / key)
            wanted.add(key)
        shas = named.column("blob_sha256").unique().drop_null().to_pylist()
        wanted.update(layout.blob_key(sha) for sha in shas)
        if not all(layout.BLOB_KEY.fullmatch(layout.blob_key(sha)) for sha in shas):
            raise StoreError("the events table names a blob by something not a SHA-256")
        missing = sorted(key for key in wanted if not (cache / key).exists())
        with ThreadPoolExecutor(FETCHERS, thread_name_prefix="taplog-fetch") as pool:
            list(pool.map(lambda key: _fetch_one(store, key, cache / key), missing))
    return fleet


def _log(instance: str, session: str, key: str | None) -> str:
    """The session's log key, checked: the layout's shape, this instance and this session."""
    match = layout.LOG_KEY.fullmatch(key or "")
    if match is None or key != layout.log_key(instance, session, match["sha"], match["suffix"]):
        raise StoreError(f"instance {instance}: session {session!r} names the log {key!r}")
    return key


def _sha_of(key: str) -> str:
    """The SHA-256 a checked key names its object by."""
    match = layout.LOG_KEY.fullmatch(key) or layout.BLOB_KEY.fullmatch(key)
    assert match is not None  # only checked keys are fetched
    return match["sha"]


def _fetch_one(store: Store, key: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = target.with_name(target.name + ".fetched")
    store.get(key, partial)
    if Digest.of_file(partial).sha256 != _sha_of(key):
        partial.unlink()
        raise StoreError(f"{key}: its bytes do not match its name")
    os.chmod(partial, 0o600)
    os.replace(partial, target)
