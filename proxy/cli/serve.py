"""`taplog serve` (the proxy) and `taplog check-config` (its config file, checked alone)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from taplog.proxy.cli.options import config_option, load_settings, settings_options
from taplog.proxy.config import ConfigError
from taplog.proxy.observe.log_lines import configure_logging
from taplog.recorder.store.lock import DataDirBusy
from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent


@click.command()
@settings_options
@config_option
@click.option(
    "--fallback",
    "fallback_rules",
    multiple=True,
    metavar="MODEL=PROVIDER:MODEL[,…]",
    help="Fail over calls for MODEL (a name or glob) to these targets, in order; repeatable. "
    "Keys come from OPENAI_API_KEY / ANTHROPIC_API_KEY.",
)
def serve(config: Path | None, fallback_rules: tuple[str, ...], **flags: Any) -> None:
    """Run the proxy; point OPENAI_BASE_URL / ANTHROPIC_BASE_URL at it.

    Listening beyond loopback (--host 0.0.0.0) needs inbound tokens
    (TAPLOG_AUTH_TOKEN); clients then use http://HOST:8787/t/<token>/v1.
    With --replay, calls the recording holds are answered from it.

    Example: taplog serve --port 8787 --fallback 'gpt-*=anthropic:claude-sonnet-4-6'
    """
    from taplog.proxy.server import ServeError, new_event_loop, ready
    from taplog.proxy.server import serve as run

    try:
        settings, fallbacks = load_settings(config, flags, fallback_rules)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    configure_logging(settings.log_format, settings.log_level)
    try:
        if settings.workers and not settings.replay:
            from taplog.proxy.processes.supervisor import serve_processes

            serve_processes(settings, fallbacks, lambda port: ready(settings, port))
        else:  # one process; a replay's recording is learned where calls are served
            with asyncio.Runner(loop_factory=new_event_loop) as runner:
                runner.run(run(settings, fallbacks))
    except (ServeError, DataDirBusy, DamagedLine, UnsupportedEvent) as exc:
        raise click.ClickException(str(exc)) from None


@click.command("check-config")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
def check_config(file: Path) -> None:
    """Check a config file without starting anything; names the first bad key.

    Example: taplog check-config config/taplog.example.toml
    """
    try:
        settings, fallbacks = load_settings(file, {}, ())
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{file}: ok")
    if (redaction := settings.redaction) is not None:
        click.echo(f"  redacts: {', '.join(redaction.names)}")
    for rule in fallbacks.rules:
        click.echo(
            f"  {rule.model} → {', '.join(str(t) for t in rule.targets)} (retries {rule.retries})"
        )
    for rule in settings.tool_policy_rules.rules:
        click.echo(f"  tool policy: {rule.id}: {rule.summary()}")
    for provider in fallbacks.providers.values():
        if provider.api_key() is None and any(
            t.provider is provider for rule in fallbacks.rules for t in rule.targets
        ):
            unset = f"${provider.api_key_env} is not set"
            click.echo(f"  warning: {unset}; {provider.name} cannot serve fallbacks")
