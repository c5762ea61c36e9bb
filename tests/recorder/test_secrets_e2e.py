"""The client's own key, however it travels and however it comes back, is nowhere taplog
writes (issue 30, item 5).

`taplog serve` runs in front of the fake vendor and the official SDKs call it with a fresh
random key shaped like no known credential, so only the by-value net can catch it. The
key goes out in headers and query parameters of any name, in base64 (alone, after
`user:`, at any offset of an encoded text) and comes back in answers, streamed or not,
cut across events where the key is split. The client gets every byte; then the data dir
(every file bytewise, the Parquet of `taplog compact` read back through DuckDB and
`taplog sql`), stderr and /metrics are searched for the key, its first 8 characters and
its base64 encodings at each alignment.
"""

from __future__ import annotations

import base64
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import duckdb
import openai
import orjson
import pytest

from taplog.recorder.query.compaction import compact
from tests.disk import readable
from tests.fakes.clients import Scrape, sql_rows
from tests.fakes.harness import TaplogProcess, serve_on_fake
from tests.fakes.keys import key_traces
from tests.fakes.vendor import FakeVendor, strip_directives

APIS = ("openai.chat", "openai.responses", "anthropic.messages")
ODD_HEADERS = ("x-csrf", "x-stainless-foo", "x-request-context")
ODD_PARAMS = ("bearer", "x", "q2")


def new_key() -> str:
    """A key of no known shape (lower case and digits: not even `sk-…` with mixed case)."""
    return "tk-" + secrets.token_hex(20)


def b64(text: str, urlsafe: bool = False, padded: bool = True) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    encoded = encode(text.encode()).decode()
    return encoded if padded else encoded.rstrip("=")


@pytest.fixture
def proxy(fake: FakeVendor, tmp_path) -> Iterator[tuple[TaplogProcess, Path]]:
    """`taplog serve` on the fake vendor, logging at debug level; bodies over 2 KiB (and
    streams) go to blobs, so both places are searched."""
    data = tmp_path / "data"
    served = serve_on_fake(
        fake, data, "--log-level", "debug", "--log-format", "json", "--body-inline-max-kb", "2"
    )
    yield served, data
    if served.process.poll() is None:
        served.stop()


def ask(url: str, api: str, key: str, prompt: str, stream: bool, odd: bool = False) -> str:
    """One call with the official SDK keyed with `key`; with `odd`, the key also goes in
    headers and query parameters of unusual names. The text the client got."""
    headers = {name: key for name in ODD_HEADERS} if odd else {}
    if odd:
        headers["x-odd-basic"] = "Basic " + b64(f"user:{key}")
        headers["user-agent"] = f"agent/1.0 ({key})"  # also in the session's first event
    query = {name: key for name in ODD_PARAMS} | {"b": b64(key, True, False)} if odd else {}
    if api == "anthropic.messages":
        claude = anthropic.Anthropic(
            base_url=url, api_key=key, max_retries=0, default_headers=headers
        )
        options = {"model": "claude-sonnet-4-6", "max_tokens": 64, "extra_query": query}
        messages = [{"role": "user", "content": prompt}]
        if not stream:
            return claude.messages.create(messages=messages, **options).content[0].text
        with claude.messages.stream(messages=messages, **options) as answer:
            return answer.get_final_message().content[0].text
    gpt = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, default_headers=headers)
    if api == "openai.responses":
        if not stream:
            return gpt.responses.create(
                model="gpt-4.1", input=prompt, extra_query=query
            ).output_text
        with gpt.responses.stream(model="gpt-4.1", input=prompt, extra_query=query) as answer:
            return answer.get_final_response().output_text
    messages = [{"role": "user", "content": prompt}]
    if not stream:
        answer = gpt.chat.completions.create(model="gpt-4.1", messages=messages, extra_query=query)
        return answer.choices[0].message.content
    with gpt.chat.completions.stream(model="gpt-4.1", messages=messages, extra_query=query) as s:
        return s.get_final_completion().choices[0].message.content


