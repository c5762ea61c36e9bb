"""The `taplog` command. Commands are thin: parse options, call one function."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from proxy.cli_logs import COMMANDS
from proxy.config import FSYNC_CHOICES, SETTINGS, ConfigError, env_name, flag_name, load
from recorder import __version__
from recorder.lock import DataDirBusy

_CLICK_TYPES: dict[str, Any] = {
    "int": click.INT,
    "float": click.FLOAT,
    "Path": click.Path(path_type=Path, file_okay=False),
    "str": click.STRING,
}


def settings_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """A flag for every setting, generated from its one declaration."""
    for name, declared in reversed(SETTINGS.items()):
        kind = click.Choice(FSYNC_CHOICES) if name == "fsync" else _CLICK_TYPES[declared.type]
        help_text = f"{declared.metadata['help']} [default: {declared.default}; ${env_name(name)}]"
        command = click.option(flag_name(name), name, type=kind, help=help_text)(command)
    return command


@click.group()
@click.version_option(__version__, prog_name="taplog")
def main() -> None:
    """taplog: a transparent recording proxy for LLM agents."""


@main.command()
@settings_options
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="TOML file of settings (see config/taplog.example.toml). [$TAPLOG_CONFIG]",
)
def serve(config: Path | None, **flags: Any) -> None:
    """Run the proxy; point OPENAI_BASE_URL / ANTHROPIC_BASE_URL at it.

    Example: taplog serve --port 8787 --data-dir ./taplog-data
    """
    from proxy.server import ServeError
    from proxy.server import serve as run

    try:
        settings = load(flags, os.environ, config)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(run(settings))
    except (ServeError, DataDirBusy) as exc:
        raise click.ClickException(str(exc)) from None


for command in COMMANDS:
    main.add_command(command)
