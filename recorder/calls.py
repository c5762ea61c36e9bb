"""The records of one client call, turned into events on the writer thread.

The proxy hands over raw material (bytes, arrival times, headers) and goes
back to moving bytes; decoding bodies, splitting and reassembling streams,
scrubbing echoed secrets and pricing the answer all happen here, off the
event loop.

Each record's envelope (its event's id and timestamp) is made when the record is, on
the loop, when the call happens; a record rebuilt in the recorder process from what a
worker sent (`recorder.channel`) is given the worker's (`envelope=`) instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

from taplog.recorder import prices
from taplog.recorder.bodies import UNPARSED, encode_body, parse_json
from taplog.recorder.events import (
    LLM_REQUEST,
    Event,
    call_answered,
    error_event,
    llm_request,
    llm_response,
)
from taplog.recorder.layouts import LaidOut, Layout
from taplog.recorder.redaction import Redaction, each_string
from taplog.recorder.secrets import redact_text
from taplog.recorder.secrets_by_value import Secrets, scrub, scrub_fields
from taplog.recorder.store.blobs import BlobStore
from taplog.recorder.store.stream_fields import Chunk, stream_body, stream_fields
from taplog.recorder.store.writer import SessionState
from taplog.recorder.vendors.apis import api_module, one_answer, requested

log = logging.getLogger("taplog.recorder")

__all__ = ["CallAnswer", "Chunk", "LlmRequest", "LlmResponse"]
# Beside the body, what redaction rewrites in a request's or answer's event: headers (a user's
# address in a header of its own), the path and URL (a query parameter), an error's text.
_REDACTED_FIELDS = ("headers", "path", "upstream_url", "error")


@dataclass(slots=True)
class LlmRequest:
    """A request as it was sent upstream (recorded once sent: built while the vendor works)."""

    at_once: ClassVar[bool] = True

    session: str
    exchange: str
    api: str
    provider: str
    method: str
    path: str
    upstream_url: str
    headers: dict[str, str]
    key_fingerprint: str | None
    body: bytes
    parsed: Any
    attempt: int = 1
    secrets: Secrets = ()
    layout: Layout | None = None  # of `body`, when the proxy found it parsing (`parsed`)
    event: Event = field(init=False)
    envelope: InitVar[Event | None] = None

    def __post_init__(self, envelope: Event | None) -> None:
        if envelope is not None:
            self.event = envelope
            return
        model, stream = requested(self.api, self.path, self.parsed)
        self.event = llm_request(
            self.session,
            self.exchange,
            api=self.api,
            provider=self.provider,
            method=self.method,
            path=self.path,
            upstream_url=self.upstream_url,
            model=_text(model),
            stream=stream,
            attempt=self.attempt,
            key_fingerprint=self.key_fingerprint,
            headers=self.headers,
        )

    @property
    def size(self) -> int:
        return len(self.body) + 1024

    def events(
        self,
        state: SessionState,
        blobs: BlobStore | None = None,
        redaction: Redaction | None = None,
    ) -> Iterable[Event]:
        scrub_fields(self.event, self.secrets)

        def search(raw: bytes, parsed: Any) -> tuple[bytes, Any]:
            found = scrub(raw, self.secrets)
            # Scrubbing changed the bytes: the parsed copy no longer describes them.
            parsed = parsed if found is raw else UNPARSED
            if redaction:
                found, parsed = redaction.body(
                    found, parse_json(found) if parsed is UNPARSED else parsed
                )
            return found, parsed

        parsed = parse_json(self.body) if self.parsed is UNPARSED else self.parsed
        layout = self.layout
        if layout is None or layout.raw is not self.body or layout.body is not parsed:
            layout = Layout.of(self.body, parsed, self.api)  # it proves the body exact, too
        fields = {"body": parsed} if layout is not None else encode_body(self.body, parsed)
        raw, parsed = state.clean_parts.searched(self.body, parsed, layout, self.secrets, search)
        if redaction:
            redaction.fields(self.event, _REDACTED_FIELDS)
        if raw is not self.body:
            fields = encode_body(raw, parsed)
        elif layout is not None:  # the deltas read its parts' digests
            self.event = LaidOut(self.event, layout)
        self.event.update(fields)
        module, body = api_module(self.api), self.event.get("body")
        if module is None or not isinstance(body, dict):
            return (self.event,)
        return [self.event, *_tool_events(self.event, state, module, body, layout)]


@dataclass(slots=True)
class LlmResponse:
    """What came back (or did not), with the arrival time of every chunk."""

    at_once: ClassVar[bool] = False  # its end's barrier has it written

    session: str
    exchange: str
    api: str
    provider: str
    status: int | None
    headers: dict[str, str]
    chunks: list[Chunk]
    outcome: str
    latency_ms: float
    ttfb_ms: float | None
    error: str | None = None
    overhead_ms: float | None = None  # taplog's own time before the vendor was called
    secrets: Secrets = ()
    event: Event = field(init=False)
    size: int = field(init=False)  # fixed at hand-over: a large stream's chunks go as it is built
    envelope: InitVar[Event | None] = None

    def __post_init__(self, envelope: Event | None) -> None:
        self.size = sum(len(chunk) for _, chunk in self.chunks) + 1024
        if envelope is not None:
            self.event = envelope
            return
        self.event = llm_response(
            self.session,
            self.exchange,
            api=self.api,
            provider=self.provider,
            status=self.status,
            outcome=self.outcome,
            error=_text(self.error),
            latency_ms=round(self.latency_ms, 3),
            ttfb_ms=None if self.ttfb_ms is None else round(self.ttfb_ms, 3),
            overhead_ms=None if self.overhead_ms is None else round(self.overhead_ms, 3),
            headers=self.headers,
        )

    @property
    def streamed(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    def events(
        self,
        state: SessionState,
        blobs: BlobStore | None = None,
        redaction: Redaction | None = None,
    ) -> Iterable[Event]:
        module = api_module(self.api)
        self.event["stream"] = self.streamed
        scrub_fields(self.event, self.secrets)
        if redaction:
            redaction.fields(self.event, _REDACTED_FIELDS)
        if self.streamed:
            fields, body = stream_fields(self.chunks, self.secrets, module, blobs, redaction)
            self.event.update(fields)
            if fields.get("malformed_events") and self.outcome == "ok":
                count = fields["malformed_events"]
                error = f"the vendor sent {count} malformed event(s), passed on as they came"
                self.event.update(outcome="upstream_error", error=error)
        else:
            raw = scrub(b"".join(chunk for _, chunk in self.chunks), self.secrets)
            parsed = UNPARSED
            if redaction:
                raw, parsed = redaction.body(raw, parse_json(raw))
            self.event.update(encode_body(raw, parsed))
            body = one_answer(self.api, self.event.get("body"))
        if module is None or not isinstance(body, dict) or self.status != 200:
            return (self.event,)
        self.event.update(self._summary(module, body))
        if self.event["outcome"] != "ok":  # the client never got the whole answer: no tool runs
            return (self.event,)
        return [self.event, *_tool_events(self.event, state, module, body)]

    def _summary(self, module: Any, body: dict[str, Any]) -> dict[str, Any]:
        summary = module.summarize(body)
        usage = {
            "input_tokens": summary.input_tokens,
            "output_tokens": summary.output_tokens,
            "cached_tokens": summary.cached_tokens,
            "cache_write_tokens": summary.cache_write_tokens,
            "reasoning_tokens": summary.reasoning_tokens,
        }
        return {
            "response_id": summary.response_id,
            "model": summary.model,
            "finish_reason": summary.finish_reason,
            "usage": usage,
            "cost_usd": prices.cost_usd(
                self.provider,
                summary.model,
                summary.input_tokens,
                summary.output_tokens,
                summary.cached_tokens,
                summary.cache_write_tokens,
            ),
        }


@dataclass(slots=True)
class CallAnswer:
    """What the client got for its call, once, whatever its tries came to: the status,
    outcome and error it saw, the time it waited, the try that served it and that
    answer's finish reason in the client's API's words.

    `served` is the answer the client got (None: taplog answered itself). Its record is
    written before this one, so its outcome (which the writer may still have changed: a
    malformed event) and finish reason are known here. `client_bytes` is what the client
    got when that answer was translated or the tool policy took a call out of it (`gated`):
    its finish reason is read from them, and a gated one is kept whole in the event
    (`client_answer`, reassembled in the client's API) beside the vendor's answer.
    """

    at_once: ClassVar[bool] = False

    session: str
    exchange: str
    api: str  # the client's
    status: int | None
    latency_ms: float
    tries: int
    served: LlmResponse | None = None
    attempt: int | None = None  # the served try's number
    outcome: str | None = None  # taplog's own answer's; None: the served try's
    error: str | None = None
    skipped: list[str] = field(default_factory=list)  # targets that could not take the call
    client_bytes: bytes | None = None
    secrets: Secrets = ()  # the client's: reasons may quote what it sent
    size: int = 512
    gated: bool = False  # the tool policy changed what the client got (`client_bytes`)
    event: Event = field(init=False)
    envelope: InitVar[Event | None] = None

    def __post_init__(self, envelope: Event | None) -> None:
        if envelope is None:
            envelope = call_answered(self.session, self.exchange)  # timed when the call ended
        self.event = envelope

    def events(
        self,
        state: SessionState,
        blobs: BlobStore | None = None,
        redaction: Redaction | None = None,
    ) -> Iterable[Event]:
        fields: dict[str, Any] = {
            "status": self.status,
            "outcome": self.outcome,
            "error": self._scrubbed(self.error),
            "latency_ms": round(self.latency_ms, 3),
            "tries": self.tries,
            "provider": None,
            "model": None,
            "attempt": self.attempt,
            "finish_reason": None,
        }
        if self.served is not None:
            answer = self.served.event
            fields.update(provider=answer.get("provider"), model=answer.get("model"))
            if self.outcome is None:
                fields.update(outcome=answer.get("outcome"), error=answer.get("error"))
            fields["finish_reason"] = self._finish_reason(answer)
        if self.skipped:
            fields["skipped"] = [self._scrubbed(reason) for reason in self.skipped]
        if self.gated:
            fields["client_answer"] = self._client_answer()
        self.event.update(fields)
        if redaction:
            redaction.fields(self.event, ("error", "skipped", "client_answer"))
        return (self.event,)

    def _scrubbed(self, text: str | None) -> str | None:
        if text is None or not self.secrets:
            return text
        return scrub(text.encode(), self.secrets).decode(errors="replace")

    def _finish_reason(self, answer: Event) -> str | None:
        """In the client's words: its own answer's, or read from the translation it got."""
        if answer.get("api") == self.api:
            return answer.get("finish_reason")
        module = api_module(self.api)
        body = self._client_answer()
        if module is None or not isinstance(body, dict):
            return None
        return module.summarize(body).finish_reason

    def _client_answer(self) -> Any:
        """What the client got, as one answer of its API (a stream reassembled), with the
        client's secrets scrubbed; None when there is nothing to read."""
        module = api_module(self.api)
        if module is None or not self.client_bytes:
            return None
        data = scrub(self.client_bytes, self.secrets) if self.secrets else self.client_bytes
        whole = data.lstrip()[:1] in (b"{", b"[")  # an object, or Gemini's JSON array
        body = one_answer(self.api, parse_json(data)) if whole else stream_body(module, data)
        return each_string(body, redact_text)


def _text(value: Any) -> Any:
    """A client- or vendor-chosen text as the log may hold it: no credential in it."""
    return redact_text(value) if isinstance(value, str) else value


def _tool_events(
    parent: Event, state: SessionState, module: Any, body: dict, layout: Layout | None = None
) -> list[Event]:
    """Tool events of a request or answer; an unreadable body is reported, never fatal.
    A request's transcript (laid out in `layout`) is read from the first item its session
    has not read yet."""
    tools = state.tools
    try:
        if parent["type"] == LLM_REQUEST:
            read = tools.read_before(layout)
            if read and layout is not None:
                body = {**body, layout.name: body[layout.name][read:]}
            events = tools.results(parent, module.tool_results(body))
            tools.read_through(layout)
            return events
        return tools.asked(parent, module.tool_calls(body), module.NORMAL_STOPS)
    except Exception as exc:
        log.exception("cannot extract tool events from %s", parent["id"])
        reason = f"tool events not extracted from {parent['type']} {parent['id']}: {exc!r}"
        return [error_event(parent["session"], parent["exchange"], reason)]
