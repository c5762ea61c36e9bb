"""Versioned snapshots of every session's conversation in a git repository: `snapshot --git`.

Each session becomes `<session>.json`: its conversation as `taplog export` gives
it (the last request and its answer, in the session's own API unless a format
is named), pretty-printed with a final newline so diffs read well. Only what
changed is committed, one commit per changed session, with a message naming
the session and the last step (`seq`) it reflects; a second run with nothing
new makes no commit. Sessions with nothing to export (no readable request) are
skipped; a session whose conversation cannot be written in the format asked for
(a translation refused) is reported with the reason, never passed over in
silence, and the others are still written. The repository is created when
missing; commits use the repository's own identity, else `taplog <taplog@localhost>`.

Reads the log through `recorder.store.reader`; runs `git` as a subprocess.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from taplog.recorder.events import LLM_REQUEST
from taplog.recorder.store.reader import read_all
from taplog.recorder.tools.export import API_FORMATS, ExportError, dumps, export_conversation
from taplog.recorder.vendors.translation import Untranslatable

_IDENTITY = ("-c", "user.name=taplog", "-c", "user.email=taplog@localhost")


class SnapshotError(RuntimeError):
    """git refused; the message carries what it said."""


@dataclass(frozen=True)
class Snapshot:
    session: str
    seq: int
    committed: bool
    refused: str | None = None  # why the session could not be written (nothing was)


def snapshot_git(data_dir: Path, repo: Path, fmt: str | None = None) -> list[Snapshot]:
    """Write and commit each session's conversation; returns what each session did."""
    repo.mkdir(parents=True, exist_ok=True)
    if not (repo / ".git").exists():
        _git(repo, "init", "-q")
    identity = () if _git(repo, "config", "user.email", check=False) else _IDENTITY
    done = []
    for session, events in read_all(data_dir).items():
        requests = [e for e in events if e["type"] == LLM_REQUEST and e.get("api") in API_FORMATS]
        if not requests:
            continue
        seq = events[-1]["seq"]
        try:
            body = export_conversation(events, fmt or API_FORMATS[requests[-1]["api"]]).body
        except (ExportError, Untranslatable) as exc:
            done.append(Snapshot(session, seq, committed=False, refused=str(exc)))
            continue
        name = f"{session}.json"
        (repo / name).write_text(dumps(body) + "\n")
        _git(repo, "add", "--", name)
        changed = not _git(repo, "diff", "--cached", "--quiet", "--", name, check=False, ok=(0,))
        if changed:
            message = f"{session}: conversation through seq {seq}"
            _git(repo, *identity, "commit", "-q", "-m", message, "--", name)
        done.append(Snapshot(session, seq, changed))
    return done


def _git(repo: Path, *args: str, check: bool = True, ok: tuple[int, ...] = (0,)) -> str:
    """git's output; with check=False, '' when it fails (exit status not in `ok`)."""
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
    )
    if result.returncode not in ok:
        if check:
            raise SnapshotError(f"git {' '.join(args)}: {result.stderr.strip()}")
        return ""
    return result.stdout.strip() or "ok"
