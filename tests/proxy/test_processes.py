"""`taplog serve --workers N`: the supervisor, the recorder process and the workers, as real
processes driven through the official SDK.

Which process served a call is made certain rather than left to the kernel: a worker
stopped with SIGSTOP accepts nothing, so the other one takes every new connection.
Kills are SIGKILL under `--fsync always`, so "the client saw its answer whole" means
"its lines were synced before the end was sent".
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import openai
import pytest

from taplog.recorder.channel import RING_BYTES
from taplog.recorder.store.reader import read_all
from taplog.recorder.verify import verify
from tests.fakes.harness import TaplogProcess, model_requests, serve_on_fake
from tests.fakes.keys import OPENAI_KEY

pytestmark = pytest.mark.slow
STREAM = "stream {n} !events=20 !delay=0.05"


def _children(pid: int) -> dict[int, str]:
    """pid -> name (`taplog-recorder`, `taplog-worker`) of the supervisor's live children
    (not one that died and is not reaped yet)."""
    found = {}
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # just reaped
            if Path(f"/proc/{child}/stat").read_text().split(") ")[1][0] != "Z":
                found[int(child)] = Path(f"/proc/{child}/comm").read_text().strip()
    return found


def _named(served: TaplogProcess, name: str) -> list[int]:
    return sorted(pid for pid, comm in _children(served.process.pid).items() if comm == name)


def _until(check, seconds: float = 15.0):
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return found


def _client(served: TaplogProcess, session: str) -> openai.OpenAI:
    """A client of its own (its own connections), calls named by session."""
    return openai.OpenAI(
        base_url=served.openai_base,
        api_key=OPENAI_KEY,
        max_retries=0,
        default_headers={"X-Taplog-Session": session},
        http_client=httpx.Client(),
    )


def _ask(served: TaplogProcess, session: str, text: str = "hi") -> str:
    answer = _client(served, session).chat.completions.create(
        model="gpt-4.1", messages=[{"role": "user", "content": text}]
    )
    return answer.choices[0].message.content


def _at_once(served: TaplogProcess, asks: list[tuple[str, str]]) -> None:
    """Each (session, text) asked by a client of its own, all at the same time."""
    callers = [threading.Thread(target=_ask, args=(served, *ask)) for ask in asks]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(30)


def _stream(served: TaplogProcess, session: str, n: int, history: str = "") -> str:
    earlier = [{"role": "user", "content": history}, {"role": "assistant", "content": "ok"}]
    chunks = _client(served, session).chat.completions.create(
        model="gpt-4.1",
        messages=[*(earlier if history else []), {"role": "user", "content": STREAM.format(n=n)}],
        stream=True,
    )
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def _streaming_load(
    served: TaplogProcess, streams: int, seconds: float, history: str = ""
) -> tuple[dict[str, str], list[threading.Thread]]:
    """`streams` clients streaming one call after another for `seconds`, each resending
    `history`: session -> the text of each call that came whole (a cut one raises in the
    SDK and is left out), and the clients' threads."""
    whole: dict[str, str] = {}
    until = time.monotonic() + seconds

    def client(k: int) -> None:
        n = 0
        while time.monotonic() < until:
            session, n = f"load-{k}-{n}", n + 1
            try:
                whole[session] = _stream(served, session, n, history)
            except (openai.APIError, httpx.HTTPError):
                time.sleep(0.05)  # cut off, or refused while the recorder is away

    threads = [threading.Thread(target=client, args=(k,)) for k in range(streams)]
    for thread in threads:
        thread.start()
    return whole, threads


def _logged_whole(data: Path, whole: dict[str, str]) -> None:
    """Every call a client saw whole is in the log, whole; every log verifies."""
    sessions = read_all(data)
    for session, text in whole.items():
        (answer,) = [e for e in sessions[session] if e["type"] == "llm.response"]
        assert answer["outcome"] == "ok" and answer["stream_complete"] is True, session
        assert text.startswith("Echo: stream ")
    reports = verify(data)
    assert reports and all(report.ok for report in reports), [r for r in reports if not r.ok]


def test_serve_runs_one_recorder_process_beside_the_workers_asked_for(fake, tmp_path):
    served = serve_on_fake(fake, tmp_path / "data", "--workers", "3")
    try:
        children = _children(served.process.pid)
        assert sorted(children.values()) == ["taplog-recorder", *["taplog-worker"] * 3]
        assert _ask(served, "s") == "Echo: hi"
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert not [pid for pid in children if Path(f"/proc/{pid}").exists()]  # all stopped


