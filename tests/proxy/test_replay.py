"""`taplog replay`: a recorded SDK tool session replayed offline, byte for byte.

Each agent of `test_tool_events` runs once through taplog (recording) and once
against the replay server, with an httpx transport that keeps every request and
answer body the SDK saw. The replay must see the same requests and give the same
answers, stream bytes included, without the vendor hearing of it.
"""

from __future__ import annotations

import os
import subprocess
import time

import anthropic
import openai
import pytest
from click.testing import CliRunner

from taplog.proxy.auth import Tokens
from taplog.proxy.cli.main import main
from taplog.proxy.replay import create_replay_app
from taplog.recorder.tools.recorded_answers import canonical, signature
from taplog.recorder.vendors.reruns import rerun_view
from tests.disk import log_of
from tests.fakes.agents import AGENTS
from tests.fakes.clients import Capture, sdk_client
from tests.fakes.harness import TAPLOG, serve_replay
from tests.fakes.keys import OPENAI_KEY


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("api", sorted(AGENTS))
def test_a_recorded_agent_run_replays_offline_byte_for_byte(servers, fake, taplog, api, stream):
    agent = AGENTS[api][0]
    recording = Capture()
    agent(sdk_client(api, taplog.url, recording), stream)
    ((session, _),) = taplog.wait_responses(8).items()
    asked_vendor = len(fake.requests)

    replay_url = serve_replay(servers, log_of(taplog.data_dir, session))
    replaying = Capture()
    agent(sdk_client(api, replay_url, replaying), stream)

    assert len(replaying.seen) == len(recording.seen) == 8
    assert replaying.seen == recording.seen  # same requests, same answers, same stream bytes
    assert fake.sent[-8:] == [answer for *_, answer in recording.seen]
    assert len(fake.requests) == asked_vendor  # offline: the vendor heard nothing


def test_replayed_answers_parse_as_the_vendors_own(servers, taplog, oai, ant_direct, ant):
    ant.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    )
    taplog.wait_responses(1)
    replay = sdk_client("anthropic", serve_replay(servers, taplog.data_dir))
    kwargs = dict(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    )
    assert replay.messages.create(**kwargs) == ant_direct.messages.create(**kwargs)


def test_a_miss_is_an_error_in_the_clients_shape_naming_the_closest(servers, taplog, oai, ant):
    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}])
    ant.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    )
    events = taplog.wait_responses(2)
    url = serve_replay(servers, taplog.data_dir)
    session, chat_seq = next(
        (e["session"], e["seq"])
        for es in events.values()
        for e in es
        if e["type"] == "llm.request" and e["api"] == "openai.chat"
    )

    with pytest.raises(openai.BadRequestError) as miss:
        sdk_client("chat", url).chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "Hello"}]
        )
    message = miss.value.body["message"]
    assert message.startswith("taplog: replay miss: no recorded openai.chat request matches")
    assert f"closest is session {session} seq {chat_seq}" in message
    assert message.endswith("differs at messages[0].content")
    assert miss.value.response.headers["x-taplog-error"] == "replay_miss"

    with pytest.raises(anthropic.BadRequestError) as miss:
        sdk_client("anthropic", url).messages.create(
            model="claude-sonnet-4-6", max_tokens=99, messages=[{"role": "user", "content": "Hi"}]
        )
    assert miss.value.body["error"]["type"] == "invalid_request_error"
    assert miss.value.body["error"]["message"].endswith("differs at max_tokens")

    with pytest.raises(openai.BadRequestError) as miss:
        sdk_client("responses", url).responses.create(model="gpt-4.1", input="Hi")
    assert "no openai.responses call recorded" in miss.value.body["message"]


def test_streams_keep_their_pacing_scaled_by_speed(servers, taplog, oai):
    prompt = [{"role": "user", "content": "Count slowly. !delay=0.05 !parts=6"}]
    with oai.chat.completions.stream(model="gpt-4.1", messages=prompt) as answer:
        answer.get_final_completion()
    taplog.wait_responses(1)
    timings = {}
    for speed in (1.0, 0.0):
        replay = sdk_client("chat", serve_replay(servers, taplog.data_dir, speed))
        started = time.monotonic()
        with replay.chat.completions.stream(model="gpt-4.1", messages=prompt) as answer:
            answer.get_final_completion()
        timings[speed] = time.monotonic() - started
    assert timings[1.0] >= 0.25 > timings[0.0]


