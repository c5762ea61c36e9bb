"""Redaction end to end: the official SDKs through a real taplog with every detector on.

Planted emails, phone numbers, cards, an IBAN, IP addresses and a custom pattern go out
in system prompts, prompts and tool results, and come back in the fake vendor's echo,
streamed and not, for each API. The vendor and the client get them intact; no file under
the data dir holds them (logs, blobs, Parquet), the markers are there, the log verifies.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
import openai
import pytest

from taplog.proxy.replay import create_replay_app
from taplog.recorder.query.compaction import compact
from taplog.recorder.vendors.reruns import IgnoredField
from taplog.recorder.verify import verify
from tests.disk import readable
from tests.fakes.clients import anthropic_at, openai_at
from tests.fakes.harness import Taplog, serve_on_fake, start_on_fake

EMAIL, PHONE, CARD = "jane.roe@example.org", "+44 20 7946 0958", "4111 1111 1111 1111"
IBAN, IPV4, IPV6 = "DE89 3704 0044 0532 0130 00", "203.0.113.77", "2001:db8::8a2e:370:7334"
TICKET = "TCK-123456"  # the custom rule's
PLANTED = (EMAIL, PHONE, CARD, CARD.replace(" ", ""), IBAN, IPV4, IPV6, TICKET)
NOT_A_CARD = "4111111111111112"  # 16 digits, Luhn-invalid: left alone
PROMPT = (
    f"Mail {EMAIL}, call {PHONE}, card {CARD}, iban {IBAN}, host {IPV4} or [{IPV6}], "
    f"ticket {TICKET}, order {NOT_A_CARD}"
)
SYSTEM = f"The user is {EMAIL} on {IPV4}."
TOOL_RESULT = f"found {EMAIL} with card {CARD.replace(' ', '')} at {IPV6}"
PADDING = "lorem ipsum " * 400  # about 5 KB: over the 2 KB inline limit, so to a blob
MARKERS = [f"[redacted:{name}]" for name in ("email", "phone", "card", "iban", "ip", "ticket")]


@pytest.fixture
def redacting(servers, fake, tmp_path) -> Taplog:
    return start_on_fake(
        servers,
        fake,
        tmp_path / "data",
        redact="email,phone,card,iban,ip",
        redact_rules=(("ticket", r"TCK-\d{6}"),),
        body_inline_max_kb=2,
    )


def _chat(taplog: Taplog, stream: bool, events: int) -> str:
    client = openai_at(f"{taplog.url}/s/chat-{stream}")
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": f'{{"q": "{EMAIL}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": TOOL_RESULT},
        {"role": "user", "content": f"{PROMPT} !events={events} {PADDING}"},
    ]
    if not stream:
        answer = client.chat.completions.create(model="gpt-4.1", messages=messages)
        return answer.choices[0].message.content
    with client.chat.completions.stream(model="gpt-4.1", messages=messages) as answer:
        return answer.get_final_completion().choices[0].message.content


def _responses(taplog: Taplog, stream: bool, events: int) -> str:
    client = openai_at(f"{taplog.url}/s/responses-{stream}")
    items = [
        {"role": "user", "content": "look it up"},
        {"type": "function_call", "call_id": "call_1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": TOOL_RESULT},
        {"role": "user", "content": f"{PROMPT} !events={events} {PADDING}"},
    ]
    if not stream:
        return client.responses.create(
            model="gpt-4.1", instructions=SYSTEM, input=items
        ).output_text
    with client.responses.stream(model="gpt-4.1", instructions=SYSTEM, input=items) as answer:
        return answer.get_final_response().output_text


def _messages(taplog: Taplog, stream: bool, events: int) -> str:
    client = anthropic_at(f"{taplog.url}/s/messages-{stream}")
    messages = [
        {"role": "user", "content": "look it up"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": TOOL_RESULT},
                {"type": "text", "text": f"{PROMPT} !events={events} {PADDING}"},
            ],
        },
    ]
    options = {"model": "claude-sonnet-4-6", "max_tokens": 64, "system": SYSTEM}
    if not stream:
        answer = client.messages.create(messages=messages, **options)
        return answer.content[0].text
    with client.messages.stream(messages=messages, **options) as answer:
        return answer.get_final_message().content[0].text


def _every_file(data_dir: Path) -> dict[Path, bytes]:
    return {path: readable(path) for path in data_dir.rglob("*") if path.is_file()}


def _parquet_text(data_dir: Path) -> str:
    """Every compacted row as text (Parquet pages are compressed: bytes alone prove little)."""
    files = [str(path) for path in data_dir.rglob("*.parquet")]
    assert files, "nothing was compacted"
    rows = duckdb.sql(f"SELECT * FROM read_parquet({files!r})").fetchall()
    return repr(rows)


@pytest.mark.parametrize("events", [3, 17])
def test_planted_text_reaches_vendor_and_client_but_nothing_under_the_data_dir(
    redacting, fake, events
):
    for call in (_chat, _responses, _messages):
        for stream in (False, True):
            answer = call(redacting, stream, events)
            assert PROMPT in answer, (call.__name__, stream)  # the client got it intact
    redacting.wait_answers(6)
    sent_upstream = b"".join(request.body for request in fake.requests)
    for text in (*PLANTED, NOT_A_CARD):
        assert text.encode() in sent_upstream  # the vendor got it intact
    assert list(redacting.data_dir.joinpath("blobs").rglob("*.json")), "no body went to a blob"
    assert compact(redacting.data_dir)
    files = _every_file(redacting.data_dir)
    everything = b"".join(files.values()).decode("utf-8", "replace") + _parquet_text(
        redacting.data_dir
    )
    for text in PLANTED:
        holding = [str(path) for path, raw in files.items() if text.encode() in raw]
        assert text not in everything, (text, holding)
    for marker in MARKERS:
        assert marker in everything, marker
    assert NOT_A_CARD in everything  # a number that is no card stays
    assert all(report.ok for report in verify(redacting.data_dir))


def test_replaying_a_redacted_recording_says_what_it_cannot_reproduce(redacting, servers, caplog):
    messages = [{"role": "user", "content": f"hello {EMAIL}"}]
    openai_at(f"{redacting.url}/s/replayed").chat.completions.create(
        model="gpt-4.1", messages=messages
    )
    redacting.wait_answers(1)
    strict = servers.serve(create_replay_app(redacting.data_dir, 0))
    with pytest.raises(openai.BadRequestError) as miss:
        openai_at(strict).chat.completions.create(model="gpt-4.1", messages=messages)
    assert "session replayed seq 2" in str(miss.value)
    assert "differs only where the recording holds redacted text (email)" in str(miss.value)
    content_aside = (IgnoredField("messages[*].content"),)
    lenient = servers.serve(create_replay_app(redacting.data_dir, 0, ignored=content_aside))
    with caplog.at_level(logging.WARNING, logger="taplog"):
        answer = openai_at(lenient).chat.completions.create(model="gpt-4.1", messages=messages)
    assert answer.choices[0].message.content == "Echo: hello [redacted:email]"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("session replayed seq 2" in w and "redacted text (email)" in w for w in warnings)


def test_the_recorder_process_of_serve_workers_redacts_too(fake, tmp_path):
    """`serve --workers 2`: the recorder process builds the events, with the same rules."""
    data = tmp_path / "data"
    served = serve_on_fake(fake, data, "--workers", "2", "--redact", "email,card,ip")
    try:
        oai = openai_at(served.url)
        for stream in (False, True):
            answer = oai.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": SYSTEM}], stream=stream
            )
            text = (
                "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
                if stream
                else answer.choices[0].message.content
            )
            assert EMAIL in text and IPV4 in text  # the client got it whole
    finally:
        code, err = served.stop()
    assert code == 0, err
    files = _every_file(data)
    assert not [path for path, content in files.items() if EMAIL.encode() in content]
    assert any(b"[redacted:email]" in content for content in files.values())
    assert all(report.ok for report in verify(data))
