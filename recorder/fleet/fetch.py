"""What a fleet query reads: the store's newest manifests and the objects they name,
fetched into a local cache.

DuckDB reads local files only, so the SQL surface stays as locked down as over one data
dir (no network, no extension; `recorder.query.read_only`). A fleet query first lists
the manifests, reads the newest of each instance, and brings every Parquet file and blob
they name into the cache folder (`~/.cache/taplog/fleet/BUCKET/PREFIX/` unless told
otherwise), under their keys; `taplog verify --fleet` asks for the session logs too
(`logs=True`). Those objects never change once written (their keys are their SHA-256),
so one fetched is never fetched again: a query downloads only what was shipped since the
last one, and each download is checked against its key's hash before it is used. Keys
come from the store, so they are checked against the layout's shapes
(`recorder.fleet.layout`) before they become paths.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from taplog.recorder.fleet import layout
from taplog.recorder.fleet.store import Digest, Store, StoreError

FETCHERS = 8


@dataclass(frozen=True, slots=True)
class Fleet:
    """Per instance, each session's Parquet file in the cache; every blob they point at;
    each session's log when they were asked for."""

    sessions: dict[str, dict[str, str]]  # instance -> session -> cached Parquet file
    blobs: list[str]
    blobs_folder: Path  # where the cache keeps them
    logs: dict[str, dict[str, str]] = field(default_factory=dict)  # instance -> session -> log


def default_cache(location: layout.Location) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "taplog" / "fleet" / location.bucket / (location.prefix or "_")


def fetch(location: layout.Location, cache: Path, logs: bool = False) -> Fleet:
    """The fleet's shipped data as of now, in `cache` (StoreError when the store fails);
    with `logs`, each session's log as shipped too."""
    store = Store(location)
    try:
        manifests = _newest_manifests(store)
    except StoreError:  # one was replaced while it was read: list again
        manifests = _newest_manifests(store)
    sessions: dict[str, dict[str, str]] = {}
    shipped_logs: dict[str, dict[str, str]] = {}
    wanted: set[str] = set()
    for instance, manifest in sorted(manifests.items()):
        named = _named(instance, manifest)
        sessions[instance] = {s: str(cache / entry.events) for s, entry in named.items()}
        for entry in named.values():
            wanted.add(entry.events)
            wanted.update(entry.blobs)
        if logs:
            keys = {session: _log(instance, session, e) for session, e in named.items()}
            shipped_logs[instance] = {session: str(cache / key) for session, key in keys.items()}
            wanted.update(keys.values())
    missing = sorted(key for key in wanted if not (cache / key).exists())
    with ThreadPoolExecutor(FETCHERS, thread_name_prefix="taplog-fetch") as pool:
        list(pool.map(lambda key: _fetch_one(store, key, cache / key), missing))
    blobs = sorted(str(cache / key) for key in wanted if layout.BLOB_KEY.fullmatch(key))
    return Fleet(sessions, blobs, cache / "blobs", shipped_logs)


def _newest_manifests(store: Store) -> dict[str, dict[str, Any]]:
    newest: dict[str, str] = {}
    for key in store.keys(layout.MANIFESTS):
        match = layout.MANIFEST_KEY.fullmatch(key)
        if match and key > newest.get(match["instance"], ""):
            newest[match["instance"]] = key
    return {instance: orjson.loads(store.read(key)) for instance, key in newest.items()}


@dataclass(frozen=True, slots=True)
class _Entry:
    """What a manifest names of one session, as keys: Parquet file, blobs, log."""

    events: str
    blobs: list[str]
    log: str | None  # checked only when it is fetched


def _named(instance: str, manifest: dict[str, Any]) -> dict[str, _Entry]:
    """Session -> what the manifest names of it, the Parquet and blob keys checked."""
    if manifest.get("format") != layout.MANIFEST_FORMAT:
        raise StoreError(f"instance {instance}: a manifest of format {manifest.get('format')}")
    named = {}
    for session, entry in manifest["sessions"].items():
        key = entry.get("events", "")
        match = layout.EVENTS_KEY.fullmatch(key)
        if match is None or match["instance"] != instance:
            raise StoreError(f"instance {instance}: session {session!r} names {key!r}")
        blobs = [layout.blob_key(sha) for sha in entry.get("blobs", [])]
        if not all(layout.BLOB_KEY.fullmatch(blob) for blob in blobs):
            raise StoreError(f"instance {instance}: session {session!r} names a bad blob")
        named[session] = _Entry(key, blobs, entry.get("log"))
    return named


def _log(instance: str, session: str, entry: _Entry) -> str:
    """The session's log key, checked: the layout's shape, this instance and this session."""
    key = entry.log or ""
    match = layout.LOG_KEY.fullmatch(key)
    if match is None or key != layout.log_key(instance, session, match["sha"], match["suffix"]):
        raise StoreError(f"instance {instance}: session {session!r} names the log {key!r}")
    return key


def _sha_of(key: str) -> str:
    """The SHA-256 a checked key names its object by."""
    match = (
        layout.LOG_KEY.fullmatch(key)
        or layout.EVENTS_KEY.fullmatch(key)
        or layout.BLOB_KEY.fullmatch(key)
    )
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
