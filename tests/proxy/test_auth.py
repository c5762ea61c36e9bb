"""Inbound tokens: unchanged SDKs get in with a base URL, nobody else does, nothing leaks."""

from __future__ import annotations

import subprocess

import anthropic
import httpx
import openai
import pytest

from taplog.proxy import auth
from taplog.proxy.auth import Tokens
from taplog.proxy.config import ConfigError, Settings, load, read_config_file
from tests.builders import HELLO
from tests.disk import readable
from tests.fakes.harness import TAPLOG, TaplogProcess, start_on_fake, taplog_env
from tests.fakes.keys import ANTHROPIC_KEY, OPENAI_KEY

TOKEN = "tok-0123456789abcdef-first"
OTHER = "tok-fedcba9876543210-second"


@pytest.fixture
def guarded(servers, fake, tmp_path):
    return start_on_fake(servers, fake, tmp_path / "data", auth_token=f"{TOKEN},{OTHER}")


def _oai(base: str, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key=OPENAI_KEY, max_retries=0, **kwargs)


def _ant(base: str, **kwargs) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base, api_key=ANTHROPIC_KEY, max_retries=0, **kwargs)


def _everything_taplog_wrote(taplog) -> bytes:
    taplog.flush()
    return b"".join(readable(p) for p in taplog.data_dir.rglob("*") if p.is_file())


def test_unchanged_sdks_get_in_with_a_token_in_the_base_url_or_a_header(guarded, fake):
    chat = _oai(f"{guarded.url}/t/{TOKEN}/v1").chat.completions.create(
        model="gpt-4.1", messages=HELLO
    )
    assert chat.choices[0].message.content == "Echo: hello"
    named = _oai(f"{guarded.url}/t/{OTHER}/s/named-run/v1")  # any configured token; a session
    named.chat.completions.create(model="gpt-4.1", messages=HELLO)
    message = _ant(f"{guarded.url}/t/{TOKEN}").messages.create(
        model="claude-sonnet-4-6", max_tokens=9, messages=HELLO
    )
    assert message.content[0].text == "Echo: hello"
    header = _oai(f"{guarded.url}/v1", default_headers={"X-Taplog-Token": OTHER})
    header.chat.completions.create(model="gpt-4.1", messages=HELLO)

    assert [r.path for r in fake.requests] == [
        "/v1/chat/completions",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/chat/completions",
    ]
    for seen in fake.requests:  # the token never goes upstream
        assert not any(k.lower() == "x-taplog-token" for k in seen.headers)
        assert TOKEN not in str(seen.headers) and OTHER not in str(seen.headers)
    sessions = guarded.wait_responses(4)
    assert "named-run" in sessions
    paths = [e["path"] for evs in sessions.values() for e in evs if e["type"] == "llm.request"]
    assert sorted(paths) == sorted(["/v1/chat/completions"] * 3 + ["/v1/messages"])
    written = _everything_taplog_wrote(guarded)
    assert TOKEN.encode() not in written and OTHER.encode() not in written


@pytest.mark.parametrize(
    "where",
    ["none", "wrong path token", "wrong header", "token prefix", "token in another case"],
)
def test_a_missing_or_wrong_token_gets_401_in_each_api_shape_and_nothing_is_recorded(
    guarded, fake, where
):
    base, headers = {
        "none": (guarded.url, {}),
        "wrong path token": (f"{guarded.url}/t/{'x' * len(TOKEN)}", {}),
        "wrong header": (guarded.url, {"X-Taplog-Token": TOKEN + "x"}),
        "token prefix": (f"{guarded.url}/t/{TOKEN[:-1]}", {}),
        "token in another case": (f"{guarded.url}/t/{TOKEN.upper()}", {}),
    }[where]
    with pytest.raises(openai.AuthenticationError) as caught:
        _oai(f"{base}/v1", default_headers=headers).chat.completions.create(
            model="gpt-4.1", messages=HELLO
        )
    assert caught.value.status_code == 401
    assert caught.value.body == {
        "message": f"taplog: {auth.REFUSED}",
        "type": "invalid_request_error",
        "param": None,
        "code": "unauthorized",
    }
    with pytest.raises(anthropic.AuthenticationError) as caught:
        _ant(base, default_headers=headers).messages.create(
            model="claude-sonnet-4-6", max_tokens=5, messages=HELLO
        )
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "authentication_error", "message": f"taplog: {auth.REFUSED}"},
    }
    assert TOKEN not in caught.value.response.text
    assert fake.requests == []
    assert guarded.sessions() == {}
    # A bad path is still a 401 first: nothing about routing is revealed.
    assert httpx.get(f"{guarded.url}/v1/../x").status_code == 401
    _oai(f"{guarded.url}/t/{TOKEN}/v1").chat.completions.create(model="gpt-4.1", messages=HELLO)


