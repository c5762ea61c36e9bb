"""`taplog resume SESSION --to PROVIDER:MODEL`: carry a recorded conversation to another model.

The session's conversation, exported in the target provider's API (its
`type`, and for OpenAI-type providers its `api`), with the continuation note
of `recorder.tools.resume_request` on top, goes to the provider through the proxy's own
upstream client and header hygiene, keyed from the provider's environment
variable (`proxy.failover.attempts.plan`, as for a failover target). Request and
answer are recorded like a proxied call, in a NEW session whose
`session.started` event links back: `source: "resumed"`, `resumed_from`, `at`
(the origin's last seq) and `origin_hash` (its line hash, as `session.forked`
has), and `left_out`: what the conversation lost on the way (the translation's
leave-outs, the last answer's tool calls that never ran). A request translated to
another API is recorded as failover records one: `translated_from`, and `dropped`
(the same list).
The origin is only read.

Recording needs the data dir to itself: while a `taplog serve` holds it,
resume refuses (stop serve first) rather than write beside the writer that
owns it. `--dry-run` only reads: it prints the request (the key shown as its
variable's name) and sends and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
from multidict import CIMultiDict, CIMultiDictProxy
from yarl import URL

from taplog.proxy.call import Try
from taplog.proxy.config import Settings
from taplog.proxy.failover.attempts import Attempt, plan, target_api
from taplog.proxy.failover.rules import Target, plain_rule
from taplog.proxy.upstream import classify, open_pool, response_headers
from taplog.recorder import __version__
from taplog.recorder.bodies import parse_json
from taplog.recorder.events import Event, new_id, session_started
from taplog.recorder.secrets import is_secret_header
from taplog.recorder.sessions import InvalidSessionId, check_session_id, new_session_id
from taplog.recorder.store.lock import DataDirBusy, DataDirLock
from taplog.recorder.store.lognames import log_exists
from taplog.recorder.store.reader import read_events
from taplog.recorder.store.writer import Recorder, SessionStart
from taplog.recorder.tools.export import API_FORMATS, ExportError, session_path
from taplog.recorder.tools.resume_request import answer_text, feature_headers, resume_body
from taplog.recorder.vendors.errors import error_message
from taplog.recorder.vendors.translation import Translated, Untranslatable

USER_AGENT = "taplog-resume"


class ResumeError(ValueError):
    """The session cannot be resumed like that; the message says why."""


@dataclass(frozen=True)
class Resumption:
    """A resume, planned: where it comes from, the new session, and the request."""

    origin: str
    origin_events: list[Event]
    new: str
    attempt: Attempt
    recorded_in: str  # the API of the origin's conversation
    left_out: list[str]  # what the conversation lost on the way


@dataclass(frozen=True)
class Resumed:
    new: str
    status: int | None
    text: str  # the answer's text, or why there is none


def plan_resume(
    data_dir: Path, session: str, target: Target, new: str | None, prompt: str | None = None
) -> Resumption:
    """The request that continues `session` on `target` (`prompt`: the user's next turn);
    reads the log, writes nothing."""
    try:
        events = list(read_events(session_path(data_dir, session)))
        api = target_api(target, "anthropic.messages")  # the provider's own API choice
        exported = resume_body(events, session, API_FORMATS[api], target.model, prompt)
    except (ExportError, Untranslatable) as exc:
        raise ResumeError(str(exc)) from None
    new = new or new_session_id()
    try:
        check_session_id(new)
    except InvalidSessionId as exc:
        raise ResumeError(str(exc)) from None
    if log_exists(data_dir / "sessions", new):
        raise ResumeError(f"session {new!r} already exists in {data_dir}")
    # A call of taplog's own, as to a failover target: no client provider, so the
    # target's own URL and key (from its variable), the body re-serialised.
    attempt = plan(
        target,
        client_provider="",
        client_api=api,
        parsed=exported.body,
        raw=b"",
        client_headers=CIMultiDictProxy(
            CIMultiDict({"user-agent": USER_AGENT, **feature_headers(events, api)})
        ),
        client_url="",
    )
    if exported.recorded_in != api:  # recorded as a translated call: what it left out
        translated = Translated(exported.body, exported.left_out)
        attempt = replace(attempt, translation=translated)
    return Resumption(session, events, new, attempt, exported.recorded_in, exported.left_out)


def dry_run_view(resumption: Resumption) -> dict[str, Any]:
    """The request as it would go, the key shown as the variable it comes from."""
    attempt = resumption.attempt
    key, variable = attempt.target.provider.api_key(), "$" + attempt.target.provider.api_key_env
    headers = {
        str(name): (value.replace(key, variable) if key else value + variable)
        if is_secret_header(name)
        else value
        for name, value in attempt.headers.items()
    }
    return {"method": "POST", "url": attempt.url, "headers": headers, "body": attempt.parsed}


async def resume(settings: Settings, resumption: Resumption) -> Resumed:
    """Send the request and record it and its answer in the new session."""
    provider = resumption.attempt.target.provider
    if provider.api_key() is None:
        raise ResumeError(
            f"${provider.api_key_env} is not set: {provider.name} needs its key "
            "(--dry-run prints the request without it)"
        )
    lock = DataDirLock(settings.data_dir)
    try:
        lock.acquire()
    except DataDirBusy:
        raise ResumeError(
            f"a taplog serve is recording into {settings.data_dir}; stop it first "
            "(resume records the new session there), or use --dry-run"
        ) from None
    recorder = Recorder(settings.data_dir, fsync=settings.fsync, redaction=settings.redaction)
    recorder.start()
    try:
        return await _send_recorded(settings, resumption, recorder)
    finally:
        recorder.close()
        lock.release()


async def _send_recorded(settings: Settings, resumption: Resumption, recorder: Recorder) -> Resumed:
    attempt, new = resumption.attempt, resumption.new
    recorder.record(SessionStart(_started(resumption)))
    path = URL(attempt.url).path
    sent = Try(recorder, new, new_id("ex"), attempt, 1, resumption.recorded_in, path, None)
    sent.record_request()
    pool = open_pool(settings)
    try:
        async with pool.post(attempt.url, data=attempt.body, headers=attempt.headers) as upstream:
            sent.status, sent.headers = upstream.status, response_headers(upstream)
            async for chunk in upstream.content.iter_any():
                sent.keep(chunk)
    except (aiohttp.ClientError, TimeoutError) as exc:
        failure = classify(exc, plain_rule(settings))
        sent.finish(failure.outcome, failure.message)
        return Resumed(new, None, failure.message)
    finally:
        await pool.close()
    answer = parse_json(sent.body())
    sent.finish("ok" if sent.status < 400 else "upstream_error")
    if sent.status >= 400:
        return Resumed(new, sent.status, _vendor_error(answer))
    return Resumed(new, sent.status, answer_text(attempt.api, answer))


def _started(resumption: Resumption) -> Event:
    """The new session's first event, linking it to the one it continues."""
    last = resumption.origin_events[-1]
    return session_started(
        resumption.new,
        source="resumed",
        original=None,
        api=resumption.attempt.api,
        user_agent=USER_AGENT,
        taplog_version=__version__,
        resumed_from=resumption.origin,
        at=last["seq"],
        origin_hash=last["h"],
        left_out=resumption.left_out,
    )


def _vendor_error(answer: Any) -> str:
    return error_message(answer) or "the vendor refused the call"
