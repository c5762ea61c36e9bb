"""Tool-call ids and tool names that both vendors accept, mapped without any state.

The vendors' rules (docs/protocols.md 5.8.17):

=================  ==============================  ==============================
                   Anthropic                       OpenAI Chat
=================  ==============================  ==============================
tool name          ``[A-Za-z0-9_-]{1,128}``        ``[A-Za-z0-9_-]{1,64}``
tool-call id       ``[A-Za-z0-9_-]+``              any string of at most 40 chars
=================  ==============================  ==============================

Scheme (`fit`): a value that already fits the target's rule is sent unchanged, so the
common case costs nothing and ids stay equal across directions. A value that does not fit
becomes ``<readable head>_<12 hex digits of sha256(value)>``: the head is the value with
every other character replaced by ``_``, cut so the whole fits the limit. The mapping is a
pure function of the value, so the same id or name maps the same way in every turn, each
turn being translated on its own; the digest keeps two different values apart.

Reversal needs no state either: every translated request carries the client's own values,
so `Renames` records ``wire value -> client value`` for what it changed while translating
the request (`Translated.tools` / `Translated.tool_ids`), and the answer translators take
that table to give the client back its own tools. Ids need no reversal: a request's ids
never come back in the answer (answers carry new ids), but answer ids are fitted to the
client's rule too, because the client will send them to its own vendor later.

A tool's wire name can hide more than a renaming, so the table holds a `ClientTool` per wire
name: the client's name, and for OpenAI Responses clients the ``namespace`` a tool was
grouped in (sent flattened as ``<namespace>__<name>``, `namespaced`, then fitted) and
whether it is a freeform (``custom``) tool whose one string input travels wrapped as
``{"input": ...}``. A wire name missing from the table is the client's own name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "ANTHROPIC_ID_LIMIT",
    "ANTHROPIC_NAME_LIMIT",
    "OPENAI_ID_LIMIT",
    "OPENAI_NAME_LIMIT",
    "ClientTool",
    "ClientTools",
    "Renames",
    "client_name",
    "client_tool",
    "fit",
    "namespaced",
]

ANTHROPIC_NAME_LIMIT = 128
ANTHROPIC_ID_LIMIT = 128  # no documented maximum; a bound keeps mapped ids short
OPENAI_NAME_LIMIT = 64
OPENAI_ID_LIMIT = 40

_VALID = re.compile(r"[A-Za-z0-9_-]+")
_INVALID = re.compile(r"[^A-Za-z0-9_-]")
_DIGEST = 12


def fit(value: str, limit: int) -> str:
    """`value` if it matches ``[A-Za-z0-9_-]{1,limit}``, else a deterministic stand-in."""
    if len(value) <= limit and _VALID.fullmatch(value):
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    head = _INVALID.sub("_", value)[: limit - _DIGEST - 1]
    return f"{head or 't'}_{digest}"


def namespaced(name: str, namespace: str | None) -> str:
    """The one name a namespaced Responses tool gets on a vendor that has no namespaces."""
    return f"{namespace}__{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class ClientTool:
    """The client's own tool behind a wire name."""

    name: str
    namespace: str | None = None  # a Responses namespace tool's group
    freeform: bool = False  # a Responses custom tool: its input is one string, not JSON


ClientTools = Mapping[str, ClientTool]  # wire name -> the client's tool


@dataclass(slots=True)
class Renames:
    """Fits the tool names and ids of one request, remembering ``wire -> client`` changes."""

    name_limit: int
    id_limit: int
    names: dict[str, ClientTool] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)

    def name(self, value: str) -> str:
        wire = fit(value, self.name_limit)
        if wire != value:
            self.names[wire] = ClientTool(value)
        return wire

    def id(self, value: str) -> str:
        wire = fit(value, self.id_limit)
        if wire != value:
            self.ids[wire] = value
        return wire


def client_tool(wire: str, tools: ClientTools | None) -> ClientTool:
    """The client's own tool that the upstream called by its wire name."""
    return (tools.get(wire) if tools else None) or ClientTool(wire)


def client_name(wire: str, tools: ClientTools | None) -> str:
    """The client's own name for a tool the upstream called by its wire name."""
    return client_tool(wire, tools).name
