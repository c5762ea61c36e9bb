"""Side calls to the small model, and the texts Claude Code adds around a conversation.

Side calls are tiny and carry no tools: a quota probe when the session starts, a title
for the first prompt, a topic check for every prompt and a check of a shell command
before it runs (not streamed), and, after each of the main agent's tool batches, a
label summing up what the tools did (streamed, `"tools": []`, thinking off: the shape
2.1.197 sends when `CLAUDE_CODE_EMIT_TOOL_USE_SUMMARIES` is set, as check-cli records
it; sub-agents send none). They interleave with the main agent's calls in the same
session, which is what makes a day's log hard to store as deltas on the call before.
The wording here is ours, sized like the CLI's.
"""

from __future__ import annotations

from typing import Any

import orjson

from bench.real_day import claude_code
from bench.real_day.thread import Call

TITLE = (
    "Write a short title, three to seven words in sentence case, for a coding session that "
    "starts with the user's message below. Answer with the title only."
)
TOPIC = (
    "Decide whether the user's message starts a new topic in a coding session. Answer "
    'with JSON only: {"isNewTopic": true or false, "title": a two or three word title '
    "when it is new, else null}."
)
COMMAND_RULES = "\n".join(
    f"- {rule}"
    for rule in (
        "A command prefix is the leading words that say what runs, without its arguments.",
        "Answer `none` for a command that only reads: listing, printing, searching.",
        "Answer `command_injection_detected` when the command hides another one: "
        "substitutions, backticks, chained commands after a harmless-looking start.",
        "Several commands joined by && or ; have the prefix of the first one.",
        "Environment assignments before the command are not part of the prefix.",
        "For git, npm, cargo, pytest and similar tools the prefix names the subcommand.",
        "Never answer with anything but the prefix, `none`, or the detection word.",
    )
)
COMMAND_CHECK = (
    "Your task is to process shell commands that a coding agent wants to run. This policy "
    "spec defines how to find the prefix of a command, so that the user can allow a "
    "family of commands once instead of each command.\n\n<policy_spec>\n"
    + "\n\n".join(f"## Rule set {i}\n{COMMAND_RULES}" for i in range(1, 5))
    + "\n</policy_spec>\n\nExamples:\n"
    + "\n".join(f"- git diff HEAD~{i} => git diff" for i in range(1, 12))
)
COMPACT = (
    "Your task is to write a detailed summary of the conversation so far, paying close "
    "attention to the user's explicit requests and your previous actions. The summary "
    "must keep every technical detail, code pattern and decision needed to continue the "
    "work without losing context.\n\nBefore the summary, think in <analysis> tags about "
    "each message in turn: the user's requests and intents, your approach, key decisions, "
    "file names, full code snippets, function signatures and edits, errors and how they "
    "were fixed, and the user's feedback.\n\nThe summary has these sections:\n"
    + "\n".join(
        f"{i}. {name}: {'what it holds, listed in detail, with file paths and snippets. ' * 3}"
        for i, name in enumerate(
            (
                "Primary request and intent",
                "Key technical concepts",
                "Files and code sections",
                "Errors and fixes",
                "Problem solving",
                "All user messages",
                "Pending tasks",
                "Current work",
                "Optional next step",
            ),
            1,
        )
    )
    + "\nRespond with text only; do not call any tools."
)
LABEL = (
    "Write a short label for what these tool calls did. It is shown as one line in a "
    "narrow list and cut at about 30 characters: think of a commit subject, not a "
    "sentence.\n\nUse the past tense and keep the most telling noun; drop articles and "
    "long paths first.\n\nExamples:\n- Searched in auth/\n- Fixed crash in Parser\n- "
    "Added signup route\n- Read settings.toml\n- Ran failing tests"
)
CONTINUED = (
    "This session is being continued from a previous conversation that ran out of "
    "context. The summary below covers the earlier portion of the conversation.\n\n"
)


def reminder(text: str) -> dict[str, str]:
    """A `<system-reminder>` block, as the CLI adds to a user message."""
    return {"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>\n"}


def side_call(kind: str, system: str, user: str, session: str, meta: dict[str, str]) -> Call:
    max_tokens = {"title": 512, "topic": 512, "quota": 1}.get(kind, 256)
    body: dict[str, Any] = claude_code.side_body(system, user, meta, max_tokens)
    if kind == "quota":  # the probe: one word, no system prompt
        body = {k: v for k, v in body.items() if k not in ("system", "temperature")}
        body["messages"] = [{"role": "user", "content": "quota"}]
    headers = claude_code.headers(session, small=True)
    return Call("side", kind, headers, orjson.dumps(body), stream=False)


def command_check(command: str, session: str, meta: dict[str, str]) -> Call:
    return side_call("command", COMMAND_CHECK, f"Command: {command}", session, meta)


def tool_summary(
    uses: list[tuple[str, Any, Any]], intent: str | None, session: str, meta: dict[str, str]
) -> Call:
    """The label of a tool batch: each tool's name, input and output cut to 300 characters."""
    done = "\n".join(
        f"Tool: {name}\nInput: {orjson.dumps(given).decode()[:300]}\n"
        f"Output: {orjson.dumps(output).decode()[:300]}"
        for name, given, output in uses
    )
    asked = f"User's intent (from assistant's last message): {intent[:200]}\n" if intent else ""
    sdk = claude_code.fixture()["body"]["system"][1]["text"]
    body = {
        "model": claude_code.SMALL_MODEL,
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": f"{asked}Tools completed:\n\n{done}\n\nLabel:"}
                ],
            }
        ],
        "system": [
            claude_code.billing(),
            {"type": "text", "text": sdk},
            {"type": "text", "text": LABEL},
        ],
        "tools": [],
        "metadata": meta,
        "max_tokens": 64000,
        "thinking": {"type": "disabled"},
        "output_config": {"effort": "high"},
        "stream": True,
    }
    return Call("side", "summary", claude_code.headers(session), orjson.dumps(body), stream=True)
