"""Large bodies beside the log: small lines, content-addressed blobs, read back everywhere.

Each test drives taplog with the official SDKs at a small `body_inline_max_kb`, so
ordinary bodies already cross it, and checks what a user would: the log lines stay
small, the blobs are on disk, and the readers, the SQL views, `show`, `export`,
`fork`, `replay` and `verify` give what they give for inline bodies.
"""

from __future__ import annotations

import errno
import itertools
import os
import threading
import time
from pathlib import Path

import httpx
import openai
import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.proxy.keys import RECORDER
from taplog.recorder.bodies import decode_body
from taplog.recorder.query.compaction import compact
from taplog.recorder.store.reader import DamagedLine, read_events, read_session
from taplog.recorder.tools.export import export_conversation
from taplog.recorder.tools.fork import fork_session
from taplog.recorder.verify import verify
from tests.disk import log_of, readable
from tests.fakes.agents import AGENTS
from tests.fakes.clients import Capture, sdk_client, sql_rows
from tests.fakes.harness import Taplog, serve_replay, start_on_fake
from tests.fakes.keys import OPENAI_KEY

INLINE_MAX_KB = 2.0  # the bodies below are 10 to 60 times that
BIG = "lorem ipsum dolor sit amet " * 2000  # about 54 KB


def _taplog(servers, fake, data_dir: Path, inline_max_kb: float = INLINE_MAX_KB) -> Taplog:
    return start_on_fake(servers, fake, data_dir, body_inline_max_kb=inline_max_kb)


def _session_oai(taplog: Taplog, session: str = "big") -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{taplog.url}/s/{session}/v1", api_key=OPENAI_KEY, max_retries=0)


def _blobs(data_dir: Path) -> list[Path]:
    return sorted((data_dir / "blobs").glob("*/*.json"))


def _conversation(oai: openai.OpenAI) -> None:
    """A big prompt, a big streamed answer, and a small call between them."""
    oai.chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "summarise " + BIG}]
    )
    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "hi"}])
    with oai.chat.completions.stream(
        model="gpt-4.1", messages=[{"role": "user", "content": "write !big=60000 !events=40"}]
    ) as stream:
        assert len(stream.get_final_completion().choices[0].message.content) == 60000


BODIES = (
    "SELECT request_body, response_body FROM llm_calls ORDER BY started_at",
    "SELECT type, data->'body' AS body, json_array_length(data->'sse') AS sse_events, "
    "data->'sse'->10->>'raw' AS sse_raw FROM events ORDER BY seq",
)


