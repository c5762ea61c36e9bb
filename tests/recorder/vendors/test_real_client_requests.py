"""What the real coding agents send translates to the other vendor, as the log records it.

The fixtures are requests captured once from the real CLIs through taplog (Claude Code
2.1.197 with its default tools, Codex 0.171.0 with its defaults, `tests/fixtures/`). They
carry what broke failover before: Claude Code's mid-conversation system message (its list
of agent types, beta `mid-conversation-system`), Codex's freeform, tool-search and
hosted web-search tools and its encrypted-reasoning `include`.
"""

from __future__ import annotations

import orjson
import pytest

from taplog.recorder.vendors.naming import ClientTool
from taplog.recorder.vendors.openai_chat.request_from_neutral import messages_to_chat
from taplog.recorder.vendors.openai_responses.request_from_neutral import messages_to_responses
from taplog.recorder.vendors.openai_responses.request_to_neutral import responses_to_messages
from taplog.recorder.vendors.translation import Untranslatable
from tests import FIXTURES

CLAUDE_CODE = orjson.loads((FIXTURES / "claude_code_2.1.197_messages.json").read_bytes())["body"]
CODEX = orjson.loads((FIXTURES / "codex_0.171.0_responses.json").read_bytes())["body"]


def test_claude_codes_mid_conversation_system_message_stays_in_its_place_for_openai():
    system_at = [m["role"] for m in CLAUDE_CODE["messages"]].index("system")
    chat = messages_to_chat(CLAUDE_CODE, model="gpt-4.1", reasoning_model=False)
    roles = [m["role"] for m in chat.body["messages"]]
    assert roles == ["system", "user", "system"]  # the prompt, the turn, the agent list
    assert chat.body["messages"][system_at + 1]["content"].startswith("Available agent types")
    names = [tool["function"]["name"] for tool in chat.body["tools"]]
    assert {"Bash", "Read", "Edit", "Agent"} <= set(names)
    assert "context_management" in chat.dropped  # recorded, not silently lost

    responses = messages_to_responses(CLAUDE_CODE, model="gpt-4.1", reasoning_model=False)
    kinds = [(item["type"], item["role"]) for item in responses.body["input"]]
    assert kinds == [("message", "user"), ("message", "system")]


def test_codexs_request_fails_over_to_claude_without_what_claude_cannot_run():
    messages = responses_to_messages(
        CODEX, model="claude-sonnet-4-5", drop_untranslatable=True
    )  # the rule's default
    body = messages.body
    tools = {tool["name"]: tool for tool in body["tools"]}
    assert {"exec_command", "apply_patch"} <= set(tools) and "web_search" not in tools
    patch = tools["apply_patch"]["input_schema"]
    assert patch["required"] == ["input"]  # the freeform patch, as one string
    assert "lark grammar" in patch["properties"]["input"]["description"]
    assert "*** Begin Patch" in patch["properties"]["input"]["description"]
    assert messages.tools["apply_patch"] == ClientTool("apply_patch", freeform=True)
    assert [m["role"] for m in body["messages"]] == ["user"]  # developer text went to system
    left_out = " ".join(messages.dropped)
    assert "(tool_search: left out" in left_out
    # Codex's cached mode (no live pages) has no equivalent: Claude's search reads live pages
    assert "(web_search: left out, external_web_access: false" in left_out
    assert "reasoning.encrypted_content" in left_out


def test_codexs_web_search_with_live_access_is_claudes_web_search():
    live = [
        {**tool, "external_web_access": True} if tool["type"] == "web_search" else tool
        for tool in CODEX["tools"]
    ]
    messages = responses_to_messages(
        {**CODEX, "tools": live}, model="claude-sonnet-4-5", drop_untranslatable=True
    )
    assert messages.body["tools"][-1] == {"type": "web_search_20250305", "name": "web_search"}
    assert "tools[9].search_content_types" in messages.dropped


def test_a_rule_that_refuses_what_the_target_cannot_take_names_it():
    with pytest.raises(Untranslatable, match=r"tools\[8\]: 'tool_search' tools have no"):
        responses_to_messages(CODEX, model="claude-sonnet-4-5", drop_untranslatable=False)
