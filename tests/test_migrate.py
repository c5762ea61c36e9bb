"""Format versioning: `taplog migrate` upgrades older files through named migrations."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from proxy.cli import main
from recorder import events as format_
from recorder import migrations, reader
from recorder.events import ERROR, make_event, seal
from recorder.lock import DataDirLock
from recorder.reader import UnsupportedEvent, read_events
from recorder.verify import verify_file


def write_session(data_dir, name: str, count: int):
    path = data_dir / "sessions" / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines, prev = [], None
    for seq in range(1, count + 1):
        line, prev = seal(make_event(ERROR, name, None, reason=f"r{seq}"), seq, prev)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return path


def migrate(data_dir):
    return CliRunner().invoke(main, ["migrate", "--data-dir", str(data_dir)])


def test_current_files_need_no_migration(tmp_path):
    path = write_session(tmp_path, "s", 3)
    before = path.read_bytes()
    result = migrate(tmp_path)
    assert result.exit_code == 0 and result.output.endswith("0 session files upgraded\n")
    assert path.read_bytes() == before


def test_a_format_change_upgrades_old_files_through_its_migration(tmp_path, monkeypatch):
    old = write_session(tmp_path, "old", 3)
    original = old.read_bytes()
    # Version 2 renames `reason` to `why`; this taplog reads it, old files are upgraded.
    with pytest.raises(UnsupportedEvent, match=r"old\.jsonl:1 .*format version 2 is newer"):
        list(read_events(_bumped(tmp_path, original)))
    monkeypatch.setattr(format_, "FORMAT_VERSION", 2)
    monkeypatch.setattr(reader, "FORMAT_VERSION", 2)
    renamed = {1: lambda e: {**{k: v for k, v in e.items() if k != "reason"}, "why": e["reason"]}}
    monkeypatch.setattr(migrations, "MIGRATIONS", renamed)

    result = migrate(tmp_path)
    assert result.exit_code == 0, result.output
    assert result.output.endswith("1 session files upgraded\n")
    upgraded = list(read_events(old))
    assert [(e["v"], e["seq"], e["why"]) for e in upgraded] == [
        (2, 1, "r1"),
        (2, 2, "r2"),
        (2, 3, "r3"),
    ]
    assert all("reason" not in e for e in upgraded)
    assert verify_file(old).ok
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.name.endswith(".v1.jsonl") and kept.read_bytes() == original
    assert migrate(tmp_path).output.endswith("0 session files upgraded\n")


def test_migrate_refuses_a_data_dir_in_use(tmp_path):
    write_session(tmp_path, "s", 1)
    lock = DataDirLock(tmp_path)
    lock.acquire()
    try:
        result = migrate(tmp_path)
    finally:
        lock.release()
    assert result.exit_code == 1 and "another taplog serve" in result.output


def _bumped(tmp_path, original: bytes):
    """The same file claiming version 2, resealed: what a newer taplog would write."""
    path = tmp_path / "newer" / "old.jsonl"
    path.parent.mkdir()
    lines, prev = [], None
    for raw in original.splitlines():
        event = {k: v for k, v in orjson.loads(raw).items() if k not in ("prev", "h")}
        line, prev = seal({**event, "v": 2}, event["seq"], prev)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return path
