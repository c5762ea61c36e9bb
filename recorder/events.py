"""The session log's event format: one JSON object per line, version 3.

Every line carries the envelope

    v, seq, ts, session, epoch, type, id, exchange, <payload…>, prev, h

`seq` (gapless per session, from 1), `prev` (the previous line's `h`) and `h`
are assigned by the writer thread, which alone owns the files; everything else
is fixed when the event is created. `epoch` is the session's owner epoch in a fleet
(`proxy.coordination.leases`): the lease under which the call was served, or null when
no lease was held (no `--coordination`, or Redis did not answer). `h` is a BLAKE2b-128
digest of the line's bytes up to the `,"h":` suffix, so a reader can verify each line
and the chain without re-serialising anything (see `seal` and `verify_line`).

Recorded content is attacker-controlled, and one event that cannot be
serialised must never stop the log: `seal` falls back to a sanitised copy
(strings with unpaired surrogates escaped, nesting clipped, odd values as
text) marked `"sanitised": "<why>"`. The bodies themselves are kept exact
beside it (see `recorder.bodies`); only derived fields can be clipped.
"""

from __future__ import annotations

import hashlib
import random
import time
from typing import Any

import orjson

from taplog.recorder.secrets import redact_text

# 2: blobs (recorder.store.blobs), transcript deltas (recorder.store.deltas);
# 3: `epoch` in the envelope, `session.resumed` (a fleet's change of owner);
# 4: a request builds on any earlier one of its file, large values met again are pointers
FORMAT_VERSION = 4

SESSION_STARTED = "session.started"
LLM_REQUEST = "llm.request"
LLM_RESPONSE = "llm.response"
TOOL_PRE = "tool.pre"
TOOL_POST = "tool.post"
FAILOVER = "failover"
ERROR = "error"
SESSION_FORKED = "session.forked"
SESSION_RESUMED = "session.resumed"
CALL_ANSWERED = "call.answered"
CALL_REFUSED = "call.refused"
TOOL_DENIED = "tool.denied"
TOOL_FLAGGED = "tool.flagged"

EVENT_TYPES = frozenset(
    {
        SESSION_STARTED,
        LLM_REQUEST,
        LLM_RESPONSE,
        TOOL_PRE,
        TOOL_POST,
        FAILOVER,
        ERROR,
        SESSION_FORKED,
        SESSION_RESUMED,
        CALL_ANSWERED,
        CALL_REFUSED,
        TOOL_DENIED,
        TOOL_FLAGGED,
    }
)

Event = dict[str, Any]

_HASH_SUFFIX_LEN = len(b',"h":"') + 32 + len(b'"}')
MAX_DEPTH = 128  # orjson serialises at most 255 levels; sanitised events keep far fewer
_INT_RANGE = range(-(2**63), 2**64)
_LINE_SEPARATORS = (
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
    ("\u0085".encode(), b"\\u0085"),
)


def new_id(prefix: str) -> str:
    """A random, practically unique id such as `ev_3f2a…` (64 bits).

    From `random` (seeded from the OS at start and again in a forked child), not
    `os.urandom`: ids need uniqueness, not secrecy, and a syscall per event on the
    event loop hands the GIL to the writer thread every time.
    """
    return f"{prefix}_{random.getrandbits(64):016x}"


_second: tuple[int, str] = (-1, "")  # the last second formatted, shared by all threads


def utc_second(second: int) -> str:
    """A Unix second as UTC, `2026-11-30T00:49:33`, formatted once per second (the last one
    is kept): strftime per event was a measurable share of the event loop's time."""
    global _second
    formatted, text = _second
    if second != formatted:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = (second, text)
    return text


