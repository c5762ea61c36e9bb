"""Crashes, power failures, full disks and failing writes: the log stays readable and whole.

Simulated crashes cut a real log at every byte offset; a simulated power failure keeps the
synced part of a file and a random part of what was written after it, per fsync policy;
writes fail at the Nth call (EIO, a short write then ENOSPC, a failed undo); a real
`RLIMIT_FSIZE` fills the "disk" of a `taplog serve` process; and `taplog serve` is killed
with SIGKILL under concurrent streaming traffic from the real SDKs, again and again.
"""

from __future__ import annotations

import base64
import errno
import os
import random
import resource
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import anthropic
import httpx
import openai
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taplog.proxy.cli.main import main
from taplog.recorder.events import ERROR, make_event, seal
from taplog.recorder.store import logfile
from taplog.recorder.store.logfile import SessionFile, open_session_file
from taplog.recorder.store.reader import DamagedLine, read_all, read_events, read_session
from taplog.recorder.store.writer import EventRecord, Recorder
from taplog.recorder.store.zstd_stream import FRAME_END
from taplog.recorder.verify import verify, verify_file
from tests.disk import log_of, readable
from tests.fakes.clients import wait_written
from tests.fakes.harness import TAPLOG, serve_on_fake, start_on_fake, taplog_env
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY


def _events(count: int, session: str = "s") -> list[dict]:
    texts = ["short", "ünïcödé ✓", "x" * 300, '{"fake":"event"}\n', "", "tail"]
    return [
        make_event(ERROR, session, None, reason=f"r{n}", text=texts[n % len(texts)])
        for n in range(count)
    ]


def _lines(count: int, session: str = "s") -> list[bytes]:
    lines, prev = [], None
    for seq, event in enumerate(_events(count, session), start=1):
        line, prev = seal(event, seq, prev)
        lines.append(line)
    return lines


# -- a crash at every byte offset ----------------------------------------------------------


def _cut_and_reopened(
    path: Path, quarantine: Path, left: bytes, ends: list[int], clean: list[int]
) -> tuple[int, bool, list[bytes]]:
    """`path` holding only `left` (a log cut short): its whole lines (those ending at
    `ends`) read back and verify, a cut not at a `clean` offset is a torn tail, and the
    writer reopens it and goes on. Returns the whole lines, whether it was torn, and what
    went to `quarantine` (emptied for the next cut)."""
    path.write_bytes(left)
    complete = sum(end <= len(left) for end in ends)
    assert [e["seq"] for e in read_events(path)] == list(range(1, complete + 1))
    report = verify_file(path)
    assert report.ok and report.lines == complete
    assert (report.torn is not None) == (len(left) not in (0, *clean))

    reopened, damage = open_session_file(path, quarantine, sync_dir=False)
    assert damage is None and reopened.seq == complete
    reopened.append([make_event(ERROR, "s", None, reason="after")])
    reopened.close(sync=False)
    assert verify_file(path).ok and verify_file(path).torn is None
    assert [e["seq"] for e in read_events(path)] == list(range(1, complete + 2))
    kept = [p.read_bytes() for p in sorted(quarantine.iterdir())]
    for leftover in quarantine.iterdir():
        leftover.unlink()
    return complete, report.torn is not None, kept


def test_a_log_cut_at_any_byte_reads_back_its_whole_lines_and_reopens_cleanly(tmp_path):
    lines = _lines(6)
    whole = b"".join(lines)
    ends = [sum(len(line) for line in lines[: n + 1]) for n in range(len(lines))]
    sessions, quarantine = tmp_path / "sessions", tmp_path / "quarantine"
    sessions.mkdir()
    quarantine.mkdir()
    path = sessions / "s.jsonl"
    for cut in range(len(whole) + 1):
        complete, torn, kept = _cut_and_reopened(path, quarantine, whole[:cut], ends, ends)
        assert kept == ([whole[ends[complete - 1] if complete else 0 : cut]] if torn else [])


