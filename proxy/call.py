"""One client call and its tries: the only place the request path makes records.

    Call ──start_try(attempt)──▶ Try    its llm.request, exactly as sent upstream
     │                            │
     │                            └──finish(outcome, …)──▶ its llm.response, once
     └──record_answer(status)──▶ call.answered: what the client got, once

A call with no fallback rule has one try; one served through its chain has a
try per target and retry, each recorded whole (translated requests with
`translated_from` and the keys they dropped), plus a `failover` event each
time it really moves to another target and the client's own request when it
went to no vendor as it was (`attempt` 0). Whatever ends a try (vendor error,
cut, timeout, the client gone, shutdown), `finish` records its answer once,
with the first outcome that applies. The call ends with what the client got:
the served try's answer, or taplog's own (`refused`), the targets `skipped`,
the time the client waited. The proxy hands over raw material (bytes, arrival
times); everything else is built on the writer thread (`recorder.calls`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

from taplog.proxy.failover.attempts import Attempt
from taplog.proxy.failover.rules import Rule, Target
from taplog.proxy.keys import Recording, Services
from taplog.proxy.observe.log_lines import log_failover
from taplog.proxy.routing import CallRoute
from taplog.recorder import events
from taplog.recorder.calls import CallAnswer, Chunk, LlmRequest, LlmResponse
from taplog.recorder.layouts import Layout
from taplog.recorder.secrets import fingerprint, redact_url, safe_headers
from taplog.recorder.store.writer import EventRecord
from taplog.recorder.vendors.apis import requested
from taplog.recorder.vendors.openai_responses.chaining import answer_id, output_items


@dataclass(slots=True, eq=False)
class Call:
    """The client's call, as the handler admitted and resolved it."""

    services: Services
    route: CallRoute
    method: str
    session: str
    id: str  # the exchange id, shared by every event of this call
    secrets: tuple[bytes, ...]  # values to scrub wherever they echo back
    received: float  # perf_counter() when the client's request arrived
    body: bytes  # decoded, when the client sent it with a Content-Encoding
    parsed: Any
    layout: Layout | None  # where the parts of `body` lie (`recorder.layouts`)
    headers: CIMultiDictProxy[str]  # the client's
    key_fingerprint: str | None
    rule: Rule  # its fallback rule, or the plain one (a chain of one)
    encoded: bytes | None = None  # the body as the client sent it, when it was encoded
    attempts: int = 0
    history: list[Any] | None = None  # Responses: the items a previous_response_id names
    history_known: bool = False  # looked up (`load_history`)
    chain: list[Target] = field(default_factory=list)  # its targets, the client's own first
    served: Try | None = None  # the try whose answer the client got
    client_bytes: bytes | None = None  # what the client got of a translated or gated answer
    gated: bool = False  # the tool policy took a call out of it (`proxy.tool_gating`)
    skipped: list[str] = field(default_factory=list)  # targets that could not take the call
    refused: tuple[str, str] | None = None  # taplog answered itself: (outcome, why)
    replay_miss: str | None = None  # why `--replay` sent it on: the recording lacks it
    epoch: int | None = None  # the session's owner epoch in a fleet (None: no lease held)

    @property
    def api(self) -> str:
        return self.route.api

    @property
    def provider(self) -> str:
        return self.route.provider

    @property
    def model(self) -> Any:
        """The model it asks for: in its body, or in its path (Gemini's)."""
        return requested(self.api, self.route.path, self.parsed)[0]

    def start_try(self, attempt: Attempt) -> Try:
        """A new try on `attempt`; its request is recorded once sent (`Try.record_request`)."""
        self.attempts += 1
        return self._try(attempt, self.attempts)

    def record_original(self, own: Attempt) -> None:
        """The client's request, which went to no vendor as it was (attempt 0)."""
        self._try(own, 0).record_request(sent=False)

    def _try(self, attempt: Attempt, number: int) -> Try:
        # where it went: the client's path, unless the try went elsewhere (another
        # vendor's, or the same one's for another model in its path: Gemini's)
        elsewhere = attempt.own_key or attempt.url != self.route.upstream_url
        return Try(
            self.services.recorder,
            self.session,
            self.id,
            attempt,
            number,
            client_api=self.api,
            path=_path_of(attempt.url) if elsewhere else self.route.path,
            key_fingerprint=self.key_fingerprint,
            client_secrets=self.secrets,
            received=self.received,
            epoch=self.epoch,
            layout=self.layout if attempt.body is self.body else None,
        )

    def record_failover(
        self, source: Target, target: Target, reason: str, sent: bool = True
    ) -> None:
        """The call moves from `source` to `target`, as its next try; `sent` False: the
        target cannot take the call at all (nothing goes to it)."""
        event = events.failover_event(
            self.session,
            self.id,
            from_provider=source.provider.name,
            from_model=source.model,
            to_provider=target.provider.name,
            to_model=target.model,
            reason=reason,
            attempt=self.attempts + 1 if sent else None,
        )
        self._record(EventRecord(event))
        log_failover(self.session, self.id, self.rule.model, str(source), str(target), reason)

    def record_answer(self, status: int | None) -> None:
        """What the client got, once the call is over: the served try's answer, or taplog's
        own (`refused`)."""
        outcome, error = self.refused or (None, None)
        served = self.served if outcome is None else None
        self._record(
            CallAnswer(
                self.session,
                self.id,
                self.api,
                status if status is not None else (served.status if served else None),
                (time.perf_counter() - self.received) * 1000,
                self.attempts,
                served=served.answer if served else None,
                attempt=served.number if served else None,
                outcome=outcome,
                error=error,
                skipped=self.skipped,
                client_bytes=self.client_bytes if served else None,
                secrets=self.secrets,
                gated=self.gated and served is not None,
            )
        )

    def record_error(self, reason: str) -> None:
        self._record(EventRecord(events.error_event(self.session, self.id, reason)))

    def _record(self, record: EventRecord | CallAnswer) -> None:
        record.event["epoch"] = self.epoch
        self.services.recorder.record(record)

    def remember(self, answer: dict | None) -> None:
        """A Responses answer the client got: later calls may chain to it by id."""
        if self.api != "openai.responses" or not isinstance(answer, dict):
            return
        if isinstance(self.parsed, dict) and self.parsed.get("store") is False:
            return  # not stored at the vendor, so no call can chain to it (Codex sends these)
        named = answer_id(answer)
        if named is None:
            return
        self.services.resolver.remember_response(named, self.session)
        if isinstance(self.parsed, dict):
            self.services.history.remember(named, self.parsed, self.body, output_items(answer))

    async def load_history(self) -> None:
        """For a Responses call about to be planned: the items its `previous_response_id`
        names, if taplog saw them (looked up once, only for calls planned anew)."""
        if not self.history_known and self.api == "openai.responses":
            if isinstance(self.parsed, dict):
                self.history = await self.services.history.items_before(self.parsed)
            self.history_known = True