def test_large_bodies_go_to_blobs_and_every_reader_sees_them_as_inline(servers, fake, tmp_path):
    blobbed = _taplog(servers, fake, tmp_path / "blobbed")
    inline = _taplog(servers, fake, tmp_path / "inline", inline_max_kb=1024)
    _conversation(_session_oai(blobbed))
    _conversation(_session_oai(inline))
    blobbed.wait_responses(3)
    inline.wait_responses(3)
    log = log_of(blobbed.data_dir, "big")

    # Small lines; the big request, the big stream (raw events and reassembled body) in blobs.
    assert max(len(line) for line in readable(log).splitlines()) < 6 * 1024
    stored = list(read_events(log, as_stored=True))
    moved = [(e["type"], set(e["blob"]["fields"]) - {"body_raw"}) for e in stored if "blob" in e]
    assert moved == [
        ("llm.request", {"body"}),
        ("llm.response", {"body"}),  # the echo of a big prompt is big too
        ("llm.response", {"sse", "body"}),
    ]
    assert len(_blobs(blobbed.data_dir)) == 3
    assert not (inline.data_dir / "blobs").exists() or not _blobs(inline.data_dir)

    # Readers put the bodies back: the exact bytes the vendor got and sent.
    events = read_session(blobbed.data_dir, "big")
    requests = [e for e in events if e["type"] == "llm.request"]
    assert [decode_body(e) for e in requests] == [r.body for r in fake.requests[:3]]
    (streamed,) = [e for e in events if e.get("stream") and e["type"] == "llm.response"]
    assert b"".join(entry["raw"].encode() for entry in streamed["sse"]) == fake.sent[2]

    def without_envelope(session_events: list[dict]) -> list[dict]:
        volatile = ("ts", "id", "exchange", "prev", "h", "latency_ms", "ttfb_ms", "overhead_ms")
        return [
            {k: v for k, v in e.items() if k not in (*volatile, "blob", "headers", "sse")}
            for e in session_events
        ]

    assert without_envelope(events) == without_envelope(read_session(inline.data_dir, "big"))

    # The SQL views give the same JSON, before and after compaction.
    for sql in BODIES:
        expected = sql_rows(inline.data_dir, sql)
        assert sql_rows(blobbed.data_dir, sql) == expected
        assert compact(blobbed.data_dir) in (["big"], [])
        assert sql_rows(blobbed.data_dir, sql) == expected
    assert "big" in orjson.loads((blobbed.data_dir / "compacted" / "manifest.json").read_bytes())

    # `show`, `export` and `fork` as for inline bodies.
    shown = CliRunner().invoke(main, ["show", "big", "--data-dir", str(blobbed.data_dir)])
    assert shown.exit_code == 0 and shown.output.count("call  openai.chat") == 3
    for fmt, at in itertools.product(("openai-chat", "anthropic", "responses"), (2, None)):
        assert export_conversation(events, fmt, at) == export_conversation(
            read_session(inline.data_dir, "big"), fmt, at
        )
    fork = fork_session(blobbed.data_dir, "big", at=2, new="big-fork")
    assert max(len(line) for line in readable(log_of(blobbed.data_dir, fork)).splitlines()) < (
        6 * 1024
    )
    assert read_session(blobbed.data_dir, fork)[1]["body"] == requests[0]["body"]
    assert verify(blobbed.data_dir)[0].ok


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("api", sorted(AGENTS))
def test_an_agent_run_with_every_body_in_blobs_replays_byte_for_byte(
    servers, fake, tmp_path, api, stream
):
    taplog = _taplog(servers, fake, tmp_path / "data", inline_max_kb=0.25)
    agent = AGENTS[api][0]
    recording = Capture()
    agent(sdk_client(api, taplog.url, recording), stream)
    ((session, _),) = taplog.wait_responses(8).items()
    stored = list(read_events(log_of(taplog.data_dir, session), as_stored=True))
    assert sum("blob" in e for e in stored) >= 12  # nearly every request and answer

    replaying = Capture()
    agent(sdk_client(api, serve_replay(servers, taplog.data_dir), replaying), stream)
    assert replaying.seen == recording.seen  # same requests, same answers, same stream bytes


def test_identical_bodies_are_stored_once(servers, fake, tmp_path):
    taplog = _taplog(servers, fake, tmp_path / "data")
    prompt = [{"role": "user", "content": "again " + BIG}]
    first = _session_oai(taplog, "one").chat.completions.create(model="gpt-4.1", messages=prompt)
    second = _session_oai(taplog, "two").chat.completions.create(model="gpt-4.1", messages=prompt)
    assert first == second  # the fake answers identical requests identically
    sessions = taplog.wait_responses(2)
    assert set(sessions) == {"one", "two"}
    refs = [
        e["blob"]["sha256"]
        for session in sessions
        for e in read_events(log_of(taplog.data_dir, session), as_stored=True)
        if "blob" in e
    ]
    assert len(refs) == 4 and len(set(refs)) == 2  # two requests, two answers: two blobs
    assert [p.stem for p in _blobs(taplog.data_dir)] == sorted(set(refs))