def _compressed_log(tmp_path: Path, writes: int) -> tuple[bytes, list[int]]:
    """A compressed log of `writes` writes of the writer (the last two in a second frame,
    as after a crash), and where each write ends (the first of the second frame's begins
    by ending the first frame, and closing the file ends the second: whole blocks too)."""
    folder = tmp_path / "written"
    (folder / "sessions").mkdir(parents=True)
    path, ends = log_of(folder, "s"), []
    for n, event in enumerate(_events(writes)):
        if n in (0, writes - 2):
            session_file, _ = open_session_file(path, folder, sync_dir=False)
            if n:
                ends.append(session_file.size + len(FRAME_END))
        event["reason"] += " lorem ipsum" * n  # big and small writes, raw and compressed blocks
        session_file.append([event])
        ends.append(session_file.size)
    session_file.close(sync=False)  # ends its frame
    ends.append(session_file.size)
    return path.read_bytes(), ends


def test_a_compressed_log_cut_at_any_byte_reads_back_its_whole_writes_and_reopens_cleanly(
    tmp_path,
):
    data, boundaries = _compressed_log(tmp_path, 6)
    ends = [end for end in boundaries if end - len(FRAME_END) not in boundaries]  # of lines
    sessions, quarantine = tmp_path / "sessions", tmp_path / "quarantine"
    sessions.mkdir()
    quarantine.mkdir()
    path = log_of(tmp_path, "s")
    for cut in range(len(data) + 1):
        _, torn, kept = _cut_and_reopened(path, quarantine, data[:cut], ends, boundaries)
        assert bool(kept) == torn and all(data[:cut].endswith(k) for k in kept)


# -- power failure: the synced part survives, plus any part of the rest --------------------


class SyncLedger:
    """Remembers, per file, how many bytes the last fsync made durable."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.synced: dict[Path, int] = {}
        original = SessionFile.sync

        def sync(session_file: SessionFile) -> None:
            original(session_file)
            self.synced[session_file.path] = session_file.size

        monkeypatch.setattr(SessionFile, "sync", sync)


def test_under_interval_lines_nobody_waits_on_are_written_and_synced_soon(tmp_path, monkeypatch):
    """Lines may wait in memory for their session's next ones (one write per call), but a
    sync pass writes them first: nothing recorded stays off the disk for long."""
    ledger = SyncLedger(monkeypatch)
    rec = Recorder(tmp_path, fsync="interval")
    rec.start()
    for event in _events(5):
        rec.record(EventRecord(event))
    path = log_of(tmp_path, "s")
    deadline = time.monotonic() + 2  # FSYNC_INTERVAL is 0.1 s: a wide margin for slow CI
    while ledger.synced.get(path, 0) == 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert ledger.synced.get(path) == path.stat().st_size
    assert [e["reason"] for e in read_session(tmp_path, "s")] == [f"r{n}" for n in range(5)]
    rec.close()


@pytest.mark.parametrize("fsync", ["always", "interval", "never"])
def test_a_power_failure_keeps_every_acknowledged_line_under_always(tmp_path, monkeypatch, fsync):
    ledger = SyncLedger(monkeypatch)
    rec = Recorder(tmp_path, fsync=fsync)
    rec.start()
    acknowledged: list[int] = []  # events the writer said were written (and synced)
    for batch in range(8):
        for event in _events(3):
            event["reason"] = f"b{batch}-{event['reason']}"
            rec.record(EventRecord(event))
        if wait_written(rec):
            acknowledged.append(3 * (batch + 1))
    path = log_of(tmp_path, "s")
    size = path.stat().st_size
    synced = ledger.synced.get(path, 0)
    if fsync == "always":
        assert synced == size and acknowledged[-1] == 24
    if fsync == "interval":
        time.sleep(0.3)  # idle: the interval sync still comes within 100 ms
        assert ledger.synced.get(path, 0) == size
    if fsync == "never":
        assert synced == 0
    whole = path.read_bytes()
    rec.close()
    rng = random.Random(fsync)
    for _ in range(40):
        cut = rng.randint(synced, size)  # the synced part, and any part of the rest
        path.write_bytes(whole[:cut])
        report = verify_file(path)
        assert report.ok
        if fsync == "always":
            assert report.lines >= acknowledged[-1]


# -- writes that fail ------------------------------------------------------------------------


class FailingWrites:
    """os.write for session logs that fails on chosen calls: EIO, or a short write."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_on: set[int], short: bool) -> None:
        self.calls, self.fail_on, self.short = 0, fail_on, short
        real = os.write

        def write(fd: int, data: bytes) -> int:
            if not os.readlink(f"/proc/self/fd/{fd}").endswith((".jsonl", ".jsonl.zst")):
                return real(fd, data)  # not a session log (the rows beside it)
            self.calls += 1
            if self.calls in self.fail_on:
                if self.short and len(data) > 1:
                    self.fail_on.add(self.calls + 1)  # the rest then finds the disk full
                    self.fail_on.discard(self.calls)
                    return real(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC if self.short else errno.EIO, "injected")
            return real(fd, data)

        monkeypatch.setattr(logfile.os, "write", write)


