"""Replay modes and `taplog serve --replay`: recorded calls answered from the recording,
misses per mode, all through the official SDKs.

A first taplog records against the fake vendor; a second one (the full proxy, the
same `create_app` as `taplog serve`) replays that recording into a data dir of its
own. Hits must give the recorded bytes without the vendor hearing of them; a miss
is refused (strict), forwarded and recorded (passthrough), or forwarded once,
recorded and answered from the recording after that (record-missing).
"""

from __future__ import annotations

import socket
import subprocess

import anthropic
import openai
import pytest

from taplog.recorder.store.reader import read_all
from tests.fakes.agents import AGENTS
from tests.fakes.clients import Capture, sdk_client
from tests.fakes.harness import TAPLOG, start_on_fake, start_taplog
from tests.fakes.servers import ServerThread

HI = [{"role": "user", "content": "Hi"}]


def replaying(servers, fake, tmp_path, source, mode: str, name: str = "replayed"):
    return start_on_fake(
        servers,
        fake,
        tmp_path / name,
        replay=str(source),
        replay_mode=mode,
        replay_speed=0.0,
    )


def model_calls(fake) -> int:
    return sum(r.path.startswith("/v1/") and r.method == "POST" for r in fake.requests)


@pytest.mark.parametrize("mode", ["strict", "passthrough", "record-missing"])
@pytest.mark.parametrize("api", sorted(AGENTS))
def test_serve_replay_answers_a_recorded_agent_run_byte_for_byte(
    servers, fake, taplog, tmp_path, api, mode
):
    agent = AGENTS[api][0]
    recording = Capture()
    agent(sdk_client(api, taplog.url, recording), True)
    taplog.wait_responses(8)
    asked_vendor = model_calls(fake)

    proxy = replaying(servers, fake, tmp_path, taplog.data_dir, mode)
    replayed = Capture()
    agent(sdk_client(api, proxy.url, replayed), True)

    assert replayed.seen == recording.seen  # same requests, same answers, same stream bytes
    assert model_calls(fake) == asked_vendor  # every call was a hit: the vendor heard nothing
    assert proxy.sessions() == {}  # hits are not recorded again


def test_strict_serve_replay_refuses_a_miss_and_sends_nothing(
    servers, fake, taplog, tmp_path, oai, caplog
):
    oai.chat.completions.create(model="gpt-4.1", messages=HI)
    taplog.wait_responses(1)
    proxy = replaying(servers, fake, tmp_path, taplog.data_dir, "strict")
    asked_vendor = len(fake.requests)
    caplog.set_level("INFO", logger="taplog")
    sdk_client("chat", proxy.url).chat.completions.create(model="gpt-4.1", messages=HI)

    with pytest.raises(openai.BadRequestError) as miss:
        sdk_client("chat", proxy.url).chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "Hello"}]
        )
    assert miss.value.response.headers["x-taplog-error"] == "replay_miss"
    assert miss.value.body["message"].endswith("differs at messages[0].content")
    said = [r.getMessage() for r in caplog.records if r.name == "taplog"]
    assert any(m.startswith("replay hit: openai.chat from session ") for m in said), said
    assert any(
        m.startswith("replay miss: no recorded openai.chat request matches")
        and m.endswith("differs at messages[0].content (strict: refused)")
        for m in said
    ), said
    with pytest.raises(openai.NotFoundError):
        sdk_client("chat", proxy.url).models.list()  # strict: nothing but recorded model calls
    assert len(fake.requests) == asked_vendor and proxy.sessions() == {}


def test_passthrough_forwards_a_miss_and_records_it_every_time(servers, fake, taplog, tmp_path):
    sdk_client("anthropic", taplog.url).messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=HI
    )
    taplog.wait_responses(1)
    proxy = replaying(servers, fake, tmp_path, taplog.data_dir, "passthrough")
    asked_vendor = model_calls(fake)
    new = [{"role": "user", "content": "Something new"}]
    replay = sdk_client("anthropic", proxy.url)

    for _ in range(2):
        answer = replay.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=new)
        assert answer.content[0].text == "Echo: Something new"
    assert model_calls(fake) == asked_vendor + 2  # passthrough never learns
    requests = [e for e in proxy.events("llm.request")]
    assert [r["body"]["messages"] for r in requests] == [new, new]
    assert replay.models.list().data  # other paths go to the vendor as with serve
    hit = replay.messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=HI
    )
    assert hit.headers["x-taplog-replayed"].startswith("session ")


def test_replay_ignore_sets_the_named_fields_aside(servers, fake, taplog, oai, tmp_path):
    oai.chat.completions.create(model="gpt-4.1", messages=HI, temperature=0.5)
    taplog.wait_responses(1)
    proxy = start_on_fake(
        servers,
        fake,
        tmp_path / "replayed",
        replay=str(taplog.data_dir),
        replay_ignore="temperature, messages[0].content",
        replay_speed=0.0,
    )
    other = [{"role": "user", "content": "Hello"}]
    hit = sdk_client("chat", proxy.url).chat.completions.with_raw_response.create(
        model="gpt-4.1", messages=other, temperature=1.5
    )
    assert hit.headers["x-taplog-replayed"].startswith("session ")
    assert hit.parse().choices[0].message.content == "Echo: Hi"  # the recorded answer
    with pytest.raises(openai.BadRequestError, match="differs at messages"):
        sdk_client("chat", proxy.url).chat.completions.create(
            model="gpt-4.1", messages=[*other, *HI], temperature=0.5
        )


