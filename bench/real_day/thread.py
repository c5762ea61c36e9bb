"""One conversation the agent keeps with the model: its history and its next request.

The main agent and each sub-agent are threads; a side call is a one-off body, no thread.
A thread's request is its fixed parts (system, tools, fields) around the whole history,
resent every call, as the real CLI does. Before each request the prompt-cache marker
moves: taken off the block that had it and put on the last block of the last user
message (as the captured requests show; a system message may come after it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from bench.real_day.claude_code import MODEL, PATH

Block = dict[str, Any]
MARKER = "cache_control"


@dataclass(frozen=True)
class Facts:
    """What a report needs of a call once it is sent: not its body."""

    thread: str
    kind: str
    size: int
    stream: bool


@dataclass
class Call:
    """One request as the CLI sends it, and what the generator knows about it."""

    thread: str  # "main", "agent-<id>" or "side"
    kind: str  # main, agent, compaction, or the side call's purpose (title, topic, …)
    headers: dict[str, str]
    body: bytes
    stream: bool
    path: str = PATH

    def facts(self) -> Facts:
        return Facts(self.thread, self.kind, len(self.body), self.stream)

    def line(self) -> bytes:
        """A JSONL line; the body is the last field, as the CLI serialised it."""
        head = orjson.dumps(
            {"thread": self.thread, "kind": self.kind, "path": self.path, "headers": self.headers}
        )
        return head[:-1] + b',"body":' + self.body + b"}\n"


@dataclass
class Thread:
    name: str
    headers: dict[str, str]
    system: list[Block]
    tools: list[Block]
    fields: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0  # bytes of the last request
    _marked: Block | None = None

    def user(self, blocks: list[Block]) -> None:
        self.messages.append({"role": "user", "content": blocks})

    def assistant(self, blocks: list[Block]) -> None:
        self.messages.append({"role": "assistant", "content": blocks})

    def system_message(self, text: str) -> None:
        self.messages.append({"role": "system", "content": text})

    def restart(self, first: list[Block], system_text: str) -> None:
        """A compacted history: the summary as the first user message, as after /compact."""
        self.messages = []
        self._marked = None
        self.user(first)
        self.system_message(system_text)

    def request(self, kind: str, extra: list[dict[str, Any]] | None = None) -> Call:
        """The next request; `extra` messages are sent once, not kept (a compaction prompt)."""
        messages = self.messages + (extra or [])
        self._move_marker(messages)
        body = {
            "model": MODEL,
            "messages": messages,
            "system": self.system,
            "tools": self.tools,
            **self.fields,
        }
        data = orjson.dumps(body)
        self.size = len(data)
        return Call(self.name, kind, self.headers, data, stream=bool(self.fields.get("stream")))

    def _move_marker(self, messages: list[dict[str, Any]]) -> None:
        if self._marked is not None:
            self._marked.pop(MARKER, None)
        last = next(m for m in reversed(messages) if m["role"] == "user")
        self._marked = last["content"][-1]
        self._marked[MARKER] = {"type": "ephemeral"}
