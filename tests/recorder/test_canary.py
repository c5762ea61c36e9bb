"""Canary secrets planted everywhere a key can come from appear nowhere taplog writes.

Planted: the inbound token (taplog's own secret), a fallback key from the
environment (the config's secret), a client's vendor key in its headers, and
both keys echoed back by a vendor in its error bodies. Searched: every file in
the data dir (sessions, quarantine, Parquet segments, read back through DuckDB
as well), /metrics, stderr at debug level, and every answer taplog made itself.
"""

from __future__ import annotations

import socket
import time

import duckdb
import httpx
import openai
import orjson
import pytest
from aiohttp import web

from taplog.recorder.query.compaction import compact
from tests.builders import HELLO
from tests.disk import logs, readable
from tests.fakes.harness import TaplogProcess, taplog_env

TOKEN = "canary-token-7f3a9c1e5b2d4f6a8c0e"
FALLBACK_KEY = "sk-ant-canary-fallback-2b4d6f8a0c1e3a5c"
CLIENT_KEY = "sk-canary-client-9e8d7c6b5a4f3e2d1c0b"
CANARIES = (TOKEN, FALLBACK_KEY, CLIENT_KEY)


def _key(request: web.Request) -> str:
    return request.headers.get("x-api-key") or request.headers.get("authorization", "")[7:]


async def _vendor(request: web.Request) -> web.Response:
    """Answers "ok" prompts, fails "fail" prompts, and echoes the key it got otherwise."""
    body = await request.read()
    key = _key(request)
    if request.path == "/v1/messages":
        error = {"type": "authentication_error", "message": f"invalid x-api-key: {key}"}
        return web.json_response({"type": "error", "error": error}, status=401)
    if b"fail" in body:
        return web.json_response({"error": {"message": "down", "type": "server_error"}}, status=500)
    if b"ok" in body:
        message = {"role": "assistant", "content": "fine"}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        answer = {"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-4.1"}
        return web.json_response({**answer, "choices": [choice]})
    error = {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}
    return web.json_response({"error": {**error, "type": "invalid_request_error"}}, status=401)


@pytest.fixture
def vendor(servers) -> str:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _vendor)
    return servers.serve(app)


def _assert_clean(where: str, text: str | bytes) -> None:
    data = text.encode() if isinstance(text, str) else text
    for canary in CANARIES:
        assert canary.encode() not in data, f"{canary} found in {where}"
        assert canary[:16].encode() not in data, f"a prefix of {canary} found in {where}"


def _malformed(url: str) -> bytes:
    """Send a request whose broken Authorization line holds a key; taplog's answer."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
            b"Authorization: Bearer " + CLIENT_KEY.encode() + b"\x00\r\n\r\n"
        )
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_planted_keys_and_tokens_appear_nowhere_taplog_writes(vendor, tmp_path):
    data = tmp_path / "data"
    env = taplog_env(TAPLOG_AUTH_TOKEN=TOKEN, ANTHROPIC_API_KEY=FALLBACK_KEY)
    served = TaplogProcess(
        "--data-dir",
        str(data),
        "--openai-base",
        f"{vendor}/v1",
        "--anthropic-base",
        vendor,
        "--fallback",
        "gpt-*=anthropic:claude-sonnet-4-6",
        "--log-level",
        "debug",
        "--log-format",
        "json",
        env=env,
    )
    url = served.openai_base.removesuffix("/t/$TAPLOG_AUTH_TOKEN/v1")
    client = openai.OpenAI(base_url=f"{url}/t/{TOKEN}/v1", api_key=CLIENT_KEY, max_retries=0)
    own_answers: list[bytes] = []
    try:
        client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "ok"}]
        )
        with pytest.raises(openai.AuthenticationError) as echoed:
            client.chat.completions.create(model="gpt-4.1", messages=HELLO)
        assert CLIENT_KEY in echoed.value.message  # the vendor's own answer, passed on as sent
        with pytest.raises(openai.APIStatusError) as failed_over:
            client.chat.completions.create(
                model="gpt-4.1", messages=[{"role": "user", "content": "fail"}]
            )
        own_answers.append(failed_over.value.response.content)  # built from the fallback's
        for path in ("/v1/chat/completions", "/t/wrong-token-000000000000/v1/models", "/metrics"):
            own_answers.append(
                httpx.post(f"{url}{path}", headers={"x-api-key": CLIENT_KEY}).content
            )
        own_answers.append(httpx.get(f"{url}/t/{TOKEN}/v1/../x").content)
        own_answers.append(_malformed(url))
        deadline = time.monotonic() + 10
        metrics = ""
        while metrics.count("outcome=") < 3 and time.monotonic() < deadline:
            metrics = httpx.get(f"{url}/metrics", headers={"X-Taplog-Token": TOKEN}).text
            time.sleep(0.05)
        own_answers.append(httpx.get(f"{url}/readyz").content)
    finally:
        code, err = served.stop()
    assert code == 0, err
    assert "refused a malformed request from 127.0.0.1: Invalid header value char" in err
    _assert_clean("stderr", err)
    _assert_clean("/metrics", metrics)
    for answer in own_answers:
        _assert_clean(f"taplog's answer {answer[:60]!r}", answer)

    assert compact(data, 0)  # Parquet segments of every session
    files = [p for p in data.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and (data / "quarantine").is_dir()
    for path in files:
        _assert_clean(str(path), readable(path))
    for segment in (data / "compacted").glob("*.parquet"):
        rows = duckdb.sql(f"SELECT * FROM read_parquet('{segment}')").fetchall()
        _assert_clean(f"{segment} read back", orjson.dumps(rows, default=str))
    logged = b"".join(readable(p) for p in logs(data))
    assert logged.count(b"[redacted]") >= 2  # both echoes were there, and were scrubbed
