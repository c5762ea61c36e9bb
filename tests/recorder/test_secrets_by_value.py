"""The by-value net, piece by piece (issue 30, item 5): base64 forms at every alignment;
the fields of an event beside its body; what is never touched.
"""

from __future__ import annotations

import base64
import json
import re

import orjson
import pytest

from taplog.recorder.secrets import MIN_SECRET_LEN
from taplog.recorder.secrets_by_value import known, scrub, scrub_fields

KEY = "tk-3f9a0c27e51b84d6a0c9e2f17b5d3a8c4e6f0b2d"  # no known shape: found by value only
SECRETS = (f"Bearer {KEY}".encode(), KEY.encode())


def assert_no_piece_of(text: str, secret: str) -> None:
    """Not the secret, nor any 6 characters of it in a row."""
    for start in range(len(secret) - 5):
        assert secret[start : start + 6] not in text, (secret[start : start + 6], text)


def decodings(text: str) -> list[str]:
    """What each run of base64 characters in `text` decodes to, read from each of its
    first four characters (the encoded text may have started anywhere)."""
    found = []
    for run in re.findall(r"[A-Za-z0-9+/_-]+", text):
        for start in range(4):
            part = run[start:][: (len(run) - start) // 4 * 4]
            found.append(base64.b64decode(part, b"+/", validate=False).decode("latin-1"))
            found.append(base64.urlsafe_b64decode(part).decode("latin-1"))
    return found


def _encodings(text: str) -> list[str]:
    encoded = base64.b64encode(text.encode()).decode()
    urlsafe = base64.urlsafe_b64encode(text.encode()).decode()
    return [encoded, encoded.rstrip("="), urlsafe, urlsafe.rstrip("=")]


@pytest.mark.parametrize("before", ["", "u:", "user:", "Authorization: Bearer ", "é"])
@pytest.mark.parametrize("after", ["", "?", "\n", " and the rest of the text"])
def test_base64_of_the_key_alone_or_embedded_padded_or_not_is_scrubbed(before, after):
    for encoded in _encodings(before + KEY + after):
        for carrier in (encoded, f"Basic {encoded}", f"a\\n{encoded}\\u00e9", f"x={encoded}&y"):
            body = json.dumps({"content": carrier}).encode()
            scrubbed = scrub(body, SECRETS)
            content = orjson.loads(scrubbed)["content"]  # still JSON
            assert "[redacted]" in content
            for decoded in decodings(content):
                assert_no_piece_of(decoded, KEY)


def test_a_key_after_a_json_escape_is_a_whole_token():
    body = json.dumps({"content": f"my key:\n{KEY}\té{KEY}"}, ensure_ascii=True).encode()
    assert b"\\n" + KEY.encode() in body and b"\\u00e9" + KEY.encode() in body
    scrubbed = scrub(body, SECRETS)
    assert orjson.loads(scrubbed)["content"] == "my key:\n[redacted]\té[redacted]"
    inside = json.dumps({"content": f"x{KEY}", "path": f"C:\\\\n{KEY}"}).encode()
    assert scrub(inside, SECRETS) == inside  # in a longer word: a word of its own


def test_nothing_shorter_than_the_minimum_is_ever_looked_for():
    short = b"k" * (MIN_SECRET_LEN - 1)
    assert not known((short,))
    text = b'{"a": "' + short + b'", "b": "' + base64.b64encode(short) + b'"}'
    assert scrub(text, (short,)) is text
    forms = known(SECRETS)
    assert forms.plain == (KEY.encode(),)  # `Bearer KEY` is looked for through KEY
    assert all(len(form.core) >= MIN_SECRET_LEN for form in forms.encoded)
    assert all(len(form.core) >= MIN_SECRET_LEN for form in known((b"12345678",)).encoded)


def test_headers_of_any_name_the_path_the_url_the_error_and_the_model_lose_the_key():
    percent = base64.b64encode(f"u:{KEY}".encode()).decode().replace("+", "%2B")
    event = {
        "headers": {"x-csrf": KEY, "x-stainless-foo": f"v1 {KEY}", KEY: "1", "accept": "*/*"},
        "path": f"/v1/chat/completions?bearer={KEY}&b={percent}&{KEY}=1&model=gpt",
        "upstream_url": f"https://api.example/v1/{KEY}/chat?x={KEY}",
        "error": f"refused {KEY}",
        "model": KEY,
    }
    scrub_fields(event, SECRETS)
    assert event == {
        "headers": {"x-csrf": "[redacted]", "x-stainless-foo": "v1 [redacted]", "accept": "*/*"},
        "path": "/v1/chat/completions?bearer=[redacted]&b=[redacted]&[redacted]&model=gpt",
        "upstream_url": "https://api.example/v1/[redacted]/chat?x=[redacted]",
        "error": "refused [redacted]",
        "model": "[redacted]",
    }
    plain = {"headers": {"accept": "*/*"}, "path": "/v1/x?a=b", "error": None}
    scrub_fields(plain, SECRETS)
    assert plain == {"headers": {"accept": "*/*"}, "path": "/v1/x?a=b", "error": None}
