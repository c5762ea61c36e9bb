"""Every setting of `taplog serve`, declared once: type, default, help, check.

Values come from, highest first: command-line flags, `TAPLOG_<NAME>`
environment variables, the TOML config file (`--config` / `TAPLOG_CONFIG`),
the defaults below. Every value is checked at start-up and a bad one is
refused with a message naming the option and where it came from. Vendor keys
are never settings: clients send their own.

Secret settings (the inbound `auth_token`) come only from a flag or the
environment, never from the config file; messages and `repr` show them as
`***`.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from taplog.proxy.metadata_hosts import is_metadata_host
from taplog.proxy.tool_policy import Policy, load_policy
from taplog.recorder.fleet.layout import check_instance, default_instance, parse_location
from taplog.recorder.redaction import BUILT_IN, Redaction, custom_rule, redaction_of
from taplog.recorder.vendors.apis import provider_endpoint
from taplog.recorder.vendors.reruns import IgnoredField

FSYNC_CHOICES = ("always", "interval", "never")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
REPLAY_MODES = ("strict", "passthrough", "record-missing")
FAILOVER_TABLES = frozenset({"providers", "fallback"})  # read by proxy.failover.rules


class ConfigError(ValueError):
    """A setting that taplog refuses to start with."""


def _port(value: int) -> None:
    if not 0 <= value <= 65535:
        raise ValueError("must be a port number from 0 (any free port) to 65535")


def _redis_url(value: str) -> None:
    if value and not value.startswith(("redis://", "rediss://", "unix://")):
        raise ValueError("a Redis URL: redis://HOST:PORT/DB, rediss://… or unix://PATH")


def _advertise_url(value: str) -> None:
    if value:
        check_base_url(value)


def _otlp_endpoint(value: str) -> None:
    if value:
        check_base_url(value)


def _workers(value: int) -> None:
    if not 0 <= value <= 256:
        raise ValueError("must be from 0 (one process) to 256")


def _positive(value: float) -> None:
    if value <= 0:
        raise ValueError("must be greater than 0")


def _not_negative(value: float) -> None:
    if value < 0:
        raise ValueError("must be 0 or more")


@dataclass(frozen=True)
class OneOf:
    """A check that also tells the CLI which values to offer."""

    choices: tuple[str, ...]

    def __call__(self, value: str) -> None:
        if value not in self.choices:
            raise ValueError(f"must be one of {', '.join(self.choices)}")


def check_base_url(value: str) -> None:
    """A vendor base URL, checked whole, so that what passes `check-config` also works:
    http(s) with a host, a port in range, no whitespace or control characters, no
    credentials, query or fragment, no cloud metadata service (`is_metadata_host`)."""
    if any(char.isspace() or not char.isprintable() for char in value):
        raise ValueError("must not contain whitespace or control characters")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http(s) URL such as https://api.openai.com/v1")
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when asked
    except ValueError:
        raise ValueError("must have a port from 1 to 65535") from None
    if parts.port == 0:
        raise ValueError("must have a port from 1 to 65535")
    if parts.username or parts.password:
        raise ValueError("must not carry credentials; keys come from the environment")
    if parts.query or parts.fragment or "?" in value or "#" in value:
        raise ValueError("must not have a query string or fragment")
    if is_metadata_host(parts.hostname):
        raise ValueError(
            "must not point at a cloud metadata service (a link-local address, or an "
            "address or name such a service answers on)"
        )


def _listen_host(value: str) -> None:
    if not value or any(char.isspace() or not char.isprintable() for char in value):
        raise ValueError("must be an address or host name, without whitespace")


def _replay_source(value: str) -> None:
    if value and not Path(value).exists():
        raise ValueError("must be an existing data dir or session file (empty: no replay)")


MIN_SHIP_AFTER_MINUTES = 0.01  # 0.6 s: tests ship that soon; a user means minutes


def _ship_after(minutes: float) -> None:
    if minutes < MIN_SHIP_AFTER_MINUTES:
        raise ValueError(
            f"must be at least {MIN_SHIP_AFTER_MINUTES} (a session idle that long is closed)"
        )


FLEET_MODULES = ("boto3", "deltalake", "pyarrow")  # what the `fleet` extra installs to ship


def _ship_to(value: str) -> None:
    if value:
        parse_location(value)
        missing = [name for name in FLEET_MODULES if importlib.util.find_spec(name) is None]
        if missing:
            raise ValueError(f"needs taplog[fleet] ({missing[0]} is missing)")


def _policy_file(value: str) -> None:
    if value and not Path(value).is_file():
        raise ValueError("must be an existing file of [[tool_policy]] tables (empty: none)")


def _field_paths(value: str) -> tuple[IgnoredField, ...]:
    return tuple(IgnoredField(path.strip()) for path in value.split(",") if path.strip())


_TOKEN = re.compile(r"[A-Za-z0-9._~-]{16,256}")
MAKE_TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"


def _tokens(value: str) -> None:
    if value and not all(_TOKEN.fullmatch(token) for token in value.split(",")):
        raise ValueError(
            "each token (comma-separated) must be 16 to 256 letters, digits, '-', '_', '.' "
            f"or '~'; make one with: {MAKE_TOKEN}"
        )


def _detector_names(value: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in value.split(",") if name.strip())


def _detectors(value: str) -> None:
    for name in _detector_names(value):
        if name not in BUILT_IN:
            raise ValueError(f"unknown detector {name!r}: choose from {', '.join(BUILT_IN)}")


def setting(
    default: Any, help: str, check: Callable[[Any], None] | None = None, secret: bool = False
) -> Any:
    return field(default=default, metadata={"help": help, "check": check, "secret": secret})


@dataclass(frozen=True)
class Settings:
    host: str = setting("127.0.0.1", "Address to listen on.", _listen_host)
    port: int = setting(8787, "Port to listen on (0: any free port).", _port)
    workers: int = setting(
        0,
        "Proxy worker processes sharing the port, beside one recorder process that writes "
        "the logs; 0: everything in one process, the recorder on a thread (the quickest "
        "for a few agents at a time).",
        _workers,
    )
    data_dir: Path = setting(Path("taplog-data"), "Where session logs are kept.")
    openai_base: str = setting(
        provider_endpoint("openai").BASE_URL,
        "OpenAI API root, in the form of OPENAI_BASE_URL.",
        check_base_url,
    )
    anthropic_base: str = setting(
        provider_endpoint("anthropic").BASE_URL,
        "Anthropic API root, in the form of ANTHROPIC_BASE_URL.",
        check_base_url,
    )
    gemini_base: str = setting(
        provider_endpoint("gemini").BASE_URL,
        "Gemini API root, in the form of GOOGLE_GEMINI_BASE_URL (the host: the paths "
        "carry their version).",
        check_base_url,
    )
    fsync: str = setting(
        "interval",
        "When logs reach the disk: always (every batch), interval (at most 100 ms "
        "of loss), never (left to the OS).",
        OneOf(FSYNC_CHOICES),
    )
    max_body_mb: float = setting(64.0, "Largest request body accepted, in MiB.", _positive)
    body_inline_max_kb: float = setting(
        1024.0,
        "Bodies (and raw streams) larger than this, in KiB, are stored beside the log in "
        "blobs/, content-addressed; the log line points at them.",
        _positive,
    )
    redact: str = setting(
        "",
        "Redact from what is recorded, never from what is sent: built-in detectors, "
        f"comma-separated ({', '.join(BUILT_IN)}); the log keeps [redacted:NAME] in their "
        "place. Rules of your own: [[redact]] tables (name, pattern) in the config file.",
        _detectors,
    )
    # The config file's [[redact]] tables, checked: (name, pattern; None for a built-in).
    redact_rules: tuple[tuple[str, str | None], ...] = field(default=(), repr=False)
    tool_policy: str = setting(
        "",
        "A TOML file of [[tool_policy]] tables: rules that deny or flag the tool calls models "
        "ask for, before the agent gets them (docs/tool-policy.md). The config file may hold "
        "[[tool_policy]] tables too, after this file's; the first rule that matches a call "
        "wins. Empty: the config file's rules alone.",
        _policy_file,
    )
    # The rules of the tool_policy file then of the config file's [[tool_policy]], checked.
    tool_policy_rules: Policy = field(default=Policy(), repr=False)
    body_timeout: float = setting(
        60.0, "Seconds a client may take to send its request body (then: 408).", _positive
    )
    header_timeout: float = setting(
        60.0,
        "Seconds a connection may take to send a request's headers, or stay idle "
        "between requests (then: closed).",
        _positive,
    )
    connect_timeout: float = setting(10.0, "Seconds to connect to a vendor.", _positive)
    read_timeout: float = setting(
        600.0, "Seconds a vendor may stay silent before the call times out.", _positive
    )
    total_timeout: float = setting(
        3600.0, "Seconds a whole call may take, streaming included (then: cut off).", _positive
    )
    max_answer_mb: float = setting(
        256.0, "Most bytes one answer may stream to a client, in MiB (then: cut off).", _positive
    )
    max_sse_event_mb: float = setting(
        16.0, "Largest stream event (and so stream line) a vendor may send, in MiB.", _positive
    )
    shutdown_grace: float = setting(
        30.0, "Seconds in-flight calls may take to finish on SIGINT/SIGTERM.", _positive
    )
    queue_high_water_mb: float = setting(
        256.0, "Unwritten log data, in MiB, above which new calls are refused.", _positive
    )
    session_idle_minutes: float = setting(
        60.0, "Idle time after which a stateless chat starts a new session.", _positive
    )
    session_max_cost_usd: float = setting(
        0.0,
        "Most a session may cost, in USD, before its next call is refused (a 403); calls of "
        "a model with no price add nothing to it (docs/budgets.md). 0: no limit.",
        _not_negative,
    )
    session_max_calls: int = setting(
        0, "Most calls a session may make; the next one is refused. 0: no limit.", _not_negative
    )
    session_max_tokens: int = setting(
        0,
        "Most tokens (input and output) a session may use; the next call is refused. 0: no limit.",
        _not_negative,
    )
    session_max_calls_per_minute: int = setting(
        0,
        "Most calls a session may make in any 60 seconds; more are refused. 0: no limit.",
        _not_negative,
    )
    key_max_cost_usd: float = setting(
        0.0,
        "As session_max_cost_usd, over every session of one API key (taplog's fingerprint "
        "of it), since taplog started. 0: no limit.",
        _not_negative,
    )
    key_max_calls: int = setting(
        0, "As session_max_calls, over every session of one API key. 0: no limit.", _not_negative
    )
    key_max_tokens: int = setting(
        0, "As session_max_tokens, over every session of one API key. 0: no limit.", _not_negative
    )
    key_max_calls_per_minute: int = setting(
        0,
        "As session_max_calls_per_minute, over every session of one API key. 0: no limit.",
        _not_negative,
    )
    loop_guard: int = setting(
        0,
        "Refuse a session's next call once its model asked for the same tool with the same "
        "arguments this many times in a row. 0: off.",
        _not_negative,
    )
    compact_after_minutes: float = setting(
        60.0,
        "Copy sessions idle this long into Parquet for fast queries (0: never).",
        _not_negative,
    )
    retention_days: int = setting(
        0,
        "Remove whole sessions whose last event is older than this many days, at start and "
        "hourly (0: keep them for ever); see docs/retention.md.",
        _not_negative,
    )
    instance: str = setting(
        "",
        "This instance's name in the fleet's shipped data (its partition); empty: the host name.",
        check_instance,
    )
    ship_to: str = setting(
        "",
        "Copy closed sessions (logs, Parquet, blobs) to S3-compatible object storage at "
        "s3://BUCKET/PREFIX, off the request path; endpoint and keys from AWS_ENDPOINT_URL, "
        "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION. Empty: no shipping.",
        _ship_to,
    )
    ship_after_minutes: float = setting(
        10.0,
        "With ship_to, ship sessions idle this long (a session that grows again is shipped "
        f"again); at least {MIN_SHIP_AFTER_MINUTES}, a round at most once a second.",
        _ship_after,
    )
    log_format: str = setting(
        "text",
        "Format of taplog's own log lines on stderr (one per call, never headers or "
        "bodies): text or json.",
        OneOf(LOG_FORMATS),
    )
    log_level: str = setting(
        "info",
        "Least severe log lines shown: debug, info (one line per call), warning, error.",
        OneOf(LOG_LEVELS),
    )
    otlp_endpoint: str = setting(
        "",
        "Send each call as an OpenTelemetry span (GenAI conventions), tool runs and "
        "failovers too, to this OTLP/HTTP collector: its base URL, /v1/traces added "
        "(http://127.0.0.1:6006 for Phoenix, http://127.0.0.1:4318 for Jaeger); built from "
        "the recorded events off the request path, dropped (and counted) when it is away. "
        "Needs the `otel` extra. Empty: no traces.",
        _otlp_endpoint,
    )
    otlp_content: bool = setting(
        False,
        "With otlp_endpoint, put the messages in the spans (gen_ai.input.messages, "
        "gen_ai.output.messages, tool arguments and results), as recorded: secrets "
        "redacted, never headers.",
    )
    auth_token: str = setting(
        "",
        "Tokens clients must present (comma-separated; each 16+ URL-safe characters) in an "
        "X-Taplog-Token header or a /t/<token>/ base-URL prefix. Required to listen beyond "
        "loopback. Flag or environment only, never the config file.",
        _tokens,
        secret=True,
    )
    coordination: str = setting(
        "",
        "Redis the instances of a fleet share (redis://HOST:PORT/DB): a lease and an epoch "
        "per session, so one instance writes a session at a time, and their circuit "
        "breakers, each instance deciding from a copy at most a second old and using its "
        "own while Redis is away. Flag or environment only (the URL may hold a password).",
        _redis_url,
        secret=True,
    )
    advertise_url: str = setting(
        "",
        "With coordination, where the other instances reach this one to send it the calls "
        "of sessions it owns (http://HOST:PORT); empty: the listening address, or the host "
        "name when listening on every address.",
        _advertise_url,
    )
    ui: bool = setting(
        False,
        "Serve the web UI (sessions, timelines, costs, live updates) at /ui/ on the proxy; "
        "with inbound tokens it needs one, as /metrics does.",
    )
    insecure_no_auth: bool = setting(
        False,
        "DANGER: listen beyond loopback without tokens; anyone who reaches the port can "
        "call vendors through taplog (on your fallback keys) and read /metrics.",
    )

    replay: str = setting(
        "",
        "Answer model calls from this recording (a data dir or a session file) when it "
        "holds them; empty: no replay.",
        _replay_source,
    )
    replay_mode: str = setting(
        "strict",
        "With --replay, what a call the recording lacks gets: strict (a 400 naming the "
        "closest recorded call), passthrough (the vendor, recorded), record-missing (the "
        "vendor, recorded and answered from the recording from then on).",
        OneOf(REPLAY_MODES),
    )
    replay_speed: float = setting(
        1.0,
        "With --replay, stream pacing: 2 plays twice as fast as recorded, 0 without waiting.",
        _not_negative,
    )
    replay_ignore: str = setting(
        "",
        "With --replay, request fields to leave out of the matching, comma-separated, beyond "
        "what the known clients make anew each run: tools,system[2].text,messages[*].content.",
        _field_paths,
    )

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)

    @property
    def body_inline_max_bytes(self) -> int:
        return int(self.body_inline_max_kb * 1024)

    @property
    def redaction(self) -> Redaction | None:
        """What the recorder redacts (None: nothing)."""
        return redaction_of(_detector_names(self.redact), self.redact_rules)

    @property
    def replay_ignored(self) -> tuple[IgnoredField, ...]:
        return _field_paths(self.replay_ignore)

    @property
    def instance_name(self) -> str:
        return self.instance or default_instance()

    def reachable_url(self, port: int) -> str:
        """Where the fleet's other instances send calls of sessions this one owns (`port`:
        the one it listens on, which `--port 0` leaves to the system)."""
        if self.advertise_url:
            return self.advertise_url
        wildcard = self.host in ("0.0.0.0", "::", "")
        host = socket.gethostname() if wildcard else self.host
        return f"http://{f'[{host}]' if ':' in host else host}:{port}"

    @property
    def auth_tokens(self) -> tuple[str, ...]:
        return tuple(token for token in self.auth_token.split(",") if token)

    def base_url(self, provider: str) -> str:
        """The configured base URL of a built-in provider (`openai` for any other)."""
        if provider == "anthropic":
            return self.anthropic_base
        return self.gemini_base if provider == "gemini" else self.openai_base

    def __repr__(self) -> str:
        shown = (f"{name}={_shown(name, getattr(self, name))}" for name in SETTINGS)
        return f"Settings({', '.join(shown)})"


SETTINGS = {f.name: f for f in dataclasses.fields(Settings) if "help" in f.metadata}


def _shown(name: str, value: Any) -> str:
    """A setting's value as messages show it: secrets as `***`."""
    return "***" if SETTINGS[name].metadata["secret"] and value else repr(value)


