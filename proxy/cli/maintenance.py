"""Keeping a data dir sound: `verify`, `repair`, `compact`, `migrate` and `prune`. No server
needed (`repair`, `migrate` and `prune` refuse while one owns the data dir)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from taplog.proxy.cli.options import (
    data_dir_option,
    fetched_fleet,
    fleet_location,
    fleet_options,
)


@click.command()
@click.argument("sessions", nargs=-1, metavar="[SESSION]...")
@data_dir_option
@fleet_options
def verify(
    sessions: tuple[str, ...], data_dir: Path, fleet: str | None, fleet_cache: Path | None
) -> None:
    """Prove session logs whole: line checksums, the hash chain, seq 1, 2, 3… without gaps.

    Checks the named sessions, or all of them. Damage is printed as
    FILE:LINE (byte OFFSET): REASON and makes the exit status 1. A torn last
    line (a write cut short by a crash) is reported but is not damage: readers
    skip it and `taplog repair` (or the next write) moves it to quarantine/.
    Safe to run while `taplog serve` records.

    With --fleet, every instance's shipped logs, and each change of a session's
    owner: one line per handover (linked at seq N, declared, or not yet shipped),
    FORK where two owners wrote the same epoch, a line of an old epoch came after
    the handover, or a link names a line that is not there; any fork or damage
    makes the exit status 1.

    Example: taplog verify --data-dir taplog-data 20261130T004933Z-1a2b3c4d
    """
    if fleet is not None:
        _report_fleet(_fleet_checked(fleet, fleet_cache, sessions))
        return
    from taplog.recorder.verify import verify as run

    _report(_checked(run, data_dir, sessions))


@click.command()
@click.argument("sessions", nargs=-1, metavar="[SESSION]...")
@data_dir_option
def repair(sessions: tuple[str, ...], data_dir: Path) -> None:
    """Repair torn tails now, as `taplog serve` does when it opens a log.

    A torn last line is moved to quarantine/ (kept, never deleted) and the log
    cut back to its last whole line; a log whose last whole line is damaged is
    moved to quarantine/ whole and its session starts anew with an error
    event. Damage in the middle of a log is reported (exit status 1) and left
    as it is. Refuses to run while `taplog serve` owns the data dir.

    Example: taplog repair --data-dir taplog-data
    """
    from taplog.recorder.verify import repair as run

    _report(_checked(run, data_dir, sessions))


def _logs_dir(data_dir: Path) -> None:
    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")


def _checked(run: Any, data_dir: Path, names: tuple[str, ...]) -> list[Any]:
    from taplog.recorder.store.lock import DataDirBusy
    from taplog.recorder.verify import UnknownSessions

    _logs_dir(data_dir)
    try:
        return run(data_dir, names)
    except UnknownSessions as exc:
        raise click.BadParameter(str(exc), param_hint="SESSION") from None
    except DataDirBusy as exc:
        raise click.ClickException(f"{exc}; it repairs the files it opens itself") from None


def _report(reports: list[Any]) -> None:
    """Print what was found, a summary line, and exit 1 when any file is damaged."""
    for report in reports:
        if report.repaired:
            click.echo(f"repaired: {report.path}: {report.repaired}")
        _echo_problems(report)
    damaged = [r for r in reports if not r.ok]
    counts = {
        "repaired": sum(r.repaired is not None for r in reports),
        "with a torn tail": sum(r.torn is not None for r in reports),
    }
    summary = f"checked {len(reports)} session log{'' if len(reports) == 1 else 's'}, "
    summary += f"{sum(r.lines for r in reports)} lines: {len(damaged)} damaged"
    click.echo(summary + "".join(f", {n} {what}" for what, n in counts.items() if n))
    if damaged:
        raise SystemExit(1)


def _echo_problems(report: Any, where: str = "") -> None:
    """A log's torn tail and damage, a line each (`where`: the instance and session of a
    fleet's log)."""
    if report.torn is not None:
        click.echo(f"torn tail: {where}{report.torn}")
    for finding in report.damage:
        click.echo(f"damaged: {where}{finding}")
    if report.more_damage:
        click.echo(f"damaged: {where}{report.path}: {report.more_damage} more damaged lines")