@pytest.mark.parametrize("nth", [1, 2, 4])
@pytest.mark.parametrize("kind", ["eio", "short then enospc", "undo fails too"])
def test_a_write_failing_at_the_nth_call_leaves_no_partial_line_and_recording_resumes(
    tmp_path, monkeypatch, nth, kind
):
    FailingWrites(monkeypatch, {nth, nth + 1}, short=kind != "eio")
    if kind == "undo fails too":
        real = os.ftruncate
        failed = []

        def ftruncate(fd: int, length: int) -> None:
            if not failed:
                failed.append(length)
                raise OSError(errno.EIO, "injected")
            real(fd, length)

        monkeypatch.setattr(logfile.os, "ftruncate", ftruncate)
    rec = Recorder(tmp_path, fsync="always", retry_seconds=0.05)
    rec.start()
    told: list[bool] = []
    for n, event in enumerate(_events(12)):
        rec.record(EventRecord(event))
        if n % 3 == 2:
            told.append(wait_written(rec))
    assert rec.flush(10)
    assert rec.accepting and rec.stats.write_errors >= 1
    assert False in told  # a caller waiting on the log heard of the failure at once
    rec.close()
    (report,) = verify(tmp_path)
    assert report.ok and report.torn is None
    reasons = [e["reason"] for e in read_session(tmp_path, "s")]
    if kind == "undo fails too":  # whole lines of the torn batch may be there twice
        assert sorted(set(reasons), key=lambda r: int(r[1:])) == [f"r{n}" for n in range(12)]
    else:
        assert reasons == [f"r{n}" for n in range(12)]


def _with_children(pid: int) -> list[int]:
    """A process and all its descendants (`taplog serve`'s recorder process, its workers)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [pid, *(p for child in children for p in _with_children(int(child)))]


def test_a_disk_that_fills_up_for_real_refuses_new_calls_then_resumes(fake, tmp_path):
    """RLIMIT_FSIZE makes every write past the limit fail with EFBIG, as a full disk would."""
    limit = 48 * 1024

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    data = tmp_path / "data"
    command = [
        TAPLOG,
        "serve",
        "--port",
        "0",
        "--data-dir",
        str(data),
        "--openai-base",
        f"{fake.url}/v1",
        "--fsync",
        "always",
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=taplog_env(),
        preexec_fn=small_files,
    )
    try:
        banner = [process.stdout.readline() for _ in range(4)]
        base = next(line for line in banner if "OPENAI_BASE_URL" in line).split("=", 1)[1]
        client = openai.OpenAI(
            base_url=base.strip(),
            api_key=OPENAI_KEY,
            max_retries=0,
            default_headers={"X-Taplog-Session": "full"},
        )

        def prompt() -> list[dict]:  # random: the log's compression cannot shrink it
            return [
                {"role": "user", "content": "fill " + base64.b64encode(os.urandom(9000)).decode()}
            ]

        answered = 0
        with pytest.raises(openai.APIConnectionError):  # under `always`: cut, never complete
            for _ in range(20):  # each call adds about 9 KiB to the session's log
                client.chat.completions.create(model="gpt-4.1", messages=prompt())
                answered += 1
        assert 2 <= answered < 20
        forwarded = len(fake.requests)
        ready = httpx.get(base.strip().removesuffix("/v1") + "/readyz")
        assert ready.status_code == 503 and "File too large" in ready.json()["reason"]
        with pytest.raises(openai.InternalServerError, match="not recording"):
            client.chat.completions.create(model="gpt-4.1", messages=prompt())
        assert len(fake.requests) == forwarded  # refused before any vendor was called
        (report,) = verify(data)
        assert report.ok and report.torn is None  # no partial line at the limit

        for pid in _with_children(process.pid):  # space returns, for the recorder process
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (-1, -1))
        deadline = time.monotonic() + 10
        while httpx.get(base.strip().removesuffix("/v1") + "/readyz").status_code != 200:
            assert time.monotonic() < deadline, "recording never resumed"
            time.sleep(0.05)
        client.chat.completions.create(model="gpt-4.1", messages=prompt())
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert "File too large" in err
    (report,) = verify(data)
    assert report.ok
    events = read_session(data, "full")
    answers = [e for e in events if e["type"] == "llm.response"]
    assert len(answers) == answered + 2 and all(a["outcome"] == "ok" for a in answers)
    (withheld,) = [e for e in events if e["type"] == "error"]  # the call that was cut off
    assert withheld["exchange"] == answers[answered]["exchange"]
    assert "cut off before the end" in withheld["reason"]


# -- the answer's end waits for its record ---------------------------------------------------


@pytest.fixture
def slow_writer(monkeypatch):
    """Every append takes 0.2 s: an answer's end must still never beat its record."""
    real = SessionFile.append

    def append(session_file: SessionFile, events) -> None:
        time.sleep(0.2)
        real(session_file, events)

    monkeypatch.setattr(SessionFile, "append", append)