@dataclass(slots=True, eq=False)
class Try:
    """One upstream try: its request, and the chunks that came back with their arrival
    times. It records both itself, into the session it belongs to."""

    recorder: Recording
    session: str
    exchange: str
    attempt: Attempt
    number: int  # the attempt number in the log (0: not sent)
    client_api: str  # the API the client spoke (differs when translated)
    path: str  # the path and query it went to (the client's, unless it went elsewhere)
    key_fingerprint: str | None  # of the client's key
    client_secrets: tuple[bytes, ...] = ()  # values to scrub wherever they echo back
    received: float | None = None  # when the client's request arrived, for taplog's overhead
    started: float = field(default_factory=time.perf_counter)
    chunks: list[Chunk] = field(default_factory=list)
    size: int = 0  # bytes in chunks
    ttfb_ms: float | None = None
    status: int | None = None
    headers: CIMultiDict[str] | None = None  # the vendor's, once they came
    requested: bool = False  # its request is recorded
    answer: LlmResponse | None = None  # its record, once finished
    epoch: int | None = None  # its call's (`Call.epoch`)
    layout: Layout | None = None  # of the attempt's body, when it is the client's

    def keep(self, chunk: bytes) -> None:
        at = (time.perf_counter() - self.started) * 1000
        if self.ttfb_ms is None:
            self.ttfb_ms = at
        self.chunks.append((at, chunk))
        self.size += len(chunk)

    def body(self) -> bytes:
        return b"".join(chunk for _, chunk in self.chunks)

    @property
    def secrets(self) -> tuple[bytes, ...]:
        """The client's secrets, and taplog's own key where it keyed this try."""
        key = self.attempt.target.provider.api_key() if self.attempt.own_key else None
        return self.client_secrets + ((key.encode(),) if key else ())

    def record_request(self, sent: bool = True) -> None:
        """The one builder of `llm.request`: what this try sends, once its body is handed
        to the connection (`proxy.upstream.open_upstream`), so the recorder builds it while
        the vendor works, not while the body goes out; before its answer in any case. Once."""
        if self.requested:
            return
        self.requested = True
        attempt = self.attempt
        translation = attempt.translation
        key_fp = (
            fingerprint(attempt.target.provider.api_key())
            if attempt.own_key
            else self.key_fingerprint
        )
        record = LlmRequest(
            session=self.session,
            exchange=self.exchange,
            api=attempt.api,
            provider=attempt.target.provider.name,
            method=attempt.method,
            path=redact_url(self.path),
            upstream_url=redact_url(attempt.url),
            headers=safe_headers(attempt.headers.items()),
            key_fingerprint=key_fp,
            body=attempt.body,
            parsed=attempt.parsed,
            attempt=self.number,
            secrets=self.secrets,
            layout=self.layout,
        )
        if translation is not None:
            record.event.update(translated_from=self.client_api, dropped=translation.dropped)
        if attempt.encoded is not None:  # the body above is its decoded copy
            record.event["content_encoding"] = ", ".join(
                attempt.headers.getall("content-encoding", ())
            )
        if not sent:
            record.event["sent"] = False
        record.event["epoch"] = self.epoch
        self.recorder.record(record)

    def finish(self, outcome: str, error: str | None = None, **facts: Any) -> bool:
        """Record what came back, once: the first outcome that applies wins.

        `facts` are extra fields of the answer's event (how taplog completed or
        continued it). The chunks go with it: read the body before. Returns whether
        this call recorded it.
        """
        if self.answer is not None:
            return False
        self.record_request()
        first = self.number == 1 and self.received is not None
        answer = LlmResponse(
            session=self.session,
            exchange=self.exchange,
            api=self.attempt.api,
            provider=self.attempt.target.provider.name,
            status=self.status,
            headers=safe_headers(self.headers.items()) if self.headers else {},
            chunks=self.chunks,
            outcome=outcome,
            latency_ms=(time.perf_counter() - self.started) * 1000,
            ttfb_ms=self.ttfb_ms,
            error=error,
            overhead_ms=(self.started - self.received) * 1000 if first else None,
            secrets=self.secrets,
        )
        answer.event.update(facts, epoch=self.epoch)
        self.answer = answer
        self.chunks = []  # handed to the recorder, which may let go of them as it goes
        self.recorder.record(answer)
        return True


def _path_of(url: str) -> str:
    """The path (and query) a try went to, where it is not the client's own."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")
