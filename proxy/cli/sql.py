"""`taplog sql`: one read-only query over the logs, printed or written to a file; no server."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, TypeVar

import click

from taplog.proxy.cli.options import data_dir_option, fetched_fleet, fleet_options, format_option

T = TypeVar("T")


_OUTPUTS = {
    ".parquet": "FORMAT parquet",
    ".csv": "FORMAT csv, HEADER",
    ".json": "FORMAT json, ARRAY true",
    ".jsonl": "FORMAT json",
}


def open_logs(data_dir: Path, output: Path | None = None) -> Any:
    """DuckDB over the data dir's logs (read-only; `output` the one file a COPY may write)."""
    from taplog.recorder.query.connect import connect

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    return connect(data_dir, output, warn=lambda message: click.echo(message, err=True))


def open_fleet(
    url: str, cache: Path | None, output: Path | None = None, whole: bool = False
) -> Any:
    """DuckDB over what a fleet shipped to `url` (read-only); blobs fetched into `cache`.
    `whole`: for a command that reads every session's summary (its columns read once)."""
    fleet = fetched_fleet(url, cache)
    from taplog.recorder.fleet.views import connect_fleet

    return connect_fleet(fleet, output, whole)


def _open(data_dir: Path, fleet: str | None, cache: Path | None, output: Path | None = None) -> Any:
    return open_logs(data_dir, output) if fleet is None else open_fleet(fleet, cache, output)


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
@fleet_options
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
    help="Stop the query after this many seconds; 0 for no limit. Ctrl-C stops it too.",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=0),
    default=1000,
    help="Print at most this many rows and say how many more there are; 0 for all.",
)
def sql(
    sql: str,
    data_dir: Path,
    fleet: str | None,
    fleet_cache: Path | None,
    fmt: str,
    output: Path | None,
    timeout: float,
    max_rows: int,
) -> None:
    """Query the logs with DuckDB SQL (views: events, llm_calls, tool_calls, sessions).

    Only queries run: SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE and
    EXPLAIN of those. Nothing is written but the --output file.

    With --fleet, the same views over every instance's shipped data, each row with its
    instance (sessions: the list of them).

    Example: taplog sql "SELECT response_model, sum(cost_usd) FROM llm_calls GROUP BY 1"
    """
    if output is None:
        con = _open(data_dir, fleet, fleet_cache)
        _print(*_stoppable(con, timeout, lambda: _fetch(con, sql, max_rows)), fmt)
        return
    options = _output_format(output, data_dir)
    con = _open(data_dir, fleet, fleet_cache, _partial(output))
    _stoppable(con, timeout, lambda: _write(con, sql, output, options))