def _on_disk(data_dir: Path) -> list[dict]:
    return [e for events in read_all(data_dir).values() for e in events]  # no flush


def test_a_client_that_has_the_whole_answer_finds_it_on_disk(slow_writer, taplog, oai, ant):
    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "a"}])
    assert [e["outcome"] for e in _on_disk(taplog.data_dir) if e["type"] == "llm.response"] == [
        "ok"
    ]
    chunks = oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "b !events=5"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: b"
    with ant.messages.stream(
        model="claude-sonnet-4-6", max_tokens=9, messages=[{"role": "user", "content": "c"}]
    ) as stream:
        assert stream.get_final_text() == "Echo: c"
    answers = [e for e in _on_disk(taplog.data_dir) if e["type"] == "llm.response"]
    assert len(answers) == 3 and all(a["outcome"] == "ok" for a in answers)


def test_a_client_served_through_failover_finds_the_answer_on_disk(
    slow_writer, servers, vendors, tmp_path
):
    rule = {"model": "gpt-*", "to": ["anthropic:claude-sonnet-4-6"], "ttfb_timeout": 5.0}
    taplog = vendors.proxy(servers, tmp_path / "data", {"fallback": [rule]})
    vendors.openai.down = {"status": "503"}
    oai = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    said = oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "a"}])
    assert said.choices[0].message.content == "Echo: a"
    served = [e for e in _on_disk(taplog.data_dir) if e["type"] == "llm.response"]
    *failed, last = [(e["status"], e["outcome"]) for e in served]
    assert failed and set(failed) == {(503, "upstream_error")} and last == (200, "ok")
    chunks = oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "b !events=5"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: b"
    served = [e for e in _on_disk(taplog.data_dir) if e["type"] == "llm.response"]
    assert [e["outcome"] for e in served if e.get("stream_complete")] == ["ok"]
    vendors.openai.down = {}
    rule_served = oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "c"}]
    )  # the primary answers: relayed as it came, through the failover path
    assert rule_served.choices[0].message.content == "Echo: c"
    served = [e for e in _on_disk(taplog.data_dir) if e["type"] == "llm.response"]
    assert max(served, key=lambda e: e["ts"])["status"] == 200


@pytest.mark.parametrize("fsync", ["always", "interval"])
def test_when_the_log_fails_mid_call_always_cuts_the_client_off_interval_finishes(
    servers, fake, tmp_path, monkeypatch, fsync
):
    real = SessionFile.append

    def append(session_file: SessionFile, events) -> None:
        if any(e["type"] == "llm.response" for e in events):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(session_file, events)

    monkeypatch.setattr(SessionFile, "append", append)
    taplog = start_on_fake(servers, fake, tmp_path / "data", fsync=fsync)
    client = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    chunks = client.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "d !events=4"}], stream=True
    )
    if fsync == "always":
        with pytest.raises((httpx.HTTPError, openai.APIError)):
            list(chunks)
    else:
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: d"
    monkeypatch.setattr(SessionFile, "append", real)  # space returns: the answer is written
    answers = taplog.wait_responses(1)
    assert [e["outcome"] for ev in answers.values() for e in ev if e["type"] == "llm.response"]


# -- kill -9 under load ---------------------------------------------------------------------


