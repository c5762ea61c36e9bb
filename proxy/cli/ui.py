"""`taplog ui`: the web UI over a data dir, on its own port."""

from __future__ import annotations

from typing import Any

import click

from taplog.proxy.cli.options import data_dir_option, listening_options
from taplog.proxy.config import ConfigError, load


@click.command("ui")
@data_dir_option
@listening_options
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
