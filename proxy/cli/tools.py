"""Session tools: `export`, `fork`, `snapshot` (on the files alone), `resume` and `replay`.

Thin: each parses its options and calls one function of `recorder.tools` (or, for
`resume` and `replay`, of `proxy.resume` and `proxy.replay`). Strict `replay` works on the
files alone."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from taplog.proxy.cli.options import config_option, data_dir_option, listening_options
from taplog.proxy.config import REPLAY_MODES
from taplog.recorder.tools.export import API_FORMATS, FORMATS, Exported
from taplog.recorder.tools.resume_request import DEFAULT_PROMPT


@click.command("export")
@click.argument("session")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="jsonl",
    help="A ready request body for that API, or the raw event lines (jsonl).",
)
@click.option("--at", type=click.IntRange(min=1), help="The state at this seq (default: the end).")
@click.option("--model", help="The model named in the body (default: the recorded one).")
@click.option(
    "--prompt",
    metavar="TEXT",
    help="The user's next turn after the conversation, so the body is ready to send "
    "(the last answer's tool calls, never run, are then left out).",
)
@click.option(
    "--keep-ids",
    is_flag=True,
    help="Keep the recorded run's own ids (Claude Code's metadata.user_id, Codex's cache "
    "key and client metadata, a user): sent with them, the body is taken for that run, and "
    "taplog files it in SESSION.",
)
@click.option(
    "--headers",
    "headers_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Write the headers the body needs (anthropic-beta, as the client sent it) to FILE, "
    "one 'Name: value' a line, as curl -H @FILE reads them; empty when it needs none.",
)
@data_dir_option
def export(
    session: str,
    fmt: str,
    at: int | None,
    model: str | None,
    prompt: str | None,
    keep_ids: bool,
    headers_file: Path | None,
    data_dir: Path,
) -> None:
    """Print a session's conversation, last answer included, as a request body, or its events.

    What the format cannot take is left out and named on stderr, and so are the recorded
    run's own ids (--keep-ids keeps them). A body in its client's own API keeps the beta
    fields the client sent; stderr names the header they need (--headers FILE writes it).

    Example: taplog export 20261130T004933Z-1a2b3c4d --format anthropic --prompt "Go on."
    """
    from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent, read_events
    from taplog.recorder.tools.export import (
        ExportError,
        dumps,
        export_conversation,
        export_lines,
        session_path,
    )
    from taplog.recorder.vendors.translation import Untranslatable

    if fmt == "jsonl" and (keep_ids or headers_file):
        raise click.UsageError("--keep-ids and --headers shape a request body: give a --format")
    try:
        path = session_path(data_dir, session)
        if fmt == "jsonl":
            for line in export_lines(path, at):
                sys.stdout.buffer.write(line)
            return
        events = list(read_events(path))
        exported = export_conversation(events, fmt, at, model, prompt, keep_ids)
    except (ExportError, Untranslatable, DamagedLine, UnsupportedEvent) as exc:
        raise click.ClickException(str(exc)) from None
    for what in [*exported.left_out, *_run_ids(exported, session, fmt)]:
        click.echo(f"left out: {what}", err=True)
    for name, value in exported.headers.items():
        sender = exported.client or "the client"
        click.echo(
            f"send it with the header {name}: {value} ({sender} sent it so; "
            "--headers FILE writes it)",
            err=True,
        )
    if headers_file is not None:
        headers_file.write_text("".join(f"{n}: {v}\n" for n, v in exported.headers.items()))
    click.echo(dumps(exported.body))


def _run_ids(exported: Exported, session: str, fmt: str) -> list[str]:
    """The line that names the recorded run's ids export left out, if it left any; in the
    client's own API, the session taplog would file the body in by them."""
    if not exported.run_ids:
        return []
    one = len(exported.run_ids) == 1
    whose = f"{exported.client}'s" if exported.client else "the recorded"
    it = "it" if one else "them"
    joins = (
        f", and through taplog joins {session}" if fmt == API_FORMATS[exported.recorded_in] else ""
    )
    return [
        f"{', '.join(exported.run_ids)} ({whose} run {'id' if one else 'ids'}: a body sent "
        f"with {it} is taken for that run{joins}; --keep-ids keeps {it})"
    ]