SYSTEM = "You are a careful coding agent. Follow the house rules. " * 40


class Traffic:
    """Client threads streaming through taplog until it dies; each keeps what completed."""

    def __init__(self, base: str, round_: int, threads: int = 4) -> None:
        self.completed: list[str] = []
        self.first_completed = threading.Event()
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._run, args=(base, f"k{round_}-{n}", n), daemon=True)
            for n in range(threads)
        ]
        for thread in self.threads:
            thread.start()

    def _run(self, base: str, name: str, n: int) -> None:
        session = {"X-Taplog-Session": f"kill-{n}"}
        with (
            openai.OpenAI(
                base_url=f"{base}/v1", api_key=OPENAI_KEY, max_retries=0, default_headers=session
            ) as oai,
            anthropic.Anthropic(
                base_url=base, api_key=ANTHROPIC_KEY, max_retries=0, default_headers=session
            ) as ant,
        ):
            histories: dict[bool, list] = {False: [], True: []}  # one conversation per API
            for i in range(1000):
                if self.stop.is_set():
                    return
                prompt, anthropic_api = f"{name}-{i}", (n + i) % 2 == 1
                history = histories[anthropic_api]
                try:
                    text = self._call(oai, ant, history, prompt, anthropic_api)
                except Exception:  # taplog died under us (SDKs raise their transports' errors)
                    return
                if text == f"Echo: {prompt}":
                    self.completed.append(prompt)
                    self.first_completed.set()
                    history[:] = history[-8:]  # a history that grows, and is trimmed now and then

    @staticmethod
    def _call(
        oai: openai.OpenAI,
        ant: anthropic.Anthropic,
        history: list,
        prompt: str,
        anthropic_api: bool,
    ) -> str:
        """One streamed turn of a conversation with a large system prompt (which the log
        stores once) and its history (stored as what each turn adds to an earlier one)."""
        history.append({"role": "user", "content": prompt + " !events=6 !delay=0.02"})
        if anthropic_api:
            with ant.messages.stream(
                model="claude-sonnet-4-6", max_tokens=50, system=SYSTEM, messages=history
            ) as stream:
                text = stream.get_final_text()
        else:
            chunks = oai.chat.completions.create(
                model="gpt-4.1",
                messages=[{"role": "system", "content": SYSTEM}, *history],
                stream=True,
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        history.append({"role": "assistant", "content": text})
        return text

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fsync", "rounds", "workers"), [("always", 4, "0"), ("interval", 2, "0"), ("always", 2, "2")]
)
def test_kill_9_under_streaming_load_loses_no_answer_a_client_completed(
    fake, tmp_path, fsync, rounds, workers
):
    """With workers, the kill is the supervisor's: its children die with it."""
    data, completed, rng = tmp_path / "data", [], random.Random(rounds)
    for round_ in range(rounds):
        served = serve_on_fake(fake, data, "--fsync", fsync, "--workers", workers)
        traffic = Traffic(served.url, round_)
        traffic.first_completed.wait(30)  # under load: only kill once calls flow
        time.sleep(rng.uniform(0.05, 0.6))
        served.process.send_signal(signal.SIGKILL)
        served.process.communicate(timeout=20)
        traffic.join()
        completed += traffic.completed
    assert len(completed) >= rounds * 2, "too little traffic completed to prove anything"

    result = CliRunner().invoke(main, ["verify", "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    assert not list((data / "quarantine").glob("*.damaged.jsonl*"))
    sessions = read_all(data)
    ids = [e["id"] for events in sessions.values() for e in events]
    assert len(ids) == len(set(ids))  # nothing written twice
    requests = {}
    for events in sessions.values():
        for event in events:
            if event["type"] == "llm.request":
                last = event["body"]["messages"][-1]["content"]
                requests[last.split(" !")[0]] = event["exchange"]
    answered = {
        e["exchange"]
        for events in sessions.values()
        for e in events
        if e["type"] == "llm.response" and e["outcome"] == "ok" and e["stream_complete"]
    }
    missing = [p for p in completed if requests.get(p) not in answered]
    assert missing == [], f"completed for the client but not in the log: {missing}"


# -- property tests: the reader never crashes, never skips damage silently -----------------

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LOG = b"".join(_lines(5))
BOUNDARIES = [0]
for _line in _lines(5):
    BOUNDARIES.append(BOUNDARIES[-1] + len(_line))


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(0, len(LOG)), tail=st.binary(max_size=200))
def test_any_bytes_after_any_cut_are_reported_never_crash_the_reader(tmp_path, cut, tail):
    path = tmp_path / "s.jsonl"
    path.write_bytes(LOG[:cut] + tail)
    whole = sum(end <= cut for end in BOUNDARIES[1:])
    report = verify_file(path)
    try:
        read = [e["seq"] for e in read_events(path)]
    except DamagedLine as exc:
        assert not report.ok and str(report.damage[0]) in str(exc)
    else:
        assert read[:whole] == list(range(1, whole + 1))
        assert report.ok or len(read) > whole  # only garbage that verifies could pass


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(position=st.integers(0, len(LOG) - 1), value=st.integers(0, 255))
def test_a_changed_byte_is_found_in_its_own_line(tmp_path, position, value):
    if LOG[position] == value:
        return
    damaged = bytearray(LOG)
    damaged[position] = value
    path = tmp_path / "s.jsonl"
    path.write_bytes(bytes(damaged))
    line = sum(end <= position for end in BOUNDARIES[1:]) + 1
    report = verify_file(path)
    if position == len(LOG) - 1:  # the last newline: a torn tail, not damage
        assert report.ok and report.torn is not None and report.torn.line == line
    else:
        assert report.damage[0].line == line and report.damage[0].offset == BOUNDARIES[line - 1]
        with pytest.raises(DamagedLine, match=rf":{line} \(byte {BOUNDARIES[line - 1]}\)"):
            list(read_events(path))


def _reopened_with_a_line(path: Path, content: bytes) -> str | None:
    """Write `content` as the log at `path`, open it as the writer does and append one line
    (reason "next"); what the opening found damaged."""
    (path.parent.parent / "quarantine").mkdir(parents=True)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content)
    session_file, damage = open_session_file(path, path.parent.parent / "quarantine", False)
    session_file.append([make_event(ERROR, "s", None, reason="next")])
    session_file.close(sync=False)
    return damage


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.integers(0, len(LOG)), tail=st.binary(max_size=100).filter(lambda b: b"\n" not in b))
def test_the_writer_reopens_any_torn_log_and_continues_its_chain(tmp_path, cut, tail):
    folder = tmp_path / f"case-{os.urandom(4).hex()}"
    path = folder / "sessions" / "s.jsonl"  # plain, as an older taplog wrote it
    damage = _reopened_with_a_line(path, LOG[:cut] + tail)
    report = verify_file(path)
    assert report.ok and report.torn is None
    assert orjson.loads(path.read_bytes().splitlines()[-1])["reason"] == "next"
    assert damage is None or "fails its checksum" in damage


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data(), tail=st.binary(max_size=100))
def test_the_writer_reopens_any_torn_compressed_log_and_continues_its_chain(tmp_path, data, tail):
    folder = tmp_path / f"case-{os.urandom(4).hex()}"
    if not COMPRESSED_LOG:
        COMPRESSED_LOG.append(_compressed_log(tmp_path, 5)[0])
    log = COMPRESSED_LOG[0]
    cut = data.draw(st.integers(0, len(log)))
    path = log_of(folder, "s")
    damage = _reopened_with_a_line(path, log[:cut] + tail)
    report = verify_file(path)
    assert report.ok and report.torn is None
    assert orjson.loads(readable(path).splitlines()[-1])["reason"] == "next"
    assert damage is None or "fails its checksum" in damage or "compressed stream" in damage