def choices(name: str) -> tuple[str, ...] | None:
    """The values a setting accepts, when they are a fixed list."""
    check = SETTINGS[name].metadata["check"]
    return check.choices if isinstance(check, OneOf) else None


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def env_name(name: str) -> str:
    return "TAPLOG_" + name.upper()


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise ValueError("must be true or false")


def _convert(name: str, value: Any, source: str) -> Any:
    target = SETTINGS[name].type
    kind = {"int": int, "float": float, "Path": Path, "str": str, "bool": _bool}[target]
    try:
        if kind is int and isinstance(value, float | bool):
            raise ValueError
        converted = kind(value)
        check = SETTINGS[name].metadata["check"]
        if check is not None:
            check(converted)
    except (TypeError, ValueError) as exc:
        reason = str(exc) or f"must be a {kind.__name__}"
        raise ConfigError(f"{source}: {reason} (got {_shown(name, value)})") from None
    return converted


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(SETTINGS) - FAILOVER_TABLES)
    if unknown:
        raise ConfigError(f"config file {path}: unknown setting {unknown[0]!r}")
    for name, declared in SETTINGS.items():
        if declared.metadata["secret"] and data.get(name):
            raise ConfigError(
                f"config file {path}: {name}: secrets never go in config files; "
                f"set {env_name(name)} in the environment instead"
            )
    return data