@click.command("fork")
@click.argument("session")
@click.option("--at", type=click.IntRange(min=1), required=True, help="The last event to keep.")
@click.option("--as", "new", help="The new session's id (default: SESSION-fork<AT>-<random>).")
@data_dir_option
def fork(session: str, at: int, new: str | None, data_dir: Path) -> None:
    """Start a new session from SESSION's first AT events; the original is untouched.

    Continue it by naming it: header X-Taplog-Session: NEW, or base URL …/s/NEW/v1.

    Example: taplog fork 20261130T004933Z-1a2b3c4d --at 14 --as retry-with-opus
    """
    from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent
    from taplog.recorder.tools.fork import ForkError, fork_session

    try:
        click.echo(fork_session(data_dir, session, at, new))
    except (ForkError, DamagedLine, UnsupportedEvent) as exc:
        raise click.ClickException(str(exc)) from None


@click.command("snapshot")
@click.option(
    "--git",
    "repo",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="The git repository to write into (created when missing).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS[:-1]),
    help="Export every session in this API's shape (default: each session's own).",
)
@data_dir_option
def snapshot(repo: Path, fmt: str | None, data_dir: Path) -> None:
    """Commit each session's conversation (as export gives it) to git, only what changed.

    A session that cannot be written in the format asked for is named with the reason on
    stderr, the others are still committed, and the exit status is 1.

    Example: taplog snapshot --git ~/agent-history
    """
    from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent
    from taplog.recorder.tools.snapshot import SnapshotError, snapshot_git

    if not (data_dir / "sessions").is_dir():
        raise click.ClickException(f"no taplog logs in {data_dir} (see --data-dir)")
    try:
        done = snapshot_git(data_dir, repo, fmt)
    except (SnapshotError, DamagedLine, UnsupportedEvent) as exc:
        raise click.ClickException(str(exc)) from None
    committed = [s for s in done if s.committed]
    refused = [s for s in done if s.refused]
    for shot in committed:
        click.echo(f"committed {shot.session} (through seq {shot.seq})")
    for shot in refused:
        click.echo(f"not written: {shot.session}: {shot.refused}", err=True)
    written = len(done) - len(refused)
    click.echo(f"{len(committed)} of {written} sessions changed")
    if refused:
        shape = f" as {fmt}" if fmt else ""
        raise click.ClickException(f"{len(refused)} session(s) could not be written{shape}")


@click.command("resume")
@click.argument("session")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="PROVIDER:MODEL",
    help="openai, anthropic or a provider of the config file, and the model to continue with.",
)
@click.option("--as", "new", help="The new session's id (default: a fresh one).")
@click.option(
    "--prompt",
    metavar="TEXT",
    help="The user's next turn (default after the model's last answer: "
    f'"{DEFAULT_PROMPT}"; the tool calls it asked for, never run, are left out).',
)
@click.option("--dry-run", is_flag=True, help="Print the request (no key); send and write nothing.")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="The data dir to read SESSION from and record into (as taplog serve's).",
)
@config_option
def resume(
    session: str,
    to: str,
    new: str | None,
    prompt: str | None,
    dry_run: bool,
    data_dir: Path | None,
    config: Path | None,
) -> None:
    """Continue SESSION on another model: its conversation, a note on top, sent and recorded.

    After the model's last answer it goes on with a user turn (--prompt). What the
    provider's API cannot take is left out, named on stderr and in the new session.
    The answer is recorded in a new session linked to SESSION; continue it
    through taplog serve with the base URL …/s/NEW/v1 it prints (the address that
    serve noted in the data dir, else the configured one). Keys come from the
    provider's variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, or api_key_env).
    Needs the data dir to itself: stop taplog serve first (--dry-run does not).

    Example: taplog resume 20261130T004933Z-1a2b3c4d --to anthropic:claude-sonnet-4-6
    """
    import asyncio

    from taplog.proxy.cli.options import load_settings
    from taplog.proxy.config import ConfigError
    from taplog.proxy.failover.rules import parse_target
    from taplog.proxy.resume import ResumeError, dry_run_view, plan_resume
    from taplog.proxy.resume import resume as send
    from taplog.proxy.server import client_base
    from taplog.recorder.store.lock import serve_address
    from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent
    from taplog.recorder.tools.export import dumps
    from taplog.recorder.vendors.apis import provider_endpoint

    try:
        settings, fallbacks = load_settings(config, {"data_dir": data_dir}, ())
        target = parse_target("--to", to, fallbacks.providers)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        resumption = plan_resume(settings.data_dir, session, target, new, prompt)
        for what in resumption.left_out:
            click.echo(f"left out: {what}", err=True)
        if dry_run:
            click.echo(dumps(dry_run_view(resumption)))
            return
        resumed = asyncio.run(send(settings, resumption))
    except (ResumeError, DamagedLine, UnsupportedEvent) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(resumed.text)
    suffix = provider_endpoint(resumption.attempt.target.provider.type).SDK_BASE
    served = serve_address(settings.data_dir)
    if served is not None:
        whose = f"the address taplog serve noted in {settings.data_dir} when it last listened"
    else:
        served = client_base(settings, settings.port)
        whose = f"the configured address: no taplog serve has noted its own in {settings.data_dir}"
    click.echo(f"\nsession {resumed.new} (resumes {session}); continue it through taplog serve")
    click.echo(f"  with the base URL {served}/s/{resumed.new}{suffix} ({whose})")
    if resumed.status is None or resumed.status >= 400:
        raise click.ClickException(f"the vendor did not answer ({resumed.status or 'no answer'})")