def _fleet_checked(url: str, cache: Path | None, names: tuple[str, ...]) -> Any:
    """The fleet's shipped logs fetched into `cache` and checked (`recorder.fleet.verify`)."""
    shipped = fetched_fleet(url, cache, logs=True)
    from taplog.recorder.fleet.verify import verify_fleet
    from taplog.recorder.verify import UnknownSessions

    try:
        return verify_fleet(shipped.logs, shipped.blobs_folder, names)
    except UnknownSessions as exc:
        raise click.BadParameter(str(exc), param_hint="SESSION") from None


def _report_fleet(report: Any) -> None:
    """Damage and torn tails by instance and session, a line per handover or fork, a
    summary line; exit 1 when anything is damaged or forked."""
    logs: dict[str, list[Any]] = {}
    findings: dict[str, list[Any]] = {}
    for instance, session, log in report.logs:
        logs.setdefault(session, []).append((instance, log))
    for finding in report.findings:
        findings.setdefault(finding.session, []).append(finding)
    for session in report.sessions:
        for instance, log in logs.get(session, []):
            _echo_problems(log, f"instance {instance}, session {session}: ")
        for finding in findings.get(session, []):
            click.echo(str(finding))
    click.echo(report.summary())
    if not report.ok:
        raise SystemExit(1)


_FLEET_TABLE = click.option(
    "--fleet",
    metavar="s3://BUCKET/PREFIX",
    help="The fleet's events table there (serve --ship-to) instead of --data-dir; the store "
    "from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION. "
    "Needs taplog[fleet].",
)


@click.command()
@data_dir_option
@click.option(
    "--idle-minutes",
    type=click.FloatRange(min=0),
    default=0,
    help="Only sessions whose log has not changed for this long.",
)
@_FLEET_TABLE
def compact(data_dir: Path, idle_minutes: float, fleet: str | None) -> None:
    """Copy sessions into Parquet so queries over long histories stay fast.

    The JSONL logs stay the source of truth; a session that changes again is
    read from its log until it is compacted anew.

    With --fleet, the fleet's events table: every partition (a day of an
    instance) of many small files merged into one, then the files no snapshot
    of the last day needs deleted (vacuum), a killed round's too. Instances
    do this on their own as they ship; this runs it now.

    Example: taplog compact --idle-minutes 60
    """
    if fleet is not None:
        _compact_fleet(fleet)
        return
    from taplog.recorder.query.compaction import compact as run

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    done = run(data_dir, idle_minutes * 60)
    click.echo(f"compacted {len(done)} session{'' if len(done) == 1 else 's'}")


def _compact_fleet(url: str) -> None:
    location = fleet_location(url)
    from taplog.recorder.fleet import table
    from taplog.recorder.fleet.store import StoreError

    try:
        merged = table.compact(location)
        deleted = table.vacuum(location)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(
        f"{location}: {_count(merged, 'small file')} merged away, "
        f"{_count(deleted, 'unneeded file')} deleted"
    )


@click.command("migrate")
@data_dir_option
def migrate(data_dir: Path) -> None:
    """Upgrade session files written by an older taplog to the current format.

    Needs the data dir to itself (stop taplog serve first); originals go to quarantine/.

    Example: taplog migrate --data-dir taplog-data
    """
    from taplog.recorder.migrations import migrate_data_dir
    from taplog.recorder.store.lock import DataDirBusy
    from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    try:
        rewritten = migrate_data_dir(data_dir)
    except (DataDirBusy, DamagedLine, UnsupportedEvent) as exc:
        raise click.ClickException(str(exc)) from None
    for path in rewritten:
        click.echo(f"upgraded {path}")
    click.echo(f"{len(rewritten)} session files upgraded")


