"""The `taplog` command: the group, and every command in it, by the module that holds it.

Each command module keeps its heavy imports inside the command, so `taplog --help` and a
command that reads one file start fast.
"""

from __future__ import annotations

import click

from taplog.proxy.cli import maintenance, serve, sessions, sql, tools, ui
from taplog.recorder import __version__


@click.group(context_settings={"show_default": True})
@click.version_option(__version__, prog_name="taplog")
def main() -> None:
    """taplog: a transparent recording proxy for LLM agents."""


for command in (
    serve.serve,
    serve.check_config,
    sessions.sessions,
    sessions.show,
    sessions.tail,
    sql.sql,
    tools.export,
    tools.fork,
    tools.snapshot,
    tools.resume,
    tools.replay,
    maintenance.verify,
    maintenance.repair,
    maintenance.compact,
    maintenance.migrate,
    maintenance.prune,
    ui.ui,
):
    main.add_command(command)
