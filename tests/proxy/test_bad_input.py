"""Hostile and broken requests: refused clearly or recorded safely, never a crash, never
another host. Each case asserts its exact answer, then that a normal call still works."""

from __future__ import annotations

import select
import socket
import time

import httpx
import openai
import orjson
import pytest
from aiohttp import web

from taplog.proxy.config import ConfigError, load
from taplog.proxy.keys import RECORDER
from taplog.recorder.bodies import decode_body
from tests.builders import HELLO
from tests.fakes.harness import start_taplog
from tests.fakes.keys import OPENAI_KEY

BODY = orjson.dumps({"model": "gpt-4.1", "messages": HELLO})


def _raw(url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are; the answer's status, headers and body."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while (chunk := sock.recv(65536)) and not _whole(answer := answer + chunk):
            pass
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return int(status_line.split()[1]), headers, body


def _whole(answer: bytes) -> bool:
    """An answer with a Content-Length is whole once that many body bytes are in."""
    head, found, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:] if found else ():
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def _post(target: bytes, extra: bytes = b"", body: bytes = BODY, length: bool = True) -> bytes:
    head = b"POST " + target + b" HTTP/1.1\r\nHost: taplog\r\nConnection: close\r\n"
    head += b"Content-Type: application/json\r\nAuthorization: Bearer " + OPENAI_KEY.encode()
    head += b"\r\n" + extra
    if length:
        head += b"Content-Length: %d\r\n" % len(body)
    return head + b"\r\n" + body


def _still_serving(taplog) -> None:
    client = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    answer = client.chat.completions.create(model="gpt-4.1", messages=HELLO)
    assert answer.choices[0].message.content == "Echo: hello"
    assert taplog.app[RECORDER].accepting


def _openai_error(body: bytes, code: str, message: str) -> None:
    assert orjson.loads(body) == {
        "error": {
            "message": f"taplog: {message}",
            "type": "invalid_request_error",
            "param": None,
            "code": code,
        }
    }


# -- upstream hosts only from configuration ------------------------------------------------


@pytest.mark.parametrize(
    "target", [b"http://evil.example/v1/chat/completions", b"https://evil.example:443/v1/models"]
)
def test_an_absolute_form_target_is_refused(taplog, fake, target):
    status, headers, body = _raw(taplog.url, _post(target))
    assert (status, headers["x-taplog-error"]) == (400, "invalid_path")
    _openai_error(body, "invalid_path", "request target must be a path")
    assert fake.requests == [] and taplog.sessions() == {}
    _still_serving(taplog)


@pytest.mark.parametrize(
    "target",
    [b"/v1/%2e%2e/%2e%2e/chat/completions", b"/v1/%2E%2E%2Fadmin", b"/s/x/v1/./chat/completions"],
)
def test_encoded_dot_segments_are_refused(taplog, fake, target):
    status, _, body = _raw(taplog.url, _post(target))
    assert status == 400
    _openai_error(body, "invalid_path", "path must not contain '.' or '..' segments")
    assert fake.requests == []
    _still_serving(taplog)


@pytest.mark.parametrize(
    ("target", "arrives_as"),
    [
        (b"//evil.example/v1/chat/completions", "/v1//evil.example/v1/chat/completions"),
        (b"/v1@evil.example/chat/completions", "/v1/v1@evil.example/chat/completions"),
        (b"/\\evil.example/chat/completions", "/v1/\\evil.example/chat/completions"),
        (b"/v1/chat/completions?api_base=http://evil.example", "/v1/chat/completions"),
    ],
)
def test_odd_paths_only_ever_reach_the_configured_base(taplog, fake, target, arrives_as):
    """An unreachable evil.example would be a 502: the fake's own answer proves where it went."""
    status, _, _ = _raw(taplog.url, _post(target))
    assert status in (200, 404)  # the fake's answer: 404 for paths it does not serve
    (seen,) = fake.requests
    assert seen.path == arrives_as
    _still_serving(taplog)


