"""Settings as the commands that run the proxy or call vendors read them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from taplog.proxy.config import Settings, config_file, load
from taplog.proxy.failover.rules import Fallbacks, load_fallbacks

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
    fallbacks = load_fallbacks(settings.openai_base, settings.anthropic_base, from_file, rules)
    return settings, fallbacks