def written(served: TaplogProcess, data: Path, calls: int) -> dict[str, bytes]:
    """Everything a user could look at once the calls are in: /metrics, stderr, every file
    under the data dir after `taplog compact`, its Parquet read back, `taplog sql`."""
    deadline = time.monotonic() + 10
    while (scrape := Scrape(served.url)).value("taplog_calls_total") < calls:
        assert time.monotonic() < deadline, scrape.text
        time.sleep(0.1)
    code, err = served.stop()
    assert code == 0, err
    assert compact(data, 0)
    places = {"stderr": err.encode(), "/metrics": scrape.text.encode()}
    places |= {str(path): readable(path) for path in data.rglob("*") if path.is_file()}
    for segment in (data / "compacted").glob("*.parquet"):
        rows = duckdb.sql(f"SELECT * FROM read_parquet('{segment}')").fetchall()
        places[f"{segment} read back"] = orjson.dumps(rows, default=str)
    rows = sql_rows(data, "SELECT * FROM events")
    assert any(row["type"] == "llm.response" for row in rows)
    places["taplog sql"] = orjson.dumps(rows)
    return places


def assert_nowhere(places: dict[str, bytes], keys: list[str]) -> None:
    for key in keys:
        for trace in key_traces(key):
            for where, content in places.items():
                at = content.find(trace.encode())
                seen = content[max(0, at - 120) : at + 60]
                assert at < 0, f"{trace!r} (of {key}) in {where}: …{seen!r}…"


def recorded_events(data: Path) -> list[dict]:
    """The raw stream events the log holds (inline or in blobs), each parsed: all JSON."""
    rows = sql_rows(data, "SELECT data FROM events WHERE type = 'llm.response'")
    found = []
    for row in rows:
        data = row["data"] if isinstance(row["data"], dict) else orjson.loads(row["data"])
        for entry in data.get("sse") or []:
            for line in entry["raw"].splitlines():
                if line.startswith("data: {"):
                    found.append(orjson.loads(line[6:]))
    return found


@pytest.mark.parametrize("api", APIS)
def test_the_key_under_headers_and_parameters_of_any_name_is_logged_nowhere(proxy, api):
    served, data = proxy
    keys = [new_key(), new_key()]
    for stream, key in zip((False, True), keys, strict=True):
        text = ask(served.url, api, key, "hello", stream, odd=True)
        assert text == "Echo: hello"
    assert_nowhere(written(served, data, 2), keys)


@pytest.mark.parametrize("api", APIS)
def test_a_key_echoed_across_stream_events_is_cut_out_of_every_event(proxy, api):
    served, data = proxy
    keys = []
    for piece in (1, 8, 21, 42):  # the key is 43 characters: split near each end and between
        key = new_key()
        prompt = f"repeat {key} back"
        at = ("Echo: " + prompt).index(key)
        text = ask(served.url, api, key, f"{prompt} !cuts={at + piece}", stream=True)
        assert text == f"Echo: {prompt}"  # the client got the key whole
        keys.append(key)
    key = new_key()  # in three pieces, in an answer large enough for a blob
    prompt = f"repeat {key} back {'and more ' * 300}"
    at = ("Echo: " + strip_directives(prompt)).index(key)
    text = ask(served.url, api, key, f"{prompt} !cuts={at + 5},{at + 30}", stream=True)
    assert key in text
    keys.append(key)
    assert_nowhere(written(served, data, len(keys)), keys)
    events = recorded_events(data)
    assert events and "[redacted]" in orjson.dumps(events).decode()


@pytest.mark.parametrize("api", APIS)
def test_base64_forms_of_the_key_in_bodies_and_streams_are_logged_nowhere(proxy, api):
    served, data = proxy
    keys = []
    for stream in (False, True):
        for prefix in ("", "u:", "user:", "x"):  # each alignment of the key in the encoding
            key = new_key()
            forms = [
                b64(prefix + key),
                b64(prefix + key, padded=False),
                b64(f"{prefix}{key} and more", urlsafe=True),
                b64(prefix + key + "?", urlsafe=True, padded=False),
            ]
            prompt = "decode " + " or ".join(forms)
            at = ("Echo: " + prompt).index(forms[1]) + 9  # a cut inside the encoded key
            text = ask(served.url, api, key, f"{prompt} !cuts={at}", stream)
            assert text == f"Echo: {prompt}"
            keys.append(key)
    assert_nowhere(written(served, data, len(keys)), keys)
