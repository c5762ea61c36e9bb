"""Format versioning: `taplog migrate` upgrades older files through named migrations."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder import events as format_
from taplog.recorder import migrations
from taplog.recorder.events import ERROR, make_event, seal
from taplog.recorder.store import reader
from taplog.recorder.store.lock import DataDirLock
from taplog.recorder.store.lognames import iter_lines
from taplog.recorder.store.reader import UnsupportedEvent, read_events, read_session
from taplog.recorder.store.rows import read_rows, rows_of
from taplog.recorder.store.zstd_stream import compress_whole
from taplog.recorder.verify import verify_file
from tests.disk import log_of, readable

NOW = format_.FORMAT_VERSION
NEXT = NOW + 1


def write_session(data_dir, name: str, count: int, plain: bool = False):
    """A log of `count` lines, compressed as taplog writes it (`plain`: as an older one)."""
    path = data_dir / "sessions" / f"{name}.jsonl" if plain else log_of(data_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines, prev = [], None
    for seq in range(1, count + 1):
        line, prev = seal(make_event(ERROR, name, None, reason=f"r{seq}"), seq, prev)
        lines.append(line)
    path.write_bytes(b"".join(lines) if plain else compress_whole(b"".join(lines)))
    return path


def migrate(data_dir):
    return CliRunner().invoke(main, ["migrate", "--data-dir", str(data_dir)])


def test_current_files_need_no_migration(tmp_path):
    path = write_session(tmp_path, "s", 3)
    before = path.read_bytes()
    result = migrate(tmp_path)
    assert result.exit_code == 0 and result.output.endswith("0 session files upgraded\n")
    assert path.read_bytes() == before


def test_a_plain_log_of_an_older_taplog_is_compressed_and_reads_the_same(tmp_path):
    plain = write_session(tmp_path, "s", 3, plain=True)
    before = [e["reason"] for e in read_session(tmp_path, "s")]
    result = migrate(tmp_path)
    assert result.exit_code == 0 and result.output.endswith("1 session files upgraded\n")
    compressed = log_of(tmp_path, "s")
    assert compressed.name == "s.jsonl.zst" and not plain.exists()
    assert [e["reason"] for e in read_session(tmp_path, "s")] == before == ["r1", "r2", "r3"]
    assert verify_file(compressed).ok
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.name.endswith(f".v{NOW}.jsonl") and b'"reason":"r3"' in kept.read_bytes()
    assert migrate(tmp_path).output.endswith("0 session files upgraded\n")


def test_a_format_change_upgrades_old_files_through_its_migration(tmp_path, monkeypatch):
    old = write_session(tmp_path, "old", 3)
    original = old.read_bytes()
    # Version NEXT renames `reason` to `why`; this taplog reads it, old files are upgraded.
    with pytest.raises(UnsupportedEvent, match=rf"old\.jsonl:1 .*format version {NEXT} is newer"):
        list(read_events(_bumped(tmp_path, readable(old))))
    monkeypatch.setattr(format_, "FORMAT_VERSION", NEXT)
    monkeypatch.setattr(reader, "FORMAT_VERSION", NEXT)
    rename = lambda e: {**{k: v for k, v in e.items() if k != "reason"}, "why": e["reason"]}  # noqa: E731
    monkeypatch.setattr(migrations, "MIGRATIONS", {**migrations.MIGRATIONS, NOW: rename})

    result = migrate(tmp_path)
    assert result.exit_code == 0, result.output
    assert result.output.endswith("1 session files upgraded\n")
    upgraded = list(read_events(old))
    assert [(e["v"], e["seq"], e["why"]) for e in upgraded] == [
        (NEXT, 1, "r1"),
        (NEXT, 2, "r2"),
        (NEXT, 3, "r3"),
    ]
    assert all("reason" not in e for e in upgraded)
    assert verify_file(old).ok
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.name.endswith(f".v{NOW}.jsonl.zst") and kept.read_bytes() == original
    assert migrate(tmp_path).output.endswith("0 session files upgraded\n")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_older_logs_are_read_as_they_are_and_migrate_to_the_current_version(tmp_path, version):
    old = write_session(tmp_path, "old", 2, plain=True)  # as that taplog wrote them
    lines, prev = [], None
    left_out = ("prev", "h") if version >= 3 else ("prev", "h", "epoch")  # epochs came in 3
    for raw in old.read_bytes().splitlines():  # as that taplog wrote them
        event = {k: v for k, v in orjson.loads(raw).items() if k not in left_out}
        line, prev = seal({**event, "v": version}, event["seq"], prev)
        lines.append(line)
    old.write_bytes(b"".join(lines))
    read = list(read_events(old))
    assert [(e["v"], e["reason"]) for e in read] == [(version, "r1"), (version, "r2")]
    assert all(("epoch" in e) == (version >= 3) for e in read)
    result = migrate(tmp_path)
    assert result.exit_code == 0 and result.output.endswith("1 session files upgraded\n")
    upgraded = list(read_events(log_of(tmp_path, "old")))
    assert [(e["v"], e["reason"], e["epoch"]) for e in upgraded] == [
        (NOW, "r1", None),
        (NOW, "r2", None),
    ]
    assert verify_file(log_of(tmp_path, "old")).ok
    migrated = log_of(tmp_path, "old")
    assert read_rows(migrated) == b"".join(rows_of(iter_lines(migrated)))  # its rows beside it


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
    """The same file claiming version NEXT, resealed: what a newer taplog would write."""
    path = tmp_path / "newer" / "old.jsonl"
    path.parent.mkdir()
    lines, prev = [], None
    for raw in original.splitlines():
        event = {k: v for k, v in orjson.loads(raw).items() if k not in ("prev", "h")}
        line, prev = seal({**event, "v": NEXT}, event["seq"], prev)
        lines.append(line)
    path.write_bytes(b"".join(lines))
    return path
