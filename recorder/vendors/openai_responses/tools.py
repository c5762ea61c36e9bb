"""OpenAI Responses tools -> Chat tools for `chat_to_messages`, and Claude's web search
(docs/protocols.md 2, 5.2, 9).

=========================  ==================================================================
Responses tool             on Anthropic
=========================  ==================================================================
``function``               a tool (through Chat); ``strict`` kept only when true
``namespace``              one tool per inner function or custom tool, named
                           ``<namespace>__<name>`` (`naming.namespaced`, then fitted), its
                           description followed by the namespace's; answers give the client
                           ``name`` and ``namespace`` apart again
``custom`` (freeform)      a tool whose input is ``{"input": <string>}``, that string's
                           description saying what the ``format`` requires (a grammar's
                           syntax and whole definition); answers unwrap the string
``web_search``,            Claude's server tool ``{type: web_search_20250305, name:
``web_search_preview``,    web_search}``: ``filters.allowed_domains`` -> ``allowed_domains``,
dated variants             ``user_location`` (approximate) -> ``user_location``, other keys
                           (``search_context_size``, ``search_content_types``) dropped.
                           With ``external_web_access: false`` (Codex's cached mode: OpenAI's
                           index only, no live pages) it has no equivalent, since Claude's
                           search reads live pages
``tool_search``,           no equivalent (`_NO_EQUIVALENT` says why, per type)
``file_search``, ``mcp``,
``shell``, ... any other
=========================  ==================================================================

A tool without an equivalent is left out and recorded with ``leave_out``, else refused
(`Untranslatable`, naming the tool and why). Keys a tool carries beyond the ones above
(``defer_loading``, ``allowed_callers``, ...) are dropped and recorded. Two tools with one
wire name are refused: Anthropic refuses duplicate names.

``tool_choice``: auto / none / required kept; ``{type: function | custom, name}`` -> the Chat
function choice, the name of a tool inside a namespace resolving to its flattened name
unless a top-level tool has it; ``allowed_tools`` -> the Chat form with its function and
custom entries (the web search stays only if a web search entry is among them); a choice
of a hosted tool has no equivalent (left out with ``leave_out``, else refused).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from taplog.recorder.vendors.naming import ANTHROPIC_NAME_LIMIT, ClientTool, fit, namespaced
from taplog.recorder.vendors.sse import as_list, as_str, dig
from taplog.recorder.vendors.translation import RequestTranslation, Untranslatable

__all__ = ["ResponsesTools"]

_WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search"}
_WEB_SEARCH_TYPES = re.compile(r"web_search(?:_preview)?(?:_\d{4}_\d{2}_\d{2})?")
_FUNCTION_KEYS = frozenset({"type", "name", "description", "parameters", "strict"})
_CUSTOM_KEYS = frozenset({"type", "name", "description", "format"})
_NAMESPACE_KEYS = frozenset({"type", "name", "description", "tools"})
_LOCATION_KEYS = ("city", "region", "country", "timezone")
_CACHED_SEARCH = (
    "external_web_access: false searches OpenAI's cache only, and Claude's web search "
    "reads live pages"
)
_NO_EQUIVALENT = {
    "tool_search": "the tools it finds are loaded into OpenAI's next call",
    "file_search": "it searches vector stores held by OpenAI",
    "code_interpreter": "it runs code in OpenAI's containers",
    "image_generation": "Claude generates no images",
    "mcp": "OpenAI calls the MCP server itself",
    "computer": "its actions and screenshots are OpenAI's computer_call items",
    "computer_use_preview": "its actions and screenshots are OpenAI's computer_call items",
    "local_shell": "its calls are OpenAI's local_shell_call items",
    "shell": "its calls are OpenAI's shell_call items",
    "apply_patch": "its calls are OpenAI's apply_patch_call items (the freeform tool works)",
}


def _is_web_search(kind: Any) -> bool:
    """A Responses hosted web search type, any version."""
    return isinstance(kind, str) and _WEB_SEARCH_TYPES.fullmatch(kind) is not None


@dataclass(slots=True)
class ResponsesTools:
    """The tools of one Responses request, as `chat_to_messages` and Anthropic take them."""

    ctx: RequestTranslation
    leave_out: bool
    chat: list[dict] = field(default_factory=list)  # Chat function tools
    web_search: dict | None = None  # Claude's server tool, added after the Chat translation
    client: dict[str, ClientTool] = field(default_factory=dict)  # wire -> namespaced/freeform
    _search_at: str = ""  # where the client's request holds the web search tool
    _wires: set[str] = field(default_factory=set)
    _top_level: set[str] = field(default_factory=set)
    _inner: dict[str, str] = field(default_factory=dict)  # name in a namespace -> flattened

    def read(self, tools: Any) -> None:
        for k, tool in enumerate(as_list(tools)):
            where, kind = f"tools[{k}]", dig(tool, "type")
            if kind in ("function", "custom"):
                self._add(tool, where)
            elif kind == "namespace":
                self._namespace(tool, where)
            elif _is_web_search(kind):
                self._web_search(tool, where)
            else:
                self._no_equivalent(where, kind, _NO_EQUIVALENT.get(kind, "Anthropic has none"))

    def _no_equivalent(self, where: str, kind: Any, why: str) -> None:
        if not self.leave_out:
            raise Untranslatable(f"{where}: {kind!r} tools have no Anthropic equivalent: {why}")
        self.ctx.drop(f"{where} ({kind}: left out, {why})")

    def _add(self, tool: dict, where: str, namespace: dict | None = None) -> None:
        """A function or custom tool, at the top level or inside `namespace`."""
        name, kind = as_str(tool.get("name")), tool["type"]
        if not name:
            raise Untranslatable(f"{where}: a {kind} tool needs a name")
        group = as_str(namespace.get("name")) if namespace else None
        flat = namespaced(name, group)
        wire = fit(flat, ANTHROPIC_NAME_LIMIT)
        if wire in self._wires:
            raise Untranslatable(f"{where}: its Anthropic name {wire!r} is an earlier tool's")
        self._wires.add(wire)
        if group:
            self._inner.setdefault(name, flat)
        else:
            self._top_level.add(name)
        if group or kind == "custom":
            self.client[wire] = ClientTool(name, group, freeform=kind == "custom")
        function = {"name": flat}
        if description := _description(tool, namespace):
            function["description"] = description
        if kind == "custom":
            function["parameters"] = _freeform_schema(tool, where, self.ctx)
        elif "parameters" in tool:
            function["parameters"] = tool["parameters"]
        if kind == "function" and tool.get("strict") is True:
            function["strict"] = True
        known = _FUNCTION_KEYS if kind == "function" else _CUSTOM_KEYS
        for key in tool:
            if key not in known:
                self.ctx.drop(f"{where}.{key}")
        self.chat.append({"type": "function", "function": function})

    def _namespace(self, tool: dict, where: str) -> None:
        if not as_str(tool.get("name")):
            raise Untranslatable(f"{where}: a namespace tool needs a name")
        for key in tool:
            if key not in _NAMESPACE_KEYS:
                self.ctx.drop(f"{where}.{key}")
        for j, inner in enumerate(as_list(tool.get("tools"))):
            at, kind = f"{where}.tools[{j}]", dig(inner, "type")
            if kind in ("function", "custom"):
                self._add(inner, at, tool)
            else:
                self._no_equivalent(at, kind, "a namespace holds only function and custom tools")

    def _web_search(self, tool: dict, where: str) -> None:
        kind = tool["type"]
        if tool.get("external_web_access") is False:
            self._no_equivalent(where, kind, _CACHED_SEARCH)
            return
        if self.web_search is not None:
            self.ctx.drop(f"{where} ({kind}: left out, Claude is offered one web search)")
            return
        search = dict(_WEB_SEARCH)
        for key, value in tool.items():
            if key == "filters" and isinstance(value, dict):
                _filters(value, search, where, self.ctx)
            elif key == "user_location" and isinstance(value, dict):
                _location(value, search, where, self.ctx)
            elif key not in ("type", "external_web_access") and value is not None:
                self.ctx.drop(f"{where}.{key}")
        self.web_search, self._search_at = search, where

    def choice(self, choice: Any) -> Any:
        """Responses ``tool_choice`` in Chat's shape."""
        kind = dig(choice, "type")
        if choice is None or choice in ("auto", "none", "required"):
            return choice
        if kind in ("function", "custom") and as_str(choice.get("name")):
            return {"type": "function", "function": {"name": self._chosen(choice["name"])}}
        if kind == "allowed_tools":
            return self._allowed(choice)
        why = "taplog forces only function and custom tools on Anthropic"
        if self.leave_out:
            self.ctx.drop(f"tool_choice ({kind}: left out, {why})")
            return None
        raise Untranslatable(f"tool_choice {choice!r}: {why}")

    def _chosen(self, name: str) -> str:
        return name if name in self._top_level else self._inner.get(name, name)

    def _allowed(self, choice: dict) -> dict:
        entries = as_list(choice.get("tools"))
        names = [
            self._chosen(entry["name"])
            for entry in entries
            if dig(entry, "type") in ("function", "custom") and as_str(entry.get("name"))
        ]
        if self.web_search is not None and not any(_is_web_search(dig(e, "type")) for e in entries):
            self.web_search = None
            self.ctx.drop(f"{self._search_at} (left out: not among tool_choice.allowed_tools)")
        tools = [{"type": "function", "function": {"name": name}} for name in names]
        mode = "required" if choice.get("mode") == "required" else "auto"
        return {"type": "allowed_tools", "allowed_tools": {"mode": mode, "tools": tools}}


