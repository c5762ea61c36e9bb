"""Commands that read the logs: `sql`, `sessions`, `show`, `compact`, `verify`, `repair`.

No server needed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click

from taplog.proxy.config import SETTINGS

T = TypeVar("T")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_OUTPUTS = {
    ".parquet": "FORMAT parquet",
    ".csv": "FORMAT csv, HEADER",
    ".json": "FORMAT json, ARRAY true",
    ".jsonl": "FORMAT json",
}

data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=SETTINGS["data_dir"].default,
    show_default=True,
    envvar="TAPLOG_DATA_DIR",
    help="The data dir `taplog serve` records into. [$TAPLOG_DATA_DIR]",
)
format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "jsonl"]),
    default="table",
    show_default=True,
    help="How to print the result.",
)


def _connect(data_dir: Path, output: Path | None = None) -> Any:
    from taplog.recorder.query.connect import connect

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    return connect(data_dir, output, warn=lambda message: click.echo(message, err=True))


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    match = _DURATION.fullmatch(value)
    if match:
        ago = timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        return datetime.now(UTC).replace(tzinfo=None) - ago
    try:
        return datetime.fromisoformat(value).replace(tzinfo=None)
    except ValueError:
        raise click.BadParameter(
            "use a duration such as 30m, 6h, 2d or a date such as 2026-11-30"
        ) from None


def _fetch(con: Any, sql: str, max_rows: int) -> tuple[Any, list[Any], int]:
    """The query's relation and rows, or its first `max_rows` rows; how many there are in all."""
    from taplog.recorder.query.connect import query

    relation = query(con, sql)
    rows = relation.limit(max_rows + 1).fetchall() if max_rows else relation.fetchall()
    if len(rows) <= max_rows or not max_rows:
        return relation, rows, len(rows)
    [(total,)] = relation.aggregate("count(*)").fetchall()
    return relation, rows[:max_rows], total


def _print(relation: Any, rows: list[Any], total: int, fmt: str) -> None:
    """The rows, and on stderr how many were left out and how to get them."""
    from taplog.recorder.query.tables import render

    click.echo(render(relation.columns, [str(t) for t in relation.types], rows, fmt))
    if total > len(rows):
        left_out = total - len(rows)
        click.echo(
            f"{left_out} more row{'' if left_out == 1 else 's'} not shown (--max-rows "
            f"{len(rows)}): --max-rows 0 prints all {total}, --output FILE writes them all",
            err=True,
        )


def _output_format(output: Path, data_dir: Path) -> str:
    """COPY's options for `output`, a file outside the data dir (taplog serve's alone)."""
    options = _OUTPUTS.get(output.suffix.lower())
    if options is None:
        raise click.BadParameter(f"use one of {', '.join(_OUTPUTS)}", param_hint="--output")
    if output.resolve().is_relative_to(data_dir.resolve()):
        raise click.BadParameter("give a file outside the data dir", param_hint="--output")
    return options


def _partial(output: Path) -> Path:
    """Where the result is written before it replaces `output` whole."""
    return output.resolve().with_name(f".{output.name}.partial")


def _write(con: Any, sql: str, output: Path, options: str) -> None:
    """The query's whole result into `output`, by taplog's own COPY, to the file it names."""
    from taplog.recorder.query.connect import check_read_only

    check_read_only(sql)
    partial = _partial(output)
    target = "'" + str(partial).replace("'", "''") + "'"
    try:  # the query goes in as a value: query() runs one SELECT and nothing else
        con.execute(f"COPY (FROM query(?)) TO {target} ({options}, USE_TMP_FILE false)", [sql])
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(output)


def _stoppable(con: Any, timeout: float, work: Callable[[], T]) -> T:
    """`work` on `con`, interrupted after `timeout` seconds (0: never) or at Ctrl-C.

    DuckDB works in a thread while this one only waits, so Ctrl-C reaches it
    at once, whatever DuckDB is doing.
    """
    import duckdb

    from taplog.recorder.query.connect import QueryError

    pool = ThreadPoolExecutor(1, thread_name_prefix="taplog-sql")
    running = pool.submit(work)
    try:
        return running.result(timeout=timeout or None)
    except (QueryError, duckdb.Error) as exc:
        raise click.ClickException(str(exc).strip()) from None
    except TimeoutError:
        stopped = click.ClickException(f"stopped after {timeout:g} s (--timeout; 0 for no limit)")
    except KeyboardInterrupt:
        stopped = click.ClickException("stopped by Ctrl-C")
        stopped.exit_code = 130  # as a shell reports a command ended by SIGINT
    finally:
        pool.shutdown(wait=False)
    con.interrupt()
    wait([running])  # DuckDB notices within milliseconds
    raise stopped


