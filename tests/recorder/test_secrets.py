"""Credentials are kept out of everything taplog writes by their shape, by their name and
by their value (issue 18, items 3, 8 and 9; issue 30, item 5).

A property test plants random credentials of every shape in every place a request can
carry one (path, query, header names and values, body) and has the vendor echo all of it
back (in answers and in error bodies). The client's own key, of no known shape, goes too
under headers and query parameters of odd names and in base64 (at any alignment, padded
or not), and comes back split across stream events at any offset. None of them, nor
their first 8 characters, nor the key's base64, may be found under the data dir (Parquet
included), in stderr or in /metrics.
"""

from __future__ import annotations

import base64
import string
import time
from urllib.parse import quote, urlencode

import duckdb
import httpx
import orjson
import pytest
from aiohttp import web
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from taplog.recorder.events import make_event, seal
from taplog.recorder.query.compaction import compact
from taplog.recorder.secrets import redact_text, redact_url, safe_headers
from taplog.recorder.secrets_by_value import scrub
from tests.disk import readable
from tests.fakes.harness import TaplogProcess, serve_fake, taplog_env
from tests.fakes.keys import key_traces
from tests.fakes.vendor import strip_directives

ALNUM = string.ascii_letters + string.digits
URLSAFE = ALNUM + "_-"
LOWER = string.ascii_lowercase + string.digits


def _random(alphabet: str, size: int) -> st.SearchStrategy[str]:
    """Random text: drawn from a seeded generator, so that shrinking keeps it random (a
    shrunk `00000000…` would be found in any number)."""
    return st.randoms(use_true_random=False).map(
        lambda rng: "".join(rng.choice(alphabet) for _ in range(size))
    )


def _mixed(alphabet: str, size: int) -> st.SearchStrategy[str]:
    """Random text with a lower case letter, an upper case letter and a digit, as keys have."""
    return _random(alphabet, size - 3).map(lambda text: text + "xQ7")


SHAPES = {
    "openai": _mixed(URLSAFE, 48).map(lambda s: "sk-" + s),
    "project": _mixed(URLSAFE, 60).map(lambda s: "sk-proj-" + s),
    "anthropic": _mixed(URLSAFE, 80).map(lambda s: "sk-ant-api03-" + s),
    "bearer": _mixed(ALNUM + "._~+/", 32),  # sent as `Bearer <it>` in a header of any name
    "jwt": st.tuples(*[_random(URLSAFE, n) for n in (20, 40, 43)]).map(
        lambda p: f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}"
    ),
    "aws": _random(string.ascii_uppercase + string.digits, 16).map(lambda s: "AKIA" + s),
    "google": _random(URLSAFE, 35).map(lambda s: "AIza" + s),
}
# The client's own key: lower case and digits, the shape of nothing, so only its value
# can find it; headers and parameters named like nothing a credential is named.
OWN_KEYS = _random(LOWER, 40).map(lambda s: "ok-" + s)
ODD_NAMES = st.one_of(
    st.sampled_from(["x-csrf", "x-stainless-foo", "bearer", "x", "q", "x-request-context"]),
    _random(string.ascii_lowercase, 6).map(lambda s: "x-" + s),
)


@st.composite
def encoded_keys(draw: st.DrawFn, key: str) -> str:
    """`key` in base64 as a client may send it: alone or after a prefix of any length
    (each alignment), with text after it or not, standard or URL-safe, padded or not."""
    before = draw(st.sampled_from(["", "u:", "user:", "Authorization: Bearer "]))
    after = draw(st.sampled_from(["", "?", " and the rest"]))
    encode = draw(st.sampled_from([base64.b64encode, base64.urlsafe_b64encode]))
    encoded = encode(f"{before}{key}{after}".encode()).decode()
    return encoded if draw(st.booleans()) else encoded.rstrip("=")


async def _echo(request: web.Request) -> web.Response:
    """The vendor echoes everything it got; `fail` in the body makes it an error body."""
    body = await request.read()
    said = {
        "path": request.path_qs,
        "headers": {str(name): value for name, value in request.headers.items()},
        "body": body.decode(errors="replace"),
    }
    text = orjson.dumps(said).decode()
    if b"fail" in body:
        error = {"message": f"rejected: {text}", "type": "server_error", "code": None}
        return web.json_response({"error": error}, status=500)
    message = {"role": "assistant", "content": text}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    answer = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4.1"}
    return web.json_response({**answer, "choices": [choice]})


