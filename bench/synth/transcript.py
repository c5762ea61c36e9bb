"""The neutral vocabulary between a session and the wire shapes: calls, results, entries.

A session keeps its transcript as `Entry`s and decides each answer as a `Reply`, with no
API in mind; the per-API modules (`chat`, `messages`, `responses`) render them in their
own request and answer shapes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class Call:
    call_id: str
    name: str
    arguments: Any  # parsed arguments, or the raw text of a custom tool
    kind: str = "function"  # function, custom
    raw: str | None = None  # the string the API carries (Chat, Responses)
    bad_json: bool = False

    def raw_arguments(self) -> str:
        """The arguments as a string: as the model wrote them, or else as JSON."""
        return self.raw if self.raw is not None else orjson.dumps(self.arguments).decode()


@dataclass
class Result:
    call_id: str
    name: str | None
    content: Any
    is_error: bool
    asked_us: int | None  # when the answer asked; None for an imported (orphan) result
    kind: str = "function"


@dataclass
class Entry:
    """One resent unit of the transcript: a user turn, or an assistant turn with its results."""

    role: str  # user, assistant
    text: str | None = None
    calls: list[Call] = field(default_factory=list)
    results: list[Result] = field(default_factory=list)
    server: list[dict] = field(default_factory=list)  # Anthropic server-tool blocks
    size: int = 0
    cache: dict[str, list] = field(default_factory=dict)


@dataclass
class Reply:
    """What the model answers, decided before any wire shape."""

    text: str | None
    thinking: str | None
    calls: list[Call]
    server: list[tuple[str, str]]  # server-tool uses: (id, query)
    output: int  # output tokens
    mismatch: bool = False  # asks for tools but says it stopped (`finish_mismatch`)
    usage: dict[str, int] = field(default_factory=dict)  # token counts, per vendor
