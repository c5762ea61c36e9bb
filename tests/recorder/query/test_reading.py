"""Reading is bounded by what is shown (issue #31): `taplog sessions`, `show` and
`show --messages` over a long agent session and short ones (tests/fakes/reading_traffic.py),
read as a user reads them, with the request bodies each command read (the DEBUG log of
`recorder.query.requests`)."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from taplog.proxy.cli.main import main
from taplog.recorder.query.chat import conversation
from taplog.recorder.query.chat_page import chat_page
from taplog.recorder.query.connect import connect
from taplog.recorder.store.reader import read_session
from tests.fakes.clients import anthropic_at
from tests.fakes.reading_traffic import (
    LONG,
    SHORTS,
    SMALL_MODEL,
    TOOL_STEPS,
    TOOLS,
    bodies_read,
    output,
    prompt,
)

pytestmark = pytest.mark.slow


def taplog(recorded, *args: str) -> list[str]:
    """A taplog command's output lines, over the recorded data dir."""
    done = CliRunner().invoke(main, [*args, "--data-dir", str(recorded.data_dir)])
    assert done.exit_code == 0, done.output
    return done.output.splitlines()


def test_sessions_show_the_persons_prompt_from_a_body_each(reading_recording, counted):
    """Not the quota probe nor the title asked of the small model, though both came first;
    twenty sessions read one body each."""
    listed = taplog(reading_recording, "sessions", "--format", "jsonl", "--limit", "20")
    rows = {r["session"]: r for r in map(orjson.loads, listed)}
    assert len(rows) == SHORTS + 1
    assert rows[LONG]["prompt"] == prompt(LONG, TOOL_STEPS)
    assert rows["short-07"]["prompt"] == prompt("short-07", 1)
    assert {r["client"] for r in rows.values()} == {"Anthropic Python SDK"}
    assert bodies_read(counted) == SHORTS + 1


def test_show_prints_the_whole_timeline_in_order(reading_recording):
    lines = taplog(reading_recording, "show", LONG)
    calls = [line for line in lines if "  call  anthropic.messages " in line]
    tools = [line for line in lines if "  tool read_file " in line]
    assert (len(calls), len(tools)) == (TOOL_STEPS + 3, TOOL_STEPS)
    times = [line.split()[0] for line in lines[1:-1]]
    assert times == sorted(times)
    assert "→ line 0000 of a long listing\\nline 0001" in tools[9] and "…  " in tools[9]
    assert len(tools[9]) < 300 and output(9).count("\n") > 40
    assert lines[-1].startswith(f"{TOOL_STEPS + 3} calls · {TOOL_STEPS} tool calls (0 failed)")


def test_show_messages_shows_the_last_entries_and_says_how_to_read_on(reading_recording, counted):
    lines = taplog(reading_recording, "show", LONG, "--messages", "--last", "10")
    *shown, footer = lines
    assert footer.startswith("── the last 10 entries, from seq ")
    earlier = int(footer.split("from seq ")[1].split(";")[0])
    assert footer.endswith(f"taplog show {LONG} --messages --before {earlier} (or --all)")
    assert shown[-1] == "assistant  Echo: Tidy up the parser of long-agent."
    assert sum(line.startswith("tool       read_file") for line in shown) == 9
    assert (
        shown[-2].startswith("  → line 0000 of a long listing\\nline 0001") and len(shown[-2]) < 110
    )
    assert bodies_read(counted) <= 3  # the loop's last request holds the conversation

    before = taplog(
        reading_recording, "show", LONG, "--messages", "--before", str(earlier), "--all"
    )
    whole = taplog(reading_recording, "show", LONG, "--messages", "--all")
    assert before + shown == whole  # two pages, end to end, are the whole conversation
    assert whole[:2] == ["user       quota", "assistant  Echo: quota"]  # the probe, first
    assert f"user       {prompt(LONG, TOOL_STEPS)}" in whole
    assert sum(line.startswith("tool       read_file") for line in whole) == TOOL_STEPS


def test_a_page_reads_a_body_or_two_however_long_the_session(reading_recording, counted):
    """The last request of the loop resends every earlier call's answer: the conversation
    from one body, each turn where it was first sent, as if every request had been read."""
    session = LONG
    con = connect(reading_recording.data_dir, only=session)
    whole = chat_page(con, session, last=None)
    assert bodies_read(counted) <= 3  # the loop's last call, and the two side calls
    events = read_session(reading_recording.data_dir, session)
    assert whole.threads == conversation(events) and whole.earlier is None
    assert whole.calls == TOOL_STEPS + 3

    counted.clear()
    page = chat_page(con, session, last=20)
    assert 20 <= page.entries < 25 and page.earlier is not None
    assert bodies_read(counted) <= 2


