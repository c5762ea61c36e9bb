"""Resent history is logged once: lines stay the size of a turn, every request comes back whole.

Agents driven by the official SDKs resend their growing history each turn (and
edit it: Anthropic cache markers move to the newest message, a history is
trimmed). What the vendor received must come back byte for byte from the
readers, and as the same JSON from the SQL views, before and after compaction.
"""

from __future__ import annotations

import anthropic
import openai
import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taplog.proxy.cli.main import main as main_command
from taplog.recorder.bodies import decode_body
from taplog.recorder.calls import LlmRequest
from taplog.recorder.events import FORMAT_VERSION, LLM_REQUEST, make_event, seal
from taplog.recorder.known_bodies import KnownBodies
from taplog.recorder.query.compaction import compact
from taplog.recorder.query.connect import connect
from taplog.recorder.store.reader import DamagedLine, read_events, read_session
from taplog.recorder.store.writer import EventRecord, Recorder
from taplog.recorder.verify import verify
from tests.disk import edit_log, log_of
from tests.fakes.clients import sql_rows
from tests.fakes.harness import Taplog, start_on_fake, start_taplog
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

TURNS = 40
TEXT = "Please look at the next part of the code and tell me what to change. " * 3


def _chat_agent(taplog: Taplog) -> None:
    oai = openai.OpenAI(base_url=f"{taplog.url}/s/chat/v1", api_key=OPENAI_KEY, max_retries=0)
    messages: list = [{"role": "system", "content": "You are a coder."}]
    for turn in range(TURNS):
        pasted = " The log:" + "x" * 20_000 if turn == 10 else ""  # over the inline limit
        messages.append({"role": "user", "content": f"Turn {turn}. {TEXT}{pasted}"})
        if turn == TURNS // 2:  # the agent trims its history: everything after it is new
            messages = [messages[0], *messages[-5:]]
        answer = oai.chat.completions.create(model="gpt-4.1", messages=messages)
        messages.append({"role": "assistant", "content": answer.choices[0].message.content})


def _claude_agent(taplog: Taplog) -> None:
    """A cache marker on the newest message moves every turn, as Claude Code does."""
    ant = anthropic.Anthropic(base_url=f"{taplog.url}/s/claude", api_key=ANTHROPIC_KEY)
    history: list = []
    for turn in range(TURNS):
        for message in history:
            if isinstance(message["content"], list):
                message["content"] = message["content"][0]["text"]
        marked = {
            "type": "text",
            "text": f"Turn {turn}. {TEXT}",
            "cache_control": {"type": "ephemeral"},
        }
        history.append({"role": "user", "content": [marked]})
        answer = ant.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=history)
        history.append({"role": "assistant", "content": answer.content[0].text})


