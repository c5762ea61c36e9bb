r"""The rules of taplog's PreToolUse gate: which tool calls a model asks for are refused
(`deny`) or marked (`flag`) before the agent receives them. This module parses, checks and
matches the rules; the gate that holds and rewrites answers uses `Policy.judge`.

    [[tool_policy]]
    id = "ci-no-root-deletes"             # shown to the agent, in events and metrics
    name = "Bash"                         # glob on the tool's name
    arguments = 'rm\s+-rf'                # regex searched in the arguments as compact JSON
    fields = { command = '^sudo\b' }      # regex per field of the arguments (path = regex)
    session = "ci-*"                      # glob on the session id
    key = "key:1a2b3c4d5e6f7a8b"          # glob on the API key's fingerprint
    model = "claude-*"                    # glob on the model the client asked for
    action = "deny"                       # or "flag": recorded and counted, nothing changed
    reason = "no recursive deletes as root in CI"   # what the agent reads (deny: required)

Rules come from the `--tool-policy` file first, then from the config file; the first rule
that matches a call decides it. Every match key a rule gives must match, and a rule must
give one: `name = "*"` is how to mean every call. `arguments` is searched in the arguments
re-serialised as compact JSON (the model's spacing never matters), or in the raw text when
they are not JSON (a freeform tool's input, arguments cut short at the hold limit);
`fields` read parsed JSON only, and a missing field matches nothing.

Judging is cheap because the work is done at load: every regex and glob is compiled once,
and a call's arguments are parsed and re-serialised at most once, only when a rule reads
them.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ACTIONS = ("deny", "flag")
MATCH_KEYS = ("name", "arguments", "fields", "session", "key", "model")
KEYS = ("id", *MATCH_KEYS, "action", "reason")
FLAG_REASON = "flagged by the tool policy"
_ID = re.compile(r"\S{1,128}")


@dataclass(frozen=True, slots=True)
class GatedCall:
    """One tool call the model asked for, as the client would receive it."""

    name: str
    # As the model sent them: JSON text for a function tool, the raw input for a custom
    # (freeform) tool; possibly cut short (see partial).
    arguments: str
    call_id: str  # the API's id for it (tool_use id, tool_calls[].id, call_id); "" when none
    partial: bool = False  # the arguments were cut at the hold limit: judged on what arrived


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What a rule may match besides the tool call itself."""

    session: str
    key_fingerprint: str | None  # `key:` and 16 hex digits (recorder.secrets.fingerprint)
    model: str | None  # as the client asked for it


@dataclass(frozen=True, slots=True)
class Decision:
    action: str  # "deny" or "flag"
    rule: str  # the rule's id
    reason: str
    call: GatedCall


@dataclass(frozen=True, slots=True)
class Glob:
    """An fnmatch glob (case-sensitive), compiled once."""

    text: str
    compiled: re.Pattern[str]

    @classmethod
    def of(cls, text: str) -> Glob:
        return cls(text, re.compile(fnmatch.translate(text)))

    def matches(self, value: str | None) -> bool:
        return value is not None and self.compiled.match(value) is not None


@dataclass(frozen=True, slots=True)
class FieldMatch:
    """A regex searched in one field of the arguments, found by a dot-separated path of keys
    and list indexes (`edits.0.path`)."""

    steps: tuple[str, ...]
    pattern: re.Pattern[str]

    @property
    def path(self) -> str:
        return ".".join(self.steps)

    def matches(self, arguments: Any) -> bool:
        value = arguments
        for step in self.steps:
            if isinstance(value, dict) and step in value:
                value = value[step]
            elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
                value = value[int(step)]
            else:
                return False  # a missing field matches nothing
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        return self.pattern.search(text) is not None


_NOT_JSON = object()  # arguments that do not parse: a freeform tool's input, or cut short
_UNREAD = object()