@click.command("replay")
@click.argument("source", type=click.Path(path_type=Path, exists=True))
@click.option(
    "--speed",
    type=click.FloatRange(min=0),
    default=1.0,
    help="Stream pacing: 2 plays twice as fast as recorded, 0 sends without waiting.",
)
@click.option(
    "--mode",
    type=click.Choice(REPLAY_MODES),
    default="strict",
    help="What a call the recording lacks gets: a 400 (strict), the vendor (passthrough), "
    "the vendor and a place in the recording (record-missing).",
)
@click.option(
    "--ignore",
    "ignore",
    multiple=True,
    metavar="FIELD",
    help="A request field to leave out of the matching (repeatable), beyond what the known "
    "clients make anew each run: tools, system[2].text, messages[*].content.",
)
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="passthrough / record-missing: where misses are recorded (as taplog serve's).",
)
@listening_options
@config_option
def replay(
    source: Path,
    host: str,
    port: int,
    speed: float,
    mode: str,
    ignore: tuple[str, ...],
    data_dir: Path | None,
    config: Path | None,
    auth_token: str | None,
    insecure_no_auth: bool,
) -> None:
    """Answer model calls from a recording (a data dir or a session file).

    Strict (the default): offline; a request that matches no recorded one gets
    a 400 in the client's API shape naming the closest recorded request. The
    other modes run the full proxy (taplog serve --replay): a miss goes to the
    vendor and is recorded into --data-dir. Every hit and miss is logged on
    stderr. Point the SDK's base URL at it.

    Beyond loopback it needs inbound tokens, as `serve` does.

    Example: taplog replay taplog-data/sessions/run-7.jsonl.zst --port 8788 --speed 0
    """
    import asyncio

    from taplog.proxy.cli.options import load_settings
    from taplog.proxy.config import ConfigError
    from taplog.proxy.observe.log_lines import configure_logging
    from taplog.proxy.replay import run_replay
    from taplog.proxy.server import ServeError, serve
    from taplog.recorder.store.lock import DataDirBusy
    from taplog.recorder.store.reader import DamagedLine, UnsupportedEvent

    flags = {
        "host": host,
        "port": port,
        "data_dir": data_dir,
        "replay": str(source),
        "replay_mode": mode,
        "replay_speed": speed,
        "replay_ignore": ",".join(ignore) or None,
        "auth_token": auth_token,
        "insecure_no_auth": insecure_no_auth or None,
    }
    try:
        settings, fallbacks = load_settings(config, flags, ())
        configure_logging(settings.log_format, settings.log_level)
        if mode == "strict":  # offline: only the recording
            asyncio.run(run_replay(source, settings))
        else:  # taplog serve --replay SOURCE --replay-mode MODE
            asyncio.run(serve(settings, fallbacks))
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    except (ServeError, DataDirBusy, DamagedLine, UnsupportedEvent, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        pass
