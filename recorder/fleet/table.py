"""The fleet's events: one Delta Lake table that taplog and every other engine read alike.

    PREFIX/tables/events/     a Delta Lake table (delta-rs), partitioned by `day` (the day
                              each session started, UTC) and `instance`

A row is an event as `recorder.query.views` types it (`data` is its line as stored, blobs
and resent history left apart), with the `instance` that shipped it, the `day` and
`shipped_log` (the key of its session's log, `recorder.fleet.layout`).

Delta Lake rather than Iceberg: a Delta commit is the conditional write of the table's
next log entry, which any S3 store does, where Iceberg's needs a catalog service beside
the bucket. Spark, Trino, ClickHouse (chDB), DuckDB and Polars read it as it is.

- A shipping round is one commit (`commit_round`): it removes the rows its sessions had
  (their previous copy, in the instance's partition of their day) and adds their new copy.
  A reader of any snapshot sees each session once; files written by a round that never
  committed are in no snapshot. Instances commit at once safely: each commit is written
  with `If-None-Match` (`conditional_put = etag`), and delta-rs retries on the next
  version when another took it (their partitions differ, so nothing conflicts).
- `compact` merges a partition's small files after a round that leaves many; `vacuum`
  removes the files no snapshot of the last `RETENTION_HOURS` needs (replaced copies,
  compacted files, a killed round's uploads); `expire` takes whole days out.
- A question reads what it needs (`PROPERTIES`, `_writer`): the log is a checkpoint and
  a few commits, with column ranges of the columns filters use; a file's footer has
  ranges of every column but `data`, cut short.

The store's settings come from the variables boto3 reads (`storage_options`), never logged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taplog.recorder.fleet.layout import Location
from taplog.recorder.fleet.store import StoreError

if TYPE_CHECKING:
    import pyarrow
    import pyarrow.dataset
    from deltalake import DeltaTable

TABLE = "tables/events"
PARTITIONS = ["day", "instance"]
SMALL_FILES = 8  # a partition with more is compacted into one after a round
RETENTION_HOURS = 24  # what vacuum keeps for readers of older snapshots
# Set when the table is made. A reader replays the commits since the last checkpoint, which
# names every file with its column ranges and every file removed within the retention: so
# few commits, ranges of the columns a filter uses alone, and removed files kept a day.
PROPERTIES = {
    "delta.checkpointInterval": "20",
    "delta.dataSkippingStatsColumns": "ts,session,seq,type",
    "delta.deletedFileRetentionDuration": f"interval {RETENTION_HOURS // 24} days",
}
STATS_CHARS = 64  # a text column's min and max in a file's footer are cut to this


def table_uri(location: Location) -> str:
    return f"s3://{location.bucket}/{location.key(TABLE)}"


def storage_options() -> dict[str, str]:
    """delta-rs's S3 settings, from the variables boto3 reads (`recorder.fleet.store`)."""
    env = os.environ
    options = {"conditional_put": "etag"}  # commits are written only where none is
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if env.get(name):
            options[name] = env[name]
    options["AWS_REGION"] = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "us-east-1"
    return options


def _writer() -> Any:
    from deltalake import ColumnProperties, WriterProperties

    from taplog.recorder.query.compaction import ROW_GROUP

    # small row groups, as a local segment's: a query reading `data` for a few rows
    # decompresses only the groups they are in; no footer holds a range of whole lines
    return WriterProperties(
        max_row_group_size=ROW_GROUP,
        compression="ZSTD",
        statistics_truncate_length=STATS_CHARS,
        column_properties={"data": ColumnProperties(statistics_enabled="NONE")},
    )


def _failed(doing: str, location: Location, exc: Exception) -> StoreError:
    """A delta-rs error as taplog's: its kind and first line (it names no credential)."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return StoreError(f"{doing} {table_uri(location)}: {type(exc).__name__}: {first[:300]}")


def open_table(location: Location) -> DeltaTable | None:
    """The table's current snapshot; None when nothing was shipped yet."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table_uri(location), storage_options=storage_options())
    except TableNotFoundError:
        return None
    except Exception as exc:  # delta-rs raises its own, OSError and plain Exception alike
        raise _failed("reading", location, exc) from None


def dataset(table: DeltaTable) -> pyarrow.dataset.Dataset:
    """The snapshot as a dataset whose files carry their partition and column ranges, so
    a filter on `day`, `instance` or `ts` skips files, and a scan reads byte ranges."""
    return table.to_pyarrow_dataset()