def _description(tool: dict, namespace: dict | None) -> str:
    """The tool's description; inside a namespace, followed by what the namespace is for."""
    own = as_str(tool.get("description")) or ""
    if namespace is None:
        return own
    group = as_str(namespace.get("description"))
    about = f"Part of the {namespace['name']} tools" + (f": {group}" if group else ".")
    return f"{own}\n\n{about}" if own else about


def _freeform_schema(tool: dict, where: str, ctx: RequestTranslation) -> dict:
    """A freeform tool's one string, described by what its ``format`` requires."""
    fmt = tool.get("format")
    kind = dig(fmt, "type")
    what = "The tool's whole input as plain text, exactly as the tool takes it (not JSON)."
    if kind == "grammar":
        syntax = as_str(fmt.get("syntax")) or "given"
        definition = as_str(fmt.get("definition")) or ""
        what = (
            "The tool's whole input as plain text (not JSON), which must match this "
            f"{syntax} grammar:\n{definition}"
        )
    elif kind not in (None, "text"):
        ctx.drop(f"{where}.format ({kind}: sent as plain text)")
    text = {"type": "string", "description": what}
    return {"type": "object", "properties": {"input": text}, "required": ["input"]}


def _filters(filters: dict, search: dict, where: str, ctx: RequestTranslation) -> None:
    for key, value in filters.items():
        if key == "allowed_domains" and isinstance(value, list) and value:
            search["allowed_domains"] = value
        elif value is not None:
            ctx.drop(f"{where}.filters.{key}")


def _location(location: dict, search: dict, where: str, ctx: RequestTranslation) -> None:
    """OpenAI's and Anthropic's approximate locations have the same fields."""
    fields = {key: location[key] for key in _LOCATION_KEYS if as_str(location.get(key))}
    if fields:
        search["user_location"] = {"type": "approximate", **fields}
    for key in location:
        if key not in (*_LOCATION_KEYS, "type"):
            ctx.drop(f"{where}.user_location.{key}")
