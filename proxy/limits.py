"""Budgets and the loop guard: a call over a limit is refused before any vendor sees it.

Checked on the request path once the session is known (`proxy.handler`), against the
totals kept of the recorded events (`recorder.usage`): a few dict lookups, no I/O,
nothing awaited. The refusal is a 403 in the client's own API shape, recorded as a
`call.refused` event and counted in `taplog_calls_refused_total{reason=…}` (the
`x-taplog-error` code: `budget`, `loop_guard`).

    limit                         measured from
    *_max_calls                   calls begun (their first request recorded)
    *_max_tokens                  input + output tokens of the answers recorded
    *_max_cost_usd                their cost; an answer with no price adds nothing and
                                  is counted as `unpriced` (the refusal says how many)
    *_max_calls_per_minute        calls admitted here in the last 60 s, or recorded by
                                  every worker, whichever is more
    loop_guard                    the same tool with the same arguments, asked for that
                                  many times in a row (`tool.pre`)

The totals lag the calls in flight: an answer counts once it is recorded, so calls
already running when a limit is reached may pass it (docs/budgets.md).
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from taplog.proxy import errors
from taplog.proxy.config import Settings, env_name, flag_name
from taplog.recorder.events import call_refused
from taplog.recorder.store.writer import EventRecord
from taplog.recorder.usage import MAX_TRACKED, Totals, Tracked, UsageTables

if TYPE_CHECKING:
    from taplog.proxy.call import Call

# 403, not 429: openai-python and anthropic-python retry 408, 409, 429 and 5xx by
# themselves, and a budget spent or a loop caught does not pass with a retry.
REFUSED_STATUS = 403
MINUTE = 60.0
MEASURES = ("calls", "tokens", "cost_usd", "calls_per_minute")


@dataclass(frozen=True, slots=True)
class Limit:
    setting: str  # its name in the settings: session_max_calls, loop_guard, …
    measure: str  # one of MEASURES, or `repeats`
    value: float


@dataclass(frozen=True, slots=True)
class Over:
    """A limit reached: what was used, and the totals that say so."""

    limit: Limit
    used: float
    totals: Totals | None


def _limits(settings: Settings, scope: str) -> tuple[Limit, ...]:
    named = ((f"{scope}_max_{measure}", measure) for measure in MEASURES)
    return tuple(
        Limit(name, measure, getattr(settings, name))
        for name, measure in named
        if getattr(settings, name) > 0
    )


def tracked(settings: Settings) -> Tracked | None:
    """What the usage ledger must keep for these settings; None: no limit is on."""
    sessions, keys = _limits(settings, "session"), _limits(settings, "key")
    if not sessions and not keys and not settings.loop_guard:
        return None
    per_minute = (
        settings.session_max_calls_per_minute,
        settings.key_max_calls_per_minute,
    )
    return Tracked(keys=bool(keys), per_minute=int(max(per_minute)), tools=settings.loop_guard > 0)


class Limits:
    """The request path's check (`refusal`), over `tables`: the ledger's own in one process,
    a worker's copy with `--workers`."""

    def __init__(self, settings: Settings, tables: UsageTables) -> None:
        self._tables = tables
        self._session = _limits(settings, "session")
        self._key = _limits(settings, "key")
        guard = settings.loop_guard
        self._loop_guard = Limit("loop_guard", "repeats", guard) if guard else None
        self._admitted: dict[str, deque[float]] = {}  # calls let through here, per minute
        self._session_rate = settings.session_max_calls_per_minute > 0
        self._key_rate = settings.key_max_calls_per_minute > 0

    def refusal(self, call: Call) -> web.Response | None:
        """None when the call may go on (and it is counted as admitted); else the refusal,
        recorded."""
        now = time.time()
        session, key = call.session, call.key_fingerprint
        over = self._over(self._session, self._tables.sessions, "s:" + session, session, now)
        if over is None and key is not None:
            over = self._over(self._key, self._tables.keys, "k:" + key, key, now)
        if over is None and self._loop_guard is not None:
            over = self._looping(self._tables.sessions.get(session))
        if over is None:
            self._admit(session, key, now)
            return None
        return self._refuse(call, over)

    def _over(
        self,
        limits: tuple[Limit, ...],
        table: dict[str, Totals],
        admitted: str,
        name: str,
        now: float,
    ) -> Over | None:
        totals = table.get(name)
        for limit in limits:
            if limit.measure == "calls_per_minute":
                used: float = self._last_minute(admitted, totals, now)
            elif totals is None:
                continue
            else:
                used = getattr(totals, limit.measure)
            if used >= limit.value:
                return Over(limit, used, totals)
        return None

    def _looping(self, totals: Totals | None) -> Over | None:
        guard = self._loop_guard
        if guard is not None and totals is not None and totals.repeats >= guard.value:
            return Over(guard, totals.repeats, totals)
        return None

    def _last_minute(self, admitted: str, totals: Totals | None, now: float) -> int:
        """Calls in the last minute: those let through here, or those every worker began
        (recorded), whichever is more (neither over-counts)."""
        since = now - MINUTE
        here = self._admitted.get(admitted)
        if here is not None:
            while here and here[0] <= since:
                here.popleft()
        recorded = totals.started if totals is not None else ()
        return max(len(here or ()), len(recorded) - bisect_right(recorded, since))

    def _admit(self, session: str, key: str | None, now: float) -> None:
        if self._session_rate:
            self._count("s:" + session, now)
        if key is not None and self._key_rate:
            self._count("k:" + key, now)

    def _count(self, admitted: str, now: float) -> None:
        here = self._admitted.get(admitted)
        if here is None:
            here = self._admitted[admitted] = deque()
            if len(self._admitted) > MAX_TRACKED:
                del self._admitted[next(iter(self._admitted))]
        here.append(now)

    def _refuse(self, call: Call, over: Over) -> web.Response:
        limit = over.limit
        message = refusal_message(call, over)
        reason = "loop_guard" if limit.measure == "repeats" else "budget"
        details: dict[str, object] = {"api": call.api, "provider": call.provider}
        if isinstance(call.model, str):
            details["model"] = call.model
        if limit.setting.startswith("key_"):
            details["key_fingerprint"] = call.key_fingerprint
        if limit.measure == "cost_usd" and over.totals is not None:
            details["unpriced"] = over.totals.unpriced
        if reason == "loop_guard" and over.totals is not None:
            details.update(tool=over.totals.tool_name, arguments=over.totals.tool_arguments)
        event = call_refused(
            call.session,
            call.id,
            call.epoch,
            reason=reason,
            limit=limit.setting,
            value=limit.value,
            used=over.used,
            error=message,
            status=REFUSED_STATUS,
            **details,
        )
        call.services.recorder.record(EventRecord(event))
        return errors.error_response(call.provider, REFUSED_STATUS, message, reason)


