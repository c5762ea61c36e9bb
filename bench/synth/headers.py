"""Where calls go and the HTTP headers on both sides, as each client and vendor sends them.

Request headers depend on the client (Claude Code, Codex, the Python SDKs); response
headers on the vendor (Anthropic and OpenAI behind Cloudflare, a local uvicorn server).
"""

from __future__ import annotations

import time

from bench.synth.catalog import CHAT, MESSAGES, RESPONSES, Agent
from bench.synth.common import SECOND, Draw

OPENAI_URL = "https://api.openai.com"
ANTHROPIC_URL = "https://api.anthropic.com"
LOCAL_URL = "http://10.0.3.17:8000"
PATHS = {CHAT: "/v1/chat/completions", RESPONSES: "/v1/responses", MESSAGES: "/v1/messages"}
# The keys taplog's fallback targets are called with (key fingerprints).
TAPLOG_KEYS = {
    "openai": "key:6a1f0c9e2b7d4a35",
    "anthropic": "key:c04e8b1d9f2a6e73",
}

_ORG_OPENAI = "acme-prod-8f2k1x"
_PROJECT_OPENAI = "proj_Qm3vX8LwR2pJ5tYb7nK1cZ4d"
_ORG_ANTHROPIC = "5d3c9a7e-2f41-4b8e-9c6d-0a1b2c3d4e5f"
_POPS = ("FRA", "CDG", "AMS", "IAD", "SJC", "NRT", "LHR")
_ANTHROPIC_LIMITS = (
    ("requests", 4000),
    ("tokens", 2_000_000),
    ("input-tokens", 1_600_000),
    ("output-tokens", 400_000),
)


def vendor_url(provider: str) -> str:
    return ANTHROPIC_URL if provider == "anthropic" else OPENAI_URL


def http_date(now: int) -> str:
    return time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now // SECOND))


# ----------------------------------------------------------------------- requests


def request_headers(agent: Agent, provider: str, sid: str, retry_count: int) -> dict[str, str]:
    if agent.tools == "claude":
        return _claude_code(agent, sid, retry_count)
    if agent.tools == "codex":
        return {
            "accept": "text/event-stream",
            "content-type": "application/json",
            "originator": "codex_cli_rs",
            "session_id": sid,
            "user-agent": agent.user_agent,
            "version": "0.58.0",
        }
    headers = {
        "accept": "application/json",
        "content-type": "application/json",
        "user-agent": agent.user_agent,
        "x-stainless-lang": "python",
        "x-stainless-package-version": agent.user_agent.rsplit(" ", 1)[-1],
        "x-stainless-os": "Linux",
        "x-stainless-arch": "x64",
        "x-stainless-runtime": "CPython",
        "x-stainless-runtime-version": "3.11.7",
        "x-stainless-async": "false",
        "x-stainless-retry-count": str(retry_count),
        "x-stainless-read-timeout": "600",
    }
    if provider == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
    return headers


def _claude_code(agent: Agent, sid: str, retry_count: int) -> dict[str, str]:
    return {
        "accept": "application/json",
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14,"
        "fine-grained-tool-streaming-2025-05-14",
        "anthropic-dangerous-direct-browser-access": "true",
        "anthropic-version": "2023-06-01",
        "content-type": "application/json",
        "user-agent": agent.user_agent,
        "x-app": "cli",
        "x-claude-code-session-id": sid,
        "x-stainless-arch": "x64",
        "x-stainless-lang": "js",
        "x-stainless-os": "Linux",
        "x-stainless-package-version": "0.60.0",
        "x-stainless-retry-count": str(retry_count),
        "x-stainless-runtime": "node",
        "x-stainless-runtime-version": "v22.19.0",
        "x-stainless-timeout": "600",
    }


# ----------------------------------------------------------------------- responses


def response_headers(
    rng: Draw,
    now: int,
    local: bool,
    provider: str,
    stream: bool,
    length: int | None,
    status: int = 200,
) -> dict[str, str]:
    headers = {"date": http_date(now)}
    if local:
        headers["server"] = "uvicorn"
    headers["content-type"] = "text/event-stream; charset=utf-8" if stream else "application/json"
    if length is not None:
        headers["content-length"] = str(length)
    if local:
        return headers
    if provider == "anthropic":
        return _anthropic(rng, now, headers, stream, status)
    return _openai(rng, headers)


def _anthropic(rng: Draw, now: int, headers: dict, stream: bool, status: int) -> dict[str, str]:
    headers["request-id"] = "req_011C" + rng.b62(20)
    headers["anthropic-organization-id"] = _ORG_ANTHROPIC
    if status == 200:
        reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now // SECOND + 1))
        for kind, limit in _ANTHROPIC_LIMITS:
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(limit)
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(
                limit - rng.randrange(limit // 20 + 1)
            )
            headers[f"anthropic-ratelimit-{kind}-reset"] = reset
    else:
        headers["x-should-retry"] = "true"
    if stream:
        headers["cache-control"] = "no-cache"
    headers["via"] = "1.1 google"
    headers["cf-cache-status"] = "DYNAMIC"
    headers["server"] = "cloudflare"
    headers["cf-ray"] = f"{rng.hexa(16)}-{rng.choice(_POPS)}"
    return headers


def _openai(rng: Draw, headers: dict) -> dict[str, str]:
    headers.update(
        {
            "access-control-expose-headers": "X-Request-ID",
            "openai-organization": _ORG_OPENAI,
            "openai-processing-ms": str(rng.randint(150, 9000)),
            "openai-project": _PROJECT_OPENAI,
            "openai-version": "2020-10-01",
            "x-envoy-upstream-service-time": str(rng.randint(150, 9000)),
            "x-ratelimit-limit-requests": "10000",
            "x-ratelimit-limit-tokens": "30000000",
            "x-ratelimit-remaining-requests": str(9999 - rng.randrange(40)),
            "x-ratelimit-remaining-tokens": str(30_000_000 - rng.randrange(400_000)),
            "x-ratelimit-reset-requests": "6ms",
            "x-ratelimit-reset-tokens": f"{rng.randint(0, 900)}ms",
            "x-request-id": "req_" + rng.hexa(32),
            "strict-transport-security": "max-age=31536000; includeSubDomains; preload",
            "cf-cache-status": "DYNAMIC",
            "x-content-type-options": "nosniff",
            "server": "cloudflare",
            "cf-ray": f"{rng.hexa(16)}-{rng.choice(_POPS)}",
            "alt-svc": 'h3=":443"; ma=86400',
        }
    )
    return headers