@click.command()
@data_dir_option
@click.option(
    "--older-than",
    "age",
    required=True,
    metavar="AGE",
    help="Sessions whose last event is older than this go: 30d, 12h or 90m (0d: every one).",
)
@click.option("--dry-run", is_flag=True, help="Print what would go; change nothing.")
@_FLEET_TABLE
def prune(data_dir: Path, age: str, dry_run: bool, fleet: str | None) -> None:
    """Remove whole sessions whose last event is older than AGE.

    A session goes with the blobs no other session points at, its quarantined
    files and its compacted rows; a line per session goes to pruned.jsonl.
    Refuses while `taplog serve` owns the data dir: give it --retention-days
    instead. --dry-run only reads, so it runs beside serve.

    With --fleet, the days of the fleet's events table before AGE ago go, by
    the day each session started: their rows in one commit, then their shipped
    logs and the blobs no session left names. Their table files are deleted by
    the vacuum a day later (readers of an older snapshot keep working). Safe
    while the fleet ships.

    Example: taplog prune --older-than 30d --dry-run
    """
    from taplog.recorder.retention import BadAge, parse_age
    from taplog.recorder.retention import prune as run
    from taplog.recorder.store.lock import DataDirBusy

    try:
        older_than = parse_age(age)
    except BadAge as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    if fleet is not None:
        _prune_fleet(fleet, older_than, dry_run)
        return
    _logs_dir(data_dir)
    try:
        gone = run(data_dir, older_than, dry_run=dry_run)
    except DataDirBusy as exc:
        raise click.ClickException(
            f"{exc}; or let it prune on its own: taplog serve --retention-days N"
        ) from None
    verb = "would prune" if dry_run else "pruned"
    for pruned in gone:
        click.echo(
            f"{verb} {pruned.session}: last event {pruned.last_event}, {pruned.lines} lines, "
            f"{_bytes(pruned.bytes)}, {_count(pruned.blobs_removed, 'blob')}"
        )
    summary = (
        f"{verb} {_count(len(gone), 'session')} older than {age}: "
        f"{sum(p.lines for p in gone)} lines, {_bytes(sum(p.bytes for p in gone))}, "
        f"{_count(sum(p.blobs_removed for p in gone), 'blob')}"
    )
    click.echo(summary + ("; nothing was changed (--dry-run)" if dry_run else ""))


def _prune_fleet(url: str, older_than: Any, dry_run: bool) -> None:
    """The fleet's days before `older_than` ago out of its table, then their logs and
    the blobs no session left names."""
    from datetime import UTC, datetime

    location = fleet_location(url)
    from taplog.recorder.fleet import layout, table
    from taplog.recorder.fleet.store import Store, StoreError

    before = (datetime.now(UTC) - older_than).strftime("%Y-%m-%d")
    try:
        expired = table.expire(location, before, dry_run=dry_run)
        if not dry_run:
            store = Store(location)
            for key in sorted(expired.logs) + [layout.blob_key(s) for s in sorted(expired.blobs)]:
                store.delete(key)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    verb = "would prune" if dry_run else "pruned"
    for day, instance, session in expired.sessions:
        click.echo(f"{verb} {session} (instance {instance}, started {day})")
    click.echo(
        f"{location}: {verb} {_count(len(expired.sessions), 'session')} started before "
        f"{before}: {_count(len(expired.logs), 'log')}, {_count(len(expired.blobs), 'blob')}"
        + ("; nothing was changed (--dry-run)" if dry_run else "")
    )


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _bytes(size: int) -> str:
    scaled, unit = float(size), "bytes"
    for larger in ("KiB", "MiB", "GiB"):
        if scaled < 1024:
            break
        scaled, unit = scaled / 1024, larger
    return f"{size} bytes" if unit == "bytes" else f"{scaled:.1f} {unit}"