def config_file(config: Path | None, env: Mapping[str, str]) -> tuple[Path | None, dict[str, Any]]:
    """The config file named by `--config` or `TAPLOG_CONFIG`, and its contents."""
    if config is None and env.get("TAPLOG_CONFIG"):
        config = Path(env["TAPLOG_CONFIG"])
    return config, (read_config_file(config) if config is not None else {})


def load(flags: Mapping[str, Any], env: Mapping[str, str], config: Path | None) -> Settings:
    """Merge flags > environment > config file > defaults, checking each value."""
    config, from_file = config_file(config, env)
    values: dict[str, Any] = {}
    for name in SETTINGS:
        if flags.get(name) is not None:
            values[name] = _convert(name, flags[name], f"option {flag_name(name)}")
        elif env.get(env_name(name)) is not None:
            values[name] = _convert(name, env[env_name(name)], f"variable {env_name(name)}")
        # A list is the [[redact]] or [[tool_policy]] tables that share the setting's name.
        elif name in from_file and not isinstance(from_file[name], list):
            values[name] = _convert(name, from_file[name], f"config file {config}: {name}")
    policy_file = values.get("tool_policy")
    return Settings(
        **values,
        redact_rules=_redact_tables(from_file.get("redact"), config),
        tool_policy_rules=load_policy(
            from_file, config, Path(policy_file) if policy_file else None
        ),
    )


def _redact_tables(tables: Any, config: Path | None) -> tuple[tuple[str, str | None], ...]:
    """The config file's `[[redact]]` tables, each checked: `name` and `pattern` (a Python
    regular expression), or `name` alone for a built-in detector."""
    if not isinstance(tables, list):
        return ()
    rules = []
    for number, table in enumerate(tables):
        where = f"config file {config}: redact[{number}]"
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: must be a table ([[redact]] with name and pattern)")
        unknown = sorted(set(table) - {"name", "pattern"})
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r} (name and pattern only)")
        name, pattern = table.get("name"), table.get("pattern")
        if pattern is None and name not in BUILT_IN:
            raise ConfigError(
                f"{where}.pattern: missing (name alone is for a built-in detector: "
                f"{', '.join(BUILT_IN)})"
            )
        if pattern is not None:
            try:
                custom_rule(name, pattern)
            except ValueError as exc:
                raise ConfigError(f"{where}.{exc}") from None
        rules.append((name, pattern))
    return tuple(rules)
