"""Redaction's parts: what each detector finds and leaves, streams split at random, the
settings and the config file's `[[redact]]` rules."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from taplog.proxy.cli.main import main
from taplog.proxy.config import ConfigError, load
from taplog.recorder.redaction import BUILT_IN, Redaction, built_in, custom_rule
from taplog.recorder.redaction_streams import StreamRedaction
from taplog.recorder.vendors.apis import api_module
from taplog.recorder.vendors.sse import event_bytes, parse_block, typed_event

ALL = Redaction([*built_in(BUILT_IN), custom_rule("ticket", r"TCK-\d{6}")])


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("mail jane.roe+x@example.co.uk now", "mail [redacted:email] now"),
        ("call +1 415 555 0100.", "call [redacted:phone]."),
        ("call +44 20 7946 0958", "call [redacted:phone]"),
        ("call +49 (30) 123-4567", "call [redacted:phone]"),
        ("call (415) 555-0100 or 415.555.0100", "call [redacted:phone] or [redacted:phone]"),
        ("card 4111 1111 1111 1111 exp 2026", "card [redacted:card] exp 2026"),
        ("card 4111-1111-1111-1111", "card [redacted:card]"),
        ("amex 378282246310005", "amex [redacted:card]"),
        ("iban DE89 3704 0044 0532 0130 00 ok", "iban [redacted:iban] ok"),
        ("iban GB82WEST12345698765432", "iban [redacted:iban]"),
        ("from 192.168.1.10, to 10.0.0.1.", "from [redacted:ip], to [redacted:ip]."),
        ("v6 2001:db8::8a2e:370:7334 and ::ffff:10.0.0.1", "v6 [redacted:ip] and [redacted:ip]"),
        ("see TCK-123456 today", "see [redacted:ticket] today"),
    ],
)
def test_each_detector_finds_its_kind(text, redacted):
    assert ALL.text(text) == redacted


@pytest.mark.parametrize(
    "text",
    [
        "order 4111111111111112",  # 16 digits, Luhn-invalid
        "iban DE00 3704 0044 0532 0130 00",  # mod-97 fails
        "version 1.2.3 and 999.1.1.1",
        "std::vector, a::b, 12:30:45, de:ad:be:ef:00:11",
        "on 2026-12-01 at 16:02, ts 1733068964, id 12345678901234",
        "no one@localhost or user@host",
        "already [redacted:email] here",
    ],
)
def test_detectors_leave_lookalikes_alone(text):
    assert ALL.text(text) is text


def test_json_is_redacted_string_by_string_and_untouched_json_is_not_copied():
    body = {"messages": [{"role": "user", "content": "hi jane@example.org"}], "n": 1}
    assert ALL.value(body) == {
        "messages": [{"role": "user", "content": "hi [redacted:email]"}],
        "n": 1,
    }
    clean = {"messages": [{"role": "user", "content": "hello"}]}
    assert ALL.value(clean) is clean
    raw = orjson.dumps(body)
    redacted, parsed = ALL.body(raw, orjson.loads(raw))
    assert b"jane" not in redacted and orjson.loads(redacted) == parsed


TEXT = (
    "Write to john.doe@example.com or call +1 415 555 0100; card 4111 1111 1111 1111, "
    "iban DE89 3704 0044 0532 0130 00 from 203.0.113.9, ticket TCK-654321. Bye"
)
SECRETS = ("john.doe", "555 0100", "1111 1111", "0532 0130", "203.0.113", "654321")


def _pieces(text: str, cuts: list[int]) -> list[str]:
    points = sorted(set(cuts))
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


def _chat_blocks(pieces: list[str]) -> list[bytes]:
    """Chat chunks: the text in `pieces`, then a tool call whose arguments hold the text,
    split at the same places."""
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [{**head, "choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    args = [
        {**head, "choices": [{"index": 0, "delta": {"tool_calls": [tool]}}]}
        for tool in [{"index": 0, "id": "t1", "type": "function", "function": {"name": "f"}}]
        + [{"index": 0, "function": {"arguments": p}} for p in _arguments(pieces)]
    ]
    done = {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return [event_bytes(None, c) for c in [*chunks, *args, done]] + [b"data: [DONE]\n\n"]


def _arguments(pieces: list[str]) -> list[str]:
    return (
        ['{"to": "' + pieces[0], *pieces[1:-1], pieces[-1] + '"}']
        if len(pieces) > 1
        else ['{"to": "' + pieces[0] + '"}']
    )


def _responses_blocks(pieces: list[str]) -> list[bytes]:
    deltas = [
        typed_event(
            "response.output_text.delta",
            {"output_index": 0, "content_index": 0, "item_id": "m1", "delta": p},
        )
        for p in pieces
    ]
    done = typed_event(
        "response.output_text.done", {"output_index": 0, "content_index": 0, "text": TEXT}
    )
    return [*deltas, done]


def _anthropic_blocks(pieces: list[str]) -> list[bytes]:
    start = typed_event(
        "message_start",
        {"message": {"id": "m", "type": "message", "role": "assistant", "content": []}},
    )
    block = typed_event(
        "content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}
    )
    deltas = [
        typed_event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": p}})
        for p in pieces
    ]
    return [start, block, *deltas, typed_event("message_stop", {})]


STREAMS = {
    "openai.chat": (_chat_blocks, lambda b: b["choices"][0]["message"]["content"]),
    "openai.responses": (_responses_blocks, lambda b: b["output"][0]["content"][0]["text"]),
    "anthropic.messages": (_anthropic_blocks, lambda b: b["content"][0]["text"]),
}


@pytest.mark.parametrize("api", STREAMS)
@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(TEXT) - 1), max_size=40))
def test_a_finding_split_across_stream_events_at_random_is_cut_out_of_each(api, cuts):
    build, text_of = STREAMS[api]
    module = api_module(api)
    blocks = build(_pieces(TEXT, cuts))
    plan = StreamRedaction(ALL, module)
    plan.scan(blocks)
    redacted = [plan.apply(index, raw) for index, raw in enumerate(blocks)]
    joined = b"".join(redacted).decode()
    assert not [s for s in SECRETS if s in joined]
    for raw in redacted:  # every event valid again
        data = parse_block(raw).data
        assert data == "[DONE]" or isinstance(orjson.loads(data), dict)
    body = module.reassemble(filter(None, map(parse_block, redacted))).body
    assert text_of(body) == ALL.text(TEXT)
    if api == "openai.chat":  # a tool call's arguments, streamed in pieces too
        arguments = body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        assert orjson.loads(arguments)["to"] == ALL.text(TEXT)


def test_events_with_nothing_to_redact_keep_their_exact_bytes():
    blocks = _chat_blocks(["Hello ", "there"])
    plan = StreamRedaction(ALL, api_module("openai.chat"))
    plan.scan(blocks)
    kept = [plan.apply(index, raw) for index, raw in enumerate(blocks)]
    assert [a is b for a, b in zip(kept, blocks, strict=True)][:2] == [True, True]


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "taplog.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('name = "ticket"\npattern = "TCK-(\\\\d+"', "redact[0].pattern: not a valid"),
        ('name = "Ticket!"\npattern = "x"', "redact[0].name: must be"),
        ('name = "email"\npattern = "x"', "redact[0].name: 'email' is a built-in"),
        ('name = "ticket"\npattern = "a*"', "redact[0].pattern: matches the empty string"),
        ('name = "ticket"', "redact[0].pattern: missing"),
        ('name = "t"\npattern = "x"\nflags = "i"', "redact[0]: unknown key 'flags'"),
    ],
)
def test_a_bad_rule_is_refused_at_start_up_naming_its_key(tmp_path, table, named):
    path = _config(tmp_path, f"[[redact]]\n{table}\n")
    with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("]", r"\]")):
        load({}, {}, path)
    result = CliRunner().invoke(main, ["check-config", str(path)])
    assert result.exit_code == 1 and named in result.output


def test_an_unknown_detector_is_refused_wherever_it_is_set(tmp_path):
    with pytest.raises(ConfigError, match="variable TAPLOG_REDACT: unknown detector 'mail'"):
        load({}, {"TAPLOG_REDACT": "email,mail"}, None)
    with pytest.raises(ConfigError, match="option --redact: unknown detector"):
        load({"redact": "ssn"}, {}, None)


def test_rules_of_the_config_file_join_the_built_in_detectors(tmp_path):
    path = _config(
        tmp_path,
        '[[redact]]\nname = "ticket"\npattern = "TCK-\\\\d{6}"\n\n[[redact]]\nname = "iban"\n',
    )
    settings_ = load({"redact": "email"}, {}, path)
    assert settings_.redaction.names == ("email", "ticket", "iban")
    assert settings_.redaction.text("a@b.io TCK-123456") == "[redacted:email] [redacted:ticket]"
    assert load({}, {}, None).redaction is None
    result = CliRunner().invoke(main, ["check-config", str(path)])
    assert result.exit_code == 0 and "redacts: ticket, iban" in result.output
