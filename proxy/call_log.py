"""The log side of a call with fallbacks: the call, its tries, and their events.

Every try is recorded: its `llm.request` exactly as sent (translated ones with
`translated_from` and the keys they dropped), its `llm.response`, and a
`failover` event for each switch; the client's own request too when it went to
no vendor as it was (`attempt` 0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from proxy.attempts import Attempt
from proxy.fallbacks import Rule, Target
from proxy.forward import Exchange
from proxy.state import RECORDER
from proxy.upstream import request_headers
from recorder.events import make_event
from recorder.exchange import LlmRequest, LlmResponse
from recorder.secrets import fingerprint, safe_headers
from recorder.writer import EventRecord


@dataclass
class Call:
    """The client's call, as the handler resolved it."""

    exchange: Exchange
    parsed: dict[str, Any]
    body: bytes
    headers: Any  # the client's CIMultiDictProxy
    key_fingerprint: str | None
    rule: Rule
    attempts: int = 0
    primary_error: tuple[int, CIMultiDict[str], bytes] | None = None
    last_reason: str = ""
    chain: list[Target] = field(default_factory=list)  # the targets, the client's own first
    history: list[Any] | None = None  # Responses: the items a previous_response_id names

    @property
    def api(self) -> str:
        return self.exchange.route.api


@dataclass
class Try:
    """One upstream try: what came back, and the chunks with their arrival times."""

    attempt: Attempt
    number: int
    started: float = field(default_factory=time.perf_counter)
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    ttfb_ms: float | None = None

    def keep(self, chunk: bytes) -> None:
        at = (time.perf_counter() - self.started) * 1000
        self.ttfb_ms = at if self.ttfb_ms is None else self.ttfb_ms
        self.chunks.append((at, chunk))

    def answer(
        self,
        session: str,
        exchange: str,
        status: int | None,
        headers: CIMultiDict[str],
        outcome: str,
        error: str | None,
        secrets: tuple[bytes, ...],
    ) -> LlmResponse:
        """What came back on this try, as the record the writer logs."""
        return LlmResponse(
            session=session,
            exchange=exchange,
            api=self.attempt.api,
            provider=self.attempt.target.provider.name,
            status=status,
            headers=safe_headers(headers.items()),
            chunks=self.chunks,
            outcome=outcome,
            latency_ms=(time.perf_counter() - self.started) * 1000,
            ttfb_ms=self.ttfb_ms,
            error=error,
            secrets=secrets,
        )


def switch(source: Target, target: Target) -> dict[str, str]:
    return {
        "from_provider": source.provider.name,
        "from_model": source.model,
        "to_provider": target.provider.name,
        "to_model": target.model,
    }


def record_event(request: web.Request, call: Call, kind: str, **payload: Any) -> None:
    event = make_event(kind, call.exchange.session, call.exchange.id, **payload)
    request.app[RECORDER].record(EventRecord(event))


def record_request(request: web.Request, call: Call, attempt_try: Try) -> None:
    attempt = attempt_try.attempt
    translation = attempt.translation
    record = LlmRequest(
        session=call.exchange.session,
        exchange=call.exchange.id,
        api=attempt.api,
        provider=attempt.target.provider.name,
        method="POST",
        path=call.exchange.route.path,
        upstream_url=attempt.url,
        headers=safe_headers(attempt.headers.items()),
        key_fingerprint=call.key_fingerprint
        if translation is None
        else fingerprint(attempt.target.provider.api_key()),
        body=attempt.body,
        parsed=attempt.parsed,
        attempt=attempt_try.number,
        secrets=call.exchange.secrets + _own_secret(attempt),
    )
    if translation is not None:
        record.event.update(translated_from=call.api, dropped=translation.dropped)
    request.app[RECORDER].record(record)


def record_original(request: web.Request, call: Call) -> None:
    """The client's request, which went to no vendor as it was (attempt 0)."""
    route = call.exchange.route
    record = LlmRequest(
        session=call.exchange.session,
        exchange=call.exchange.id,
        api=route.api,
        provider=route.provider,
        method="POST",
        path=route.path,
        upstream_url=route.upstream_url,
        headers=safe_headers(request_headers(call.headers).items()),
        key_fingerprint=call.key_fingerprint,
        body=call.body,
        parsed=call.parsed,
        attempt=0,
        secrets=call.exchange.secrets,
    )
    record.event["sent"] = False
    request.app[RECORDER].record(record)


def _own_secret(attempt: Attempt) -> tuple[bytes, ...]:
    key = attempt.target.provider.api_key()
    return (key.encode(),) if key and attempt.translation is not None else ()


def record_response(
    request: web.Request,
    call: Call,
    attempt_try: Try,
    status: int | None,
    headers: CIMultiDict[str],
    outcome: str,
    error: str | None,
) -> None:
    secrets = call.exchange.secrets + _own_secret(attempt_try.attempt)
    answer = attempt_try.answer(
        call.exchange.session, call.exchange.id, status, headers, outcome, error, secrets
    )
    request.app[RECORDER].record(answer)
