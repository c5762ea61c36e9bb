"""`taplog export`: a recorded SDK tool session as a ready body for every API, fed back.

Each agent of `test_tool_events` runs through taplog (two parallel tools, a failing
one, then five more turns). The export, in each API's shape, at the end and at a tool
step, goes back through the official SDK to the fake vendor: it must be accepted and
hold the same conversation (user texts, assistant turns, pending tool results).
"""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.tools.export import export_conversation
from tests.disk import log_of, readable
from tests.fakes.agents import AGENTS
from tests.fakes.vendor import Anthropic, Chat, Responses

READERS = {"openai-chat": Chat, "anthropic": Anthropic, "responses": Responses}
NATIVE = {"chat": "openai-chat", "anthropic": "anthropic", "responses": "responses"}


def record(request, taplog, api: str, stream: bool) -> tuple[str, list[dict]]:
    agent, client_fixture, _, _ = AGENTS[api]
    agent(request.getfixturevalue(client_fixture), stream)
    sessions = taplog.wait_responses(8)
    ((session, events),) = sessions.items()
    return session, events


def cli_export(taplog, session: str, *args: str) -> str:
    result = CliRunner().invoke(
        main, ["export", session, "--data-dir", str(taplog.data_dir), *args]
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def send(fmt: str, body: dict, oai_direct, ant_direct) -> None:
    """Through the official SDK to the fake vendor, which must accept it."""
    if fmt == "openai-chat":
        assert oai_direct.chat.completions.create(**body).choices[0].message
    elif fmt == "anthropic":
        assert ant_direct.messages.create(**body).content
    else:
        assert oai_direct.responses.create(**body).output


def meaning(fmt: str, body: dict) -> tuple:
    transcript = READERS[fmt]().transcript(body)
    return transcript.users, transcript.turns, transcript.results


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("api", sorted(AGENTS))
def test_export_to_every_api_is_accepted_and_equal_in_meaning(
    request, taplog, oai_direct, ant_direct, api, stream
):
    session, events = record(request, taplog, api, stream)
    native = NATIVE[api]
    tool_step = next(e["seq"] for e in events if e["type"] == "tool.post")
    for at in (None, tool_step):
        args = () if at is None else ("--at", str(at))
        base = orjson.loads(cli_export(taplog, session, "--format", native, *args))
        assert "previous_response_id" not in base and "stream" not in base
        expected = meaning(native, base)
        assert expected[0][0].startswith("Plan my trip")
        if at is not None:
            assert expected[2], "a tool step ends with tool results"
        for fmt in READERS:
            body = orjson.loads(cli_export(taplog, session, "--format", fmt, *args))
            assert meaning(fmt, body) == expected, (fmt, at)
            send(fmt, body, oai_direct, ant_direct)


def test_native_export_is_the_last_request_as_sent_and_its_answer(request, taplog):
    _, events = record(request, taplog, "chat", False)
    last = [e for e in events if e["type"] == "llm.request"][-1]
    answer = [e for e in events if e["type"] == "llm.response"][-1]["body"]
    said = {"role": "assistant", "content": answer["choices"][0]["message"]["content"]}
    exported = export_conversation(events, "openai-chat")
    assert exported.body == {**last["body"], "messages": [*last["body"]["messages"], said]}
    assert exported.left_out == []
    other = export_conversation(events, "anthropic", model="claude-sonnet-4-6")
    assert other.body["model"] == "claude-sonnet-4-6"


def test_jsonl_export_is_the_raw_lines(request, taplog):
    session, _ = record(request, taplog, "anthropic", True)
    raw = readable(log_of(taplog.data_dir, session))
    assert cli_export(taplog, session).encode() == raw
    first_five = b"".join(raw.splitlines(keepends=True)[:5])
    assert cli_export(taplog, session, "--at", "5").encode() == first_five


def test_export_errors_are_clear(taplog, tmp_path):
    runner = CliRunner()
    result = runner.invoke(main, ["export", "nope", "--data-dir", str(taplog.data_dir)])
    assert result.exit_code == 1 and "no session 'nope'" in result.output
