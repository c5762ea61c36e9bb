"""The by-value net, piece by piece (issue 30, item 5): a key split across stream events
at every offset, for each API, in memory and in a blob; base64 forms at every alignment;
the fields of an event beside its body; what is never touched.

Streams are built by the fake vendor's own renderers (`!cuts` puts the split where the test
wants it), and read back as a user reads them: every event's data parsed as JSON.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import orjson
import pytest

from taplog.recorder.redaction import Redaction, built_in
from taplog.recorder.secrets import MIN_SECRET_LEN
from taplog.recorder.secrets_by_value import known, scrub, scrub_fields
from taplog.recorder.store.blobs import BlobStore, load
from taplog.recorder.store.stream_fields import Chunk, stream_fields
from taplog.recorder.vendors.apis import api_module
from tests.fakes.vendor import Anthropic, Chat, Responses, build_answer

KEY = "tk-3f9a0c27e51b84d6a0c9e2f17b5d3a8c4e6f0b2d"  # no known shape: found by value only
SECRETS = (f"Bearer {KEY}".encode(), KEY.encode())
VENDORS = {"openai.chat": Chat, "openai.responses": Responses, "anthropic.messages": Anthropic}


def vendor_stream(api: str, prompt: str, cuts: list[int]) -> list[Chunk]:
    """The fake vendor's stream for `prompt` ("Echo: " and it), its text cut at `cuts`."""
    vendor = VENDORS[api]()
    body = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": prompt}]}
    body["input"] = prompt
    directives = {"cuts": ",".join(map(str, cuts))}
    answer = build_answer(b"seed", 100, vendor.transcript(body), directives, False)
    return [(float(at), event) for at, event in enumerate(vendor.events(answer, body))]


def recorded(
    api: str, chunks: list[Chunk], tmp_path: Path | None = None, redaction: Redaction | None = None
) -> tuple[str, dict]:
    """The stream's fields as written (from the blob, with `tmp_path`): its events' data
    (every one parsed: each must still be JSON) joined, and the reassembled answer."""
    blobs = BlobStore(tmp_path, 0, False) if tmp_path is not None else None
    fields, _ = stream_fields(chunks, SECRETS, api_module(api), blobs, redaction)
    if blobs is not None:
        fields = load(tmp_path, fields["blob"])
    data = []
    for entry in fields["sse"]:
        for line in entry["raw"].splitlines():
            if line.startswith("data: {"):
                data.append(orjson.loads(line.removeprefix("data: ")))
    return orjson.dumps(data).decode(), fields["body"]


def answer_text(api: str, body: dict) -> str:
    if api == "openai.chat":
        return body["choices"][0]["message"]["content"]
    if api == "openai.responses":
        return body["output"][0]["content"][0]["text"]
    return body["content"][0]["text"]


def assert_no_piece_of(text: str, secret: str) -> None:
    """Not the secret, nor any 6 characters of it in a row."""
    for start in range(len(secret) - 5):
        assert secret[start : start + 6] not in text, (secret[start : start + 6], text)


@pytest.mark.parametrize("api", sorted(VENDORS))
@pytest.mark.parametrize("blob", [False, True], ids=["inline", "blob"])
def test_a_key_split_across_events_at_every_offset_is_cut_out_of_each(api, blob, tmp_path):
    prompt = f"repeat {KEY} back"
    at = f"Echo: {prompt}".index(KEY)
    for offset in range(1, len(KEY)):
        cuts = [at + offset] if offset % 2 else [at + offset // 2, at + offset]
        events, body = recorded(api, vendor_stream(api, prompt, cuts), tmp_path if blob else None)
        assert_no_piece_of(events, KEY)
        assert "[redacted]" in events
        assert answer_text(api, body) == "Echo: repeat [redacted] back"


@pytest.mark.parametrize("api", sorted(VENDORS))
@pytest.mark.parametrize("blob", [False, True], ids=["inline", "blob"])
def test_a_split_key_and_a_split_email_are_both_cut_with_redaction_on(api, blob, tmp_path):
    email = "jane.roe@example.org"
    prompt = f"mail {email} the key {KEY} now"
    text = f"Echo: {prompt}"
    cuts = [text.index(email) + 6, text.index(KEY) + 9, text.index(KEY) + 30]
    chunks = vendor_stream(api, prompt, cuts)
    redaction = Redaction(built_in(["email"]))
    events, body = recorded(api, chunks, tmp_path if blob else None, redaction)
    assert_no_piece_of(events, KEY)
    assert "jane.r" not in events and "oe@example" not in events
    assert answer_text(api, body) == "Echo: mail [redacted:email] the key [redacted] now"


@pytest.mark.parametrize("api", sorted(VENDORS))
@pytest.mark.parametrize("prefix", ["", "u:", "user:"], ids=["alone", "offset-2", "offset-5"])
def test_a_base64_key_split_across_events_is_cut_out_of_each(api, prefix):
    encoded = base64.urlsafe_b64encode(f"{prefix}{KEY}".encode()).decode().rstrip("=")
    prompt = f"decode {encoded} please"
    at = f"Echo: {prompt}".index(encoded)
    for offset in range(1, len(encoded), 3):
        events, body = recorded(api, vendor_stream(api, prompt, [at + offset]))
        assert_no_piece_of(events, encoded[4:-4])
        assert_no_piece_of(answer_text(api, body), encoded[4:-4])


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
