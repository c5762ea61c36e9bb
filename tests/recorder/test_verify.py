"""`taplog verify` and `taplog repair`: every damage class named by file, line, offset, reason."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.events import ERROR, make_event
from taplog.recorder.store.lock import DataDirLock
from taplog.recorder.store.lognames import session_name
from taplog.recorder.store.reader import DamagedLine, read_events, read_session
from taplog.recorder.store.writer import EventRecord, Recorder
from taplog.recorder.verify import verify, verify_file
from tests.disk import edit_log, log_of, readable

BROKEN = "prev is not the hash of the line before: the chain is broken"


def _log(data_dir: Path, session: str = "s", count: int = 5) -> Path:
    recorder = Recorder(data_dir, fsync="never")
    recorder.start()
    for n in range(count):
        recorder.record(EventRecord(make_event(ERROR, session, None, reason=f"r{n}")))
    recorder.close()
    return log_of(data_dir, session)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _lines_of(path: Path) -> list[bytes]:
    return readable(path).splitlines(keepends=True)


def _offset(lines: list[bytes], index: int) -> int:
    return sum(len(line) for line in lines[:index])


def test_a_whole_log_verifies_and_the_command_exits_0(tmp_path):
    _log(tmp_path, "a", 5)
    _log(tmp_path, "b", 2)
    code, out = _cli("verify", "--data-dir", str(tmp_path))
    assert code == 0, out
    assert out.strip() == "checked 2 session logs, 7 lines: 0 damaged"
    code, out = _cli("verify", "--data-dir", str(tmp_path), "b")
    assert (code, out.strip()) == (0, "checked 1 session log, 2 lines: 0 damaged")


def _damaged(path: Path, lines: list[bytes]) -> list[tuple[int, int, str]]:
    edit_log(path, lambda _: b"".join(lines))
    return [(f.line, f.offset, f.reason) for f in verify_file(path).damage]


def test_each_damage_class_is_named_with_line_offset_and_reason(tmp_path):
    path = _log(tmp_path, "s", 5)
    whole = _lines_of(path)

    flipped = list(whole)
    flipped[2] = flipped[2].replace(b'"r2"', b'"rX"')
    assert _damaged(path, flipped) == [(3, _offset(whole, 2), "line fails its checksum")]

    dropped = whole[:2] + whole[3:]  # a line deleted in the middle
    ((line, offset, reason),) = _damaged(path, dropped)
    assert (line, offset) == (3, _offset(whole, 2))
    assert reason == f"seq 4 where 3 was expected; {BROKEN}"

    repeated = whole[:3] + whole[2:]  # a line written twice: its seq repeats
    ((line, _, reason),) = _damaged(path, repeated)
    assert line == 4 and reason.startswith("seq 3 where 4 was expected")

    swapped = [whole[0], whole[2], whole[1], *whole[3:]]
    assert [f[0] for f in _damaged(path, swapped)] == [2, 3, 4]

    headless = whole[1:]  # seq must start at 1, prev at null
    assert _damaged(path, headless)[0][:2] == (1, 0)
    assert "seq 2 where 1 was expected" in _damaged(path, headless)[0][2]

    other = _lines_of(_log(tmp_path, "t", 6))
    foreign = [*whole, other[5]]  # a line of session t appended to s
    ((line, _, reason),) = _damaged(path, foreign)
    assert line == 6 and "belongs to session 't', not 's'" in reason

    joined = [*whole[:1], whole[1].rstrip(b"\n") + whole[2], *whole[3:]]  # a lost newline
    assert _damaged(path, joined)[0][:2] == (2, _offset(whole, 1))

    garbage = [*whole[:2], b"\x00\xff not json at all\n", *whole[2:]]
    assert _damaged(path, garbage)[0] == (3, _offset(whole, 2), "line fails its checksum")

    content = b'{"seq":'  # a checksum that verifies over bytes that are not JSON
    forged = content + b',"h":"' + hashlib.blake2b(content, digest_size=16).hexdigest().encode()
    crafted = [*whole[:2], forged + b'"}\n', *whole[2:]]
    assert _damaged(path, crafted)[0] == (3, _offset(whole, 2), "line is not a JSON object")
    with pytest.raises(
        DamagedLine, match=r"s\.jsonl\.zst:3 \(byte \d+\): line is not a JSON object"
    ):
        list(read_events(path))


def test_the_command_prints_file_line_offset_and_reason_and_exits_1(tmp_path):
    path = _log(tmp_path, "s", 4)
    whole = _lines_of(path)
    edit_log(path, lambda text: text.replace(b'"r1"', b'"rY"'))
    code, out = _cli("verify", "--data-dir", str(tmp_path))
    assert code == 1
    assert f"damaged: {path}:2 (byte {len(whole[0])}): line fails its checksum" in out
    assert out.splitlines()[-1] == "checked 1 session log, 4 lines: 1 damaged"


def _cut_short(tmp_path: Path) -> tuple[Path, bytes, bytes]:
    """A log of three lines whose fourth write a crash cut short: the log, its bytes
    before that write, and after the cut."""
    path = _log(tmp_path, "s", 3)
    whole = path.read_bytes()
    _log(tmp_path, "s", 1)
    cut = path.read_bytes()[: path.stat().st_size - 20]
    path.write_bytes(cut)
    return path, whole, cut


def test_a_torn_tail_is_reported_as_such_not_as_damage(tmp_path):
    path, whole, _ = _cut_short(tmp_path)
    code, out = _cli("verify", "--data-dir", str(tmp_path))
    assert code == 0, out
    torn = rf"torn tail: {re.escape(str(path))}:4 \(byte {len(whole)}\): torn last write"
    assert re.search(torn, out)
    assert out.splitlines()[-1] == "checked 1 session log, 3 lines: 0 damaged, 1 with a torn tail"


def test_repair_moves_a_torn_tail_to_quarantine_and_the_log_continues(tmp_path):
    path, whole, cut = _cut_short(tmp_path)
    torn = cut[len(whole) :]
    code, out = _cli("repair", "--data-dir", str(tmp_path))
    assert code == 0, out
    assert f"repaired: {path}: torn last line ({len(torn)} bytes at byte {len(whole)})" in out
    assert path.read_bytes() == whole
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.read_bytes() == torn
    assert _cli("verify", "--data-dir", str(tmp_path))[1].strip().endswith("0 damaged")
    _log(tmp_path, "s", 1)
    assert [e["seq"] for e in read_session(tmp_path, "s")] == [1, 2, 3, 4]


def test_repair_sets_a_damaged_last_line_aside_and_starts_the_session_anew(tmp_path):
    path = _log(tmp_path, "s", 3)
    edit_log(path, lambda text: text.replace(b'"r2"', b'"rZ"'))
    damaged = path.read_bytes()
    code, out = _cli("repair", "--data-dir", str(tmp_path))
    assert code == 0, out
    assert "last line at text offset" in out and "the session starts anew" in out
    (kept,) = (tmp_path / "quarantine").iterdir()
    assert kept.name.endswith(".damaged.jsonl.zst") and kept.read_bytes() == damaged
    (restart,) = read_session(tmp_path, "s")
    assert restart["seq"] == 1 and "fails its checksum" in restart["reason"]


def test_repair_never_truncates_damage_in_the_middle(tmp_path):
    path = _log(tmp_path, "s", 4)
    edit_log(path, lambda text: text.replace(b'"r1"', b'"rQ"'))
    damaged = path.read_bytes()
    code, out = _cli("repair", "--data-dir", str(tmp_path))
    assert code == 1
    assert f"damaged: {path}:2" in out
    assert path.read_bytes() == damaged
    assert not any((tmp_path / "quarantine").iterdir())


def test_repair_refuses_to_run_beside_serve(tmp_path):
    _log(tmp_path, "s", 1)
    lock = DataDirLock(tmp_path)
    lock.acquire()
    try:
        code, out = _cli("repair", "--data-dir", str(tmp_path))
    finally:
        lock.release()
    assert code == 1 and "another taplog serve" in out and "repairs the files" in out
    assert _cli("verify", "--data-dir", str(tmp_path))[0] == 0  # verify only reads


@pytest.mark.parametrize("name", ["../etc/passwd", "nope"])
def test_sessions_are_named_by_id_and_must_exist(tmp_path, name):
    _log(tmp_path, "s", 1)
    for command in ("verify", "repair"):
        code, out = _cli(command, "--data-dir", str(tmp_path), name)
        assert code == 2 and repr(name) in out


def test_no_logs_is_a_clear_error(tmp_path):
    code, out = _cli("verify", "--data-dir", str(tmp_path / "missing"))
    assert code == 1 and "no taplog logs in" in out


def test_verify_lists_every_session_when_none_is_named(tmp_path):
    for name in ("a", "b", "c"):
        _log(tmp_path, name, 2)
    assert [session_name(r.path) for r in verify(tmp_path)] == ["a", "b", "c"]
    assert all(r.ok and r.lines == 2 for r in verify(tmp_path, ["b"]))