@pytest.fixture(scope="module")
def echoing(tmp_path_factory):
    """`taplog serve` with OpenAI calls going to the echo above, Anthropic calls to the fake
    vendor (which streams its echo cut where `!cuts` says); what the tests planted: each
    redacted at least once, and the traces of the client's keys (`key_traces`)."""
    from tests.fakes.servers import ServerThread

    servers = ServerThread()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _echo)
    data = tmp_path_factory.mktemp("shapes") / "data"
    served = TaplogProcess(
        "--data-dir",
        str(data),
        "--openai-base",
        f"{servers.serve(app)}/v1",
        "--anthropic-base",
        serve_fake(servers).url,
        "--log-level",
        "debug",
        "--log-format",
        "json",
        env=taplog_env(),
    )
    planted: list[str] = []
    traced: list[str] = []
    yield served, data, planted, traced
    if served.process.poll() is None:
        served.stop()
    servers.stop()


def _header_name_safe(value: str) -> bool:
    return all(c in ALNUM + "!#$%&'*+-.^_`|~" for c in value)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(shape=st.sampled_from(sorted(SHAPES)), data=st.data(), fail=st.booleans())
def test_planted_credentials_of_every_shape_are_written_nowhere(echoing, shape, data, fail):
    served, _, planted, traced = echoing
    secret = data.draw(SHAPES[shape])
    named = data.draw(_mixed(ALNUM, 24))  # no shape at all: only its name marks it
    own = data.draw(OWN_KEYS)  # the client's key: only its value marks it
    encoded = data.draw(encoded_keys(own))
    planted += [secret, named, own]
    traced += key_traces(own)
    carried = f"Bearer {secret}" if shape == "bearer" else secret
    headers = {
        "authorization": f"Bearer {own}",
        "x-trace": carried,  # a header of any name
        "x-auth": named,  # named like a credential
        "helicone-auth": f"Bearer {named}",
        data.draw(ODD_NAMES): own,  # the client's key again, under a name of no meaning
        "x-basic": f"Basic {encoded}",
    }
    if shape != "bearer" and _header_name_safe(secret):
        headers[f"x-{secret}"] = "1"  # a credential as a header name
    query = f"?trace={quote(carried)}&access_token={named}&client_secret={named}&sig={named}"
    query += "&" + urlencode({data.draw(ODD_NAMES): own, data.draw(ODD_NAMES): encoded})
    content = f"{'fail ' if fail else ''}use {carried} or {encoded}"
    body = {"model": "gpt-4.1", "messages": [{"role": "user", "content": content}], "user": carried}
    answer = httpx.post(
        f"{served.url}/v1/chat/completions{query}", headers=headers, json=body, timeout=10
    )
    assert answer.status_code == (500 if fail else 200)
    assert secret in answer.text and own in answer.text  # reached the client as it was sent


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), encode=st.booleans())
def test_a_key_the_vendor_streams_back_in_pieces_is_written_nowhere(echoing, data, encode):
    """Anywhere in the key (or in its base64) the echo is cut, once or twice."""
    served, _, planted, traced = echoing
    own = data.draw(OWN_KEYS)
    planted.append(own)
    traced += key_traces(own)
    echoed = data.draw(encoded_keys(own)) if encode else own
    prompt = f"say {echoed} back"
    at = f"Echo: {prompt}".index(echoed)
    offsets = data.draw(st.sets(st.integers(1, len(echoed) - 1), min_size=1, max_size=2))
    cuts = ",".join(str(at + offset) for offset in sorted(offsets))
    answer = httpx.post(
        f"{served.url}/v1/messages?{urlencode({data.draw(ODD_NAMES): own})}",
        headers={"x-api-key": own, "anthropic-version": "2023-06-01", data.draw(ODD_NAMES): own},
        json={
            "model": "claude-sonnet-4-6",
            "max_tokens": 64,
            "stream": True,
            "messages": [{"role": "user", "content": f"{prompt} !cuts={cuts}"}],
        },
        timeout=10,
    )
    assert answer.status_code == 200
    pieces = [
        orjson.loads(line[6:])["delta"]["text"]
        for line in answer.text.splitlines()
        if line.startswith("data: ") and '"text_delta"' in line
    ]
    assert "".join(pieces) == f"Echo: {strip_directives(prompt)}"  # the client got it whole
    assert len(pieces) == len(offsets) + 1


def test_what_was_planted_is_nowhere_under_the_data_dir_in_stderr_or_metrics(echoing):
    served, data, planted, traced = echoing
    assert planted, "the property test ran first and planted credentials"
    deadline = time.monotonic() + 10
    while "taplog_calls_total" not in (metrics := httpx.get(f"{served.url}/metrics").text):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    code, err = served.stop()
    assert code == 0, err
    assert compact(data, 0)  # Parquet too
    places = {"stderr": err, "/metrics": metrics}
    for path in data.rglob("*"):
        if path.is_file():
            places[str(path)] = readable(path).decode(errors="replace")
    for segment in (data / "compacted").glob("*.parquet"):
        rows = duckdb.sql(f"SELECT * FROM read_parquet('{segment}')").fetchall()
        places[f"{segment} read back"] = orjson.dumps(rows, default=str).decode()
    for secret in planted + traced:
        for where, text in places.items():
            at = text.find(secret[:8])
            assert at < 0, f"{secret} in {where}: …{text[max(0, at - 200) : at + 60]}…"
    logged = "".join(t for w, t in places.items() if w.endswith(".jsonl.zst"))
    assert logged.count("[redacted]") >= len(planted)


