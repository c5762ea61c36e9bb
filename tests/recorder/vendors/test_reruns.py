"""A rerun of the same work is recognised: what the real coding agents make anew each run
(captured requests, `tests/fixtures/`) is set aside, what the model is asked is not."""

from __future__ import annotations

import orjson
import pytest

from taplog.recorder.tools.recorded_answers import signature
from taplog.recorder.vendors.reruns import IgnoredField, rerun_view
from tests import FIXTURES

CLAUDE_CODE = (FIXTURES / "claude_code_2.1.197_messages.json").read_bytes()
CODEX = (FIXTURES / "codex_0.171.0_responses.json").read_bytes()
GEMINI_CLI = (FIXTURES / "gemini_cli_0.61.0_generate.json").read_bytes()


def _signed(api: str, raw: bytes, *ignored: str) -> str:
    fields = tuple(IgnoredField(path) for path in ignored)
    return signature(api, rerun_view(api, orjson.loads(raw)["body"], fields))


def _rerun(raw: bytes, *changes: tuple[str, str]) -> bytes:
    for old, new in changes:
        assert old.encode() in raw, old
        raw = raw.replace(old.encode(), new.encode())
    return raw


def test_claude_code_run_from_another_directory_and_home_on_another_day_is_a_rerun():
    rerun = _rerun(
        CLAUDE_CODE,
        ("/home/dev/work", "/home/ana/src/app"),
        ("-home-dev-work", "-home-ana-src-app"),
        ("/home/dev", "/home/ana"),
        ("Today's date is 2026-12-01", "Today's date is 2027-01-15"),
        ("2a1d001d-ea77-4afa-a2ab-653bbdb4e514", "99999999-ea77-4afa-a2ab-653bbdb4e514"),
    )
    assert _signed("anthropic.messages", rerun) == _signed("anthropic.messages", CLAUDE_CODE)
    asked_else = _rerun(CLAUDE_CODE, ('"say hello"', '"say goodbye"'))
    assert _signed("anthropic.messages", asked_else) != _signed("anthropic.messages", CLAUDE_CODE)


def test_a_run_from_the_root_directory_keeps_its_paths():
    body = {"system": "Primary working directory: /", "messages": [{"content": "cat /etc/x"}]}
    view = rerun_view("anthropic.messages", body)
    assert view["messages"] == body["messages"]
    assert view != rerun_view("anthropic.messages", {**body, "messages": [{"content": "cat /y"}]})


def test_claude_codes_cache_markers_do_not_count():
    body = orjson.loads(CLAUDE_CODE)
    for message in body["body"]["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            block.pop("cache_control", None)
    moved = orjson.dumps(body)
    assert _signed("anthropic.messages", moved) == _signed("anthropic.messages", CLAUDE_CODE)


def test_codex_run_with_new_item_ids_elsewhere_is_a_rerun():
    rerun = _rerun(
        CODEX,
        ("msg_01a23186-f24f-7771-a79e-9b9ded3a4940", "msg_01b00000-0000-7771-a79e-9b9ded3a4940"),
        ("/home/dev/work", "/home/ana/checkout"),
        ("/home/dev/.codex", "/home/ana/.codex"),
        ("<current_date>2026-12-01<", "<current_date>2027-01-15<"),
        ("01a23186-f231-73d2-b61c-8be4c7dcdb45", "01b00000-f231-73d2-b61c-8be4c7dcdb45"),
    )
    assert _signed("openai.responses", rerun) == _signed("openai.responses", CODEX)
    asked_else = _rerun(CODEX, ('"say hello"', '"say goodbye"'))
    assert _signed("openai.responses", asked_else) != _signed("openai.responses", CODEX)


def test_codex_shell_output_is_the_same_whatever_its_chunk_id_and_wall_time():
    def output(chunk: str, seconds: str) -> dict:
        text = (
            f"Chunk ID: {chunk}\nWall time: {seconds} seconds\nProcess exited with code 0\n"
            "Original token count: 3\nOutput:\ntaplog-ok\n"
        )
        return {"model": "gpt-5.5", "input": [{"type": "function_call_output", "output": text}]}

    first = rerun_view("openai.responses", output("3b753e", "0.0012"))
    assert first == rerun_view("openai.responses", output("9f01aa", "0.0409"))
    assert first != rerun_view("openai.responses", {**output("3b753e", "0"), "model": "o3"})


def test_gemini_cli_run_from_another_directory_and_home_on_another_day_is_a_rerun():
    """Its session context names the workspace, its home (the project's temporary
    directory), the date; its shell names the process group; the id of a call that came
    without one is made from the clock."""
    call_id = orjson.loads(GEMINI_CLI)["body"]["contents"][1]["parts"][0]["functionCall"]["id"]
    rerun = _rerun(
        GEMINI_CLI,
        ("/home/dev/project", "/home/ana/src/project"),
        ("/home/dev", "/home/ana"),
        ("Saturday, December 5, 2026", "Monday, January 11, 2027"),
        ("Process Group PGID: 8502", "Process Group PGID: 9137"),
        (call_id, call_id.replace("_17", "_18")),
    )
    assert _signed("gemini.generate", rerun) == _signed("gemini.generate", GEMINI_CLI)
    asked_else = _rerun(GEMINI_CLI, ("then report what it printed", "then report nothing"))
    assert _signed("gemini.generate", asked_else) != _signed("gemini.generate", GEMINI_CLI)


def test_the_fields_a_user_names_are_set_aside():
    body = {
        "model": "m",
        "system": [{"text": "a"}, {"text": "run 1"}],
        "messages": [{"role": "user", "content": "x", "stamp": 1}],
        "tools": [{"name": "t"}],
    }
    rerun = {**body, "system": [{"text": "a"}, {"text": "run 2"}], "tools": []}
    rerun["messages"] = [{"role": "user", "content": "x", "stamp": 2}]
    ignored = tuple(map(IgnoredField, ("tools", "system[1].text", "messages[*].stamp")))
    assert rerun_view("anthropic.messages", body, ignored) == rerun_view(
        "anthropic.messages", rerun, ignored
    )
    assert rerun_view("anthropic.messages", body) != rerun_view("anthropic.messages", rerun)
    everything = (IgnoredField("*"),)
    assert rerun_view("anthropic.messages", body, everything) == {}


@pytest.mark.parametrize("path", ["", ".model", "messages[", "messages[x]", "a..b"])
def test_a_field_path_that_is_not_one_is_refused(path):
    with pytest.raises(ValueError):
        IgnoredField(path)
