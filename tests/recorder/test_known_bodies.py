"""A body parsed from where it differs from an earlier one is parsed as a whole parse
would parse it: the same JSON, the same verdict on exactness, the same parts, and the
same failures on bytes that are not JSON."""

from __future__ import annotations

import json

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from taplog.recorder.bodies import encode_body, parse_json
from taplog.recorder.known_bodies import KnownBodies
from taplog.recorder.layouts import Layout

API = "anthropic.messages"
TEXT = st.text(max_size=40)
SETTINGS = (
    st.sampled_from(["", "You code.", ["Bash", "Read"], 7]) | TEXT
)  # mostly resent as they were
ITEM = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant"]), "content": TEXT})


def _same_as_a_whole_parse(known: KnownBodies, raw: bytes) -> Layout | None:
    parsed, layout = known.parse(raw, API)
    whole = parse_json(raw)
    assert parsed == whole
    assert orjson.dumps(parsed) == orjson.dumps(whole)  # the keys in the same order too
    assert (layout is not None) == (
        whole is not None and encode_body(raw, whole) == {"body": whole}
    )
    if layout is not None:
        assert layout.raw is raw and layout.body is parsed
        found = Layout.of(raw, whole, API)
        assert found is not None
        assert (layout.items, layout.fields) == (found.items, found.fields)
        assert layout.chain() == found.chain()
        assert [layout.value_digest(k) for k in layout.fields] == [
            found.value_digest(k) for k in found.fields
        ]
    return layout


@st.composite
def _conversations(draw) -> list[bytes]:
    """Request bytes as threads send them, interleaved: growing, edited, restarted, with
    fields before and after the transcript that change now and then (a key moved, added,
    dropped, a value changed), and now and then bytes that are not the compact JSON of
    anything (spaced, cut short, a key twice, bytes after the end)."""
    fields = st.dictionaries(st.sampled_from(["system", "tools", "_", "x"]), SETTINGS)
    threads = [
        (draw(st.lists(ITEM, min_size=1, max_size=3)), draw(fields))
        for _ in range(draw(st.integers(1, 3)))
    ]
    sent = []
    for _ in range(draw(st.integers(1, 12))):
        history, settings = draw(st.sampled_from(threads))
        action = draw(st.sampled_from(["grow", "grow", "edit", "restart", "settings", "same"]))
        if action == "grow":
            history += draw(st.lists(ITEM, min_size=1, max_size=2))
        elif action == "edit":
            history[draw(st.integers(0, len(history) - 1))] = draw(ITEM)
        elif action == "restart":
            history[:] = [draw(ITEM)]
        elif action == "settings":
            settings.clear()
            settings.update(draw(fields))
        body = {"model": draw(st.sampled_from(["a", "b"])), "messages": list(history), **settings}
        raw = orjson.dumps(body)
        form = draw(st.sampled_from(["compact"] * 6 + ["spaced", "cut", "twice", "trailing"]))
        if form == "spaced":
            raw = json.dumps(body).encode()
        elif form == "cut":
            raw = raw[: draw(st.integers(0, len(raw) - 1))]
        elif form == "twice":  # a key again after the transcript: not its compact JSON
            raw = raw[:-1] + b',"' + draw(st.sampled_from([b"model", b"messages", b"_"])) + b'":1}'
        elif form == "trailing":
            raw += draw(st.sampled_from([b" ", b"]", b"}", b",1"]))
        sent.append(raw)
    return sent


@settings(max_examples=300, deadline=None)
@given(conversations=_conversations(), max_bodies=st.sampled_from([1, 64]))
def test_a_body_grown_from_an_earlier_one_parses_as_a_whole_parse(conversations, max_bodies):
    known = KnownBodies(max_bodies=max_bodies, min_bytes=0)
    for raw in conversations:
        _same_as_a_whole_parse(known, raw)


def test_a_resent_beginning_is_not_parsed_again():
    """The items a body shares with an earlier one are that body's objects, and their
    digests are not taken again; only what follows them is new."""
    known = KnownBodies(min_bytes=0)
    history = [{"role": "user", "content": f"turn {n} " + "x" * 100} for n in range(20)]
    first = orjson.dumps({"model": "m", "messages": history, "tools": ["t"]})
    layout = _same_as_a_whole_parse(known, first)
    assert layout is not None
    layout.chain()
    grown = [*history, {"role": "assistant", "content": "done"}]
    second = orjson.dumps({"model": "m", "messages": grown, "tools": ["t"]})
    parsed, after = known.parse(second, API)
    assert after is not None and after is not layout
    assert all(a is b for a, b in zip(parsed["messages"], layout.body["messages"], strict=False))
    assert after.digests == layout.digests and after.links == layout.chain()
    assert after.chain() == Layout.of(second, orjson.loads(second), API).chain()


def test_small_bodies_and_other_apis_are_parsed_whole_and_not_kept():
    known = KnownBodies()
    small = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert known.parse(small, API) == (orjson.loads(small), None)
    assert known.parse(b'{"input":"x"}', "openai.embeddings") == ({"input": "x"}, None)
    assert known.parse(b"not json", API) == (None, None)


def test_a_key_sent_twice_is_parsed_as_a_whole_parse_and_never_taken_for_compact_json():
    known = KnownBodies(min_bytes=0)
    assert _same_as_a_whole_parse(known, b'{"model":"a","messages":[{"n":1}],"system":"s"}')
    for raw in (
        b'{"model":"a","messages":[{"n":1},{"n":2}],"system":"t","system":"s"}',
        b'{"model":"a","messages":[{"n":1},{"n":2}],"model":"b","system":"s"}',
        b'{"model":"a","messages":[{"n":1},{"n":2}],"messages":[],"system":"s"}',
    ):
        assert _same_as_a_whole_parse(known, raw) is None