def refusal_message(call: Call, over: Over) -> str:
    """What the client is told: which limit, its value, what was used, how to raise it."""
    limit, totals = over.limit, over.totals
    setting = limit.setting
    raise_it = (
        f"raise it with {flag_name(setting)}, {env_name(setting)} or {setting} in the config file"
    )
    if limit.measure == "repeats":
        assert totals is not None
        return (
            f"loop guard: in session {call.session!r} the model asked for the tool "
            f"{totals.tool_name!r} with the same arguments {totals.tool_arguments} "
            f"{over.used:g} times in a row, and {setting} is {limit.value:g}; the call was "
            f"not sent. Start a new session, or {raise_it} (0: off)"
        )
    whose = (
        f"session {call.session!r}"
        if setting.startswith("session_")
        else f"the calls with this API key ({call.key_fingerprint})"
    )
    return (
        f"budget reached: {whose} {_used(limit.measure, over.used, totals)}, and {setting} "
        f"is {limit.value:g}; the call was not sent. To go on, {raise_it} (0: no limit)"
    )


def _used(measure: str, used: float, totals: Totals | None) -> str:
    if measure == "calls":
        return f"made {used:g} calls"
    if measure == "tokens":
        return f"used {used:g} tokens"
    if measure == "calls_per_minute":
        return f"made {used:g} calls in the last minute"
    unpriced = totals.unpriced if totals is not None else 0
    calls = "1 call" if unpriced == 1 else f"{unpriced} calls"
    unknown = f" ({calls} had no price and count nothing)" if unpriced else ""
    return f"cost ${used:.6f}{unknown}"