@pytest.mark.parametrize(
    ("headers", "body", "named"),
    [
        ({"X-Base-URL": "http://evil.example"}, {}, "the header x-base-url"),
        ({"X-Api-Base": "http://evil.example"}, {}, "the header x-api-base"),
        ({}, {"api_base": "http://evil.example"}, "the body field 'api_base'"),
        ({}, {"base_url": "http://evil.example"}, "the body field 'base_url'"),
    ],
)
def test_body_fields_and_headers_naming_a_base_url_are_refused(taplog, fake, headers, body, named):
    client = openai.OpenAI(
        base_url=f"{taplog.url}/v1", api_key=OPENAI_KEY, max_retries=0, default_headers=headers
    )
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="gpt-4.1", messages=HELLO, extra_body=body)
    assert refused.value.response.headers["x-taplog-error"] == "upstream_override"
    assert refused.value.message == (
        f"Error code: 400 - taplog: {named} would choose the upstream; "
        "taplog forwards only to its configured vendors"
    )
    assert fake.requests == [] and taplog.sessions() == {}
    _still_serving(taplog)


def test_a_reverse_proxys_forwarding_headers_are_ignored_not_refused(taplog, fake):
    """X-Forwarded-* come from a proxy in front of taplog, not from the client: never used."""
    client = openai.OpenAI(
        base_url=f"{taplog.url}/v1",
        api_key=OPENAI_KEY,
        max_retries=0,
        default_headers={"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https"},
    )
    client.chat.completions.create(model="gpt-4.1", messages=HELLO)
    (seen,) = fake.requests
    assert seen.path == "/v1/chat/completions"


def test_redirects_from_upstream_are_passed_back_never_followed(servers, tmp_path):

    followed: list[str] = []

    async def redirect(request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": f"{evil_url}/stolen"})

    async def evil(request: web.Request) -> web.Response:
        followed.append(request.headers.get("Authorization", ""))
        return web.json_response({})

    evil_app, vendor = web.Application(), web.Application()
    evil_app.router.add_route("*", "/{tail:.*}", evil)
    vendor.router.add_route("*", "/{tail:.*}", redirect)
    evil_url = servers.serve(evil_app)
    vendor_url = servers.serve(vendor)
    taplog = start_taplog(
        servers, tmp_path / "data", openai_base=f"{vendor_url}/v1", anthropic_base=vendor_url
    )
    answer = httpx.post(
        f"{taplog.url}/v1/chat/completions",
        content=BODY,
        headers={"authorization": f"Bearer {OPENAI_KEY}", "content-type": "application/json"},
    )
    assert answer.status_code == 307 and answer.headers["location"] == f"{evil_url}/stolen"
    assert followed == []
    (response,) = taplog.events("llm.response")
    assert (response["status"], response["outcome"]) == (307, "ok")


def test_other_request_forms_never_reach_a_vendor(taplog, fake):
    status, _, _ = _raw(
        taplog.url, b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil\r\nConnection: close\r\n\r\n"
    )
    assert status == 404
    status, _, _ = _raw(taplog.url, b"OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert status == 404
    assert fake.requests == []
    _still_serving(taplog)


# -- malformed HTTP: refused by the parser, before routing ----------------------------------

PARSER_CASES = {
    "CR in a header value": (b"X-A: a\rb\r\n", b"Missing expected LF after header value"),
    "LF in a header value": (
        b"X-A: a\nX-Injected: 1\r\n",
        b"Missing expected CR after header value",
    ),
    "NUL in a header value": (b"X-A: a\x00b\r\n", b"Invalid header value char"),
    "a folded header line": (b"X-A: a\r\n b\r\n", b"Unexpected whitespace after header value"),
    "space in a header name": (b"X A: b\r\n", b"Invalid header token"),
    "Content-Length with Transfer-Encoding": (
        b"Transfer-Encoding: chunked\r\n",
        b"Content-Length can't be present with Transfer-Encoding",
    ),
    "two Content-Lengths": (b"Content-Length: 5\r\n", b"Duplicate Content-Length"),
    "a header over 8190 bytes": (
        b"X-Big: " + b"a" * 9000 + b"\r\n",
        b"Got more than 8190 bytes when reading",
    ),
    "129 headers": (
        b"".join(b"X-H%d: v\r\n" % i for i in range(129)),
        b"Too many headers received",
    ),
}


@pytest.mark.parametrize("case", sorted(PARSER_CASES))
def test_malformed_http_is_refused_in_an_sdk_error_shape_and_nothing_recorded(taplog, fake, case):
    extra, kind = PARSER_CASES[case]
    status, headers, body = _raw(taplog.url, _post(b"/v1/chat/completions", extra))
    assert (status, headers["x-taplog-error"]) == (400, "malformed_request")
    assert orjson.loads(body) == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"taplog: malformed HTTP request: {kind.decode()}",
            "param": None,
            "code": "malformed_request",
        },
    }
    assert fake.requests == [] and taplog.sessions() == {}
    _still_serving(taplog)


