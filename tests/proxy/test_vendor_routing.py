"""Each call goes to the vendor whose API it speaks, and a key only to the vendor it was sent
for: the official SDKs through taplog in front of two fake vendors, one per provider.

The SDK-wide sweep (every resource method of both SDKs) is tests/e2e/test_sdk_surface.py;
these are the rules one by one, and the near misses (a doubled /v1, a base URL probe).
"""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx
import openai
import pytest

from tests.disk import logs
from tests.fakes.harness import Taplog, Vendors, start_taplog
from tests.fakes.servers import ServerThread
from tests.fakes.vendor import FakeVendor

# Keys in the vendors' real shapes (the tests' usual keys prove nothing by shape).
ANTHROPIC_KEY = "sk-ant-api03-" + "Zr8f" * 20
OPENAI_KEY = "sk-proj-" + "Qw3e" * 12 + "T3BlbkFJ" + "x9Yz" * 6


@pytest.fixture
def two(servers: ServerThread, vendors: Vendors, tmp_path: Path) -> Taplog:
    """taplog with each provider at its own fake vendor."""
    return start_taplog(
        servers,
        tmp_path,
        openai_base=f"{vendors.openai.url}/v1",
        anthropic_base=vendors.anthropic.url,
    )


def _paths(fake: FakeVendor) -> list[str]:
    return [f"{r.method} {r.path}" for r in fake.requests]


def _key(received) -> str | None:
    """The key a vendor received, in either auth style (the newest SDKs send Bearer)."""
    return received.headers.get("x-api-key") or received.headers["authorization"][7:]


def _session_files(taplog: Taplog) -> list[Path]:
    taplog.flush()
    return logs(taplog.data_dir)


def _requests(taplog: Taplog) -> list[dict]:
    return taplog.events("llm.request")


def test_every_anthropic_sdk_call_goes_to_anthropic_with_its_key(two, vendors):
    client = anthropic.Anthropic(base_url=two.url, api_key=ANTHROPIC_KEY, max_retries=0)
    client.models.list()
    client.messages.count_tokens(
        model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}]
    )
    client.messages.create(
        model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
    )
    with pytest.raises(anthropic.NotFoundError):  # the fake serves no files: its 404 comes back
        client.beta.files.list()
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.list()

    assert _paths(vendors.openai) == []
    assert _paths(vendors.anthropic) == [
        "GET /v1/models",
        "POST /v1/messages/count_tokens",
        "POST /v1/messages",
        "GET /v1/files",
        "GET /v1/skills",
    ]
    assert all(_key(r) == ANTHROPIC_KEY for r in vendors.anthropic.requests)
    two.wait_responses(5)
    logged = sorted((r["provider"], r["api"], r["path"]) for r in _requests(two))
    reached = [r.path + (f"?{r.query}" if r.query else "") for r in vendors.anthropic.requests]
    apis = ["passthrough", "passthrough", "anthropic.messages", "passthrough", "passthrough"]
    assert logged == sorted(
        ("anthropic", api, path) for api, path in zip(apis, reached, strict=True)
    )


def test_openai_sdk_calls_on_shared_paths_stay_with_openai(two, vendors):
    client = openai.OpenAI(base_url=f"{two.url}/v1", api_key=OPENAI_KEY, max_retries=0)
    assert [m.id for m in client.models.list()]
    with pytest.raises(openai.NotFoundError):
        client.files.list()
    assert _paths(vendors.anthropic) == []
    assert _paths(vendors.openai) == ["GET /v1/models", "GET /v1/files"]
    assert all(_key(r) == OPENAI_KEY for r in vendors.openai.requests)


def test_the_legacy_complete_call_goes_to_anthropic(two, vendors):
    """`/v1/complete` (the Text Completions API) is Anthropic's alone, whatever the headers."""
    httpx.post(
        f"{two.url}/v1/complete",
        json={"model": "claude-2.1", "prompt": "\n\nHuman: hi\n\nAssistant:"},
        headers={"authorization": "Bearer some-gateway-token"},
    )
    assert _paths(vendors.openai) == []
    assert _paths(vendors.anthropic) == ["POST /v1/complete"]


def test_an_x_api_key_alone_speaks_anthropic_where_no_path_decides(two, vendors):
    """On a path both vendors serve, `x-api-key` without a bearer token is Anthropic's way;
    on OpenAI's own model paths (gateways that take `x-api-key`) the path decides."""
    keyed = {"x-api-key": "a-key-of-some-shape"}
    httpx.get(f"{two.url}/v1/models", headers=keyed)
    httpx.post(f"{two.url}/v1/chat/completions", json={"model": "gpt-4.1"}, headers=keyed)
    assert _paths(vendors.openai) == ["POST /v1/chat/completions"]
    assert _paths(vendors.anthropic) == ["GET /v1/models"]