def test_verify_and_readers_name_a_missing_or_changed_blob(servers, fake, tmp_path):
    taplog = _taplog(servers, fake, tmp_path / "data")
    _session_oai(taplog).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": "check " + BIG}]
    )
    taplog.wait_responses(1)
    data = taplog.data_dir
    stored = list(read_events(log_of(data, "big"), as_stored=True))
    request, answer = [e for e in stored if "blob" in e]
    changed = data / "blobs" / request["blob"]["sha256"][:2] / f"{request['blob']['sha256']}.json"
    missing = data / "blobs" / answer["blob"]["sha256"][:2] / f"{answer['blob']['sha256']}.json"
    assert CliRunner().invoke(main, ["verify", "--data-dir", str(data)]).exit_code == 0

    changed.write_bytes(changed.read_bytes().replace(b"lorem", b"LOREM", 1))
    missing.unlink()
    result = CliRunner().invoke(main, ["verify", "--data-dir", str(data)])
    assert result.exit_code == 1
    assert f"{changed} was changed" in result.output
    assert f"{missing} is missing" in result.output
    with pytest.raises(DamagedLine, match=r"big\.jsonl\.zst:\d+ .*was changed"):
        read_session(data, "big")
    failed = CliRunner().invoke(
        main, ["sql", "SELECT response_body FROM llm_calls", "--data-dir", str(data)]
    )
    assert failed.exit_code != 0 and answer["blob"]["sha256"] in failed.output
    assert "is missing from blobs/" in failed.output


class FullDiskForBlobs:
    """os.write into a file under blobs/ fails with ENOSPC while `full` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full = threading.Event()
        self.failures = 0
        real = os.write

        def write(fd: int, data) -> int:
            if self.full.is_set() and "/blobs/" in os.readlink(f"/proc/self/fd/{fd}"):
                self.failures += 1
                raise OSError(errno.ENOSPC, "No space left on device")
            return real(fd, data)

        monkeypatch.setattr(os, "write", write)


def test_a_blob_that_cannot_be_written_holds_its_line_back_until_space_returns(
    servers, fake, tmp_path, monkeypatch
):
    disk = FullDiskForBlobs(monkeypatch)
    taplog = _taplog(servers, fake, tmp_path / "data")
    recorder = taplog.app[RECORDER]
    oai = _session_oai(taplog)
    disk.full.set()
    prompt = [{"role": "user", "content": "full " + BIG}]
    answer = oai.chat.completions.create(model="gpt-4.1", messages=prompt)  # `interval`: finishes
    deadline = time.monotonic() + 10
    while recorder.accepting:
        assert time.monotonic() < deadline, "the writer never reported the failed blob"
        time.sleep(0.02)
    assert "No space left on device" in recorder.health()["reason"]
    ready = httpx.get(f"{taplog.url}/readyz")
    assert ready.status_code == 503
    with pytest.raises(openai.InternalServerError, match="not recording"):
        oai.chat.completions.create(model="gpt-4.1", messages=prompt)
    log = log_of(taplog.data_dir, "big")
    on_disk = list(read_events(log, as_stored=True)) if log.exists() else []
    assert not [e for e in on_disk if e["type"].startswith("llm.")]  # nothing points nowhere
    assert not list((taplog.data_dir / "blobs").glob("*/.*"))  # no partial blob left behind

    disk.full.clear()
    while not recorder.accepting:
        assert time.monotonic() < deadline + 10, "recording never resumed"
        time.sleep(0.02)
    again = oai.chat.completions.create(model="gpt-4.1", messages=prompt)
    assert again == answer and disk.failures >= 1
    events = taplog.wait_responses(2)["big"]
    assert [e["type"] for e in events if e["type"].startswith("llm.")] == [
        "llm.request",
        "llm.response",
        "llm.request",
        "llm.response",
    ]
    assert decode_body(events[1]) == fake.requests[0].body
    assert verify(taplog.data_dir)[0].ok and recorder.stats.write_errors >= 1