@pytest.mark.parametrize(
    "request_bytes",
    [
        _post(b"/v1/chat/completions?" + b"q" * 9000),  # request line over 8190 bytes
        _post(b"/v1/chat/completions", b"Transfer-Encoding: chunked\r\n" * 2, length=False),
        _post(b"/v1/chat/completions", b"Transfer-Encoding: gzip, chunked\r\n", length=False),
        b"POST @evil.example/v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n",
    ],
    ids=["long request line", "two Transfer-Encodings", "gzip, chunked", "@host target"],
)
def test_other_framing_attacks_are_refused_with_a_400(taplog, fake, request_bytes):
    status, headers, _ = _raw(taplog.url, request_bytes)
    assert status == 400 and headers["content-type"] == "application/json"
    assert fake.requests == []
    _still_serving(taplog)


@pytest.mark.parametrize(
    "broken_line",
    [
        b"Authorization: Bearer %s\x00\r\n",
        b"X-A: a\nAuthorization: Bearer %s\r\n",
        b"Authorization: Bearer %s" + b"a" * 9000 + b"\r\n",
    ],
    ids=["NUL", "bare LF", "too long"],
)
def test_a_malformed_line_carrying_a_key_is_echoed_neither_to_the_client_nor_the_log(
    taplog, fake, caplog, capfd, broken_line
):
    canary = b"sk-canary-malformed-0123456789"
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + broken_line % canary
    status, _, body = _raw(taplog.url, request + b"Content-Length: 0\r\n\r\n")
    assert status == 400 and b"malformed HTTP request" in body
    assert canary not in body
    seen = caplog.text + "".join(capfd.readouterr())
    assert "refused a malformed request" in caplog.text
    assert canary.decode() not in seen and "Traceback" not in seen
    _still_serving(taplog)


# -- odd bodies and headers: forwarded exactly, recorded safely ----------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"model":"gpt-4.1","messages":[{"role":"user","content":"h\xff\xfe"}]}',
        b'{"model":"gpt-4.1","x":' + b"[" * 300 + b"]" * 300 + b"}",
        b'{"model":"gpt-4.1","x":' + b"[" * 5000 + b"]" * 5000 + b"}",
        b'{"model":"gpt-4.1","messages":[{"role":"user","content":"\\ud800"}]}',
    ],
    ids=["invalid UTF-8", "nested 300 deep", "nested 5000 deep", "a lone surrogate escape"],
)
def test_odd_bodies_are_forwarded_byte_exact_and_recorded_exactly(taplog, fake, body):
    status, _, _ = _raw(taplog.url, _post(b"/s/odd/v1/chat/completions", body=body))
    assert status in (200, 400)  # the fake's verdict on the body, passed through
    (seen,) = fake.requests
    assert seen.body == body
    (request,) = taplog.events("llm.request")
    assert decode_body(request) == body
    _still_serving(taplog)


def test_undecodable_header_bytes_are_forwarded_and_recorded_escaped(taplog, fake):
    extra = b"X-Odd: caf\xe9 \xff\r\n"
    status, _, _ = _raw(taplog.url, _post(b"/s/odd/v1/chat/completions", extra))
    assert status == 200
    (request,) = taplog.events("llm.request")
    assert request["headers"]["x-odd"] == "caf\\udce9 \\udcff"
    assert "surrogates" in request["sanitised"]
    _still_serving(taplog)


