"""Exports of real Claude Code and Codex sessions, sent again as a user sends them (#34).

Each CLI's tool loop is recorded through taplog (`test_real_cli_sessions.record`: the pinned
CLI against the fake vendor, ending with "Done: … taplog-ok"), then exported in every format
with a next prompt, as `docs/sessions.md` shows it, and sent through a taplog on the same
data dir to the fake vendor of that API, without a session name as the issue's user sent it:

    with the official SDK   `create(**body)`, nothing moved into `extra_body`; a body with
                            beta fields through `beta.messages.stream`, with the headers
                            `--headers` wrote (the docs' Python lines)
    with curl               the docs' own export and curl lines, run by bash, the vendor's
                            host swapped for taplog's (`/s/NEW`)

What a user checks: the call succeeds and the answer is the model's, the body passes the
SDK's request types, the recorded session got no call (each send is a session of its own),
and stderr named the run ids it left out. With `--keep-ids` the ids stay, and a body sent
with them joins the recorded session, which is why they are left out by default.
"""

from __future__ import annotations

import json
import re
import subprocess
from itertools import pairwise
from pathlib import Path

import anthropic.types.beta.message_create_params as beta_params
import anthropic.types.message_create_params as anthropic_params
import openai.types.chat.completion_create_params as chat_params
import openai.types.responses.response_create_params as responses_params
import orjson
import pytest
from click.testing import CliRunner
from pydantic import TypeAdapter

from taplog.proxy.cli.main import main
from taplog.recorder.store.reader import read_all
from taplog.recorder.vendors.apis import PER_RUN_FIELDS
from tests import ROOT
from tests.e2e.test_real_cli_sessions import record
from tests.fakes.clients import anthropic_at, openai_at
from tests.fakes.clis import proxy_for
from tests.fakes.harness import TAPLOG, Taplog, Vendors, taplog_env
from tests.fakes.keys import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY
from tests.recorder.vendors.checks import declared_keys, force

pytestmark = pytest.mark.slow

FORMATS = ("anthropic", "responses", "openai-chat", "gemini")
PROMPT = "What did it print?"
FINAL = "taplog-ok"  # the tool's output, in the recorded loop's last answer
DONE = "Done: "  # the fake's answer after its plan is done and no new tool result came
DOCS = ROOT / "docs" / "sessions.md"
HOSTS = (  # the vendors the docs' curl lines call; the test calls taplog instead
    "https://api.anthropic.com",
    "https://api.openai.com",
    "https://generativelanguage.googleapis.com",
)
# The SDKs' request types, kept alive while pydantic's lazy iterators are walked.
REQUEST_TYPES = {
    "anthropic": anthropic_params.MessageCreateParamsNonStreaming,
    "anthropic-beta": beta_params.MessageCreateParamsNonStreaming,
    "responses": responses_params.ResponseCreateParamsNonStreaming,
    "openai-chat": chat_params.CompletionCreateParamsNonStreaming,
}
ADAPTERS = {name: TypeAdapter(kind) for name, kind in REQUEST_TYPES.items()}
MODEL_CALLS = ("/messages", "/responses", "/chat/completions", ":generateContent")
RUN_IDS = {  # what stderr says of the client's own ids, left out of its own API's export
    "claude": "left out: metadata.user_id (Claude Code's run id: a body sent with it is taken "
    "for that run, and through taplog joins {session}; --keep-ids keeps it)",
    "codex": "left out: prompt_cache_key, client_metadata (Codex's run ids: a body sent with "
    "them is taken for that run, and through taplog joins {session}; --keep-ids keeps them)",
}


def export(data: Path, session: str, fmt: str, *more: str) -> tuple[dict, str, dict[str, str]]:
    """`taplog export SESSION --format FMT --prompt … --headers FILE`: the body, stderr, and
    the headers it wrote."""
    headers = data.parent / "headers.txt"
    args = ["export", session, "--format", fmt, "--prompt", PROMPT, "--headers", str(headers)]
    result = CliRunner().invoke(main, [*args, "--data-dir", str(data), *more])
    assert result.exit_code == 0, result.output
    named = dict(line.split(": ", 1) for line in headers.read_text().splitlines())
    return orjson.loads(result.stdout), result.stderr, named


