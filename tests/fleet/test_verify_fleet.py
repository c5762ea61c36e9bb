"""`taplog verify --fleet`: each shipped log whole, each handover linked, each fork named.

The checks run on real session logs written for the purpose, one data dir per instance
(`Instance`), with each line's epoch and time set by the test; the end-to-end tests ship
such data dirs to a real SeaweedFS and read the command's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.events import ERROR, LLM_RESPONSE, Event, make_event, session_resumed
from taplog.recorder.fleet.layout import parse_location
from taplog.recorder.fleet.verify import FleetReport, verify_fleet
from taplog.recorder.store.blobs import BlobStore
from taplog.recorder.store.logfile import SessionFile
from taplog.recorder.store.lognames import session_name
from taplog.recorder.verify import verify_file
from tests.disk import edit_log, log_of, logs
from tests.fakes.engines import SeaweedFS

TO = "s3://fleet/prod"


def _ts(second: int) -> str:
    return f"2026-12-01T10:00:{second:02d}.000000Z"


def line(epoch: int | None, at: int, session: str = "s") -> Event:
    """A line of `session` written under `epoch` at second `at`."""
    event = make_event(ERROR, session, None, epoch, reason=f"at {at}")
    event["ts"] = _ts(at)
    return event


def resumed(instance: str, epoch: int, last: Event | None, owner: str, old: int, at: int) -> Event:
    """`instance` takes the session at `epoch` from `owner`@`old`, whose reported last line
    was `last` (None: it had reported none)."""
    previous = {
        "instance": owner,
        "epoch": old,
        "seq": None if last is None else last["seq"],
        "h": None if last is None else last["h"],
    }
    reason = f"{owner} had reported no line of epoch {old}" if last is None else None
    event = session_resumed("s", epoch, instance=instance, previous=previous, reason=reason)
    event["ts"] = _ts(at)
    return event


class Instance:
    """One instance's data dir; `write` appends to a session's log as its writer would."""

    def __init__(self, root: Path, name: str) -> None:
        self.name, self.data_dir = name, root / name
        for folder in ("sessions", "quarantine", "blobs"):
            (self.data_dir / folder).mkdir(parents=True, exist_ok=True)

    def log(self, session: str = "s") -> Path:
        return log_of(self.data_dir, session)

    def write(self, *events: Event, session: str = "s", inline_max: int = 1 << 20) -> Event:
        """Append the events; the last one, with its `seq` and `h`."""
        blobs = BlobStore(self.data_dir / "blobs", inline_max, sync=False)
        log = SessionFile(self.log(session), self.data_dir / "quarantine", False, blobs)
        log.append(events)
        log.close(sync=False)
        return events[-1]


def _check(*instances: Instance) -> tuple[FleetReport, list[str]]:
    shipped = {i.name: {session_name(p): str(p) for p in logs(i.data_dir)} for i in instances}
    report = verify_fleet(shipped, instances[0].data_dir / "blobs")
    return report, [str(finding) for finding in report.findings]


def _a_then_b(tmp_path: Path) -> tuple[Instance, Instance, Event]:
    """a writes epoch 1 (seq 1-4, seconds 1-4); b is there, empty. The last line of a."""
    a, b = Instance(tmp_path, "a"), Instance(tmp_path, "b")
    last = a.write(*(line(1, at) for at in range(1, 5)))
    return a, b, last


def test_a_clean_handover_is_linked(tmp_path):
    a, b, last = _a_then_b(tmp_path)
    b.write(resumed("b", 2, last, "a", 1, 10), line(2, 11), line(2, 12))
    report, found = _check(a, b)
    assert found == ["session s: a@1 -> b@2 linked at seq 4"]
    assert report.ok
    assert report.summary() == (
        "2 logs of 1 session from 2 instances; 1 handover: 1 linked, 0 declared, "
        "0 not yet shipped; 0 forks; 0 damaged"
    )


def test_lines_after_the_last_report_but_before_the_handover_are_counted_still_linked(tmp_path):
    a, b = Instance(tmp_path, "a"), Instance(tmp_path, "b")
    a.write(line(1, 1))
    reported = a.write(line(1, 2))
    a.write(line(1, 3), line(1, 4))  # after the last report: a was killed before the next
    b.write(resumed("b", 2, reported, "a", 1, 10), line(2, 11))
    report, found = _check(a, b)
    assert found == [
        "session s: a@1 -> b@2 linked at seq 2 (2 lines after it written before the handover)"
    ]
    assert report.ok


def test_a_line_of_the_old_epoch_after_the_handover_is_a_fork(tmp_path):
    a, b, last = _a_then_b(tmp_path)
    b.write(resumed("b", 2, last, "a", 1, 10), line(2, 11))
    a.write(line(1, 12))  # a went on writing epoch 1 after b took the session
    report, found = _check(a, b)
    assert found == [
        "FORK session s: a@1 -> b@2 linked at seq 4, but a wrote 1 line of epoch 1 after "
        "the handover (seq 5)"
    ]
    assert not report.ok and report.summary().endswith("; 1 fork; 0 damaged")


def test_a_link_whose_hash_is_not_the_line_s_is_a_fork(tmp_path):
    a, b, last = _a_then_b(tmp_path)
    b.write(resumed("b", 2, {**last, "h": "0" * 32}, "a", 1, 10), line(2, 11))
    report, found = _check(a, b)
    assert found == [
        f"FORK session s: a@1 -> b@2: a's line 4 is not the one linked (epoch 1, hash "
        f"{last['h']} where {'0' * 32} was named)"
    ]
    assert not report.ok


def test_a_link_to_a_line_that_is_not_there_is_a_fork_or_not_yet_shipped(tmp_path):
    a, b, last = _a_then_b(tmp_path)
    b.write(resumed("b", 2, {**last, "seq": 9}, "a", 1, 10))
    assert _check(a, b)[1] == [
        "session s: a@1 -> b@2 not yet shipped: a's shipped log ends at seq 4, before 9: "
        "cannot check"
    ]
    report, found = _check(b)  # a has not shipped the session at all
    assert found == ["session s: a@1 -> b@2 not yet shipped by a: cannot check"]
    assert report.ok and "1 not yet shipped" in report.summary()


def test_a_declared_link_says_why_and_is_no_fork(tmp_path):
    a, b, _ = _a_then_b(tmp_path)
    b.write(resumed("b", 2, None, "a", 1, 10), line(2, 11))
    report, found = _check(a, b)
    assert found == ["session s: a@1 -> b@2 declared: a had reported no line of epoch 1"]
    assert report.ok and "1 handover: 0 linked, 1 declared" in report.summary()


def test_one_epoch_written_by_two_instances_is_a_fork_with_its_seqs_twice(tmp_path):
    a, _, _ = _a_then_b(tmp_path)
    c = Instance(tmp_path, "c")  # Redis started afresh: c got epoch 1 too
    c.write(line(1, 5), line(1, 6), line(1, 7))
    report, found = _check(a, c)
    assert found == [
        "FORK session s: epoch 1 written by a and c; 3 of its seq numbers written twice (seq 1-3)"
    ]
    assert not report.ok


def test_an_epoch_without_a_resumed_record_is_a_fork(tmp_path):
    a, b, _ = _a_then_b(tmp_path)
    b.write(line(2, 11), line(2, 12))
    _, found = _check(a, b)
    assert found == ["FORK session s: epoch 2 has no handover record"]


def test_a_restart_in_the_same_file_is_linked(tmp_path):
    a, _, last = _a_then_b(tmp_path)
    a.write(resumed("a", 2, last, "a", 1, 10), line(2, 11))
    report, found = _check(a)
    assert found == ["session s: a@1 -> a@2 linked at seq 4"]
    assert report.ok and report.summary().startswith("1 log of 1 session from 1 instance; ")


def test_lines_without_a_lease_from_two_instances_are_a_fork(tmp_path):
    a, b = Instance(tmp_path, "a"), Instance(tmp_path, "b")
    a.write(line(None, 1), line(None, 2))
    b.write(line(None, 3))
    _, found = _check(a, b)
    assert found == ["FORK session s: written without a lease by a and b"]
    assert _check(a)[1] == []  # one instance alone: its own order holds


def test_a_damaged_log_is_counted_and_a_session_s_logs_are_checked_apart(tmp_path):
    a, b, last = _a_then_b(tmp_path)
    b.write(resumed("b", 2, last, "a", 1, 10), line(2, 11))
    edit_log(a.log(), lambda text: text.replace(b"at 2", b"at 9"))
    report, found = _check(a, b)
    [(instance, session, damaged)] = [log for log in report.logs if not log[2].ok]
    assert (instance, session, damaged.damage[0].line) == ("a", "s", 2)
    assert found == ["session s: a@1 -> b@2 linked at seq 4"]  # the link does not need line 2
    assert not report.ok and report.summary().endswith("; 0 forks; 1 damaged")


def test_a_copy_of_a_log_verifies_under_its_session_with_blobs_elsewhere(tmp_path):
    a = Instance(tmp_path, "a")
    big = make_event(LLM_RESPONSE, "s", "x_1", 1, status=200, body={"text": "x" * 5000})
    a.write(line(1, 1), big, inline_max=1024)
    copy, blobs = tmp_path / "elsewhere" / "0123abcd.jsonl.zst", tmp_path / "a" / "blobs"
    copy.parent.mkdir()
    copy.write_bytes(a.log().read_bytes())
    assert list(blobs.rglob("*.json"))  # the body went to a blob
    assert not verify_file(copy).ok  # named for another session, its blobs not beside it
    assert verify_file(copy, session="s", blobs_folder=blobs).ok
    assert not verify_file(copy, session="s", blobs_folder=tmp_path).ok


@pytest.mark.parametrize("missing", ["boto3", "deltalake"])
@pytest.mark.parametrize(
    "command",
    [
        ["verify"],
        ["sessions"],
        ["sql", "SELECT count(*) FROM events"],
        ["compact"],
        ["prune", "--older-than", "90d"],
    ],
)
def test_without_the_fleet_extra_every_fleet_command_says_so(monkeypatch, command, missing):
    monkeypatch.setitem(sys.modules, missing, None)
    result = CliRunner().invoke(main, [*command, "--fleet", TO])
    assert result.exit_code == 1
    assert f"--fleet needs taplog[fleet] ({missing} is missing)" in result.output


# -- through the store ----------------------------------------------------------------


def _ship(instance: Instance) -> list[str]:
    from taplog.recorder.fleet.shipper import Shipper

    shipper = Shipper(instance.data_dir, parse_location(TO), instance.name, idle_seconds=0)
    return shipper.ship_once()


def _verify(tmp_path: Path, *sessions: str) -> tuple[int, list[str]]:
    args = ["verify", "--fleet", TO, "--fleet-cache", str(tmp_path / "cache"), *sessions]
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output.splitlines()


@pytest.mark.slow
def test_a_shipped_fleet_verifies_and_a_third_instance_forking_it_is_named(
    store_env: SeaweedFS, tmp_path
):
    a, b = Instance(tmp_path, "a"), Instance(tmp_path, "b")
    big = make_event(LLM_RESPONSE, "s", "x_1", 1, status=200, body={"text": "x" * 5000})
    big["ts"] = _ts(2)
    last = a.write(line(1, 1), big, line(1, 3), inline_max=1024)
    a.write(line(1, 4, "other"), session="other")
    b.write(resumed("b", 2, last, "a", 1, 10), line(2, 11), line(2, 12))
    assert (_ship(a), _ship(b)) == (["other", "s"], ["s"])
    assert store_env.keys("prod/blobs/")  # the large body went as its blob
    code, out = _verify(tmp_path)
    assert out == [
        "session s: a@1 -> b@2 linked at seq 3",
        "3 logs of 2 sessions from 2 instances; 1 handover: 1 linked, 0 declared, "
        "0 not yet shipped; 0 forks; 0 damaged",
    ]
    assert code == 0

    c = Instance(tmp_path, "c")  # wrote epoch 2 as well: two owners at once
    c.write(resumed("c", 2, last, "a", 1, 10), line(2, 13))
    assert _ship(c) == ["s"]
    code, out = _verify(tmp_path)
    assert out == [
        "session s: a@1 -> b@2 linked at seq 3",
        "session s: a@1 -> c@2 linked at seq 3",
        "FORK session s: epoch 2 written by b and c; 2 of its seq numbers written twice (seq 1-2)",
        "4 logs of 2 sessions from 3 instances; 2 handovers: 2 linked, 0 declared, "
        "0 not yet shipped; 1 fork; 0 damaged",
    ]
    assert code == 1
    code, out = _verify(tmp_path, "other")  # SESSIONS narrows it
    assert (code, out[-1]) == (
        0,
        "1 log of 1 session from 1 instance; 0 handovers: "
        "0 linked, 0 declared, 0 not yet shipped; 0 forks; 0 damaged",
    )
    code, out = _verify(tmp_path, "nowhere")
    assert code == 2 and "no instance has shipped session 'nowhere'" in "\n".join(out)


def test_without_the_fleet_extra_a_config_that_ships_is_refused(monkeypatch, tmp_path):
    config = tmp_path / "taplog.toml"
    config.write_text(f'ship_to = "{TO}"\n')
    assert CliRunner().invoke(main, ["check-config", str(config)]).exit_code == 0
    monkeypatch.setitem(sys.modules, "deltalake", None)
    result = CliRunner().invoke(main, ["check-config", str(config)])
    assert result.exit_code != 0
    assert "needs taplog[fleet] (deltalake is missing)" in result.output
