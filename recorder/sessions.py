"""Which session a call belongs to, resolved in the order docs/sessions.md states.

1. the `X-Taplog-Session` header;
2. the path prefix `/s/<id>/` (found by the router, passed in);
3. what the client already sends (docs/protocols.md §7): a Responses
   `previous_response_id` recorded earlier, then the session ids agents send
   (`recorder.vendors.clients`: Claude Code's session header and
   `metadata.user_id`, Codex's and opencode's session headers, `conversation`,
   `prompt_cache_key`, `metadata.session_id`);
4. conversation stitching: a stateless chat that resends an earlier call's
   messages plus new ones continues that call's session (`recorder.stitching`: also
   when the client closed the earlier call with text of its own); the same messages
   again are that call again (a retry) when the client says so or the model has had
   turns in them already;
5. otherwise a new session.

Workers of one `taplog serve --workers N` each resolve on their own and agree through
facts: what one learns that a later call may refer back to (a transcript prefix, a
Responses answer id) it `share`s, and the others `learn` it (`proxy.processes.link`).

Ids become file names, so explicit ids must match `SESSION_ID` or the call is
refused; ids taken from clients are mapped to that form instead, keeping the
original for `session.started`.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from taplog.recorder.secrets import redact_text
from taplog.recorder.stitching import stitches
from taplog.recorder.vendors.clients import session_hints
from taplog.recorder.vendors.openai_responses.chaining import PREVIOUS_FIELD, previous_answer

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SESSION_HEADER = "x-taplog-session"


class InvalidSessionId(ValueError):
    """An explicitly named session id that cannot be a file name."""


def check_session_id(value: str) -> str:
    if redact_text(value) != value:  # never a file name, nor echoed back
        raise InvalidSessionId(
            "invalid session id: it looks like a credential (a key or token); "
            "name sessions with something that is not secret"
        )
    if SESSION_ID.fullmatch(value):
        return value
    shown = value if len(value) <= 40 else value[:40] + "…"
    raise InvalidSessionId(
        f"invalid session id {shown!r}: use 1-128 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit"
    )


def safe_session_id(original: str) -> str:
    """A client-chosen id as a valid, stable session id (a credential-shaped one: its
    digest only)."""
    if redact_text(original) != original:
        return f"s-{hashlib.blake2b(original.encode(), digest_size=8).hexdigest()}"
    if SESSION_ID.fullmatch(original):
        return original
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", original).lstrip("._-")[:100]
    suffix = hashlib.blake2b(original.encode(), digest_size=4).hexdigest()
    return f"{cleaned}-{suffix}" if cleaned else f"s-{suffix}"


def new_session_id() -> str:
    """Sortable by start time: `20261130T004933Z-1a2b3c4d` (random like `events.new_id`)."""
    return f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{random.getrandbits(32):08x}"


Fact = tuple[str, Any, str]  # ("prefix", digest, session) or ("response", answer id, session)


@dataclass(frozen=True, slots=True)
class Resolution:
    session: str
    source: str  # header, path, client:<signal>, stitched, new
    original: str | None = None  # the client's own id when it was mapped
    first_seen: bool = False  # first call of this session in this process


@dataclass(frozen=True, slots=True)
class CallClues:
    """What resolution looks at: lower-cased headers and the parsed body."""

    api: str
    headers: Mapping[str, str]
    body: Any
    key_fingerprint: str | None = None
    path_session: str | None = None
    retry: bool = False


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


class _Recent:
    """What was put (or found) lately: at most `limit` keys, the older half forgotten
    whole once the newer half is full.

    Two plain dicts hold an entry in about a third of the memory an OrderedDict in
    exact LRU order took; at 100,000 entries a map that was most of taplog's growth
    in RSS under load.
    """

    def __init__(self, limit: int) -> None:
        self._half = max(1, limit // 2)
        self._new: dict[Any, Any] = {}
        self._old: dict[Any, Any] = {}

    def __contains__(self, key: Any) -> bool:
        return key in self._new or key in self._old

    def get(self, key: Any, default: Any = None) -> Any:
        if key in self._new:
            return self._new[key]
        if key in self._old:
            value = self._old[key]
            self.put(key, value)  # found: recent again
            return value
        return default

    def put(self, key: Any, value: Any) -> None:
        self._old.pop(key, None)
        self._new[key] = value
        if len(self._new) >= self._half:
            self._old, self._new = self._new, {}


class SessionResolver:
    """Resolves sessions and remembers what later calls may refer back to."""

    def __init__(
        self,
        idle_seconds: float = 3600.0,
        max_entries: int = 100_000,
        logged: Callable[[str], bool] = lambda session: False,
    ) -> None:
        """`logged(session)` tells whether a session already has a log (from an earlier
        process): its first call here then starts nothing new."""
        self.idle_seconds = idle_seconds
        self._logged = logged
        self._prefixes = _Recent(max_entries)  # transcript-prefix hash -> session
        self._responses = _Recent(max_entries)  # Responses API response id -> session
        self._seen = _Recent(max_entries)  # session -> when its last call came
        self.share: Callable[[Fact], None] | None = None  # to the other workers, if any

    def resolve(self, call: CallClues) -> Resolution:
        """Raises InvalidSessionId for a bad explicit id; nothing is remembered then."""
        explicit = call.headers.get(SESSION_HEADER)
        if explicit is not None:
            found = (check_session_id(explicit), "header", None)
        elif call.path_session is not None:
            found = (check_session_id(call.path_session), "path", None)
        else:
            found = self._from_client(call) or self._stitch(call)
        session, source, original = found
        # Only a session named by the client can have a log from an earlier process.
        named = source not in ("new", "stitched")
        first_seen = session not in self._seen and not (named and self._logged(session))
        self._seen.put(session, time.monotonic())
        return Resolution(session, source, original, first_seen)

    def remember_response(self, response_id: str, session: str) -> None:
        """A recorded answer that a later `previous_response_id` may name."""
        self._responses.put(response_id, session)
        if self.share is not None:
            self.share(("response", response_id, session))

    def learn(self, fact: Fact, when: float) -> None:
        """What another worker learned, at `when` (`time.monotonic`: one clock for every
        process of the machine), when its session was seen."""
        kind, key, session = fact
        (self._prefixes if kind == "prefix" else self._responses).put(key, session)
        if when > self._seen.get(session, -math.inf):
            self._seen.put(session, when)

    def _from_client(self, call: CallClues) -> tuple[str, str, str | None] | None:
        body = call.body if isinstance(call.body, dict) else {}
        previous = _text(previous_answer(body))
        session = None if previous is None else self._responses.get(previous)
        if session is not None:
            return session, f"client:{PREVIOUS_FIELD}", None
        for source, value in session_hints(call.headers, body):
            session = safe_session_id(value)
            return session, f"client:{source}", value if session != value else None
        return None

    def _stitch(self, call: CallClues) -> tuple[str, str, None]:
        """The session whose transcript this one extends, else a new one."""
        known = stitches(call.api, call.body, self._seed(call))
        now = time.monotonic()
        found = None
        # A strict beginning means "the same conversation, further on"; the whole
        # transcript again is the same conversation when it is a retry: the client
        # says so, or the model has had turns in it (aider retries without a word).
        # A lone opening sent again may be another run of the same prompt.
        again = known.ends[:1] if call.retry or known.under_way else ()
        for digest in itertools.chain(again, known.earlier()):
            session = self._prefixes.get(digest)
            if (
                session is not None
                and now - self._seen.get(session, -math.inf) <= self.idle_seconds
            ):
                found = (session, "stitched", None)
                break
        found = found or (new_session_id(), "new", None)
        for digest in known.ends:
            self._prefixes.put(digest, found[0])
            if self.share is not None:
                self.share(("prefix", digest, found[0]))
        return found

    @staticmethod
    def _seed(call: CallClues) -> bytes:
        agent = call.headers.get("user-agent", "").split("/", 1)[0]
        return orjson.dumps([call.api, call.key_fingerprint, agent])
