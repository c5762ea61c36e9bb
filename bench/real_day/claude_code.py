"""The parts of Claude Code 2.1.x's requests that do not depend on the conversation.

Taken from a real request (`tests/fixtures/claude_code_2.1.197_messages.json`, captured
from `claude -p`) and from the sub-agent calls the same CLI made against the fake vendor
(`bench/real_day/cli_check.py` records them): the main agent's system blocks and its
64 KB tool list, the `Available agent types` system message it keeps at `messages[1]`,
its headers and body fields. A sub-agent (`x-claude-code-agent-id`) gets its own system
prompt, the main list less three tools (38 KB) and thinking off. Side calls go to a small
model with tiny bodies and no tools, not streamed.

Headers are lower-case, as sent; the key is a made-up `sk-ant-api03-…` so that taplog's
secret handling sees one where the real CLI puts it.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

from bench.common import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "claude_code_2.1.197_messages.json"
VERSION = "2.1.197"
MODEL, SMALL_MODEL = "claude-opus-4-8", "claude-haiku-4-5-20251001"
PATH = "/v1/messages?beta=true"
API_KEY = "sk-ant-api03-" + "bench" * 16 + "-realdayAA"
NOT_FOR_SUB_AGENTS = frozenset({"ScheduleWakeup", "TaskOutput", "Workflow"})  # as 2.1.197 does
SUB_AGENT_PROMPT = (
    "You are an agent for Claude Code, working inside the user's repository on a task the "
    "main agent hands you. Use the tools to finish the task completely, without extending "
    "it; when done, answer with a short report of what you did and what you found, since "
    "the main agent relays it to the user.\n\nWhat you are good at:\n- searching code, "
    "configuration and naming patterns across large repositories\n- reading several files "
    "to explain how a part of the system fits together\n- running the tests or a command "
    "and reading its output closely\n\nHow to work:\n- Search broadly when you do not know "
    "where something lives; read a file directly when you know its path.\n- Start wide and "
    "narrow down; try another search strategy when the first finds nothing.\n- Check more "
    "than one place and more than one spelling before concluding something is absent.\n- "
    "Do not create files unless the task needs them; prefer editing an existing file.\n- "
    "Do not write documentation files unless asked.\n- Give absolute paths in your report, "
    "and quote only the lines that matter.\n\nNotes:\n- Your report is read by the main "
    "agent, not the user; keep it factual and brief.\n- Avoid emojis.\n- Do not end with "
    "a question; you cannot receive an answer.\n"
) * 2
REMINDER_TASKS = (
    "The task tools have not been used for a while. If the work you are doing would "
    "benefit from tracking its progress, consider TaskCreate to add tasks and TaskUpdate "
    "to mark them in progress or done, and clean up the list when it is stale. This is "
    "a gentle reminder only; ignore it if it does not apply, and never mention it to "
    "the user."
)
STAINLESS = {
    "x-stainless-arch": "x64",
    "x-stainless-lang": "js",
    "x-stainless-os": "Linux",
    "x-stainless-package-version": "0.94.0",
    "x-stainless-retry-count": "0",
    "x-stainless-runtime": "node",
    "x-stainless-runtime-version": "v26.3.0",
    "x-stainless-timeout": "600",
}


@functools.cache
def fixture() -> dict[str, Any]:
    return orjson.loads(FIXTURE.read_bytes())


def main_tools() -> list[dict[str, Any]]:
    return fixture()["body"]["tools"]


def sub_agent_tools() -> list[dict[str, Any]]:
    return [t for t in main_tools() if t["name"] not in NOT_FOR_SUB_AGENTS]


def billing(sub_agent: bool = False) -> dict[str, str]:
    tail = " cc_is_subagent=true;" if sub_agent else ""
    text = f"x-anthropic-billing-header: cc_version={VERSION}.1c0; cc_entrypoint=cli;{tail}"
    return {"type": "text", "text": text}


def main_system(environment: str) -> list[dict[str, Any]]:
    """The fixture's system blocks, the big one followed by this session's environment."""
    _, sdk, big = fixture()["body"]["system"]
    return [
        billing(),
        dict(sdk),
        {"type": "text", "text": big["text"] + environment}
        | {"cache_control": {"type": "ephemeral"}},
    ]


def sub_agent_system(environment: str) -> list[dict[str, Any]]:
    sdk = fixture()["body"]["system"][1]
    marker = {"cache_control": {"type": "ephemeral"}}
    return [
        billing(True),
        dict(sdk),
        {"type": "text", "text": SUB_AGENT_PROMPT + environment} | marker,
    ]


def agent_types(skills: bool = True) -> str:
    """`messages[1]` of the main agent: agent types and, for the main agent, its skills."""
    text = fixture()["body"]["messages"][1]["content"]
    return text if skills else text.split("\n\nThe following skills")[0]


def headers(session: str, agent: str | None = None, small: bool = False) -> dict[str, str]:
    """The headers Claude Code sends, less those HTTP sets (host, length, connection)."""
    out = {
        "accept": "application/json",
        "content-type": "application/json",
        "user-agent": f"claude-cli/{VERSION} (external, cli)",
        "x-claude-code-session-id": session,
        **STAINLESS,
        "anthropic-beta": fixture()["headers"]["anthropic-beta"],
        "anthropic-dangerous-direct-browser-access": "true",
        "anthropic-version": "2023-06-01",
        "x-app": "cli",
        "x-api-key": API_KEY,
        "accept-encoding": "gzip, deflate, br, zstd",
    }
    if small:
        out["anthropic-beta"] = "claude-code-20250219,prompt-caching-scope-2026-01-05"
    if agent is not None:
        out["x-claude-code-agent-id"] = agent
    return out


def metadata(device: str, session: str) -> dict[str, str]:
    user = {"device_id": device, "account_uuid": "", "session_id": session}
    return {"user_id": orjson.dumps(user).decode()}


def main_fields(meta: dict[str, str]) -> dict[str, Any]:
    """The body fields after `tools`, in the CLI's order (main agent)."""
    return {
        "metadata": meta,
        "max_tokens": 64000,
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "stream": True,
    }


def sub_agent_fields(meta: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": meta,
        "max_tokens": 64000,
        "thinking": {"type": "disabled"},
        "output_config": {"effort": "high"},
        "stream": True,
    }


def side_body(system: str, user: str, meta: dict[str, str], max_tokens: int) -> dict[str, Any]:
    """A side call to the small model: a title, a topic check, a command's prefix."""
    return {
        "model": SMALL_MODEL,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
        "system": [billing(), {"type": "text", "text": system}],
        "temperature": 0,
        "metadata": meta,
        "stream": False,
    }