def test_metrics_need_a_token_too_and_count_refusals(guarded):
    httpx.get(f"{guarded.url}/v1/models")
    assert httpx.get(f"{guarded.url}/metrics").status_code == 401
    assert httpx.get(f"{guarded.url}/t/wrong-token-0123456789/metrics").status_code == 401
    for response in (
        httpx.get(f"{guarded.url}/metrics", headers={"X-Taplog-Token": TOKEN}),
        httpx.get(f"{guarded.url}/metrics", headers={"Authorization": f"Bearer {OTHER}"}),
        httpx.get(f"{guarded.url}/t/{TOKEN}/metrics"),
    ):
        assert response.status_code == 200
        assert 'taplog_calls_refused_total{reason="unauthorized"} 2.0' in response.text
        assert TOKEN not in response.text and OTHER not in response.text
    assert httpx.get(f"{guarded.url}/healthz").status_code == 200  # probes stay open
    assert httpx.get(f"{guarded.url}/readyz").status_code == 200


def test_a_path_token_never_reaches_a_vendor_even_when_none_is_required(taplog, fake):
    client = _oai(f"{taplog.url}/t/{TOKEN}/v1")
    client.chat.completions.create(model="gpt-4.1", messages=HELLO)
    assert [r.path for r in fake.requests] == ["/v1/chat/completions"]
    assert TOKEN.encode() not in _everything_taplog_wrote(taplog)


def test_every_configured_token_is_compared_in_constant_time(monkeypatch):
    compared = []

    def spy(a: bytes, b: bytes) -> bool:
        compared.append(b)
        return a == b

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    tokens = Tokens([TOKEN, OTHER])
    assert tokens.accepts(TOKEN) and compared == [TOKEN.encode(), OTHER.encode()]
    assert not tokens.accepts(None, "", "nope\udcff")
    assert Tokens([]).accepts(None)  # none configured: loopback use, as before


# -- binding -------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "taplog.internal"])
def test_serve_refuses_to_listen_beyond_loopback_without_tokens(tmp_path, host):
    result = subprocess.run(
        [TAPLOG, "serve", "--host", host, "--port", "0", "--data-dir", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=20,
        env=taplog_env(),
    )
    assert result.returncode == 1
    assert "refusing to listen on" in result.stderr and "without inbound tokens" in result.stderr
    assert "TAPLOG_AUTH_TOKEN" in result.stderr and "--insecure-no-auth" in result.stderr
    assert not (tmp_path / "d").exists()


def test_the_opt_out_starts_but_says_so_loudly(fake, tmp_path):
    served = TaplogProcess(
        "--host",
        "0.0.0.0",
        "--insecure-no-auth",
        "--data-dir",
        str(tmp_path / "d"),
        "--openai-base",
        f"{fake.url}/v1",
    )
    try:
        _oai(served.openai_base).chat.completions.create(model="gpt-4.1", messages=HELLO)
    finally:
        code, err = served.stop()
    assert code == 0
    assert "ERROR" in err and "INSECURE: listening on 0.0.0.0 without inbound tokens" in err


def test_loopback_needs_no_token_and_a_token_from_the_environment_is_used(fake, tmp_path):
    served = TaplogProcess(
        "--data-dir",
        str(tmp_path / "d"),
        "--openai-base",
        f"{fake.url}/v1",
        env=taplog_env(TAPLOG_AUTH_TOKEN=TOKEN),
    )
    try:
        assert served.openai_base.endswith("/t/$TAPLOG_AUTH_TOKEN/v1")
        url = served.openai_base.removesuffix("/t/$TAPLOG_AUTH_TOKEN/v1")
        with pytest.raises(openai.AuthenticationError):
            _oai(f"{url}/v1").chat.completions.create(model="gpt-4.1", messages=HELLO)
        _oai(f"{url}/t/{TOKEN}/v1").chat.completions.create(model="gpt-4.1", messages=HELLO)
    finally:
        code, err = served.stop()
    assert code == 0 and TOKEN not in err and TOKEN not in "".join(served.banner)


# -- the token as a setting ----------------------------------------------------------------


def test_a_token_in_the_config_file_is_refused_without_showing_it(tmp_path):
    config = tmp_path / "taplog.toml"
    config.write_text(f'auth_token = "{TOKEN}"\n')
    with pytest.raises(ConfigError, match="secrets never go in config files") as caught:
        read_config_file(config)
    assert "TAPLOG_AUTH_TOKEN" in str(caught.value) and TOKEN not in str(caught.value)
    config.write_text('auth_token = ""\ninsecure_no_auth = false\n')
    assert read_config_file(config)["insecure_no_auth"] is False


@pytest.mark.parametrize("bad", ["short", "has space in it 0123456", "a/slash/0123456789abcdef"])
def test_weak_or_unsafe_tokens_are_refused_without_showing_them(bad):
    with pytest.raises(ConfigError, match=r"TAPLOG_AUTH_TOKEN: each token .* \(got \*\*\*\)") as e:
        load({}, {"TAPLOG_AUTH_TOKEN": bad}, None)
    assert bad not in str(e.value) and "secrets.token_urlsafe" in str(e.value)


def test_settings_print_tokens_as_stars():
    settings = Settings(auth_token=TOKEN)
    assert TOKEN not in repr(settings) and TOKEN not in str(settings)
    assert "auth_token=***" in repr(settings)
    assert "auth_token=''" in repr(Settings())