@pytest.mark.parametrize("mode", ["passthrough", "record-missing"])
def test_a_miss_the_vendor_cannot_take_says_why_the_recording_lacked_it(
    servers, taplog, oai, tmp_path, mode
):
    oai.chat.completions.create(model="gpt-4.1", messages=HI)
    taplog.wait_responses(1)
    with socket.socket() as closed:  # a port nobody listens on: the vendor is down
        closed.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    proxy = start_taplog(
        servers,
        tmp_path / "replayed",
        openai_base=down,
        replay=str(taplog.data_dir),
        replay_mode=mode,
        replay_speed=0.0,
    )
    with pytest.raises(openai.APIStatusError) as failed:
        sdk_client("chat", proxy.url).chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "Hello"}]
        )
    told = failed.value.body["message"]
    assert failed.value.status_code == 502 and "cannot reach the vendor" in told
    assert told.endswith(
        "replay miss: no recorded openai.chat request matches this one; "
        f"the closest is session {next(iter(taplog.sessions()))} seq 2 "
        f"(exchange {taplog.events('llm.request')[0]['exchange']}), "
        "which differs at messages[0].content"
    )
    [answered] = proxy.events("call.answered")
    assert answered["error"] == told.removeprefix("taplog: ")


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
def test_record_missing_asks_the_vendor_once_then_answers_from_the_recording(
    servers, fake, taplog, tmp_path, stream
):
    sdk_client("chat", taplog.url).chat.completions.create(model="gpt-4.1", messages=HI)
    taplog.wait_responses(1)
    proxy = replaying(servers, fake, tmp_path, taplog.data_dir, "record-missing")
    new = [{"role": "user", "content": "A new question !events=4"}]
    seen = Capture()
    replay = sdk_client("chat", proxy.url, seen)
    asked_vendor = model_calls(fake)

    for _ in range(3):
        answer = replay.chat.completions.with_raw_response.create(
            model="gpt-4.1", messages=new, stream=stream
        )
        if stream:
            assert [c.choices[0].delta.content for c in answer.parse() if c.choices]
        else:
            assert answer.parse().choices[0].message.content == "Echo: A new question"
    assert model_calls(fake) == asked_vendor + 1  # only the first went to the vendor
    first, *again = seen.seen
    assert again == [first, first]  # identical answers, stream bytes included
    assert first[3] == fake.sent[-1]
    ((session, events),) = proxy.sessions().items()
    kinds = [e["type"] for e in events]
    assert kinds == ["session.started", "llm.request", "llm.response", "call.answered"]
    assert answer.headers["x-taplog-replayed"].startswith(f"session {session} seq 2")


def test_record_missing_into_its_own_data_dir_keeps_new_episodes_across_runs(
    servers, fake, tmp_path
):
    data = tmp_path / "cassette"
    data.mkdir()
    first_run = ServerThread()
    try:
        first = replaying(first_run, fake, tmp_path, data, "record-missing", name="cassette")
        sdk_client("anthropic", first.url).messages.create(
            model="claude-sonnet-4-6", max_tokens=64, messages=HI
        )
    finally:
        first_run.stop()  # the run ends; its data dir holds the new episode
    second = replaying(servers, fake, tmp_path, data, "strict", name="cassette")
    asked_vendor = model_calls(fake)
    answer = sdk_client("anthropic", second.url).messages.with_raw_response.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=HI
    )
    assert answer.parse().content[0].text == "Echo: Hi"
    assert "x-taplog-replayed" in answer.headers and model_calls(fake) == asked_vendor


def test_replay_command_record_missing_runs_the_proxy(fake, taplog, oai, tmp_path):
    oai.chat.completions.create(model="gpt-4.1", messages=HI)
    taplog.wait_responses(1)
    env_base = f"{fake.url}/v1"
    server = subprocess.Popen(
        [
            TAPLOG,
            "replay",
            str(taplog.data_dir),
            "--port",
            "0",
            "--speed",
            "0",
            "--mode",
            "record-missing",
            "--data-dir",
            str(tmp_path / "misses"),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={"TAPLOG_OPENAI_BASE": env_base, "PATH": ""},
    )
    try:
        line = server.stdout.readline()
        assert line.startswith("taplog replay: 1 calls on http://127.0.0.1:")
        assert line.endswith("(misses: record-missing)\n")
        url = line.split(" on ")[1].split()[0]
        replay = sdk_client("chat", url)
        assert replay.chat.completions.create(model="gpt-4.1", messages=HI).choices
        new = [{"role": "user", "content": "New"}]
        asked_vendor = model_calls(fake)
        for _ in range(2):
            replay.chat.completions.create(model="gpt-4.1", messages=new)
        assert model_calls(fake) == asked_vendor + 1
    finally:
        server.terminate()
        server.wait(20)
    ((_, events),) = read_all(tmp_path / "misses").items()
    assert [e["body"]["messages"] for e in events if e["type"] == "llm.request"] == [new]


def test_serve_replay_refuses_a_missing_recording(tmp_path):
    result = subprocess.run(
        [TAPLOG, "serve", "--replay", str(tmp_path / "nope"), "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        env={"PATH": ""},
        timeout=30,
    )
    assert result.returncode == 2
    assert "option --replay: must be an existing data dir or session file" in result.stderr


def test_anthropic_sdk_misses_are_in_its_own_shape(servers, fake, taplog, tmp_path):
    proxy = replaying(servers, fake, tmp_path, taplog.data_dir, "strict")
    with pytest.raises(anthropic.BadRequestError) as miss:
        sdk_client("anthropic", proxy.url).messages.create(
            model="claude-sonnet-4-6", max_tokens=64, messages=HI
        )
    assert miss.value.body["error"]["type"] == "invalid_request_error"
    assert "no anthropic.messages call recorded" in miss.value.body["error"]["message"]