def test_an_anthropic_key_in_an_openai_client_is_refused_and_nothing_sent(two, vendors):
    client = openai.OpenAI(base_url=f"{two.url}/v1", api_key=ANTHROPIC_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="gpt-4.1", messages=[{"role": "user", "content": "hi"}]
        )
    message = refused.value.message
    assert "an Anthropic key" in message and "ANTHROPIC_BASE_URL" in message
    assert ANTHROPIC_KEY[:16] not in message
    assert refused.value.code == "key_for_another_vendor"
    assert _paths(vendors.openai) == _paths(vendors.anthropic) == []
    assert _session_files(two) == []
    metrics = httpx.get(f"{two.url}/metrics").text
    assert 'taplog_calls_refused_total{reason="key_for_another_vendor"} 1.0' in metrics


def test_an_openai_key_in_an_anthropic_client_is_refused_and_nothing_sent(two, vendors):
    client = anthropic.Anthropic(base_url=two.url, api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.models.list()
    assert "an OpenAI key" in refused.value.message
    assert "OPENAI_BASE_URL" in refused.value.message
    assert _paths(vendors.openai) == _paths(vendors.anthropic) == []
    assert _session_files(two) == []


def test_a_key_may_go_where_its_vendor_is_configured(servers, vendors, tmp_path):
    """An OpenAI client keyed for Anthropic's OpenAI-compatible endpoint: `openai_base` set to
    the Anthropic upstream says that is where such keys go."""
    taplog = start_taplog(
        servers,
        tmp_path,
        openai_base=f"{vendors.anthropic.url}/v1",
        anthropic_base=vendors.anthropic.url,
    )
    client = openai.OpenAI(base_url=f"{taplog.url}/v1", api_key=ANTHROPIC_KEY, max_retries=0)
    answer = client.chat.completions.create(
        model="claude-sonnet-4-6", messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content == "Echo: hi"
    assert _paths(vendors.anthropic) == ["POST /v1/chat/completions"]


def test_a_doubled_v1_is_refused_naming_the_base_url(two, vendors):
    client = anthropic.Anthropic(base_url=f"{two.url}/v1", api_key=ANTHROPIC_KEY, max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model="claude-sonnet-4-6", max_tokens=50, messages=[{"role": "user", "content": "hi"}]
        )
    assert f"set ANTHROPIC_BASE_URL={two.url} (" in refused.value.message
    openai_client = openai.OpenAI(base_url=f"{two.url}/v1/v1", api_key=OPENAI_KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client.models.list()
    assert refused.value.message.endswith(f"set OPENAI_BASE_URL={two.url}/v1")
    assert _paths(vendors.openai) == _paths(vendors.anthropic) == []
    assert _session_files(two) == []


def test_a_doubled_v1_keeps_the_session_and_names_no_token(servers, vendors, tmp_path):
    taplog = start_taplog(
        servers,
        tmp_path,
        openai_base=f"{vendors.openai.url}/v1",
        anthropic_base=vendors.anthropic.url,
        auth_token="inbound-token-0123456789",
    )
    answer = httpx.post(
        f"{taplog.url}/t/inbound-token-0123456789/s/my-run/v1/v1/messages",
        json={"model": "claude-sonnet-4-6", "max_tokens": 5, "messages": []},
        headers={"anthropic-version": "2023-06-01", "x-api-key": ANTHROPIC_KEY},
    )
    assert answer.status_code == 400
    message = answer.json()["error"]["message"]
    assert message.endswith(f"ANTHROPIC_BASE_URL={taplog.url}/t/<token>/s/my-run")
    assert "inbound-token" not in message


def test_batch_results_fetched_on_the_base_url_pass_through_taplog(two, vendors):
    """The docs' way to download a batch's results through taplog (the SDK's `results()`
    follows the absolute `results_url`, past taplog)."""
    client = anthropic.Anthropic(base_url=two.url, api_key=ANTHROPIC_KEY, max_retries=0)
    with pytest.raises(anthropic.NotFoundError):  # the fake has no batches; it was reached
        client.get("/v1/messages/batches/msgbatch_01/results", cast_to=str)
    assert _paths(vendors.anthropic) == ["GET /v1/messages/batches/msgbatch_01/results"]
    two.wait_responses(1)
    [logged] = _requests(two)
    assert (logged["provider"], logged["path"]) == (
        "anthropic",
        "/v1/messages/batches/msgbatch_01/results",
    )


@pytest.mark.parametrize("method", ["HEAD", "GET"])
@pytest.mark.parametrize("path", ["/", "/v1", "/v1/", "/s/my-run", "/s/my-run/v1"])
def test_a_base_url_probe_is_answered_here_and_makes_no_session(two, vendors, method, path):
    answer = httpx.request(method, two.url + path, headers={"x-api-key": ANTHROPIC_KEY})
    assert answer.status_code == 200
    assert _paths(vendors.openai) == _paths(vendors.anthropic) == []
    assert _session_files(two) == []