def test_one_sessions_calls_over_every_worker_land_in_one_whole_log(fake, tmp_path):
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2", "--fsync", "always")
    first, second = _named(served, "taplog-worker")
    try:
        for stopped, serving in ((second, first), (first, second)):
            os.kill(stopped, signal.SIGSTOP)  # accepts nothing: the other takes every call
            try:
                for n in range(5):
                    assert _ask(served, "one", f"turn {serving} {n}") == f"Echo: turn {serving} {n}"
            finally:
                os.kill(stopped, signal.SIGCONT)
        _at_once(served, [("one", f"together {n}") for n in range(10)])
    finally:
        code, err = served.stop()
    assert code == 0, err
    (events,) = read_all(data).values()
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert [e["type"] for e in events].count("session.started") == 1
    answers = [e for e in events if e["type"] == "llm.response"]
    assert len(answers) == 20 and all(a["outcome"] == "ok" for a in answers)
    (report,) = verify(data)
    assert report.ok


def test_large_request_bodies_between_small_calls_reach_the_log_byte_for_byte(fake, tmp_path):
    """A worker sends a large body to the recorder process through the memory they share,
    or, when it is larger than that, from where it is, apart from the small frames of the
    same loop turn; the log holds each request as its client sent it, whatever the clients
    did at the same time."""
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2")
    texts = {f"big-{n}": f"{n} " + "a resent history line\n" * (20_000 * (n + 1)) for n in range(3)}
    texts["larger-than-the-ring"] = "h " + "a resent history line\n" * (RING_BYTES // 20)
    texts |= {f"small-{n}": f"small {n}" for n in range(6)}
    try:
        _at_once(served, list(texts.items()))
    finally:
        code, err = served.stop()
    assert code == 0, err
    sessions = read_all(data)
    for session, text in texts.items():
        (request,) = [e for e in sessions[session] if e["type"] == "llm.request"]
        assert request["body"]["messages"][0]["content"] == text, session
    assert all(report.ok for report in verify(data))


def test_a_worker_killed_under_load_loses_nothing_acknowledged_and_is_started_again(fake, tmp_path):
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2", "--fsync", "always")
    try:
        victim, survivor = _named(served, "taplog-worker")
        whole, threads = _streaming_load(served, streams=6, seconds=4)
        time.sleep(1.5)
        os.kill(victim, signal.SIGKILL)
        workers = _until(
            lambda: victim not in (w := _named(served, "taplog-worker")) and len(w) == 2 and w
        )
        assert survivor in workers  # the other kept serving; the victim's place is taken
        for thread in threads:
            thread.join(30)
        assert _ask(served, "after") == "Echo: hi"
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert re.search(r"the worker \d exited \(code -9\); starting it again", err), err
    assert len(whole) >= 6  # the load went on around the kill
    _logged_whole(data, whole)


def test_a_worker_killed_with_large_bodies_on_their_way_loses_nothing_acknowledged(fake, tmp_path):
    """The bodies a worker had put in the memory it shares with the recorder process are
    still there for it once the worker is gone: every call a client saw whole is in the
    log with the body it sent, and every log verifies."""
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2", "--fsync", "always")
    history = "an earlier turn of a long conversation\n" * 8_000  # 300 KB, in the ring
    try:
        victim = _named(served, "taplog-worker")[0]
        whole, threads = _streaming_load(served, streams=4, seconds=3, history=history)
        time.sleep(1)
        os.kill(victim, signal.SIGKILL)
        for thread in threads:
            thread.join(30)
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert len(whole) >= 4
    _logged_whole(data, whole)
    sessions = read_all(data)
    for session in whole:
        (request,) = [e for e in sessions[session] if e["type"] == "llm.request"]
        assert request["body"]["messages"][0]["content"] == history, session


def test_a_recorder_killed_under_load_refuses_calls_until_it_is_back(fake, tmp_path):
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2", "--fsync", "always")
    readyz = f"{served.url}/readyz"
    try:
        (recorder,) = _named(served, "taplog-recorder")
        whole, threads = _streaming_load(served, streams=6, seconds=4)
        time.sleep(1.5)
        os.kill(served.process.pid, signal.SIGSTOP)  # no restart until it is looked at
        try:
            os.kill(recorder, signal.SIGKILL)
            away = _until(lambda: (r := httpx.get(readyz)).status_code == 503 and r.json())
            assert "the recorder process is not running" in away["reason"]
            heard = len(fake.requests)
            with pytest.raises(openai.InternalServerError, match="recorder process"):
                _ask(served, "while-away")  # a 503 before any vendor is called
            assert len(fake.requests) == heard
        finally:
            os.kill(served.process.pid, signal.SIGCONT)
        _until(lambda: [p for p in _named(served, "taplog-recorder") if p != recorder])
        _until(lambda: httpx.get(readyz).status_code == 200)
        for thread in threads:
            thread.join(30)
        assert _ask(served, "after") == "Echo: hi"
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert "the recorder process exited (code -9); starting it again" in err
    _logged_whole(data, whole)


def test_sigterm_with_streams_in_flight_on_every_worker_exits_0_with_all_written(fake, tmp_path):
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2", "--fsync", "always")
    texts: dict[int, str] = {}
    started = threading.Barrier(7)

    def stream(n: int) -> None:
        chunks = _client(served, f"stream-{n}").chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": STREAM.format(n=n)}], stream=True
        )
        parts = [next(chunks).choices[0].delta.content or ""]
        started.wait(10)
        parts += [c.choices[0].delta.content or "" for c in chunks if c.choices]
        texts[n] = "".join(parts)

    threads = [threading.Thread(target=stream, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    started.wait(10)
    served.process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(20)
    _, err = served.process.communicate(timeout=30)
    assert served.process.returncode == 0, err
    assert texts == {n: f"Echo: stream {n}" for n in range(6)}
    _logged_whole(data, {f"stream-{n}": text for n, text in texts.items()})


# -- what the workers agree on ----------------------------------------------------------


@contextlib.contextmanager
def _only(served: TaplogProcess, worker: int):
    """Every new connection goes to `worker`: the others are stopped meanwhile."""
    others = [pid for pid in _named(served, "taplog-worker") if pid != worker]
    for pid in others:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in others:
            os.kill(pid, signal.SIGCONT)


def _anonymous(served: TaplogProcess) -> openai.OpenAI:
    """A client that names no session: taplog finds it (stitching, answer ids). Each call
    gets one of its own: a kept-alive connection would stay with its worker."""
    return openai.OpenAI(
        base_url=served.openai_base, api_key=OPENAI_KEY, max_retries=0, http_client=httpx.Client()
    )


def test_a_stateless_chat_is_stitched_whichever_worker_takes_each_turn(fake, tmp_path):
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2")
    first, second = _named(served, "taplog-worker")
    messages: list = []
    try:
        for turn, worker in enumerate((first, second, first, second)):
            messages.append({"role": "user", "content": f"turn {turn}"})
            with _only(served, worker):
                answer = _anonymous(served).chat.completions.create(
                    model="gpt-4.1", messages=messages
                )
            messages.append({"role": "assistant", "content": answer.choices[0].message.content})
    finally:
        code, err = served.stop()
    assert code == 0, err
    (events,) = read_all(data).values()  # one session, not one per worker
    assert [e["type"] for e in events].count("llm.request") == 4
    assert [e["type"] for e in events].count("session.started") == 1


def test_a_worker_started_again_knows_what_the_others_learned_before_it(fake, tmp_path):
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2")
    first, second = _named(served, "taplog-worker")
    messages = [{"role": "user", "content": "before"}]
    try:
        with _only(served, first):
            answer = _anonymous(served).chat.completions.create(model="gpt-4.1", messages=messages)
        os.kill(first, signal.SIGKILL)
        (again,) = _until(
            lambda: [w for w in _named(served, "taplog-worker") if w not in (first, second)]
        )
        messages += [
            {"role": "assistant", "content": answer.choices[0].message.content},
            {"role": "user", "content": "after"},
        ]
        with _only(served, again):
            _anonymous(served).chat.completions.create(model="gpt-4.1", messages=messages)
    finally:
        code, err = served.stop()
    assert code == 0, err
    (events,) = read_all(data).values()  # stitched by the worker that was not there
    assert [e["type"] for e in events].count("llm.request") == 2


def test_a_responses_chain_stays_one_session_and_fails_over_whole_across_workers(vendors, tmp_path):
    data = tmp_path / "data"
    served = TaplogProcess(
        *("--data-dir", str(data), "--workers", "2"),
        *("--openai-base", f"{vendors.openai.url}/v1", "--anthropic-base", vendors.anthropic.url),
        *("--fallback", "gpt-*=anthropic:claude-sonnet-4-6"),
    )
    first, second = _named(served, "taplog-worker")
    try:
        with _only(served, first):
            opening = _anonymous(served).responses.create(
                model="gpt-4.1", input="remember the word teal"
            )
        with _only(served, second):
            chained = _anonymous(served).responses.create(
                model="gpt-4.1", input="and now?", previous_response_id=opening.id
            )
        vendors.openai.down = {"status": "503"}
        with _only(served, first):  # not the worker that served the answer it chains to
            moved = _anonymous(served).responses.create(
                model="gpt-4.1", input="which word?", previous_response_id=chained.id
            )
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert moved.output_text.startswith("Echo: which word?")
    (sent,) = model_requests(vendors.anthropic)  # the whole conversation, spelled out
    said = sent.body.decode()
    assert all(text in said for text in ("remember the word teal", "and now?", "which word?"))
    (events,) = read_all(data).values()
    assert len([e for e in events if e["type"] == "call.answered"]) == 3


def test_a_circuit_one_worker_opens_is_open_for_every_worker(vendors, tmp_path):
    served = TaplogProcess(
        *("--data-dir", str(tmp_path / "data"), "--workers", "2"),
        *("--openai-base", f"{vendors.openai.url}/v1", "--anthropic-base", vendors.anthropic.url),
        *("--fallback", "gpt-*=anthropic:claude-sonnet-4-6"),
    )
    first, second = _named(served, "taplog-worker")
    vendors.openai.down = {"status": "503"}
    try:
        with _only(served, first):  # its three tries (retries = 2) open the circuit
            _anonymous(served).chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "here"}]
            )
        failed = len(model_requests(vendors.openai))
        with _only(served, second):
            answer = _anonymous(served).chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "elsewhere"}]
            )
            scraped = httpx.get(f"{served.url}/metrics").text
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert answer.choices[0].message.content == "Echo: elsewhere"
    assert len(model_requests(vendors.openai)) == failed  # skipped, not waited on again
    assert re.search(r'taplog_circuit_breaker_state\{[^}]*state="open"[^}]*\} 1', scraped), scraped