def now_ts() -> str:
    """UTC time with microseconds, the form every `ts` field uses: `2026-11-30T00:49:33.123456Z`."""
    second, micro = divmod(time.time_ns() // 1000, 1_000_000)
    return f"{utc_second(second)}.{micro:06d}Z"


def make_event(
    event_type: str, session: str, exchange: str | None, epoch: int | None = None, **payload: Any
) -> Event:
    """An event with its envelope; the writer adds `seq`, `prev` and `h`."""
    if event_type not in EVENT_TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    return {
        "v": FORMAT_VERSION,
        "seq": 0,
        "ts": now_ts(),
        "session": session,
        "epoch": epoch,
        "type": event_type,
        "id": new_id("ev"),
        "exchange": exchange,
        **payload,
    }


# One constructor per event kind: the fields each kind carries, named once.


def session_started(
    session: str,
    epoch: int | None = None,
    *,
    source: str,
    original: str | None,
    api: str,
    user_agent: str | None,
    taplog_version: str,
    **links: Any,
) -> Event:
    """A session's first event: how its id was found (`links`: where a resumed one comes from)."""
    return make_event(
        SESSION_STARTED,
        session,
        None,
        epoch,
        source=source,
        original=None if original is None else redact_text(original),
        api=api,
        user_agent=None if user_agent is None else redact_text(user_agent),
        taplog_version=taplog_version,
        **links,
    )


def session_forked(session: str, *, origin: str, at: int, origin_hash: str) -> Event:
    return make_event(SESSION_FORKED, session, None, origin=origin, at=at, origin_hash=origin_hash)


def session_resumed(
    session: str, epoch: int, *, instance: str, previous: dict[str, Any], reason: str | None
) -> Event:
    """A fleet's session changed owner: `instance` writes it from `epoch` on. `previous`
    names the last owner's last line it had reported (`instance`, `epoch`, `seq`, `h`;
    `seq` and `h` null when it had reported none), `reason` says why it is not linked."""
    return make_event(
        SESSION_RESUMED,
        session,
        None,
        epoch,
        instance=instance,
        previous=previous,
        linked=previous.get("h") is not None,
        reason=reason,
    )


def llm_request(session: str, exchange: str, **fields: Any) -> Event:
    """The envelope of a request as sent upstream (`recorder.calls.LlmRequest` fills it)."""
    return make_event(LLM_REQUEST, session, exchange, **fields)


def llm_response(session: str, exchange: str, **fields: Any) -> Event:
    """The envelope of what came back (`recorder.calls.LlmResponse` fills it)."""
    return make_event(LLM_RESPONSE, session, exchange, **fields)


def tool_pre(parent: Event, *, call_id: str, name: str | None, **fields: Any) -> Event:
    """The model asked for a tool, in the answer `parent`; timed as that answer."""
    return _timed_as(TOOL_PRE, parent, call_id=call_id, name=name, **fields)


def tool_post(parent: Event, *, call_id: str, name: str | None, **fields: Any) -> Event:
    """A tool's result, first seen in the request `parent`; timed as that request."""
    return _timed_as(TOOL_POST, parent, call_id=call_id, name=name, **fields)


def _timed_as(kind: str, parent: Event, **payload: Any) -> Event:
    event = make_event(kind, parent["session"], parent["exchange"], parent.get("epoch"), **payload)
    event["ts"] = parent["ts"]  # when the call happened, not when it was written
    return event


def failover_event(
    session: str,
    exchange: str,
    *,
    from_provider: str,
    from_model: str,
    to_provider: str,
    to_model: str,
    reason: str,
    attempt: int | None,
) -> Event:
    """A call moved from one target to another (`attempt`: the try it moved to)."""
    return make_event(
        FAILOVER,
        session,
        exchange,
        from_provider=from_provider,
        from_model=from_model,
        to_provider=to_provider,
        to_model=to_model,
        reason=redact_text(reason),
        attempt=attempt,
    )


def call_answered(session: str, exchange: str, **fields: Any) -> Event:
    """What the client got for its call, once, whatever its tries came to
    (`recorder.calls.CallAnswer` fills it). Ignorable: a reader that predates it falls
    back on the last `llm.response`."""
    return make_event(CALL_ANSWERED, session, exchange, ignorable=True, **fields)


def call_refused(
    session: str,
    exchange: str,
    epoch: int | None = None,
    *,
    reason: str,
    limit: str,
    value: float,
    used: float,
    error: str,
    **details: Any,
) -> Event:
    """A call taplog refused before any vendor saw it: `reason` (`budget`, `loop_guard`),
    the setting `limit` with its `value`, what was `used`, and `error`, what the client was
    told. Ignorable, as `call.answered` is: an older reader skips it."""
    return make_event(
        CALL_REFUSED,
        session,
        exchange,
        epoch,
        ignorable=True,
        reason=reason,
        limit=limit,
        value=value,
        used=used,
        error=redact_text(error),
        **details,
    )


def tool_policy_event(
    session: str,
    exchange: str,
    *,
    action: str,
    rule: str,
    reason: str,
    call_id: str,
    name: str,
    partial: bool,
    attempt: int | None,
) -> Event:
    """The tool policy's decision on a tool call the model asked for (`proxy.tool_policy`):
    `tool.denied` (taken out of what the client got) or `tool.flagged` (passed). `partial`:
    judged on arguments cut at the hold limit; `attempt`: the try whose answer it was.
    Ignorable, as `call.answered` is: an older reader skips it."""
    return make_event(
        TOOL_DENIED if action == "deny" else TOOL_FLAGGED,
        session,
        exchange,
        ignorable=True,
        rule=rule,
        reason=redact_text(reason),
        call_id=call_id,
        name=name,
        partial=partial,
        attempt=attempt,
    )


def error_event(session: str, exchange: str | None, reason: str, **details: Any) -> Event:
    """What taplog itself refused or could not do, and why."""
    return make_event(ERROR, session, exchange, reason=redact_text(reason), **details)


def seal(event: Event, seq: int, prev: str | None) -> tuple[bytes, str]:
    """Serialise `event` as one log line numbered `seq`, chained to `prev`.

    Returns the line (ending in a newline) and its hash. orjson escapes control
    characters, and the line separators it leaves raw (U+2028, U+2029, U+0085, which
    `str.splitlines` and many editors break lines at) are escaped here, so recorded
    content can never break out of its line for any line reader.
    """
    event["seq"] = seq
    event["prev"] = prev
    event.pop("h", None)  # an event written before (a retried batch) carries its old hash
    try:
        body = orjson.dumps(event)
    except TypeError as exc:  # orjson.JSONEncodeError: too deep, surrogates, odd types
        event["sanitised"] = str(exc)
        body = orjson.dumps(_sanitised(event, 0))
    if not body.isascii():  # most lines are (one fast pass); the separators are not
        for raw, escaped in _LINE_SEPARATORS:  # only ever inside strings: JSON's are ASCII
            if raw in body:
                body = body.replace(raw, escaped)
    digest = hashlib.blake2b(body[:-1], digest_size=16).hexdigest()
    return body[:-1] + b',"h":"' + digest.encode() + b'"}\n', digest


def verify_line(line: bytes) -> str | None:
    """The hash a line claims if its content matches it, else None."""
    line = line.rstrip(b"\n")
    if len(line) <= _HASH_SUFFIX_LEN or not line.endswith(b'"}'):
        return None
    content, claimed = line[:-_HASH_SUFFIX_LEN], line[-34:-2]
    if line[-_HASH_SUFFIX_LEN:-34] != b',"h":"':
        return None
    digest = hashlib.blake2b(content, digest_size=16).hexdigest()
    return digest if digest.encode() == claimed else None


def _sanitised(value: Any, depth: int) -> Any:
    """`value` made serialisable: what orjson refuses becomes text, deep nesting is clipped."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # unpaired surrogates, e.g. undecodable header bytes
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if value is None or isinstance(value, bool | float):
        return value
    if isinstance(value, int):
        return value if value in _INT_RANGE else str(value)
    if isinstance(value, dict | list | tuple):
        if depth >= MAX_DEPTH:
            return f"[taplog: nested deeper than {MAX_DEPTH} levels, clipped]"
        if isinstance(value, dict):
            return {_sanitised(str(k), depth): _sanitised(v, depth + 1) for k, v in value.items()}
        return [_sanitised(item, depth + 1) for item in value]
    return _sanitised(repr(value), depth)