def accepted_by_the_sdk_types(fmt: str, body: dict, headers: dict[str, str]) -> None:
    """The body is one the SDK's request type takes: no key it does not declare, every
    value of the declared shape (a body with beta fields: the beta type)."""
    kind = "anthropic-beta" if fmt == "anthropic" and headers else fmt
    assert set(body) <= declared_keys(REQUEST_TYPES[kind]), set(body)
    force(ADAPTERS[kind].validate_python(body))


def sdk_answer(url: str, fmt: str, body: dict, headers: dict[str, str]) -> str:
    """The body sent with the official SDK as the docs show it; the answer's text."""
    if fmt == "anthropic" and headers:
        client = anthropic_at(url).beta.messages
        with client.stream(**body, extra_headers=headers) as stream:
            return stream.get_final_text()
    if fmt == "anthropic":
        with anthropic_at(url).messages.stream(**body) as stream:
            return stream.get_final_text()
    if fmt == "responses":
        return openai_at(url).responses.create(**body).output_text
    return openai_at(url).chat.completions.create(**body).choices[0].message.content or ""


def docs_lines(fmt: str) -> tuple[str, str]:
    """The export line of the docs' section "Export a conversation" for `fmt`, and the curl
    line after it."""
    section = DOCS.read_text().split("### Export a conversation", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    commands = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    for line, after in pairwise(commands):
        if f"--format {fmt} " in line and after.startswith("curl "):
            return line, after
    raise AssertionError(f"docs/sessions.md shows no curl line for --format {fmt}")


def docs_curl(fmt: str, data: Path, session: str, url: str) -> tuple[str, str, str]:
    """The docs' export and curl lines for `fmt`, run by bash as a user runs them (the
    session for `run-7`, taplog's `url` for the vendor's host; curl fails on an error):
    the prompt the docs give, the answer and stderr."""
    line, curl = docs_lines(fmt)
    (prompt,) = re.findall(r'--prompt "([^"]+)"', line)
    for host in HOSTS:
        curl = curl.replace(host, url)
    script = f"set -e\n{line.replace('run-7', session)}\n{curl} --fail-with-body -sS\n"
    env = taplog_env(
        PATH=f"{Path(TAPLOG).parent}:/usr/bin:/bin",
        TAPLOG_DATA_DIR=str(data),
        ANTHROPIC_API_KEY=ANTHROPIC_KEY,
        OPENAI_API_KEY=OPENAI_KEY,
        GEMINI_API_KEY=GEMINI_KEY,
    )
    cwd = data.parent / f"curl-{fmt}"
    cwd.mkdir()
    done = subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (fmt, done.stdout, done.stderr)
    return prompt, done.stdout, done.stderr


def curl_answer(fmt: str, answer: dict) -> str:
    """The text of an answer as each API's JSON holds it."""
    if fmt == "anthropic":
        return "".join(b.get("text", "") for b in answer["content"])
    if fmt == "responses":
        items = [i for i in answer["output"] if i["type"] == "message"]
        return "".join(p.get("text", "") for i in items for p in i["content"])
    if fmt == "openai-chat":
        return answer["choices"][0]["message"]["content"]
    return "".join(p.get("text", "") for p in answer["candidates"][0]["content"]["parts"])


def vendor_got_the_conversation(vendors: Vendors, fmt: str, prompt: str) -> None:
    """The last model call the fake vendor of `fmt`'s API got: the recorded loop's last
    answer, then `prompt`."""
    fake = {"anthropic": vendors.anthropic, "gemini": vendors.gemini}.get(fmt, vendors.openai)
    called = [r for r in fake.requests if r.path.endswith(MODEL_CALLS)]
    sent = called[-1].body.decode()
    assert FINAL in sent and prompt in sent and sent.rindex(FINAL) < sent.rindex(prompt), fmt


def calls(proxy: Taplog) -> dict[str, int]:
    """Each session's model calls, as taplog recorded them."""
    sessions = proxy.sessions()
    return {name: sum(e["type"] == "llm.request" for e in ev) for name, ev in sessions.items()}


def answered(sessions: dict[str, list[dict]]) -> int:
    return sum(e["type"] == "call.answered" for events in sessions.values() for e in events)


def calls_after(proxy: Taplog, more: int, before: int) -> dict[str, int]:
    """Each session's model calls once `more` calls than `before` are over."""
    proxy.wait_for(lambda sessions: answered(sessions) >= before + more)
    return calls(proxy)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_a_real_session_s_export_is_sent_as_it_is_with_the_sdk_and_the_docs_curl_line(
    servers, vendors, tmp_path, cli, fmt
):
    data = tmp_path / "data"
    session = record(vendors, data, tmp_path / cli, cli)
    proxy = proxy_for(servers, vendors, data)
    before, over = calls(proxy), answered(proxy.sessions())
    sent = 1  # the curl line's call; the SDK's too, but for Gemini's

    body, stderr, headers = export(data, session, fmt)
    assert not PER_RUN_FIELDS & body.keys()
    native = (cli, fmt) in (("claude", "anthropic"), ("codex", "responses"))
    if native:  # the client's own ids, named as left out
        assert RUN_IDS[cli].format(session=session) in stderr
    if cli == "claude" and fmt == "anthropic":  # its beta fields, with the header they need
        assert "context_management" in body
        assert headers["anthropic-beta"].count("context-management-")
        assert f"send it with the header anthropic-beta: {headers['anthropic-beta']}" in stderr
    else:
        assert headers == {}
    if fmt != "gemini":  # no Gemini SDK takes a request body as it is
        accepted_by_the_sdk_types(fmt, body, headers)
        assert sdk_answer(proxy.url, fmt, body, headers) == DONE
        vendor_got_the_conversation(vendors, fmt, PROMPT)
        sent += 1

    prompt, answer, said = docs_curl(fmt, data, session, f"{proxy.url}/s/resent-{fmt}")
    assert curl_answer(fmt, json.loads(answer)) == DONE
    vendor_got_the_conversation(vendors, fmt, prompt)
    assert not native or RUN_IDS[cli].format(session=session) in said

    after = calls_after(proxy, sent, over)
    assert after[session] == before[session]  # the recorded session got no call
    new = {name: count for name, count in after.items() if name not in before}
    assert new[f"resent-{fmt}"] == 1
    assert len(new) == (1 if fmt == "gemini" else 2)  # the SDK's call: a session of its own


# How a body of each API goes with curl: its path, and its key headers.
CURL = {
    "anthropic": ("/v1/messages", f"x-api-key: {ANTHROPIC_KEY}", "anthropic-version: 2023-06-01"),
    "responses": ("/v1/responses", f"authorization: Bearer {OPENAI_KEY}"),
}


@pytest.mark.parametrize("cli", ["claude", "codex"])
def test_keep_ids_keeps_the_run_s_ids_and_a_body_sent_with_them_joins_its_session(
    servers, vendors, tmp_path, cli
):
    data = tmp_path / "data"
    session = record(vendors, data, tmp_path / cli, cli)
    fmt = "anthropic" if cli == "claude" else "responses"
    recorded = [e for e in read_all(data)[session] if e["type"] == "llm.request"][-1]["body"]
    body, stderr, headers = export(data, session, fmt, "--keep-ids")
    kept = PER_RUN_FIELDS & recorded.keys()
    assert kept and {key: body[key] for key in kept} == {key: recorded[key] for key in kept}
    assert "--keep-ids keeps" not in stderr

    proxy = proxy_for(servers, vendors, data)
    before, over = calls(proxy), answered(proxy.sessions())
    path, *keys = CURL[fmt]
    sent_with = [
        *keys,
        "content-type: application/json",
        *(f"{n}: {v}" for n, v in headers.items()),
    ]
    argv = ["curl", f"{proxy.url}{path}", "--fail-with-body", "-sS", "--data-binary", "@-"]
    sent = subprocess.run(
        [*argv, *(arg for header in sent_with for arg in ("-H", header))],
        input=orjson.dumps(body),
        capture_output=True,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stderr
    after = calls_after(proxy, 1, over)
    assert after[session] == before[session] + 1  # taken for the recorded run
    assert after.keys() == before.keys()
