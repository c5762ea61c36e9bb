"""Answer model calls from a recording: `taplog replay` and `taplog serve --replay`.

Each POST to a model API is matched to a recorded call by
`recorder.tools.recorded_answers.signature`; the recorded answer goes back byte for byte
(status, the vendor's headers, the body), a stream event by event with its
original pacing divided by `speed` (0: no waiting). What a call the recording
lacks (a miss) gets depends on the mode:

    strict          a 400 in the client's API shape (`x-taplog-error:
                    replay_miss`) naming the closest recorded request and the
                    first field where it differs; nothing reaches a vendor
    passthrough     the normal proxy path: forwarded to the vendor, recorded
    record-missing  the same, and once its answer is in the log it joins the
                    index, so the same request is answered from the recording
                    from then on (VCR's "new episodes")

A recorded answer is held to the tool policy as a live one is (`proxy.tool_gating`): a
call a rule refuses is taken out of what the client gets, and the decision is a line on
stderr and a count in the metrics (a replayed call is not recorded, and its session is
not known yet: rules on `session` do not match it).

Every hit and every miss is a line on stderr (taplog's log): a miss names the closest
recorded request and the first field where it differs, in every mode. A miss sent on to a
vendor that taplog then answers itself (the vendor cannot be reached, every target
failed) says so in that error too, and so in the call's `call.answered` event.

`Replayer.answer` is called by the proxy's handler (after the token check,
routing and reading the body) and by the small strict-only app of `taplog
replay`, which reads no keys, calls no vendor and writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict

from taplog.proxy import auth, content_encoding
from taplog.proxy.auth import Tokens
from taplog.proxy.config import Settings
from taplog.proxy.errors import error_response
from taplog.proxy.observe.metrics import Metrics
from taplog.proxy.routing import PASSTHROUGH, provider_for
from taplog.proxy.runner import ProxyRunner, ServeError, listening, until_stopped
from taplog.proxy.tool_gate import Judge, gate_answer, stream_gate
from taplog.proxy.tool_gating import HOLD_LIMIT, offers_tools
from taplog.proxy.tool_policy import CallFacts, Decision, Policy
from taplog.recorder.bodies import parse_json
from taplog.recorder.events import LLM_RESPONSE, Event
from taplog.recorder.secrets import api_key, fingerprint
from taplog.recorder.store.writer import Recorder
from taplog.recorder.tools.recorded_answers import (
    REPLAYED_APIS,
    Recorded,
    ReplayIndex,
    api_of_path,
    asked,
    load_index,
    recorded_calls,
)
from taplog.recorder.vendors.apis import requested
from taplog.recorder.vendors.reruns import IgnoredField
from taplog.recorder.vendors.sse import SseSplitter

STRICT, PASSTHROUGH_MODE, RECORD_MISSING = "strict", "passthrough", "record-missing"
_MISS_GOES = {
    STRICT: "refused",
    PASSTHROUGH_MODE: "sent to the vendor",
    RECORD_MISSING: "sent to the vendor, its answer recorded",
}
log = logging.getLogger("taplog")
MAX_BODY_MB = 64
MAX_BODY = MAX_BODY_MB * 2**20


@dataclass
class Replayer:
    """A recording to answer from, and what its misses get."""

    index: ReplayIndex
    mode: str = STRICT
    speed: float = 1.0
    policy: Policy | None = None  # the tool policy recorded answers are held to
    metrics: Metrics | None = None  # where its decisions are counted
    _watched: dict[str, list[Event]] = field(default_factory=dict)  # record-missing exchanges
    _loop: asyncio.AbstractEventLoop | None = None

    async def answer(
        self, request: web.Request, provider: str, api: str, body: object
    ) -> web.StreamResponse | str | None:
        """The recorded answer or strict mode's refusal; else send it to the vendor: why the
        recording lacks it (a miss), or None (not a call replay answers)."""
        if api not in REPLAYED_APIS:
            if self.mode != STRICT:
                return None
            message = f"replay serves model calls only, not {request.method} {request.path}"
            return error_response(provider, 404, message, "replay_not_recorded")
        if body is None:
            if self.mode != STRICT:
                return None
            return error_response(provider, 400, "the body is not JSON", "replay_bad_body")
        body = asked(api, request.path_qs, body)
        recorded = self.index.take(api, body)
        if recorded is not None:
            log.info("replay hit: %s from %s", api, recorded.where())
            if recorded.redacted:
                log.warning(
                    "replay: the answer from %s holds redacted text (%s): the client gets "
                    "[redacted:NAME] markers where the vendor's answer had the original",
                    recorded.where(),
                    ", ".join(recorded.redacted),
                )
            judge = self._judge(request, api, body)
            return await _send_recorded(request, recorded, self.speed, api, judge)
        miss = _miss(self.index, api, body)
        log.warning("%s (%s: %s)", miss, self.mode, _MISS_GOES[self.mode])
        if self.mode != STRICT:
            return miss
        # 400, not 404: a client shows a request error with its message (Claude Code reads a
        # 404 as a model that does not exist)
        return error_response(provider, 400, miss, "replay_miss")

    def _judge(self, request: web.Request, api: str, body: Any) -> Judge | None:
        """The tool policy's judge for a replayed call that offers tools (None: nothing to
        judge); each decision is logged and counted as it is made."""
        policy = self.policy
        if not policy or not offers_tools(body):
            return None
        model = requested(api, request.path, body)[0]
        facts = CallFacts("", fingerprint(api_key(request.headers)), model)

        def judge(tool_call: Any) -> Decision | None:
            decision = policy.judge(tool_call, facts)
            if decision is not None:
                log.warning(
                    "replay: the tool policy %s a call to %s (rule %s): %s",
                    "refused" if decision.action == "deny" else "flagged",
                    tool_call.name,
                    decision.rule,
                    decision.reason,
                )
                if self.metrics is not None:
                    self.metrics.tool_policy_decision(decision.action, decision.rule)
            return decision

        return judge

    async def forwarding(
        self, exchange: str, recorder: Recorder, sending: Awaitable[web.StreamResponse]
    ) -> web.StreamResponse:
        """A miss on its way to the vendor; under record-missing its answer joins the index
        once every event of the call is in the log."""
        if self.mode != RECORD_MISSING:
            return await sending
        self._loop = loop = asyncio.get_running_loop()
        self._watched[exchange] = []
        try:
            return await sending
        finally:  # an answer not learned yet (an error) once the whole call is in the log
            recorder.when_written(lambda ok: loop.call_soon_threadsafe(self._learn, exchange))

    def observe(self, event: Event) -> None:
        """A recorder observer (writer thread): keeps the events of watched calls.

        A good answer is learned as soon as it is written: the proxy holds the end
        of an answer until it is in the log, so the client cannot ask again before
        the index has it.
        """
        events = self._watched.get(event.get("exchange") or "")
        if events is None:
            return
        events.append(event)
        good = event.get("outcome") == "ok" and (event.get("status") or 999) < 400
        if event["type"] == LLM_RESPONSE and good and self._loop is not None:
            self._loop.call_soon_threadsafe(self._learn, event["exchange"])

    def _learn(self, exchange: str) -> None:
        events = self._watched.pop(exchange, [])
        if events:  # a call that failed over or broke off yields nothing (as when loading)
            for call in recorded_calls(events[0]["session"], events):
                self.index.add(call)


async def _send_recorded(
    request: web.Request, recorded: Recorded, speed: float, api: str, judge: Judge | None
) -> web.StreamResponse:
    """The recorded answer, held to the tool policy when `judge` is given."""
    headers = CIMultiDict({**recorded.headers, "x-taplog-replayed": recorded.where()})
    if recorded.sse is None:
        body = recorded.body
        answer = parse_json(body) if judge is not None else None
        if isinstance(answer, dict) and any(
            decision.action == "deny" for decision in gate_answer(api, answer, judge)
        ):
            body = orjson.dumps(answer)
            headers.popall("content-length", None)
        return web.Response(status=recorded.status, body=body, headers=headers)
    gate = stream_gate(api, judge, HOLD_LIMIT) if judge is not None else None
    splitter = SseSplitter(None) if gate is not None else None
    response = web.StreamResponse(status=recorded.status, headers=headers)
    await response.prepare(request)
    last = 0.0
    for t_ms, raw in recorded.sse:
        if speed > 0 and t_ms > last:
            await asyncio.sleep((t_ms - last) / 1000 / speed)
        last = max(last, t_ms)
        if gate is not None and splitter is not None:
            raw = b"".join(gate.feed(splitter.feed(raw)))
        await response.write(raw)
    if gate is not None and splitter is not None:
        rest = splitter.flush()
        await response.write(b"".join(gate.feed([rest] if rest else []) + gate.finish()))
    await response.write_eof()
    return response


def _miss(index: ReplayIndex, api: str, body: object) -> str:
    closest = index.closest(api, body)
    if closest is None:
        passed_over = index.passed_over_text()
        return f"replay miss: no {api} call recorded ({len(index)} calls in the recording" + (
            f"; {passed_over})" if passed_over else ")"
        )
    recorded, difference = closest
    miss = (
        f"replay miss: no recorded {api} request matches this one; the closest is "
        f"{recorded.where()}, which differs at {difference}"
    )
    redacted = index.redacted_match(api, body)
    if redacted is not None:
        match, rules = redacted
        miss += (
            f"; {match.where()} differs only where the recording holds redacted text "
            f"({', '.join(rules)}): a request that holds the original text cannot match it"
        )
    return miss


REPLAYER = web.AppKey("replayer", Replayer)


REPLAY_EXPOSURE = auth.Exposure(
    "read the recorded answers, and in the answers to calls the recording lacks, "
    "session ids and recorded content",
    "give clients http://HOST:PORT/t/<token>/v1 as their base URL (or an X-Taplog-Token header)",
)
TOKENS = web.AppKey("tokens", Tokens)


def create_replay_app(
    source: Path,
    speed: float = 1.0,
    tokens: Tokens | None = None,
    ignored: tuple[IgnoredField, ...] = (),
    policy: Policy | None = None,
) -> web.Application:
    """The strict replay server's app over a data dir or one session file; with tokens,
    only calls that present one are answered (as `taplog serve` does); recorded answers
    are held to `policy`."""
    app = web.Application(client_max_size=MAX_BODY)
    app[REPLAYER] = Replayer(load_index(source, ignored), STRICT, speed, policy)
    app[TOKENS] = tokens or Tokens(())
    app.router.add_route("*", "/{tail:.*}", _replay)
    return app


async def _replay(request: web.Request) -> web.StreamResponse:
    token, target = auth.split_token(request.raw_path)
    if not request.app[TOKENS].accepts(token, request.headers.get(auth.TOKEN_HEADER)):
        return error_response(
            provider_for(target, request.headers), 401, auth.REFUSED, "unauthorized"
        )
    path = target.partition("?")[0]
    api = api_of_path(path) if request.method == "POST" else None
    try:  # a body sent with a Content-Encoding, decoded as the proxy does
        raw = await content_encoding.decoded(request.headers, await request.read(), MAX_BODY_MB)
    except content_encoding.Refused as exc:
        return error_response(provider_for(target), exc.status, str(exc), exc.code)
    body = parse_json(raw)
    answer = await request.app[REPLAYER].answer(
        request, provider_for(target, request.headers), api or PASSTHROUGH, body
    )
    assert isinstance(answer, web.StreamResponse)  # strict: every call is answered
    return answer


async def run_replay(source: Path, settings: Settings) -> None:
    """Serve until interrupted, as the bind and token rule of `serve` allows; prints the
    URL once listening."""
    problem = auth.binding_problem(settings, REPLAY_EXPOSURE)
    if problem is not None:
        raise ServeError(problem)
    tokens = Tokens(settings.auth_tokens)
    app = create_replay_app(
        source, settings.replay_speed, tokens, settings.replay_ignored, settings.tool_policy_rules
    )
    runner = ProxyRunner(app, settings.header_timeout, shutdown_timeout=settings.shutdown_grace)
    async with listening(runner, settings.host, settings.port) as (bound_host, port, *_):
        token = "/t/$TAPLOG_AUTH_TOKEN" if settings.auth_tokens else ""
        url = f"http://{bound_host}:{port}{token}"
        index = runner.app[REPLAYER].index
        print(f"taplog replay: {len(index)} calls on {url}", flush=True)
        if passed_over := index.passed_over_text():
            print(f"taplog replay: {passed_over}", file=sys.stderr, flush=True)
        await until_stopped()
