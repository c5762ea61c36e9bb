"""Commands that read sessions: `sessions` (the list), `show` (one, whole) and `tail` (one, as
it grows). No server needed."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from taplog.proxy.cli.options import data_dir_option, fleet_options, format_option
from taplog.proxy.cli.sql import open_fleet, open_logs

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


FOLLOW_SECONDS = 0.25
LAST_ENTRIES = 100  # of a conversation, shown by `show --messages` (recorder.query.chat_page)


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


@click.command()
@data_dir_option
@fleet_options
@format_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=20,
    help="At most this many sessions.",
)
@click.option("--since", help="Only sessions active since then: 30m, 6h, 2d or a date.")
@click.option("--model", help="Only sessions that used this model.")
@click.option("--failing", is_flag=True, help="Only sessions with failed calls or tool errors.")
def sessions(
    data_dir: Path,
    fleet: str | None,
    fleet_cache: Path | None,
    fmt: str,
    limit: int,
    since: str | None,
    model: str | None,
    failing: bool,
) -> None:
    """Recent sessions, newest first, with calls, tokens, cost and errors.

    Each with its client and the person's first prompt (not a probe or a side call the
    agent makes beside its work), read from about one request body a session.

    With --fleet, every instance's shipped sessions, each with the instances that wrote it.

    Example: taplog sessions --since 2d --model gpt-4.1
    """
    from taplog.recorder.query.tables import render
    from taplog.recorder.query.timeline import SESSION_COLUMNS, SessionFilter, list_sessions

    wanted = SessionFilter(limit=limit, since=_since(since), model=model, failing=failing)
    if fleet is None:
        con, shown = open_logs(data_dir), SESSION_COLUMNS
    else:
        shown = "session, instances, " + SESSION_COLUMNS.removeprefix("session, ")
        con = open_fleet(fleet, fleet_cache, whole=True)
    columns, types, rows = list_sessions(con, wanted, shown)
    click.echo(render(columns, types, rows, fmt))


@click.command()
@click.argument("session")
@data_dir_option
@click.option("--full", is_flag=True, help="Show arguments and results whole, not clipped.")
@click.option(
    "--messages",
    is_flag=True,
    help="The conversation instead: prompts, answers, tool calls and their results, "
    "each turn once, sub-agents nested; its last entries (see --last).",
)
@click.option(
    "--last",
    type=click.IntRange(min=1),
    default=LAST_ENTRIES,
    show_default=True,
    help="With --messages: this many of the conversation's last entries.",
)
@click.option(
    "--before",
    type=click.IntRange(min=1),
    help="With --messages: the entries before this seq (the footer of a page names it).",
)
@click.option("--all", "whole", is_flag=True, help="With --messages: the whole conversation.")
def show(
    session: str,
    data_dir: Path,
    full: bool,
    messages: bool,
    last: int,
    before: int | None,
    whole: bool,
) -> None:
    """A session as a timeline: calls, tool runs with arguments and results, failovers.

    Printed as it is read; no request body is read.

    With --messages, the conversation's last 100 entries; a footer says how to read the
    ones before (--before SEQ, or --all). A page reads the answers of its calls and the
    requests that end their chains (one or two for a page of a long tool loop), not
    every request: see docs/sessions.md.

    Example: taplog show 20261130T004933Z-1a2b3c4d --messages
    """
    from taplog.recorder.query.connect import connect
    from taplog.recorder.query.timeline import UnknownSession, show_lines

    given = click.get_current_context().get_parameter_source("last")
    if not messages and (before is not None or whole or given is ParameterSource.COMMANDLINE):
        raise click.UsageError("--last, --before and --all go with --messages")
    _log(data_dir, session)
    con = connect(data_dir, only=session, warn=lambda message: click.echo(message, err=True))
    width = None if full else 100
    if messages:
        _messages(con, session, width, None if whole else last, before)
        return
    try:
        for line in show_lines(con, session, width):
            click.echo(line)
    except UnknownSession as exc:
        raise click.ClickException(str(exc)) from None


def _messages(
    con: Any, session: str, width: int | None, last: int | None, before: int | None
) -> None:
    from taplog.recorder.query.chat import chat_text
    from taplog.recorder.query.chat_page import chat_page

    page = chat_page(con, session, last, before)
    for line in chat_text(page.threads, width):
        click.echo(line)
    if page.earlier is not None:
        click.echo(
            f"── the last {page.entries} entries, from seq {page.earlier}; the ones before: "
            f"taplog show {session} --messages --before {page.earlier} (or --all)"
        )


def _log(data_dir: Path, session: str) -> Path:
    """A session's log file, refused with a clear message when there is none."""
    from taplog.recorder.sessions import SESSION_ID
    from taplog.recorder.store.lognames import log_path

    path = log_path(data_dir / "sessions", session)
    if not SESSION_ID.fullmatch(session) or not path.is_file():
        raise click.ClickException(f"no session {session!r} in {data_dir} (see --data-dir)")
    return path


@click.command("tail")
@click.argument("session")
@data_dir_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they are recorded.")
@click.option(
    "-n",
    "--lines",
    type=click.IntRange(min=0),
    default=20,
    help="Start with the last N events.",
)
@click.option("--full", is_flag=True, help="Show arguments and results whole, not clipped.")
def tail(session: str, data_dir: Path, follow: bool, lines: int, full: bool) -> None:
    """A session's latest events, one line each; -f follows it as it is recorded.

    Recorded text is printed with control characters escaped. Ctrl-C stops.

    Example: taplog tail 20261130T004933Z-1a2b3c4d -f
    """
    from taplog.recorder.query.timeline import event_line
    from taplog.recorder.store.reader import (
        DamagedLine,
        LogFollower,
        LogRewritten,
        UnsupportedEvent,
    )

    width = None if full else 100
    follower = LogFollower(_log(data_dir, session))
    try:
        events = follower.poll()
        for event in events[-lines:] if lines else []:
            click.echo(event_line(event, width))
        while follow:
            time.sleep(FOLLOW_SECONDS)
            for event in follower.poll():
                click.echo(event_line(event, width))
    except (DamagedLine, UnsupportedEvent, LogRewritten) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
