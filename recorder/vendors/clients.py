"""What the agents and SDKs send of their own accord that taplog reads (docs/protocols.md §7).

session ids   Claude Code's header and `metadata.user_id`, opencode's and Codex's
              headers, a Responses `conversation`, `prompt_cache_key`,
              `metadata.session_id`: strongest signal first
retries       the official SDKs count a call's retries in `x-stainless-retry-count`
tool results  a result that states its own exit code: OpenAI's APIs have no error flag for
              a tool result, so a failed command is known from what the client wrote
names         which agent or SDK a `user-agent` names; which user text is the person's
              prompt (the coding agents put their context in tagged text beside it)
side calls    which calls are the agent's own loop, not a probe or a small side call
sub-agents    which calls a sub-agent made, and the tool call that started it
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

_CLAUDE_CODE_LEGACY = re.compile(r"_session_([0-9A-Za-z-]{8,64})$")


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _claude_code_metadata(body: dict[str, Any]) -> str | None:
    metadata = body.get("metadata")
    user_id = _text(metadata.get("user_id")) if isinstance(metadata, dict) else None
    if user_id is None:
        return None
    if user_id.startswith("{"):
        try:
            return _text(orjson.loads(user_id).get("session_id"))
        except (orjson.JSONDecodeError, AttributeError):
            return None
    match = _CLAUDE_CODE_LEGACY.search(user_id)
    return match.group(1) if match else None


# opencode (1.18) names its session on every call, `x-session-affinity` and `x-session-id`
# (`x-opencode-session` to its own providers); to OpenAI its default plugin adds Codex's
# `session-id` too, so opencode is asked first. A sub-agent (its task tool) runs in a
# session of its own whose calls name the session that started it:
#   x-session-affinity: ses_dba0934e…     x-parent-session-id: ses_dba093e2…
# and the task's result names the sub-agent: `<task id="ses_dba0934e…" state="completed">`.
_OPENCODE_OWN = ("x-session-affinity", "x-opencode-session")
_OPENCODE_PARENT = "x-parent-session-id"


def _opencode_own(headers: Mapping[str, str]) -> str | None:
    return next((found for name in _OPENCODE_OWN if (found := _text(headers.get(name)))), None)


def _opencode_session(headers: Mapping[str, str]) -> str | None:
    """opencode's run: the session that started a sub-agent, else the call's own."""
    own = _opencode_own(headers)
    return None if own is None else _text(headers.get(_OPENCODE_PARENT)) or own


def session_hints(headers: Mapping[str, str], body: Any) -> list[tuple[str, str]]:
    """(source, session id) for each id the client already sends, strongest signal first
    (`headers` lower-cased)."""
    body = body if isinstance(body, dict) else {}
    hints = [
        ("claude-code", headers.get("x-claude-code-session-id")),
        ("claude-code", _claude_code_metadata(body)),
        ("opencode", _opencode_session(headers)),
        ("codex", headers.get("session_id") or headers.get("session-id")),
        ("codex", headers.get("conversation_id")),
    ]
    conversation = body.get("conversation")
    if isinstance(conversation, dict):
        conversation = conversation.get("id")
    hints.append(("conversation", conversation))
    hints.append(("prompt_cache_key", body.get("prompt_cache_key")))
    metadata = body.get("metadata")
    if isinstance(metadata, dict):
        hints.append(("metadata", metadata.get("session_id")))
    return [(source, value) for source, v in hints if (value := _text(v)) is not None]


def retry_count(headers: Mapping[str, str]) -> int:
    """How many times the client's SDK has retried this call already (0: a first try)."""
    value = headers.get("x-stainless-retry-count", "0")
    return int(value) if value.isdigit() else 0


# Codex's shell tools put a header before what the command printed (0.171):
#   Chunk ID: 3b753e / Wall time: 0.0 seconds / Process exited with code 2 / … / Output:
# and earlier releases wrote "Exit code: 2" in the same place.
_OUTPUT_MARK = "\nOutput:\n"
_EXIT_CODE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$", re.M)


@dataclass(frozen=True, slots=True)
class ToolRun:
    """A tool result as its client wrote it: what the tool printed, and its exit code
    when the client states one."""

    printed: Any
    exit_code: int | None = None


def tool_run(result: Any) -> ToolRun:
    """What a tool result says of its run; a result in no known client's words is all
    printed, with no exit code."""
    if isinstance(result, str):
        head, mark, printed = result.partition(_OUTPUT_MARK)
        code = _EXIT_CODE.search(head) if mark else None
        if code is not None:
            return ToolRun(printed, int(code.group(1)))
    return ToolRun(result)