def test_a_client_too_slow_to_send_its_body_gets_408_and_nothing_reaches_a_vendor(
    servers, fake, tmp_path
):
    taplog = start_taplog(
        servers, tmp_path / "data", openai_base=f"{fake.url}/v1", body_timeout=0.3
    )
    head = _post(b"/v1/chat/completions", body=b"").replace(
        b"Content-Length: 0", b"Content-Length: %d" % len(BODY)
    )
    status, headers, body = _raw(taplog.url, head + BODY[:10])  # the rest never comes
    assert (status, headers["x-taplog-error"], headers["connection"]) == (
        408,
        "request_timeout",
        "close",
    )
    _openai_error(
        body, "request_timeout", "request body not received within 0.3 s (--body-timeout)"
    )
    assert fake.requests == [] and taplog.sessions() == {}
    _still_serving(taplog)


def _closed_by_peer(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    try:
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


def test_a_client_trickling_its_headers_is_disconnected_after_the_header_timeout(
    servers, fake, tmp_path
):
    taplog = start_taplog(
        servers, tmp_path / "data", openai_base=f"{fake.url}/v1", header_timeout=1.0
    )
    host, port = taplog.url.removeprefix("http://").split(":")
    started, closed_after = time.monotonic(), None
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
        for n in range(50):  # a header line every 0.1 s: 5 s unless cut off
            if n == 3:
                _still_serving(taplog)  # others are served meanwhile
            time.sleep(0.1)
            try:
                sock.sendall(b"X-Slow-%d: a\r\n" % n)
            except OSError:
                closed_after = time.monotonic() - started
                break
            if _closed_by_peer(sock):
                closed_after = time.monotonic() - started
                break
    assert closed_after is not None and 0.9 < closed_after < 3.5
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"]  # only the normal call
    _still_serving(taplog)


@pytest.mark.parametrize(
    "base",
    [
        "http://2852039166/v1",
        "http://0xa9.0xfe.0xa9.0xfe/v1",
        "http://0251.0376.0251.0376/v1",
        "http://[::ffff:169.254.169.254]/v1",
        "http://169.254.169.254./v1",
        "http://[fe80::1]/v1",
        "http://metadata.google.internal/computeMetadata/v1",
    ],
)
def test_a_metadata_address_in_any_spelling_is_refused_as_a_base(base):
    with pytest.raises(ConfigError, match="TAPLOG_OPENAI_BASE: must not point at a cloud metadata"):
        load({}, {"TAPLOG_OPENAI_BASE": base}, None)
    assert load({}, {"TAPLOG_OPENAI_BASE": "http://10.0.0.7:8000/v1"}, None)


@pytest.mark.parametrize(
    ("request_bytes", "status", "shape"),
    [
        (
            b"GET /v1/chat%0acompletions HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            404,
            "openai",
        ),
        (_post(b"/s/x%0Ay/v1/messages"), 404, "anthropic"),
        (b"CONNECT /v1/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 404, "openai"),
    ],
    ids=["line break in the path", "line break in a session prefix", "CONNECT"],
)
def test_answers_taplog_makes_itself_are_json_in_the_clients_shape(
    taplog, fake, request_bytes, status, shape
):
    answered, headers, body = _raw(taplog.url, request_bytes)
    assert (answered, headers["content-type"]) == (status, "application/json")
    error = orjson.loads(body)
    if shape == "anthropic":
        assert error["type"] == "error" and error["error"]["type"] == "not_found_error"
    else:
        assert error["error"]["code"] == "not_found"
    assert fake.requests == [] and taplog.sessions() == {}
    _still_serving(taplog)


def test_a_declared_length_over_the_limit_gets_413_at_once(taplog, fake):
    head = _post(b"/v1/chat/completions", body=b"").replace(
        b"Content-Length: 0", b"Content-Length: 99000000000"
    )
    started = time.monotonic()
    status, headers, body = _raw(taplog.url, head + BODY)  # 99 GB announced, never sent
    assert time.monotonic() - started < 1  # not after --body-timeout
    assert (status, headers["x-taplog-error"]) == (413, "request_too_large")
    _openai_error(
        body, "request_too_large", "request body is over the 64 MiB limit (--max-body-mb)"
    )
    assert fake.requests == [] and taplog.sessions() == {}
    _still_serving(taplog)