# -- the nets one by one ----------------------------------------------------------------


def test_a_key_with_undecodable_bytes_is_forwarded_and_kept_out_of_the_log(taplog, fake):
    key = b"caf\xe9-0123456789abcdef"
    answer = httpx.post(
        f"{taplog.url}/v1/chat/completions",
        json={"model": "gpt-4.1", "messages": [{"role": "user", "content": "hello"}]},
        headers={"authorization": b"Bearer " + key, "x-trace": key},
    )
    assert answer.status_code == 200  # was a 500: the key could not be fingerprinted
    assert "0123456789abcdef" in fake.requests[-1].headers["x-trace"]
    (request,) = taplog.events("llm.request")
    assert request["headers"]["x-trace"] == "[redacted]"


def test_a_short_configured_key_never_rewrites_recorded_text():
    answer = b'{"usage":{"input_tokens":12,"output_tokens":3},"k":"k"}'
    assert scrub(answer, (b"k",)) == answer  # too short to be a credential: never used
    assert scrub(b'"input_tokens" and k-9f8e7d6c', (b"k-9f8e7d6c",)) == (
        b'"input_tokens" and [redacted]'
    )
    assert scrub(b"xk-9f8e7d6c k-9f8e7d6cx", (b"k-9f8e7d6c",)) == b"xk-9f8e7d6c k-9f8e7d6cx"


@pytest.mark.parametrize(
    "text",
    [
        "a task-management-and-planning-board-for-teams",  # `sk-` and a long word
        "the author field",
        '{"author": "Ada Lovelace", "max_tokens": 4096, "token_type": "bearer"}',
        '{"prompt_cache_key": "019a1b2c-3d4e-5f60-7182-93a4b5c6d7e8"}',
        '{"signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}',  # thinking
    ],
)
def test_ordinary_text_is_left_as_it_is(text):
    assert redact_text(text) == text


def test_credential_named_query_parameters_and_headers_are_redacted_whatever_their_value():
    url = "https://h/v1/x?access_token=a&Password=b&sig=c&jwt=d&api-key=e&model=gpt-4.1&q=f"
    assert redact_url(url) == (
        "https://h/v1/x?access_token=[redacted]&Password=[redacted]&sig=[redacted]"
        "&jwt=[redacted]&api-key=[redacted]&model=gpt-4.1&q=f"
    )
    assert redact_url("https://user:pw@h/v1") == "https://[redacted]@h/v1"
    kept = safe_headers(
        [("X-Auth", "v"), ("Helicone-Auth", "v"), ("X-Refresh-Token", "v"), ("Accept", "*/*")]
    )
    assert kept == {"accept": "*/*"}


def test_log_lines_escape_every_line_separator():
    event = make_event("error", "s", None, reason="a\u2028b\u2029c\x85d\x0be\x1cf")
    line, _ = seal(event, 1, None)
    assert len(line.decode().splitlines()) == 1  # what a splitlines() reader counts
    assert orjson.loads(line)["reason"] == "a\u2028b\u2029c\x85d\x0be\x1cf"


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_printed_for_a_terminal_escapes_c1_controls_and_line_separators(fmt):
    from taplog.recorder.query.tables import render

    text = "csi \x9b2J, nel \x85, del \x7f, ls \u2028, esc \x1b"
    printed = render(["reason"], ["VARCHAR"], [[text]], fmt)
    assert not any(char in printed for char in "\x9b\x85\x7f\u2028\x1b")
    assert "\\u009b" in printed and "\\u2028" in printed
    rows = orjson.loads(printed)
    assert (rows[0] if fmt == "json" else rows)["reason"] == text  # the same JSON


def test_a_key_streamed_back_in_pieces_is_redacted_in_the_reassembled_answer():
    from taplog.recorder.store.stream_fields import stream_fields
    from taplog.recorder.vendors.apis import api_module

    key = "sk-proj-" + "AbCdEf0123456789" * 3
    pieces = [key[:10], key[10:30], key[30:]]
    chunks = [
        (
            float(i),
            b"data: "
            + orjson.dumps({"choices": [{"index": 0, "delta": {"content": p}}]})
            + b"\n\n",
        )
        for i, p in enumerate(pieces)
    ]
    chunks.append((9.0, b"data: [DONE]\n\n"))
    fields, body = stream_fields(chunks, (), api_module("openai.chat"), None)
    assert body["choices"][0]["message"]["content"] == "[redacted]"
    assert key not in orjson.dumps(fields).decode()
