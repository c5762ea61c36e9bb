"""Typed keys for what the aiohttp app holds, the process lifecycle flag, and the services
every call is handed.

Kept apart from the modules that use them so that the app, the handler and the
request path can all name the keys without importing one another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from taplog.proxy.auth import Tokens
from taplog.proxy.config import Settings
from taplog.proxy.failover.breaker import Breakers
from taplog.proxy.failover.responses_history import ResponsesHistory
from taplog.proxy.failover.rules import Fallbacks, Rule, plain_rule
from taplog.recorder.known_bodies import KnownBodies
from taplog.recorder.sessions import SessionResolver


class Recording(Protocol):
    """What the request path asks of the recorder: a `Recorder` on a thread of this
    process, or the recorder process through a `proxy.processes.link.RecorderLink`."""

    sessions_dir: Path

    def record(self, record: Any) -> None: ...

    @property
    def accepting(self) -> bool: ...

    def health(self) -> dict[str, Any]: ...

    def when_written(
        self, callback: Callable[[bool], None], session: str | None = None
    ) -> None: ...


class Admission(Protocol):
    """Budgets and the loop guard (`proxy.limits.Limits`): a call's refusal, or None."""

    def refusal(self, call: Any) -> web.Response | None: ...


class Ownership(Protocol):
    """With `--coordination`, whether a call of a session is served here, and under which
    lease (`proxy.coordination.forward.FleetOwnership`)."""

    async def serve_here(
        self, request: web.Request, body: bytes, session: str, new: bool
    ) -> Any: ...

    def started(self, session: str) -> None: ...

    def ended(self, session: str) -> None: ...


@dataclass
class Lifecycle:
    """Set once shutdown starts, so calls cut by it are not blamed on clients."""

    stopping: bool = False


@dataclass(frozen=True, slots=True)
class Services:
    """What the request path uses of the process, looked up once at start-up and carried
    by every call (`proxy.call.Call`) instead of lookups in `request.app`."""

    settings: Settings
    recorder: Recording
    pool: aiohttp.ClientSession
    resolver: SessionResolver
    fallbacks: Fallbacks
    breakers: Breakers
    history: ResponsesHistory
    lifecycle: Lifecycle
    tokens: Tokens
    plain_rule: Rule  # the chain of a call whose model has no fallback rule
    ownership: Ownership | None  # sessions leased across a fleet (`--coordination`)
    limits: Admission | None  # budgets and the loop guard, when one is on
    bodies: KnownBodies  # request bodies parsed from where they differ from earlier ones


SETTINGS = web.AppKey("settings", Settings)
RECORDER = web.AppKey("recorder", Recording)
RESOLVER = web.AppKey("resolver", SessionResolver)
POOL = web.AppKey("pool", aiohttp.ClientSession)
LIFECYCLE = web.AppKey("lifecycle", Lifecycle)
FALLBACKS = web.AppKey("fallbacks", Fallbacks)
BREAKERS = web.AppKey("breakers", Breakers)
TOKENS = web.AppKey("tokens", Tokens)
RESPONSES_HISTORY = web.AppKey("responses_history", ResponsesHistory)
SERVICES = web.AppKey("services", Services)
OWNERSHIP = web.AppKey("ownership", Ownership)
LIMITS = web.AppKey("limits", Admission)


def services_of(app: web.Application) -> Services:
    """The services, once the recorder and the pool are up (`on_startup`)."""
    return Services(
        settings=app[SETTINGS],
        recorder=app[RECORDER],
        pool=app[POOL],
        resolver=app[RESOLVER],
        fallbacks=app[FALLBACKS],
        breakers=app[BREAKERS],
        history=app[RESPONSES_HISTORY],
        lifecycle=app[LIFECYCLE],
        tokens=app[TOKENS],
        plain_rule=plain_rule(app[SETTINGS]),
        ownership=app.get(OWNERSHIP),
        limits=app.get(LIMITS),
        bodies=KnownBodies(),
    )