@click.command()
@click.argument("sql")
@data_dir_option
@format_option
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the whole result to a .parquet, .csv, .json or .jsonl file instead of printing it.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=60,
    show_default=True,
    help="Stop the query after this many seconds; 0 for no limit. Ctrl-C stops it too.",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    default=1000,
    show_default=True,
    help="Print at most this many rows and say how many more there are; 0 for all.",
)
def sql(
    sql: str, data_dir: Path, fmt: str, output: Path | None, timeout: float, max_rows: int
) -> None:
    """Query the logs with DuckDB SQL (views: events, llm_calls, tool_calls, sessions).

    Only queries run: SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE and
    EXPLAIN of those. Nothing is written but the --output file.

    Example: taplog sql "SELECT response_model, sum(cost_usd) FROM llm_calls GROUP BY 1"
    """
    if output is None:
        con = _connect(data_dir)
        _print(*_stoppable(con, timeout, lambda: _fetch(con, sql, max_rows)), fmt)
        return
    options = _output_format(output, data_dir)
    con = _connect(data_dir, _partial(output))
    _stoppable(con, timeout, lambda: _write(con, sql, output, options))


@click.command()
@data_dir_option
@format_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="At most this many sessions.",
)
@click.option("--since", help="Only sessions active since then: 30m, 6h, 2d or a date.")
@click.option("--model", help="Only sessions that used this model.")
@click.option("--failing", is_flag=True, help="Only sessions with failed calls or tool errors.")
def sessions(
    data_dir: Path, fmt: str, limit: int, since: str | None, model: str | None, failing: bool
) -> None:
    """Recent sessions, newest first, with calls, tokens, cost and errors.

    Example: taplog sessions --since 2d --model gpt-4.1
    """
    from taplog.recorder.query.tables import render
    from taplog.recorder.query.timeline import SessionFilter, list_sessions

    wanted = SessionFilter(limit=limit, since=_since(since), model=model, failing=failing)
    columns, types, rows = list_sessions(_connect(data_dir), wanted)
    click.echo(render(columns, types, rows, fmt))


@click.command()
@click.argument("session")
@data_dir_option
@click.option("--full", is_flag=True, help="Show arguments and results whole, not clipped.")
def show(session: str, data_dir: Path, full: bool) -> None:
    """A session as a timeline: calls, tool runs with arguments and results, failovers.

    Example: taplog show 20261130T004933Z-1a2b3c4d
    """
    from taplog.recorder.query.timeline import UnknownSession, show_session

    try:
        click.echo(show_session(_connect(data_dir), session, None if full else 100))
    except UnknownSession as exc:
        raise click.ClickException(str(exc)) from None


@click.command()
@data_dir_option
@click.option(
    "--idle-minutes",
    type=click.FloatRange(min=0),
    default=0,
    show_default=True,
    help="Only sessions whose log has not changed for this long.",
)
def compact(data_dir: Path, idle_minutes: float) -> None:
    """Copy sessions into Parquet so queries over long histories stay fast.

    The JSONL logs stay the source of truth; a session that changes again is
    read from its log until it is compacted anew.

    Example: taplog compact --idle-minutes 60
    """
    from taplog.recorder.query.compaction import compact as run

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    done = run(data_dir, idle_minutes * 60)
    click.echo(f"compacted {len(done)} session{'' if len(done) == 1 else 's'}")


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
        if report.torn is not None:
            click.echo(f"torn tail: {report.torn}")
        for finding in report.damage:
            click.echo(f"damaged: {finding}")
        if report.more_damage:
            click.echo(f"damaged: {report.path}: {report.more_damage} more damaged lines")
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


@click.command()
@click.argument("sessions", nargs=-1, metavar="[SESSION]...")
@data_dir_option
def verify(sessions: tuple[str, ...], data_dir: Path) -> None:
    """Prove session logs whole: line checksums, the hash chain, seq 1, 2, 3… without gaps.

    Checks the named sessions, or all of them. Damage is printed as
    FILE:LINE (byte OFFSET): REASON and makes the exit status 1. A torn last
    line (a write cut short by a crash) is reported but is not damage: readers
    skip it and `taplog repair` (or the next write) moves it to quarantine/.
    Safe to run while `taplog serve` records.

    Example: taplog verify --data-dir taplog-data 20261130T004933Z-1a2b3c4d
    """
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


COMMANDS = (sql, sessions, show, compact, verify, repair)
