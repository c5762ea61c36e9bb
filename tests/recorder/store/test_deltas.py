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

from taplog.recorder.bodies import decode_body
from taplog.recorder.events import LLM_REQUEST, make_event
from taplog.recorder.query.compaction import compact
from taplog.recorder.store.reader import DamagedLine, read_events, read_session
from taplog.recorder.store.writer import EventRecord, Recorder
from taplog.recorder.verify import verify
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
        path = taplog.data_dir / "sessions" / f"{session}.jsonl"
        stored = [e for e in read_events(path, as_stored=True) if e["type"] == "llm.request"]
        sizes = [len(orjson.dumps(e)) for e in stored]
        assert max(sizes[5:]) < 2 * sizes[3], (session, sizes)
        assert stored[-1]["transcript"]["keep"] > 0
    chat = [e for e in read_events(taplog.data_dir / "sessions" / "chat.jsonl", as_stored=True)]
    kept = [e["transcript"]["keep"] for e in chat if e["type"] == "llm.request"]
    assert kept[0] == 0 and kept[TURNS // 2] == 0  # the trimmed history starts afresh
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
    path = taplog.data_dir / "sessions" / "chat.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    cut = [n for n, line in enumerate(lines) if b'"type":"llm.request"' in line][1]
    path.write_bytes(b"".join(lines[:cut] + lines[cut + 2 :]))  # a request (and answer) lost
    with pytest.raises(DamagedLine, match=r"chat\.jsonl:\d+ .*transcript keeps"):
        read_session(taplog.data_dir, "chat")
    (report,) = verify(taplog.data_dir)
    assert any("transcript keeps" in finding.reason for finding in report.damage)


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
        path = tmp_path / "sessions" / f"{session}.jsonl"
        kept = [e["transcript"]["keep"] for e in read_events(path, as_stored=True)]
        # "a" keeps what it wrote while open (turn t: t items), starts afresh once reopened
        expected = [k for t in range(6) for k in (t, 0)] if session == "a" else [0] * 6
        assert kept == expected
        assert [e["body"]["messages"] for e in read_session(tmp_path, session)] == lists
    assert all(report.ok for report in verify(tmp_path))