_CLIENTS = (  # user-agent prefix -> the client's name
    ("claude-cli/", "Claude Code"),
    ("codex_", "Codex"),
    ("opencode/", "opencode"),
    ("aider", "aider"),
    # litellm's own HTTP client (its Anthropic and Responses routes; aider's calls through
    # it too). Its OpenAI Chat route is the OpenAI Python SDK, sent as it sends it.
    ("litellm/", "litellm"),
    ("langchain-anthropic/", "langchain-anthropic"),  # the Anthropic SDK under its own name
    ("agents/python", "OpenAI Agents SDK"),
    ("openai/python", "OpenAI Python SDK"),
    ("openai/js", "OpenAI JS SDK"),
    ("anthropic/python", "Anthropic Python SDK"),
    ("anthropic/js", "Anthropic JS SDK"),
    ("geminicli", "Gemini CLI"),  # GeminiCLI-tui/0.61.0/<model> (…)
    ("google-genai-sdk/", "Google Gen AI SDK"),
    ("taplog-resume", "taplog resume"),
)


def client_name(user_agent: str | None) -> str | None:
    """The agent or SDK a session's `user-agent` names, None when taplog does not know it."""
    agent = (user_agent or "").lower()
    return next((name for prefix, name in _CLIENTS if agent.startswith(prefix)), None)


def prompt_text(turns: Any) -> str | None:
    """The person's prompt among a request's turns: the last user text that is not context
    a client added in tags (Claude Code's `<system-reminder>`, Codex's
    `<environment_context>`)."""
    for turn in reversed(turns if isinstance(turns, list) else []):
        if isinstance(turn, dict) and turn.get("role") == "user":
            for text in reversed(_texts(turn.get("content"))):
                if text.strip() and not is_context(text):
                    return text.strip()
    return None


# Besides its own loop, a coding agent calls a small model for itself: Claude Code
# probes its quota as it starts (`max_tokens: 1`, the one word "quota"), asks for the
# session's title, whether a prompt starts a new topic, a shell command's prefix, a label
# for a tool batch. None of these offers tools; the agent's loop (and a sub-agent's)
# always does.
_TOKEN_LIMITS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def is_probe(body: Any) -> bool:
    """A call that asks for at most one token: a client checking it may call (Claude
    Code's quota probe), not work."""
    if not isinstance(body, dict):
        return False
    limits = [body.get(name) for name in _TOKEN_LIMITS]
    return any(isinstance(n, int) and not isinstance(n, bool) and n <= 1 for n in limits)


def offers_tools(body: Any) -> bool:
    """Whether a request offers the model tools: an agent's own loop does, its side calls
    to a small model do not."""
    tools = body.get("tools") if isinstance(body, dict) else None
    return isinstance(tools, list) and bool(tools)


def is_context(text: str) -> bool:
    """User text a client added in tags as context (`<system-reminder>`,
    `<environment_context>`), not what the person wrote."""
    return text.lstrip().startswith("<")


def _texts(content: Any) -> list[str]:
    """The texts of a turn's content: a string, or text parts of any API."""
    if isinstance(content, str):
        return [content]
    parts = content if isinstance(content, list) else []
    return [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]


# Claude Code (2.1) runs a sub-agent for its Agent tool in the same session; each of the
# sub-agent's calls names it in a header, and the tool's result names it again:
#   x-claude-code-agent-id: adca386ca111e5468       (on the sub-agent's calls)
#   agentId: adca386ca111e5468 (use SendMessage …)   (in the Agent tool's result)
# and the sub-agent's first prompt is the tool's `prompt` argument. opencode's sub-agent is
# its own session, named on its calls beside their parent's (`_opencode_session`), and in
# its task tool's result: `<task id="ses_…" …>`, or `Subagent failed (task_id: ses_…)`.
_AGENT_HEADER = "x-claude-code-agent-id"
_AGENT_NAMED = re.compile(r'\bagentId: ([\w-]+)|<task id="([\w-]+)"|\(task_id: ([\w-]+)\)')


def sub_agent(headers: Mapping[str, str]) -> str | None:
    """The sub-agent a call was made by, when its client says so (`headers` lower-cased)."""
    if _text(headers.get(_OPENCODE_PARENT)) is not None:
        return _opencode_own(headers)
    return _text(headers.get(_AGENT_HEADER))


def started_agent(arguments: Any, result: Any, agent: str, prompt: str | None) -> bool:
    """Whether a tool call started sub-agent `agent`: its result names the agent, or its
    `prompt` argument is the sub-agent's first prompt."""
    named = _AGENT_NAMED.search(" ".join(_texts(result)))
    if named is not None:
        return next(group for group in named.groups() if group is not None) == agent
    asked = arguments.get("prompt") if isinstance(arguments, dict) else None
    return prompt is not None and isinstance(asked, str) and asked.strip() == prompt