class _Arguments:
    """One call's arguments as the rules read them, parsed and re-serialised at most once:
    compact JSON when they are JSON, else (a freeform tool's input, arguments cut short) the
    raw text."""

    __slots__ = ("_compact", "_parsed", "raw")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self._parsed: Any = _UNREAD
        self._compact: str | None = None

    def parsed(self) -> Any:
        """The arguments as JSON values, or `_NOT_JSON`."""
        if self._parsed is _UNREAD:
            try:
                self._parsed = orjson.loads(self.raw)
            except orjson.JSONDecodeError:
                self._parsed = _NOT_JSON
        return self._parsed

    def compact(self) -> str:
        if self._compact is None:
            parsed = self.parsed()
            self._compact = self.raw if parsed is _NOT_JSON else orjson.dumps(parsed).decode()
        return self._compact


@dataclass(frozen=True, slots=True)
class ToolRule:
    """One `[[tool_policy]]` table, checked and compiled; None: the key was not given."""

    id: str
    action: str
    reason: str
    name: Glob | None = None
    arguments: re.Pattern[str] | None = None
    fields: tuple[FieldMatch, ...] = ()
    session: Glob | None = None
    key: Glob | None = None
    model: Glob | None = None

    def matches(self, call: GatedCall, facts: CallFacts, arguments: _Arguments) -> bool:
        """Whether every match key this rule gives matches: the cheap globs first."""
        if self.name is not None and not self.name.matches(call.name):
            return False
        if self.session is not None and not self.session.matches(facts.session):
            return False
        if self.key is not None and not self.key.matches(facts.key_fingerprint):
            return False
        if self.model is not None and not self.model.matches(facts.model):
            return False
        if self.arguments is not None and self.arguments.search(arguments.compact()) is None:
            return False
        if self.fields:
            parsed = arguments.parsed()
            return parsed is not _NOT_JSON and all(f.matches(parsed) for f in self.fields)
        return True

    def summary(self) -> str:
        """The rule in a line, as `check-config` prints it:
        `deny Bash when arguments ~ rm\\s+-rf ("no recursive deletes")`."""
        conditions = [f"arguments ~ {self.arguments.pattern}"] if self.arguments else []
        conditions += [f"{field.path} ~ {field.pattern.pattern}" for field in self.fields]
        conditions += [
            f"{label} is {glob.text}"
            for label, glob in (("session", self.session), ("key", self.key), ("model", self.model))
            if glob is not None
        ]
        when = f" when {' and '.join(conditions)}" if conditions else ""
        tool = self.name.text if self.name else "any tool"
        return f'{self.action} {tool}{when} ("{self.reason}")'


@dataclass(frozen=True, slots=True)
class Policy:
    rules: tuple[ToolRule, ...] = ()

    def judge(self, call: GatedCall, facts: CallFacts) -> Decision | None:
        """The decision of the first rule that matches the call; None when none does."""
        arguments = _Arguments(call.arguments)
        for rule in self.rules:
            if rule.matches(call, facts, arguments):
                return Decision(rule.action, rule.id, rule.reason, call)
        return None

    def __bool__(self) -> bool:
        """False without rules: the proxy then builds no gate at all."""
        return bool(self.rules)


def refusal_text(decision: Decision) -> str:
    """What the agent reads in place of a refused call: whose refusal it is, of which call,
    by which rule and why, and that the tool was not run, so that the model neither waits
    for a result nor believes the call happened."""
    reason = decision.reason if decision.reason.endswith((".", "!", "?")) else decision.reason + "."
    return (
        f"taplog's tool policy refused this call to {decision.call.name} "
        f"(rule {decision.rule}): {reason} The tool was not run."
    )


class _BadRule(ValueError):
    """A rule refused at load; `load_policy` gives it to the caller as a ConfigError."""


def _glob(where: str, value: Any) -> Glob:
    if not isinstance(value, str) or not value:
        raise _BadRule(f'{where}: must be a glob (a non-empty string such as "mcp__*")')
    return Glob.of(value)


def _regex(where: str, value: Any) -> re.Pattern[str]:
    if not isinstance(value, str):
        raise _BadRule(f"{where}: must be a regular expression (a string)")
    try:
        return re.compile(value)
    except re.error as exc:
        raise _BadRule(f"{where}: bad regular expression: {exc}") from None


def _fields(where: str, value: Any) -> tuple[FieldMatch, ...]:
    if not isinstance(value, dict) or not value:
        raise _BadRule(
            f"{where}: must be a table of field path = regex, such as {{ command = '^rm' }}"
        )
    matches = []
    for path, pattern in value.items():
        steps = tuple(path.split("."))
        if not all(steps):
            raise _BadRule(f"{where}.{path}: a path is keys and list indexes joined by dots")
        matches.append(FieldMatch(steps, _regex(f"{where}.{path}", pattern)))
    return tuple(matches)