def test_paging_options_go_with_messages(reading_recording):
    data = ["--data-dir", str(reading_recording.data_dir)]
    for option in (["--all"], ["--last", "5"], ["--before", "9"]):
        done = CliRunner().invoke(main, ["show", LONG, *option, *data])
        assert (
            done.exit_code == 2 and "--last, --before and --all go with --messages" in done.output
        )


def test_a_session_whose_small_model_took_most_input_reads_its_first_requests(taplog, counted):
    """The likeliest request (the first of the model that took most input) is the quota
    probe here: the first requests are read, and the one that offers tools has the prompt.
    A session of a probe alone has none."""
    heavy = anthropic_at(f"{taplog.url}/s/side-heavy")
    heavy.messages.create(
        model=SMALL_MODEL, max_tokens=1, messages=[{"role": "user", "content": "quota"}]
    )
    heavy.messages.create(
        model=SMALL_MODEL,
        max_tokens=64,
        system="Say whether this starts a new topic. " * 500,
        messages=[{"role": "user", "content": "Is this new?"}],
    )
    heavy.messages.create(
        model="claude-sonnet-4-6",
        max_tokens=64,
        tools=TOOLS,
        messages=[{"role": "user", "content": "Fix the build."}],
    )
    probe = anthropic_at(f"{taplog.url}/s/probe-only")
    probe.messages.create(
        model=SMALL_MODEL, max_tokens=1, messages=[{"role": "user", "content": "quota"}]
    )
    taplog.wait_responses(4)
    taplog.flush()
    listed = CliRunner().invoke(
        main, ["sessions", "--format", "jsonl", "--data-dir", str(taplog.data_dir)]
    )
    prompts = {r["session"]: r["prompt"] for r in map(orjson.loads, listed.output.splitlines())}
    assert prompts == {"side-heavy": "Fix the build.", "probe-only": None}
    assert bodies_read(counted) == 2 + 2  # a likeliest each, then the first ones not read


def test_a_tool_call_the_client_wrote_is_shown_on_the_last_page_without_reading_the_rest(
    taplog, counted
):
    """A tool call in the history that no recorded answer asked for (written by the client,
    or from before taplog) carries its result in the last call. Read as history from
    before the page, it moved the page back to look for where it was asked: every earlier
    call's body was read (here each step's side call), and nothing was found. It is on the
    last page, with its result, from the bodies of that page."""
    steps = 40
    client = anthropic_at(f"{taplog.url}/s/written-history")
    messages: list = [{"role": "user", "content": prompt("written-history", steps)}]
    for step in range(steps):
        answer = client.messages.create(
            model="claude-sonnet-4-6", max_tokens=1024, messages=messages, tools=TOOLS
        )
        uses = [b for b in answer.content if b.type == "tool_use"]
        messages.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u.id, "content": output(step)}
                    for u in uses
                ],
            }
        )
        client.messages.create(  # the step's label, asked of a small model
            model=SMALL_MODEL,
            max_tokens=64,
            messages=[{"role": "user", "content": f"Label step {step} in three words."}],
        )
    written = {"type": "tool_use", "id": "toolu_written_by_client", "name": "read_file"}
    messages.append({"role": "assistant", "content": [{**written, "input": {"path": "NOTES"}}]})
    result = {"type": "tool_result", "tool_use_id": written["id"], "content": "notes: none"}
    messages.append({"role": "user", "content": [result]})
    client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, messages=messages, tools=TOOLS
    )
    taplog.wait_responses(2 * steps + 1)
    taplog.flush()

    counted.clear()
    con = connect(taplog.data_dir, only="written-history")
    page = chat_page(con, "written-history", last=20)
    tools = [e for t in page.threads for e in t["entries"] if e["kind"] == "tool"]
    shown = [t for t in tools if t["call_id"] == written["id"]]
    assert shown and shown[0]["result"] == "notes: none" and page.earlier is not None
    assert bodies_read(counted) < steps // 2  # the page's calls, not each step's side call

    args = ["show", "written-history", "--messages", "--last", "20"]
    shown_out = CliRunner().invoke(main, [*args, "--data-dir", str(taplog.data_dir)])
    lines = shown_out.output.splitlines()
    assert any(line.startswith("tool") and "NOTES" in line for line in lines)
    assert "  → notes: none" in lines
