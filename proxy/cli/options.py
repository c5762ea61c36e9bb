"""Options that several commands share: settings, the config file, the data dir, output
format, and the inbound-token rule of every command that listens."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from taplog.proxy.config import SETTINGS, Settings, choices, config_file, env_name, flag_name, load
from taplog.proxy.failover.rules import Fallbacks, load_fallbacks

_CLICK_TYPES: dict[str, Any] = {
    "int": click.INT,
    "float": click.FLOAT,
    "Path": click.Path(path_type=Path, file_okay=False),
    "str": click.STRING,
}


def settings_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """A flag for every setting, generated from its one declaration."""
    for name, declared in reversed(SETTINGS.items()):
        help_text = f"{declared.metadata['help']} [default: {declared.default}; ${env_name(name)}]"
        if declared.type == "bool":
            option = click.option(flag_name(name), name, is_flag=True, default=None, help=help_text)
        else:
            allowed = choices(name)
            kind = click.Choice(allowed) if allowed else _CLICK_TYPES[declared.type]
            option = click.option(flag_name(name), name, type=kind, help=help_text)
        command = option(command)
    return command


config_option = click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="TOML file of settings (see config/taplog.example.toml). [$TAPLOG_CONFIG]",
)


def load_settings(
    config: Path | None, flags: dict[str, Any], rules: tuple[str, ...]
) -> tuple[Settings, Fallbacks]:
    """Settings and failover providers/rules, as `serve` reads them (flags > env > file)."""
    path, from_file = config_file(config, os.environ)
    settings = load(flags, os.environ, path)
    fallbacks = load_fallbacks(
        settings.openai_base, settings.anthropic_base, from_file, rules, settings.gemini_base
    )
    return settings, fallbacks


data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=SETTINGS["data_dir"].default,
    envvar="TAPLOG_DATA_DIR",
    help="The data dir `taplog serve` records into. [$TAPLOG_DATA_DIR]",
)


def fleet_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--fleet and --fleet-cache: read what a fleet shipped to object storage instead."""
    command = click.option(
        "--fleet-cache",
        type=click.Path(path_type=Path, file_okay=False),
        help="Where the fleet's shipped files are kept between queries "
        "[default: ~/.cache/taplog/fleet/BUCKET/PREFIX].",
    )(command)
    return click.option(
        "--fleet",
        metavar="s3://BUCKET/PREFIX",
        help="Read every instance's data shipped there (serve --ship-to) instead of "
        "--data-dir; the store from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, "
        "AWS_SECRET_ACCESS_KEY, AWS_REGION. Needs taplog[fleet].",
    )(command)


def fleet_location(url: str) -> Any:
    """`url` as a fleet's location (`recorder.fleet.layout.Location`); a missing `fleet`
    extra or a bad URL end the command with a message."""
    try:
        import boto3  # noqa: F401  (imported by the store only once it is opened)
        import deltalake  # noqa: F401  (the events table, `recorder.fleet.table`)
        import pyarrow  # noqa: F401

        from taplog.recorder.fleet.layout import parse_location
    except ImportError as exc:
        raise click.ClickException(f"--fleet needs taplog[fleet] ({exc.name} is missing)") from None
    try:
        return parse_location(url)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--fleet") from None


def fetched_fleet(url: str, cache: Path | None, logs: bool = False) -> Any:
    """What a fleet shipped to `url` (its session logs too with `logs`), fetched into
    `cache` (`recorder.fleet.fetch.Fleet`); a missing `fleet` extra, a bad URL or a failing
    store end the command with a message."""
    location = fleet_location(url)
    from taplog.recorder.fleet.fetch import default_cache, fetch
    from taplog.recorder.fleet.store import StoreError

    try:
        return fetch(location, cache or default_cache(location), logs=logs)
    except StoreError as exc:
        raise click.ClickException(f"{location}: {exc}") from None


format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json", "jsonl"]),
    default="table",
    help="How to print the result.",
)


def listening_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """--host, --port, --auth-token and --insecure-no-auth, for every command that listens
    beside `serve` (which has them from its settings): the same bind and token rule for all."""
    command = click.option(
        "--insecure-no-auth",
        is_flag=True,
        envvar="TAPLOG_INSECURE_NO_AUTH",
        help="DANGER: listen beyond loopback without tokens; anyone who reaches the port "
        "can read every session.",
    )(command)
    command = click.option(
        "--auth-token",
        envvar="TAPLOG_AUTH_TOKEN",
        help="Tokens a caller must present (/t/<token>/… or X-Taplog-Token); required "
        "beyond loopback. [$TAPLOG_AUTH_TOKEN]",
    )(command)
    command = click.option("--port", type=click.IntRange(0, 65535), default=8788)(command)
    return click.option("--host", default="127.0.0.1", help="Address to listen on.")(command)
