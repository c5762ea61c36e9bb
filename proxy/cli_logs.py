"""Commands that read the logs: `sql`, `sessions`, `show`, `compact`. No server needed."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from proxy.config import SETTINGS

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
_OUTPUTS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "jsonl"}

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


def _connect(data_dir: Path, writable: tuple[Path, ...] = ()) -> Any:
    from recorder.query import connect

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    return connect(data_dir, writable)


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


def _print(relation: Any, fmt: str) -> None:
    from recorder.tables import render

    types = [str(t) for t in relation.types]
    click.echo(render(relation.columns, types, relation.fetchall(), fmt))


def _write(con: Any, sql: str, output: Path) -> None:
    kind = _OUTPUTS.get(output.suffix.lower())
    if kind is None:
        raise click.BadParameter(f"use one of {', '.join(_OUTPUTS)}", param_hint="--output")
    options = {
        "parquet": "FORMAT parquet",
        "csv": "FORMAT csv, HEADER",
        "json": "FORMAT json, ARRAY true",
        "jsonl": "FORMAT json",
    }
    con.execute(f"COPY ({sql}) TO ? ({options[kind]})".replace("?", _quoted(output)))


def _quoted(path: Path) -> str:
    return "'" + str(path.resolve()).replace("'", "''") + "'"


@click.command()
@click.argument("sql")
@data_dir_option
@format_option
@click.option(
    "--output",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the result to a .parquet, .csv, .json or .jsonl file instead of printing it.",
)
def sql(sql: str, data_dir: Path, fmt: str, output: Path | None) -> None:
    """Query the logs with DuckDB SQL (views: events, llm_calls, tool_calls, sessions).

    Example: taplog sql "SELECT response_model, sum(cost_usd) FROM llm_calls GROUP BY 1"
    """
    from recorder.query import QueryError, check_read_only, query

    con = _connect(data_dir, (output,) if output else ())
    try:
        if output is None:
            _print(query(con, sql), fmt)
            return
        check_read_only(sql)
        _write(con, sql, output)
    except QueryError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # duckdb errors while writing
        raise click.ClickException(str(exc).strip()) from None


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
    from recorder.tables import render
    from recorder.timeline import SessionFilter, list_sessions

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
    from recorder.timeline import UnknownSession, show_session

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
    from recorder.compaction import compact as run

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    done = run(data_dir, idle_minutes * 60)
    click.echo(f"compacted {len(done)} session{'' if len(done) == 1 else 's'}")


COMMANDS = (sql, sessions, show, compact)