COMPRESSED_LOG: list[bytes] = []  # made once, by the first example


def _failing_fsync(monkeypatch, fail_from: int, fail_until: int, damage=None) -> list[int]:
    """Make the log's fsyncs number `fail_from`..`fail_until` fail with EIO.

    Returns the inodes synced, in order. `damage(fd)` runs before a failure:
    what the lost pages look like when read back.
    """
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        status = os.fstat(fd)
        if stat.S_ISREG(status.st_mode):  # a log, not its directory
            synced.append(status.st_ino)
            if fail_from <= len(synced) <= fail_until:
                if damage is not None:
                    damage(fd)
                raise OSError(errno.EIO, "injected")
        real(fd)

    monkeypatch.setattr(logfile.os, "fsync", fsync)
    return synced


def _reasons(data_dir: Path, session: str = "s") -> list[str]:
    return [e["reason"] for e in read_session(data_dir, session)]


def test_a_failed_fsync_is_never_retried_the_file_is_sealed_and_a_new_one_goes_on(
    tmp_path, monkeypatch
):
    synced = _failing_fsync(monkeypatch, fail_from=2, fail_until=2)
    rec = Recorder(tmp_path, fsync="always")
    rec.start()
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="one")))
    assert wait_written(rec) is True
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="two")))
    assert wait_written(rec) is True  # "two" reached the disk in the new file
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="three")))
    assert wait_written(rec) is True
    assert rec.accepting
    rec.close()
    one, two, sealed, three = _reasons(tmp_path)
    assert (one, two, three) == ("one", "two", "three")
    assert sealed.startswith("an fsync of this log failed (injected); its 2 whole lines")
    (kept,) = (tmp_path / "quarantine").glob("s.*.suspect.jsonl.zst")
    assert f"quarantine/{kept.name}" in sealed
    assert [e["reason"] for e in read_events(kept)] == ["one", "two"]
    assert synced[:2] == [kept.stat().st_ino] * 2  # synced once, failed once
    assert kept.stat().st_ino not in synced[2:]  # and never synced again
    assert verify(tmp_path)[0].ok


