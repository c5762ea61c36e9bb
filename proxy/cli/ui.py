"""Commands to watch sessions: `ui` (the web UI) and `tail` (its terminal twin)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from taplog.proxy.cli.logs import data_dir_option
from taplog.proxy.config import ConfigError, load

FOLLOW_SECONDS = 0.25


def inbound_auth_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--auth-token and --insecure-no-auth, for every command that listens (`serve` has
    them from its settings): the same bind and token rule for all of them."""
    command = click.option(
        "--insecure-no-auth",
        is_flag=True,
        envvar="TAPLOG_INSECURE_NO_AUTH",
        help="DANGER: listen beyond loopback without tokens; anyone who reaches the port "
        "can read every session.",
    )(command)
    return click.option(
        "--auth-token",
        envvar="TAPLOG_AUTH_TOKEN",
        help="Tokens a caller must present (/t/<token>/… or X-Taplog-Token); required "
        "beyond loopback. [$TAPLOG_AUTH_TOKEN]",
    )(command)


@click.command("ui")
@data_dir_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8788, show_default=True)
@inbound_auth_options
def ui(**flags: Any) -> None:
    """Serve the web UI over a data dir: sessions, timelines, costs, live updates.

    Reads the same views as `taplog sql`; no proxy needed, safe while `taplog
    serve` records. Beyond loopback it needs inbound tokens, as `serve` does.

    Example: taplog ui --data-dir taplog-data --port 8788
    """
    import asyncio

    from taplog.proxy.server import ServeError
    from taplog.proxy.ui.server import run_ui

    try:
        settings = load({k: v for k, v in flags.items() if v is not None}, {}, None)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        asyncio.run(run_ui(settings))
    except ServeError as exc:
        raise click.ClickException(str(exc)) from None


@click.command("tail")
@click.argument("session")
@data_dir_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they are recorded.")
@click.option(
    "-n",
    "--lines",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Start with the last N events.",
)
@click.option("--full", is_flag=True, help="Show arguments and results whole, not clipped.")
def tail(session: str, data_dir: Path, follow: bool, lines: int, full: bool) -> None:
    """A session's latest events, one line each; -f follows it as it is recorded.

    Recorded text is printed with control characters escaped. Ctrl-C stops.

    Example: taplog tail 20261130T004933Z-1a2b3c4d -f
    """
    from taplog.recorder.query.timeline import event_line
    from taplog.recorder.reader import DamagedLine, LogFollower, LogRewritten, UnsupportedEvent
    from taplog.recorder.sessions import SESSION_ID

    path = data_dir / "sessions" / f"{session}.jsonl"
    if not SESSION_ID.fullmatch(session) or not path.is_file():
        raise click.ClickException(f"no session {session!r} in {data_dir} (see --data-dir)")
    width = None if full else 100
    follower = LogFollower(path)
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


COMMANDS = (ui, tail)