def _responses_agent(taplog: Taplog) -> None:
    oai = openai.OpenAI(base_url=f"{taplog.url}/s/resp/v1", api_key=OPENAI_KEY, max_retries=0)
    items: list = []
    for turn in range(TURNS // 2):
        items.append({"role": "user", "content": f"Turn {turn}. {TEXT}"})
        answer = oai.responses.create(model="gpt-4.1", input=items, store=False)
        items.append({"role": "assistant", "content": answer.output_text})


def test_growing_transcripts_are_logged_once_and_read_back_whole(servers, fake, tmp_path):
    taplog = start_on_fake(servers, fake, tmp_path / "data", body_inline_max_kb=8)
    for agent in (_chat_agent, _claude_agent, _responses_agent):
        agent(taplog)
    sessions = taplog.wait_responses(TURNS * 2 + TURNS // 2)
    received = [r.body for r in fake.requests]
    assert len(received) == TURNS * 2 + TURNS // 2

    # Each request line holds one turn, not the whole history.
    for session in ("chat", "claude", "resp"):
        path = log_of(taplog.data_dir, session)
        stored = [e for e in read_events(path, as_stored=True) if e["type"] == "llm.request"]
        sizes = [len(orjson.dumps(e)) for e in stored]
        assert max(sizes[5:]) < 2 * sizes[3], (session, sizes)
        assert stored[-1]["transcript"]["keep"] > 0
    chat = [e for e in read_events(log_of(taplog.data_dir, "chat"), as_stored=True)]
    kept = [e["transcript"]["keep"] for e in chat if e["type"] == "llm.request"]
    # the trimmed history keeps only its system prompt: the rest is new
    assert kept[0] == 0 and kept[TURNS // 2] == 1
    pasted = [e for e in chat if e["type"] == "llm.request" and "blob" in e]
    # the turn with the pasted log, and the next one (whose delta holds its echo)
    assert [e["transcript"]["keep"] for e in pasted] == [20, 22]

    # Readers give back every byte the vendor received.
    requests = [e for s in sessions.values() for e in s if e["type"] == "llm.request"]
    assert sorted(decode_body(e) for e in requests) == sorted(received)

    # The views give the whole body, before and after compaction.
    sql = "SELECT request_body FROM llm_calls ORDER BY session, started_at"
    expected = [
        orjson.loads(decode_body(e))
        for session in sorted(sessions)
        for e in sessions[session]
        if e["type"] == "llm.request"
    ]
    assert [row["request_body"] for row in sql_rows(taplog.data_dir, sql)] == expected
    last = (
        "SELECT data->'body'->'messages'->-1->>'content' AS last FROM events "
        "WHERE session = 'chat' AND type = 'llm.request' ORDER BY seq DESC LIMIT 1"
    )
    assert sql_rows(taplog.data_dir, last) == [{"last": f"Turn {TURNS - 1}. {TEXT}"}]
    assert sorted(compact(taplog.data_dir)) == ["chat", "claude", "resp"]
    assert [row["request_body"] for row in sql_rows(taplog.data_dir, sql)] == expected
    assert sql_rows(taplog.data_dir, last) == [{"last": f"Turn {TURNS - 1}. {TEXT}"}]
    assert all(report.ok for report in verify(taplog.data_dir))


def test_a_delta_that_does_not_fit_its_history_is_damage(servers, fake, tmp_path):
    taplog = start_taplog(servers, tmp_path / "data", openai_base=f"{fake.url}/v1")
    _chat_agent(taplog)
    taplog.flush()
    path = log_of(taplog.data_dir, "chat")

    def lose_a_call(text: bytes) -> bytes:  # a request (and answer) lost
        lines = text.splitlines(keepends=True)
        cut = [n for n, line in enumerate(lines) if b'"type":"llm.request"' in line][1]
        return b"".join(lines[:cut] + lines[cut + 2 :])

    edit_log(path, lose_a_call)
    with pytest.raises(
        DamagedLine, match=r"chat\.jsonl\.zst:\d+ .*base names request \d+, not before"
    ):
        read_session(taplog.data_dir, "chat")
    (report,) = verify(taplog.data_dir)
    assert any("base names request" in finding.reason for finding in report.damage)
    result = CliRunner().invoke(
        main_command,
        ["sql", "SELECT request_body FROM llm_calls", "--data-dir", str(taplog.data_dir)],
    )
    assert result.exit_code != 0
    assert "base names request" in result.output and "run taplog verify" in result.output


def test_a_log_reopened_by_the_writer_starts_its_deltas_afresh(tmp_path):
    """With one open file at a time, every switch of session closes and reopens a log."""
    recorder = Recorder(tmp_path, fsync="never", max_open_files=1)
    recorder.start()
    sent: dict[str, list[list]] = {"a": [], "b": []}
    for turn in range(6):
        for session in ("a", "b", "a"):  # "a" twice: reopened, then written in the same file
            messages = [{"role": "user", "content": f"{session} {n}"} for n in range(turn + 1)]
            body = {"messages": messages, "model": "gpt-4.1"}
            event = make_event(LLM_REQUEST, session, f"ex{turn}", api="openai.chat", body=body)
            recorder.record(EventRecord(event))
            sent[session].append(orjson.loads(orjson.dumps(messages)))
            assert recorder.flush(10)
    recorder.close()
    for session, lists in sent.items():
        path = log_of(tmp_path, session)
        kept = [e["transcript"]["keep"] for e in read_events(path, as_stored=True)]
        # "a" keeps what it wrote while open (turn t: t items), starts afresh once reopened
        expected = [k for t in range(6) for k in (t, 0)] if session == "a" else [0] * 6
        assert kept == expected
        assert [e["body"]["messages"] for e in read_session(tmp_path, session)] == lists
    assert all(report.ok for report in verify(tmp_path))


# -- threads, pieces and versions -----------------------------------------------------------

LONG = "A tool printed this line of its long output, one of many like it.\n" * 12  # > a piece


def _request(session: str, turn: int, api: str, body: dict) -> EventRecord:
    return EventRecord(make_event(LLM_REQUEST, session, f"ex{turn:03}", api=api, body=body))


@st.composite
def _agent_day(draw) -> list[dict]:
    """Request bodies as a coding agent sends them: threads interleaved, histories that
    grow, cache markers that move, old turns edited, tools reordered, a history restarted,
    large tool results met again in other threads."""
    threads = draw(st.integers(1, 4))
    histories: list[list] = [[{"role": "user", "content": f"task {t}"}] for t in range(threads)]
    tools = [{"name": f"tool{n}", "description": LONG[: 100 * (n + 1)]} for n in range(4)]
    bodies = []
    for turn in range(draw(st.integers(1, 14))):
        thread = draw(st.integers(0, threads - 1))
        history = histories[thread]
        action = draw(st.sampled_from(["grow", "grow", "marker", "edit", "tools", "restart"]))
        if action == "marker":  # the cache marker moves to the newest message
            for message in history:
                message.pop("cache_control", None)
            history[-1]["cache_control"] = {"type": "ephemeral"}
        elif action == "edit":  # an old turn changes (a reminder rewritten)
            at = draw(st.integers(0, len(history) - 1))
            history[at] = {**history[at], "content": f"{history[at]['content']} (edited {turn})"}
        elif action == "tools":
            tools = draw(st.permutations(tools))
        elif action == "restart":  # a compaction: the history starts again from a summary
            history[:] = [{"role": "user", "content": f"summary of thread {thread} at {turn}"}]
        result = draw(st.sampled_from(["ok", LONG, LONG + str(thread), "x" * 700]))
        history.append({"role": "assistant", "content": f"step {turn}"})
        history.append({"role": "user", "content": result})
        system = draw(st.sampled_from(["You code.", LONG]))
        bodies.append(
            {
                "model": "m",
                "system": system,
                "tools": list(tools),
                "messages": list(orjson.loads(orjson.dumps(history))),
            }
        )
    return bodies


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(day=_agent_day(), open_files=st.sampled_from([1, 8]))
def test_any_interleaving_of_threads_comes_back_byte_for_byte(tmp_path_factory, day, open_files):
    """Whatever the agents do, every request reads back as the exact bytes sent: from the
    reader, from `taplog verify`'s rebuild, and from the SQL views."""
    data = tmp_path_factory.mktemp("day")
    recorder = Recorder(data, fsync="never", max_open_files=open_files)
    recorder.start()
    for turn, body in enumerate(day):
        recorder.record(_request("day", turn, "anthropic.messages", body))
        if open_files == 1:  # another session's call between: the log is closed and reopened
            recorder.record(_request("other", turn, "anthropic.messages", {"messages": []}))
        assert recorder.flush(10)
    recorder.close()
    read = [e for e in read_session(data, "day") if e["type"] == LLM_REQUEST]
    assert [orjson.dumps(e["body"]) for e in read] == [orjson.dumps(b) for b in day]
    assert all(report.ok for report in verify(data))
    rows = sql_rows(
        data, "SELECT request_body FROM llm_calls WHERE session = 'day' ORDER BY exchange"
    )
    assert [row["request_body"] for row in rows] == day


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(day=_agent_day())
def test_requests_parsed_from_earlier_ones_come_back_byte_for_byte(tmp_path_factory, day):
    """As the proxy hands them over: each body parsed from where it differs from an
    earlier one (`recorder.known_bodies`), the parts it shares taken from that one, their
    layout going with the record to the writer's part search and deltas."""
    data = tmp_path_factory.mktemp("day")
    recorder = Recorder(data, fsync="never")
    recorder.start()
    known, sent = KnownBodies(min_bytes=0), []
    for turn, body in enumerate(day):
        raw = orjson.dumps(body)
        parsed, layout = known.parse(raw, "anthropic.messages")
        url = "https://vendor.test/v1/messages"
        where = ("anthropic.messages", "anthropic", "POST", "/v1/messages", url)
        recorder.record(
            LlmRequest("day", f"ex{turn:03}", *where, {}, None, raw, parsed, layout=layout)
        )
        sent.append(raw)
    assert recorder.flush(10)
    recorder.close()
    read = [e for e in read_session(data, "day") if e["type"] == LLM_REQUEST]
    assert [orjson.dumps(e["body"]) for e in read] == sent
    assert all(report.ok for report in verify(data))


def test_interleaved_threads_store_what_is_new_and_large_values_once(tmp_path):
    """A main agent, a sub-agent and side calls in turn, each resending a 30 KB system
    prompt and tool list: the log grows by each turn's new messages, not by its history."""
    recorder = Recorder(tmp_path, fsync="never")
    recorder.start()
    system, tools = LONG * 40, [{"name": "Bash", "description": LONG * 10}]
    main, agent, raw = [], [], 0
    for turn in range(60):
        history, first = (main, "fix the bug") if turn % 3 == 0 else (agent, "explore")
        if turn % 3 == 2:  # a side call to a small model: its own short conversation
            history, first = [], "title?"
        history[:] = history or [{"role": "user", "content": first}]
        history.append({"role": "assistant", "content": f"step {turn}"})
        history.append({"role": "user", "content": f"output {turn}: " + LONG})
        body = {"model": "m", "system": system, "tools": tools, "messages": list(history)}
        raw += len(orjson.dumps(body))
        recorder.record(_request("s", turn, "anthropic.messages", body))
    assert recorder.flush(10)
    recorder.close()
    stored = log_of(tmp_path, "s").stat().st_size
    assert stored < raw / 20, (stored, raw)  # each turn adds ~1 KB to a history of ~45 KB
    lines = [e for e in read_events(log_of(tmp_path, "s"), as_stored=True)]
    assert sum(1 for e in lines if e["body"]["system"] is not None) == 1  # written once
    assert all(len(e["body"]["messages"]) <= 3 for e in lines[3:])  # only what is new


def _v3_log(path, bodies: list[dict]) -> None:
    """Requests as taplog 3 stored them: each list a delta on the previous request's."""
    lines, prev, before, before_keep = [], None, [], 0
    for seq, body in enumerate(bodies, start=1):
        items = body["messages"]
        keep = 0
        for old, new in zip(before, items, strict=False):
            if old != new:
                break
            keep += 1
        keep = 0 if keep < before_keep else keep
        event = make_event(LLM_REQUEST, "old", f"ex{seq:03}", api="anthropic.messages")
        event.update(
            v=3,
            body={**body, "messages": items[keep:]},
            transcript={"keep": keep, "length": len(items)},
        )
        line, prev = seal(event, seq, prev)
        lines.append(line)
        before, before_keep = items, keep
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(lines))


def test_a_version_3_log_reads_the_same_and_migrates_smaller(tmp_path):
    bodies, main, side = [], [], []
    for turn in range(30):
        history = main if turn % 2 == 0 else side  # two threads in turn: v3 stores both whole
        history.append({"role": "user", "content": f"turn {turn} " + LONG})
        bodies.append({"model": "m", "system": LONG * 5, "messages": list(history)})
    path = tmp_path / "sessions" / "old.jsonl"  # plain, as taplog wrote version 3
    _v3_log(path, bodies)
    before = path.stat().st_size

    def read_back() -> list[dict]:
        return [e["body"] for e in read_session(tmp_path, "old")]

    assert read_back() == bodies
    sql = "SELECT request_body FROM llm_calls ORDER BY exchange"
    assert [row["request_body"] for row in sql_rows(tmp_path, sql)] == bodies
    result = CliRunner().invoke(main_command, ["migrate", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0 and "1 session files upgraded" in result.output, result.output
    assert read_back() == bodies
    assert [row["request_body"] for row in sql_rows(tmp_path, sql)] == bodies
    assert all(report.ok for report in verify(tmp_path))
    migrated = log_of(tmp_path, "old")
    assert migrated.name == "old.jsonl.zst" and not path.exists()
    assert {e["v"] for e in read_events(migrated, as_stored=True)} == {FORMAT_VERSION}
    assert migrated.stat().st_size < before / 5


def test_a_version_3_log_written_on_by_version_4_reads_back_in_any_order(tmp_path):
    """A v3 log that today's taplog appends to holds both kinds of lines: the views rebuild
    a v4 request from the lines it names, a v3 one from every request before it, whichever
    a query asks for first."""
    history = [{"role": "user", "content": f"turn {n} " + LONG} for n in range(8)]
    old = [{"model": "m", "messages": history[: n + 1]} for n in range(4)]
    _v3_log(tmp_path / "sessions" / "old.jsonl", old)  # plain: written on as it is
    recorder = Recorder(tmp_path, fsync="never")
    recorder.start()
    new = [{"model": "m", "messages": history[: n + 1]} for n in range(4, 8)]
    for turn, body in enumerate(new, start=len(old) + 1):
        recorder.record(_request("old", turn, "anthropic.messages", body))
    assert recorder.flush(10)
    recorder.close()
    assert [e["body"] for e in read_session(tmp_path, "old")] == old + new
    con = connect(tmp_path)
    bodies = {}
    for exchange in ("ex008", "ex002", "ex006", "ex001", "ex004"):  # v4, v3, v4, v3, v3
        sql = "SELECT request_body FROM llm_calls WHERE exchange = ?"
        ((body,),) = con.execute(sql, [exchange]).fetchall()
        bodies[exchange] = orjson.loads(body)
    assert bodies == {f"ex{n:03}": (old + new)[n - 1] for n in (8, 2, 6, 1, 4)}
