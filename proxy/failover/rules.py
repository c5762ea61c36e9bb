"""Failover configuration: named providers and fallback rules, checked at start.

    [providers.openrouter]            # openai and anthropic exist already
    type = "openai"                   # "openai" (any OpenAI-compatible server) or "anthropic"
    base_url = "https://openrouter.ai/api/v1"
    api_key_env = "OPENROUTER_API_KEY"
    api = "chat"                      # openai type: serve Anthropic clients via chat or responses
    prefill = true                    # its models continue a trailing assistant message
                                      # (default: litellm's catalogue where it knows the
                                      # model, else false)

    [[fallback]]
    model = "gpt-*"                   # requested model: exact name or glob
    to = ["openai:gpt-4.1-mini", "anthropic:claude-sonnet-4-6"]
                                      # or a table: {target = "openrouter:x", prefill = false}
    retries = 2                       # per target, for retryable failures
    timeout_retries = 0               # of those, after a timeout (0: next target at once)
    connect_timeout = 10              # seconds to connect to a vendor
    ttfb_timeout = 60                 # seconds to the first byte of the answer
    idle_timeout = 60                 # seconds between stream events
    total_timeout = 600               # seconds for one try, answer included
    leave_out_untranslatable = true   # fail over without what the target cannot take (hosted
                                      # tools, freeform tools, encrypted reasoning), recorded;
                                      # false: such a call is not failed over
    midstream = "continue"            # a stream broken after bytes reached the client:
                                      # "continue" it on the next target, or end it with "error"

On the command line, `--fallback 'gpt-*=anthropic:claude-sonnet-4-6'` adds a
rule with the defaults. Keys are never in the file: a provider names the
environment variable that holds its key.

A call whose model has no rule goes the same way, as a chain of one: its own
vendor, no retries, the `--connect-timeout`, `--read-timeout` and
`--total-timeout` settings, and a broken stream ends with an error event
(`plain_rule`).
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from taplog.proxy.config import ConfigError, Settings, check_base_url
from taplog.recorder import prices
from taplog.recorder.vendors.apis import provider_endpoint

PROVIDER_TYPES = ("openai", "anthropic", "gemini")
MIDSTREAM = ("continue", "error")
_RULE_DEFAULTS = {
    "retries": 2,
    "timeout_retries": 0,
    "connect_timeout": 10.0,
    "ttfb_timeout": 60.0,
    "idle_timeout": 60.0,
    "total_timeout": 600.0,
    "midstream": "continue",
    "leave_out_untranslatable": True,  # what real coding agents send must fail over
}
_SECONDS = ("connect_timeout", "ttfb_timeout", "idle_timeout", "total_timeout")


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    type: str  # openai | anthropic | gemini: its wire format
    base_url: str
    api_key_env: str
    api: str = "chat"  # openai type: the API that serves Anthropic clients (chat | responses)
    prefill: bool | None = None  # continues a trailing assistant message; None: ask litellm

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


@dataclass(frozen=True, slots=True)
class Target:
    provider: Provider
    model: str
    prefill: bool | None = None  # None: as its provider says

    def context_window(self) -> int | None:
        """Input tokens its model takes, per litellm's catalogue (None: unknown)."""
        info = prices.model_info(self.provider.type, self.model)
        return info.context_window if info is not None else None

    def takes_prefill(self) -> bool:
        """Whether this target continues a partial answer given as a trailing assistant
        message: as declared (target, then provider), else as litellm's catalogue says."""
        declared = self.prefill if self.prefill is not None else self.provider.prefill
        if declared is not None:
            return declared
        info = prices.model_info(self.provider.type, self.model)
        return info is not None and info.assistant_prefill

    def __str__(self) -> str:
        return f"{self.provider.name}:{self.model}"


@dataclass(frozen=True, slots=True)
class Rule:
    model: str
    targets: tuple[Target, ...]
    retries: int = 2
    timeout_retries: int = 0  # a silent vendor is retried this often, at most `retries`
    connect_timeout: float = 10.0
    ttfb_timeout: float = 60.0
    idle_timeout: float = 60.0
    total_timeout: float = 600.0
    midstream: str = "continue"
    leave_out_untranslatable: bool = True
    plain: bool = False  # a call without a rule: its timeouts are the --*-timeout settings
    # aiohttp's timeouts for one try: connecting, silence between reads, the whole try
    # (the wait for the first byte is the caller's: `ttfb_timeout`); made once.
    client_timeout: aiohttp.ClientTimeout = field(init=False, repr=False, compare=False)

    def matches(self, model: str) -> bool:
        return fnmatch.fnmatchcase(model, self.model)

    def __post_init__(self) -> None:
        timeout = aiohttp.ClientTimeout(
            total=self.total_timeout, sock_connect=self.connect_timeout, sock_read=self.idle_timeout
        )
        object.__setattr__(self, "client_timeout", timeout)

    def knob(self, timeout: str) -> str:
        """Where the `timeout` (ttfb, idle, connect, total) of this rule is set, for messages."""
        if self.plain:
            return _PLAIN_KNOBS[timeout]
        return f"{timeout}_timeout of the fallback rule for {self.model!r}"


_PLAIN_KNOBS = {
    "ttfb": "--read-timeout",
    "idle": "--read-timeout",
    "connect": "--connect-timeout",
    "total": "--total-timeout",
}


def plain_rule(settings: Settings) -> Rule:
    """The chain of a call without a fallback rule: its own vendor, once."""
    return Rule(
        model="*",
        targets=(),
        retries=0,
        connect_timeout=settings.connect_timeout,
        ttfb_timeout=settings.read_timeout,
        idle_timeout=settings.read_timeout,
        total_timeout=settings.total_timeout,
        midstream="error",
        plain=True,
    )