def _rule(where: str, table: Any, default_id: str) -> ToolRule:
    """One `[[tool_policy]]` table, checked key by key (`where` names it in messages)."""
    if not isinstance(table, dict):
        raise _BadRule(f"{where}: must be a table ([[tool_policy]] with name, action, …)")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise _BadRule(f"{where}: unknown key {unknown[0]!r} ({', '.join(KEYS)})")
    if not any(key in table for key in MATCH_KEYS):
        raise _BadRule(
            f"{where}: matches every call (it has none of {', '.join(MATCH_KEYS)}); "
            'write name = "*" if that is meant'
        )
    rule_id = table.get("id", default_id)
    if not isinstance(rule_id, str) or not _ID.fullmatch(rule_id):
        raise _BadRule(f"{where}.id: must be 1 to 128 characters without spaces")
    action = table.get("action")
    if action not in ACTIONS:
        got = "missing" if action is None else f"got {action!r}"
        raise _BadRule(f'{where}.action: must be "deny" or "flag" ({got})')
    reason = table.get("reason", FLAG_REASON if action == "flag" else None)
    if reason is None:
        raise _BadRule(f"{where}.reason: missing: a deny rule says why (the agent reads it)")
    if not isinstance(reason, str) or not reason.strip():
        raise _BadRule(f"{where}.reason: must be a sentence saying why (a non-empty string)")

    def optional(key: str, parse: Callable[[str, Any], Any]) -> Any:
        return parse(f"{where}.{key}", table[key]) if key in table else None

    return ToolRule(
        id=rule_id,
        action=action,
        reason=reason.strip(),
        name=optional("name", _glob),
        arguments=optional("arguments", _regex),
        fields=optional("fields", _fields) or (),
        session=optional("session", _glob),
        key=optional("key", _glob),
        model=optional("model", _glob),
    )


def _tables(source: str, tables: Any) -> list[Any]:
    if not isinstance(tables, list):
        raise _BadRule(f"{source}: tool_policy: must be [[tool_policy]] tables")
    return tables


def _policy_file_tables(path: Path) -> list[Any]:
    """The `[[tool_policy]]` tables of a `--tool-policy` file, which holds nothing else."""
    source = f"tool policy file {path}"
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise _BadRule(f"{source}: {exc.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _BadRule(f"{source}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"tool_policy"})
    if unknown:
        raise _BadRule(f"{source}: unknown key {unknown[0]!r} (only [[tool_policy]] tables)")
    return _tables(source, data.get("tool_policy", []))


def load_policy(file: Mapping[str, Any], config: Path | None, policy_file: Path | None) -> Policy:
    """The `[[tool_policy]]` tables of the `--tool-policy` file (first) then of the config
    file `config` (whose contents are `file`), checked; a ConfigError naming the bad rule
    and key otherwise. In the config file `tool_policy` may instead be the policy file's
    path: that is `policy_file`, read here."""
    from taplog.proxy.config import ConfigError  # not at the top: config imports this module

    try:
        sources = []
        if policy_file is not None:
            where = f"tool policy file {policy_file}"
            prefix = f"{policy_file.name}:"
            sources.append((where, prefix, _policy_file_tables(policy_file)))
        in_config = file.get("tool_policy")
        if in_config is not None and not isinstance(in_config, str):
            sources.append(
                (f"config file {config}", "", _tables(f"config file {config}", in_config))
            )
        rules: list[ToolRule] = []
        defined: dict[str, str] = {}
        for where, prefix, tables in sources:
            for number, table in enumerate(tables):
                position = f"{where}: tool_policy[{number}]"
                rule = _rule(position, table, f"{prefix}tool_policy[{number}]")
                if rule.id in defined:
                    raise _BadRule(
                        f"{position}.id: {rule.id!r} is already the id of {defined[rule.id]}"
                    )
                defined[rule.id] = position
                rules.append(rule)
    except _BadRule as exc:
        raise ConfigError(str(exc)) from None
    return Policy(tuple(rules))