def test_the_signature_ignores_key_order_whitespace_and_per_run_fields():
    def signed(api: str, body: dict) -> str:
        return signature(api, rerun_view(api, body))

    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "user": "run-1"}
    same = {"user": "run-2", "messages": [{"content": "x", "role": "user"}], "model": "m"}
    assert signed("openai.chat", body) == signed("openai.chat", same)
    view = rerun_view("openai.chat", body)
    assert canonical(view) == b'{"messages":[{"content":"x","role":"user"}],"model":"m"}'
    assert signed("openai.chat", body) != signed("openai.responses", body)
    assert signed("openai.chat", body) != signed("openai.chat", {**body, "model": "n"})


def test_the_readme_pytest_recipe_works(taplog, oai):
    prompt = [{"role": "user", "content": "Hi"}]
    recorded = oai.chat.completions.create(model="gpt-4.1", messages=prompt)
    ((session, _),) = taplog.wait_responses(1).items()
    source = log_of(taplog.data_dir, session)
    server = subprocess.Popen(
        [TAPLOG, "replay", str(source), "--port", "0", "--speed", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = server.stdout.readline()
        assert line.startswith("taplog replay: 1 calls on http://127.0.0.1:")
        url = line.split(" on ")[1].strip()
        replayed = sdk_client("chat", url).chat.completions.create(model="gpt-4.1", messages=prompt)
        assert replayed == recorded
    finally:
        server.terminate()
        server.wait(10)


def test_replay_says_which_recorded_calls_it_passes_over_and_why(taplog, oai):
    named = {"X-Taplog-Session": "cut"}
    prompt = [{"role": "user", "content": "Hi"}]
    oai.chat.completions.create(model="gpt-4.1", messages=prompt, extra_headers=named)
    with pytest.raises(openai.APIError):  # the vendor cuts the stream: no whole answer
        list(
            oai.chat.completions.create(
                model="gpt-4.1",
                messages=[{"role": "user", "content": "!cut=2"}],
                stream=True,
                extra_headers=named,
            )
        )
    ((session, _),) = taplog.wait_responses(2).items()
    server = subprocess.Popen(
        [TAPLOG, "replay", str(log_of(taplog.data_dir, session)), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout.readline().startswith("taplog replay: 1 calls on http://")
        said = server.stderr.readline()
        assert said == "taplog replay: 1 recorded calls passed over: 1 with no whole answer\n"
    finally:
        server.terminate()
        server.wait(10)


def test_replay_command_is_documented_and_refuses_a_missing_source(tmp_path):
    result = CliRunner().invoke(main, ["replay", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_replay_follows_the_bind_and_token_rule_of_serve(servers, taplog, oai, tmp_path):
    """A miss names the closest session and what it said: beyond loopback that needs a
    token, as `serve` and `ui` do (issue 18, item 5)."""
    open_bind = subprocess.run(
        [TAPLOG, "replay", str(tmp_path), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        env={k: v for k, v in os.environ.items() if not k.startswith("TAPLOG_")},
    )
    assert open_bind.returncode != 0
    assert "refusing to listen on 0.0.0.0 without inbound tokens" in open_bind.stderr
    assert "session ids" in open_bind.stderr and "TAPLOG_AUTH_TOKEN" in open_bind.stderr

    oai.chat.completions.create(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}])
    taplog.wait_responses(1)
    token = "replay-token-0123456789abcdef"
    app = create_replay_app(taplog.data_dir, 0, Tokens([token]))
    url = servers.serve(app, handler_cancellation=True)
    asked = dict(model="gpt-4.1", messages=[{"role": "user", "content": "Hi"}])
    without = openai.OpenAI(base_url=f"{url}/v1", api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        without.chat.completions.create(**asked)
    with_token = openai.OpenAI(base_url=f"{url}/t/{token}/v1", api_key=OPENAI_KEY, max_retries=0)
    assert with_token.chat.completions.create(**asked).choices[0].message.content == "Echo: Hi"