@dataclass(frozen=True, slots=True)
class Fallbacks:
    providers: Mapping[str, Provider]
    rules: tuple[Rule, ...] = field(default=())

    def rule_for(self, model: Any) -> Rule | None:
        """The first rule whose pattern matches the requested model."""
        if not isinstance(model, str):
            return None
        return next((rule for rule in self.rules if rule.matches(model)), None)


def _check_url(where: str, url: Any) -> str:
    if not isinstance(url, str):
        raise ConfigError(f"{where}: must be an http(s) URL")
    try:
        check_base_url(url)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return url


def _provider(name: str, table: Any) -> Provider:
    where = f"providers.{name}"
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table")
    unknown = sorted(set(table) - {"type", "base_url", "api_key_env", "api", "prefill"})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}")
    kind = table.get("type")
    if kind not in PROVIDER_TYPES:
        raise ConfigError(f"{where}.type: must be one of {', '.join(PROVIDER_TYPES)}")
    env = table.get("api_key_env")
    if not isinstance(env, str) or not env.isidentifier():
        raise ConfigError(f"{where}.api_key_env: the name of an environment variable")
    api = table.get("api", "chat")
    if api not in ("chat", "responses") or (api == "responses" and kind != "openai"):
        raise ConfigError(f"{where}.api: 'chat' or 'responses' (openai providers only)")
    prefill = table.get("prefill")
    if prefill is not None and not isinstance(prefill, bool):
        raise ConfigError(f"{where}.prefill: true or false")
    url = _check_url(f"{where}.base_url", table.get("base_url"))
    return Provider(name, kind, url, env, api, prefill)


def parse_target(where: str, text: Any, providers: Mapping[str, Provider]) -> Target:
    """A target: `provider:model`, or `{target = "provider:model", prefill = true|false}`."""
    if isinstance(text, dict):
        unknown = sorted(set(text) - {"target", "prefill"})
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r}")
        prefill = text.get("prefill")
        if prefill is not None and not isinstance(prefill, bool):
            raise ConfigError(f"{where}.prefill: true or false")
        target = parse_target(f"{where}.target", text.get("target"), providers)
        return Target(target.provider, target.model, prefill)
    name, colon, model = text.partition(":") if isinstance(text, str) else ("", "", "")
    if not colon or not model:
        raise ConfigError(f"{where}: write targets as 'provider:model', got {text!r}")
    if name not in providers:
        raise ConfigError(f"{where}: unknown provider {name!r} (known: {', '.join(providers)})")
    return Target(providers[name], model)


def _rule(where: str, table: dict[str, Any], providers: Mapping[str, Provider]) -> Rule:
    unknown = sorted(set(table) - {"model", "to", *_RULE_DEFAULTS})
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}")
    model, targets = table.get("model"), table.get("to")
    if not isinstance(model, str) or not model:
        raise ConfigError(f"{where}.model: a model name or glob such as 'gpt-*'")
    if not isinstance(targets, list) or not targets:
        raise ConfigError(f"{where}.to: a list of 'provider:model' targets")
    values = {**_RULE_DEFAULTS, **{k: table[k] for k in _RULE_DEFAULTS if k in table}}
    for key in ("retries", "timeout_retries"):
        if not isinstance(values[key], int) or not 0 <= values[key] <= 10:
            raise ConfigError(f"{where}.{key}: a whole number from 0 to 10")
    for key in _SECONDS:
        if not isinstance(values[key], int | float) or values[key] <= 0:
            raise ConfigError(f"{where}.{key}: seconds, greater than 0")
    if not isinstance(values["leave_out_untranslatable"], bool):
        raise ConfigError(f"{where}.leave_out_untranslatable: true or false")
    if values["midstream"] not in MIDSTREAM:
        raise ConfigError(f"{where}.midstream: must be one of {', '.join(MIDSTREAM)}")
    chain = tuple(parse_target(f"{where}.to[{i}]", t, providers) for i, t in enumerate(targets))
    return Rule(model, chain, **values)


def parse_cli_rule(text: str) -> dict[str, Any]:
    """`MODEL=PROVIDER:MODEL[,PROVIDER:MODEL…]` as a rule table."""
    model, equals, targets = text.partition("=")
    if not equals or not model or not targets:
        raise ConfigError(f"--fallback: write 'MODEL=PROVIDER:MODEL[,…]', got {text!r}")
    return {"model": model, "to": targets.split(",")}


def load_fallbacks(
    openai_base: str,
    anthropic_base: str,
    file: Mapping[str, Any],
    cli_rules: tuple[str, ...],
    gemini_base: str = provider_endpoint("gemini").BASE_URL,
) -> Fallbacks:
    """Providers and rules from the config file and `--fallback` flags, all checked."""
    providers = {
        "openai": Provider("openai", "openai", openai_base, "OPENAI_API_KEY"),
        "anthropic": Provider("anthropic", "anthropic", anthropic_base, "ANTHROPIC_API_KEY"),
        "gemini": Provider("gemini", "gemini", gemini_base, "GEMINI_API_KEY"),
    }
    tables = file.get("providers", {})
    if not isinstance(tables, dict):
        raise ConfigError("providers: must be a table of provider tables")
    providers.update({name: _provider(name, table) for name, table in tables.items()})
    rule_tables = file.get("fallback", [])
    if not isinstance(rule_tables, list) or not all(isinstance(t, dict) for t in rule_tables):
        raise ConfigError("fallback: must be an array of tables ([[fallback]])")
    rules = [_rule(f"fallback[{i}]", t, providers) for i, t in enumerate(rule_tables)]
    rules += [_rule(f"--fallback {r!r}", parse_cli_rule(r), providers) for r in cli_rules]
    return Fallbacks(providers, tuple(rules))