def test_a_recorder_that_cannot_keep_up_is_back_pressure_never_a_drop(fake, tmp_path):
    """The recorder process stops reading: the channel fills, calls in flight wait for
    their lines, new ones are refused before any vendor hears of them; once it reads
    again every admitted call completes and is in the log."""
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "1", "--queue-high-water-mb", "0.5")
    results: dict[int, str] = {}
    big = "x" * 300_000  # a few calls' records fill the socket and pass the mark

    def call(n: int) -> None:
        try:
            answer = _ask(served, f"big-{n}", f"{n} {big}")
            results[n] = "whole" if answer == f"Echo: {n} {big}" else answer[:40]
        except openai.InternalServerError as exc:
            results[n] = f"refused: {exc.message}"

    (recorder,) = _named(served, "taplog-recorder")
    os.kill(recorder, signal.SIGSTOP)
    threads: list[threading.Thread] = []
    try:
        for n in range(8):  # one at a time: each admitted (the vendor has it) or refused
            heard = len(fake.requests)
            threads.append(threading.Thread(target=call, args=(n,)))
            threads[-1].start()
            _until(lambda: len(fake.requests) > heard or n in results)  # noqa: B023
    finally:
        os.kill(recorder, signal.SIGCONT)
    for thread in threads:
        thread.join(30)
    code, err = served.stop()
    assert code == 0, err
    refused = [n for n, said in results.items() if said.startswith("refused")]
    admitted = [n for n, said in results.items() if said == "whole"]
    assert refused and admitted and len(results) == 8, results
    assert all("not keeping up" in results[n] for n in refused), results
    assert len(fake.requests) == len(admitted)  # a refused call never reached the vendor
    sessions = read_all(data)
    assert sorted(sessions) == sorted(f"big-{n}" for n in admitted)
    assert all(
        [e["outcome"] for e in sessions[f"big-{n}"] if e["type"] == "llm.response"] == ["ok"]
        for n in admitted
    )
    assert all(report.ok for report in verify(data))