def commit_round(
    location: Location, rows: Any, instance: str, sessions: dict[str, list[str]]
) -> None:
    """One commit: the rows of `sessions` (day -> the sessions that started on it) in
    `instance`'s partitions replaced by `rows` (an Arrow stream of their new copy)."""
    from deltalake import write_deltalake

    table = open_table(location)
    common: dict[str, Any] = {
        "partition_by": PARTITIONS,
        "storage_options": storage_options(),
        "writer_properties": _writer(),
        "schema_mode": "merge",  # a newer taplog's added columns join the table
    }
    try:
        if table is None:
            write_deltalake(
                table_uri(location),
                rows,
                mode="append",
                configuration=PROPERTIES,
                **common,
            )
        else:
            write_deltalake(
                table, rows, mode="overwrite", predicate=_replaced(instance, sessions), **common
            )
    except Exception as exc:
        raise _failed("committing to", location, exc) from None


def _replaced(instance: str, sessions: dict[str, list[str]]) -> str:
    """The rows a round replaces, as delta-rs's SQL predicate."""
    return " OR ".join(
        f"(day = {_literal(day)} AND instance = {_literal(instance)} "
        f"AND session IN ({', '.join(_literal(s) for s in sorted(names))}))"
        for day, names in sorted(sessions.items())
    )


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def compact(location: Location, instance: str | None = None, days: Iterable[str] = ()) -> int:
    """Merge the small files of `instance`'s partitions of `days` (of every partition
    holding more than `SMALL_FILES` without them); how many files were merged away."""
    table = open_table(location)
    if table is None:
        return 0
    crowded = _crowded(table, instance, set(days))
    removed = 0
    try:
        for day, of in crowded:
            metrics = table.optimize.compact(
                partition_filters=[("day", "=", day), ("instance", "=", of)],
                writer_properties=_writer(),
            )
            removed += int(metrics.get("numFilesRemoved", 0)) - int(metrics.get("numFilesAdded", 0))
    except Exception as exc:
        raise _failed("compacting", location, exc) from None
    return removed


def _crowded(table: DeltaTable, instance: str | None, days: set[str]) -> list[tuple[str, str]]:
    """The (day, instance) partitions that hold more than `SMALL_FILES` files."""
    import pyarrow

    actions = pyarrow.table(table.get_add_actions(flatten=True))
    counts: dict[tuple[str, str], int] = {}
    for day, of in zip(
        actions.column("partition.day").to_pylist(),
        actions.column("partition.instance").to_pylist(),
        strict=True,
    ):
        if (instance is None or of == instance) and (not days or day in days):
            counts[(day, of)] = counts.get((day, of), 0) + 1
    return sorted(part for part, files in counts.items() if files > SMALL_FILES)


def vacuum(location: Location) -> int:
    """Delete the table's files that no snapshot of the last `RETENTION_HOURS` needs,
    a killed round's too; how many."""
    table = open_table(location)
    if table is None:
        return 0
    try:
        return len(
            table.vacuum(
                retention_hours=RETENTION_HOURS,
                dry_run=False,
                full=True,  # files no commit names (a killed round's) go too
            )
        )
    except Exception as exc:
        raise _failed("vacuuming", location, exc) from None


@dataclass(frozen=True, slots=True)
class Expired:
    """What taking days out of the table removes (or would, in a dry run)."""

    sessions: list[tuple[str, str, str]]  # (day, instance, session)
    logs: set[str]  # their logs' keys
    blobs: set[str]  # the SHA-256 of the blobs no session left names


def expire(location: Location, before: str, dry_run: bool = False) -> Expired:
    """Take the sessions that started before the day `before` out of the table, in one
    commit (unless `dry_run`); what went."""
    import pyarrow.dataset as ds

    table = open_table(location)
    if table is None:
        return Expired([], set(), set())
    old = ds.field("day") < before
    try:
        scanned = dataset(table)
        gone = scanned.to_table(
            filter=old, columns=["day", "instance", "session", "shipped_log", "blob_sha256"]
        )
        kept = scanned.to_table(
            filter=~old & ds.field("blob_sha256").is_valid(), columns=["blob_sha256"]
        )
        if gone.num_rows and not dry_run:
            table.delete(f"day < {_literal(before)}")
    except Exception as exc:
        raise _failed("expiring days in", location, exc) from None
    sessions = gone.group_by(["day", "instance", "session"]).aggregate([])
    return Expired(
        sorted((r["day"], r["instance"], r["session"]) for r in sessions.to_pylist()),
        set(gone.column("shipped_log").unique().drop_null().to_pylist()),
        set(gone.column("blob_sha256").unique().drop_null().to_pylist())
        - set(kept.column("blob_sha256").unique().to_pylist()),
    )
