"""What the synthetic history is made of: the APIs, the models, fallback rules and agents.

Data only. An `Agent` is a kind of client with the habits that shape its sessions (API,
models, how often it streams, how taplog found its session id, its tool set); `AGENTS` are
weighted as they share the traffic of a typical taplog install.
"""

from __future__ import annotations

from dataclasses import dataclass

CHAT, RESPONSES, MESSAGES, PASSTHROUGH = (
    "openai.chat",
    "openai.responses",
    "anthropic.messages",
    "passthrough",
)
TAPLOG_VERSION = "0.1.0"

# Model -> (provider, model as the answer names it, system fingerprint, tokens per second)
MODELS: dict[str, tuple[str, str, str | None, int]] = {
    "gpt-4.1": ("openai", "gpt-4.1-2025-04-14", "fp_b3f1157249", 80),
    "gpt-4.1-mini": ("openai", "gpt-4.1-mini-2025-04-14", "fp_6f2eabb9a5", 120),
    "gpt-4o-mini": ("openai", "gpt-4o-mini-2024-07-18", "fp_560af6e559", 110),
    "gpt-5": ("openai", "gpt-5-2025-08-07", None, 60),
    "gpt-5-mini": ("openai", "gpt-5-mini-2025-08-07", None, 90),
    "gpt-5-codex": ("openai", "gpt-5-codex", None, 60),
    "o4-mini": ("openai", "o4-mini-2025-04-16", None, 100),
    "claude-sonnet-4-6": ("anthropic", "claude-sonnet-4-6", None, 70),
    "claude-sonnet-4-5": ("anthropic", "claude-sonnet-4-5", None, 70),
    "claude-opus-4-6": ("anthropic", "claude-opus-4-6", None, 45),
    "claude-haiku-4-5": ("anthropic", "claude-haiku-4-5", None, 150),
    # OpenAI-compatible servers run by the user: not in litellm's price list.
    "qwen3-coder-30b-a3b-instruct": ("openai", "qwen3-coder-30b-a3b-instruct", None, 90),
    "gpt-oss-120b": ("openai", "gpt-oss-120b", None, 70),
}
REASONING = frozenset({"gpt-5", "gpt-5-mini", "gpt-5-codex", "o4-mini", "gpt-oss-120b"})

# Fallback rules (`--fallback MODEL=PROVIDER:MODEL`) for the sessions that have one: the
# same provider's smaller model, or the other vendor through translation. Responses calls
# and local servers have none (taplog does not fail Responses over).
FALLBACK = {
    "gpt-4.1": "claude-sonnet-4-6",
    "gpt-4.1-mini": "gpt-4o-mini",
    "gpt-4o-mini": "claude-haiku-4-5",
    "claude-sonnet-4-6": "gpt-4.1",
    "claude-sonnet-4-5": "gpt-4.1",
    "claude-opus-4-6": "claude-sonnet-4-6",
    "claude-haiku-4-5": "gpt-4.1-mini",
}
NATIVE_API = {"openai": CHAT, "anthropic": MESSAGES}


@dataclass(frozen=True)
class Agent:
    """A kind of client, with the habits that shape its sessions."""

    name: str
    weight: float
    api: str
    user_agent: str
    models: tuple[tuple[str, float], ...]
    stream: float  # share of sessions that stream
    sources: tuple[tuple[str, float], ...]  # how taplog found the session id
    tools: str  # tool set: "claude", "codex" or "generic"
    system: str
    length: float = 1.0  # relative session length
    local: bool = False  # an OpenAI-compatible server of the user's
    chained: float = 0.0  # Responses sessions chained by previous_response_id
    passthrough: float = 0.0  # chance of a pass-through call before a user turn


AGENTS = (
    Agent(
        "claude-code",
        0.32,
        MESSAGES,
        "claude-cli/2.0.31 (external, cli)",
        (("claude-sonnet-4-6", 0.55), ("claude-opus-4-6", 0.25), ("claude-haiku-4-5", 0.20)),
        0.97,
        (("client:claude-code", 1.0),),
        "claude",
        "You are Claude Code, Anthropic's official CLI for Claude. You help users with "
        "software engineering tasks.",
        length=1.4,
        passthrough=0.35,
    ),
    Agent(
        "codex",
        0.10,
        RESPONSES,
        "codex_cli_rs/0.58.0 (Ubuntu 24.4.0; x86_64) xterm-256color",
        (("gpt-5-codex", 0.5), ("gpt-5", 0.3), ("gpt-5-mini", 0.2)),
        1.0,
        (("client:codex", 1.0),),
        "codex",
        "You are Codex, based on GPT-5, a coding agent in the Codex CLI. Keep going until "
        "the query is resolved.",
        length=1.3,
    ),
    Agent(
        "openai-python-chat",
        0.26,
        CHAT,
        "OpenAI/Python 3.57.0",
        (("gpt-4.1", 0.35), ("gpt-4.1-mini", 0.40), ("gpt-4o-mini", 0.25)),
        0.4,
        (("new", 0.70), ("header", 0.15), ("path", 0.10), ("client:metadata", 0.05)),
        "generic",
        "You are a helpful assistant for Acme Corp. Use the tools; never guess numbers.",
        length=0.7,
        passthrough=0.06,
    ),
    Agent(
        "openai-python-responses",
        0.08,
        RESPONSES,
        "OpenAI/Python 3.57.0",
        (("gpt-4.1", 0.3), ("gpt-5-mini", 0.4), ("o4-mini", 0.3)),
        0.4,
        (("new", 0.75), ("header", 0.15), ("client:prompt_cache_key", 0.10)),
        "generic",
        "You are an analyst assistant. Call tools for facts, then answer briefly.",
        length=0.7,
        chained=0.5,
    ),
    Agent(
        "anthropic-python",
        0.18,
        MESSAGES,
        "Anthropic/Python 2.14.0",
        (("claude-sonnet-4-6", 0.45), ("claude-haiku-4-5", 0.35), ("claude-opus-4-6", 0.20)),
        0.5,
        (("new", 0.70), ("header", 0.15), ("path", 0.10), ("client:metadata", 0.05)),
        "generic",
        "You are a support agent for Acme Corp. Be precise and use the tools provided.",
        length=0.8,
    ),
    Agent(
        "local-openai-compatible",
        0.06,
        CHAT,
        "OpenAI/Python 3.57.0",
        (("qwen3-coder-30b-a3b-instruct", 0.6), ("gpt-oss-120b", 0.4)),
        0.6,
        (("new", 0.85), ("path", 0.15)),
        "generic",
        "You are a coding assistant running on a local model. Use tools to inspect files.",
        length=0.8,
        local=True,
    ),
)
