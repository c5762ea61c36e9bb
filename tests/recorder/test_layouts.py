"""A body's layout says what a whole-body serialisation would: whether the bytes are the
body's exact compact JSON, and which bytes each part is."""

from __future__ import annotations

import json

import orjson
from hypothesis import given
from hypothesis import strategies as st

from taplog.recorder.bodies import encode_body, parse_json
from taplog.recorder.layouts import Layout, digest

API = "anthropic.messages"  # its transcript is `messages`

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
BODIES = st.builds(
    lambda before, messages, after: {**before, "messages": messages, **after},
    st.dictionaries(st.text(), JSON, max_size=2),
    st.lists(JSON, max_size=4),
    st.dictionaries(st.text(), JSON, max_size=3),
)


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


@given(body=BODIES, spaced=st.booleans())
def test_a_layout_is_found_exactly_when_the_bytes_are_the_compact_json(body, spaced):
    try:
        raw = json.dumps(body).encode() if spaced else orjson.dumps(body)
    except TypeError:  # an integer orjson cannot write
        return
    parsed = parse_json(raw)  # an integer orjson cannot read: None
    layout = Layout.of(raw, parsed, API)
    assert (layout is not None) == (encode_body(raw, parsed) == {"body": parsed})
    if layout is None:
        return
    messages = parsed["messages"]
    assert [layout.item(at) for at in range(len(messages))] == [orjson.dumps(m) for m in messages]
    chain, link = [], b""
    for message in messages:
        link = digest(link + digest(orjson.dumps(message)))
        chain.append(link)
    assert layout.chain() == chain
    for key, value in parsed.items():
        if key != "messages":
            assert layout.field_part(key) == orjson.dumps({key: value})
            assert layout.value_digest(key) == digest(orjson.dumps(value))


def test_a_part_too_deep_for_a_log_line_leaves_the_body_whole():
    """orjson writes at most 255 levels: a part that fits alone but not inside a log line
    makes the body one stored as text, as the whole-body check says, at the same depth."""
    seen = set()
    for levels in range(230, 245):
        for body in ({"messages": [_deep(levels)]}, {"messages": [], "tools": _deep(levels)}):
            raw = orjson.dumps(body)
            whole = encode_body(raw, body) == {"body": body}
            assert (Layout.of(raw, body, API) is not None) == whole
            seen.add(whole)
    assert seen == {True, False}  # the depths tried cross the limit