def test_what_a_failed_fsync_lost_stays_in_quarantine_and_the_log_says_so(tmp_path, monkeypatch):
    def lose_the_last_line(fd: int) -> None:
        size = os.fstat(fd).st_size
        stale = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY)  # the log's own fd appends
        os.pwrite(stale, b"\0" * 40, size - 40)  # the unsynced pages came back stale
        os.close(stale)

    _failing_fsync(monkeypatch, fail_from=2, fail_until=2, damage=lose_the_last_line)
    rec = Recorder(tmp_path, fsync="always")
    rec.start()
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="one")))
    assert wait_written(rec) is True
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="two")))
    assert wait_written(rec) is False  # "two" is not on disk: under `always` its caller is cut off
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="three")))
    assert wait_written(rec) is True and rec.accepting
    rec.close()
    one, sealed, three = _reasons(tmp_path)
    assert three == "three"
    assert one == "one"
    assert "its 1 whole lines were copied" in sealed
    assert "bytes after them did not read back whole and stay there" in sealed
    (kept,) = (tmp_path / "quarantine").glob("s.*.suspect.jsonl.zst")
    assert b'"reason":"two"' not in readable(log_of(tmp_path, "s"))
    assert kept.read_bytes().endswith(b"\0" * 40)  # the lost line is kept as it read back
    assert stat.S_IMODE(log_of(tmp_path, "s").stat().st_mode) == 0o600
    assert verify(tmp_path)[0].ok


def test_when_sealing_a_failed_fsync_fails_too_new_calls_wait_for_a_restart(tmp_path, monkeypatch):
    _failing_fsync(monkeypatch, fail_from=2, fail_until=10**6)
    rec = Recorder(tmp_path, fsync="always")
    rec.start()
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="one")))
    assert wait_written(rec) is True
    rec.record(EventRecord(make_event(ERROR, "s", None, reason="two")))
    assert wait_written(rec) is False  # its sync failed and so did the new file's: callers hear so
    assert not rec.accepting
    reason = rec.health()["reason"]
    assert "fsync of s.jsonl.zst failed (injected) and so did sealing it" in reason
    assert "restart taplog" in reason
    rec.close()
    assert _reasons(tmp_path)[:2] == ["one", "two"]


def test_a_queue_over_its_high_water_mark_refuses_new_calls_and_drops_nothing(
    tmp_path, monkeypatch
):
    real = SessionFile.append

    def slow(session_file: SessionFile, events) -> None:
        time.sleep(0.02)
        real(session_file, events)

    monkeypatch.setattr(SessionFile, "append", slow)
    rec = Recorder(tmp_path, high_water_bytes=4096)
    rec.start()
    for event in _events(40):
        rec.record(EventRecord(event))  # 512 bytes each, as the writer counts them
    assert not rec.accepting
    assert rec.health()["reason"] == "recorder queue is over its high-water mark"
    assert rec.flush(10) and rec.accepting
    rec.close()
    assert [e["reason"] for e in read_session(tmp_path, "s")] == [f"r{n}" for n in range(40)]
