"""Keep secrets out of the log: by name, by value and by shape, wherever taplog writes.

Three nets, each cheap where it catches nothing (the common case):

* by name: headers and query parameters named like credentials (``*auth*``,
  ``*token*``, ``*secret*``, ``*password*``, ``*credential*``, ``*api-key*``,
  ``cookie``, ``sig``, ``signature``, ``jwt``, ``key``, …) are left out of the
  log (headers) or keep their name with ``[redacted]`` (query parameters),
  whatever their value;
* by value (`recorder.secrets_by_value`): the request's own secrets (the values of
  its credential headers, `secret_values`) and taplog's fallback key where it keyed a
  try are replaced wherever they echo back: in any header or query parameter whatever
  its name, the path and URL, bodies, stream events (split across them too), error
  texts, and in base64 at any alignment; only where one stands as a whole token (never
  inside a longer word), and never one shorter than `MIN_SECRET_LEN`: a short string
  is not a credential, and replacing it would corrupt the recorded text;
* by shape: OpenAI and Anthropic keys, ``Bearer …``, JWTs, AWS access keys,
  Google API keys, GitHub and Slack tokens, and long high-entropy values of
  JSON fields named like credentials, in any text taplog writes (paths, URLs,
  header values of any name, bodies, error texts, log lines).

The nets by name and by shape run where a text is made or recorded (a request's headers
and path on the event loop, cached); the net by value runs where the recorder builds
events, off the loop. `shape_spans`, `merged` and `replaced` are shared with it: each net
finds spans, and a text is rewritten once.

A fingerprint lets a user tell calls made with different keys apart without
the log ever holding a key: BLAKE2b with a fixed personalisation, truncated,
so it cannot be reversed for real (high-entropy) API keys.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

import ahocorasick_rs

from taplog.recorder.vendors.apis import KEY_HEADERS, without_bearer

REDACTED = "[redacted]"
_REDACTED = REDACTED.encode()
MIN_SECRET_LEN = 8
Span = tuple[int, int]  # (start, end) in bytes

# Words that name a credential, in headers, query parameters and JSON fields. Not
# "signature" in JSON: Anthropic's thinking blocks carry one that must stay exact.
_CREDENTIAL_WORDS = (
    r"auth(?!or(?:s|ed)?(?![a-z]))|token|secret|passw|pwd|credential|api[-_]?key|access[-_]?key|private[-_]?key"
    r"|client[-_]?key|session[-_]?key|cookie|jwt"
)
_SECRET_HEADER = re.compile(rf"(?i)({_CREDENTIAL_WORDS}|signature|(^|-)key$)")
_SECRET_PARAM = re.compile(rf"(?i)({_CREDENTIAL_WORDS}|signature|^(sig|key|code)$)")


@dataclass(frozen=True, slots=True)
class _Shape:
    """A credential's shape. Every pattern opens with a literal, and is only run where that
    literal occurs at all (`_LITERALS` finds them all in one pass); `group` is the part
    redacted. Lookbehinds would cost the regex engine's fast search for the literal: the
    token's left edge is checked on each match instead."""

    literal: bytes
    pattern: re.Pattern[bytes]
    group: int = 0
    mixed_case: bool = False  # only a token with lower and upper case letters and digits


# A token's edges: where letters and digits stop ("x-sk-…" holds a key, "task-…" none).
WORD_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_END = rb"(?![A-Za-z0-9])"
_TOKEN = rb"[A-Za-z0-9._~+/=%-]"  # % too: a token percent-encoded in a URL
_TOKEN_SHAPES = (
    # "sk-" and a long word ("task-management-…") is no key: keys mix cases and digits
    _Shape(b"sk-", re.compile(rb"sk-[A-Za-z0-9_-]{20,}" + _END), mixed_case=True),
    *(
        _Shape(word, re.compile(re.escape(word) + rb"(?:\s|%20|\+)+(" + _TOKEN + rb"{16,})"), 1)
        for word in (b"Bearer", b"bearer", b"BEARER")
    ),
    _Shape(b"eyJ", re.compile(rb"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+")),
    *(
        _Shape(prefix, re.compile(prefix + rb"[A-Z0-9]{16}(?![A-Za-z0-9])"))
        for prefix in (b"AKIA", b"ASIA")
    ),
    _Shape(b"AIza", re.compile(rb"AIza[A-Za-z0-9_-]{35}" + _END)),
    *(
        _Shape(prefix, re.compile(prefix + rb"[A-Za-z0-9]{30,}" + _END))
        for prefix in (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_")
    ),
    _Shape(b"github_pat_", re.compile(rb"github_pat_\w{30,}" + _END)),
    _Shape(b"xox", re.compile(rb"xox[abposr]-[A-Za-z0-9-]{10,}" + _END)),
)
# "password": "…" and the like: a long value with letters and digits, in a field whose name
# holds a credential word. The pattern opens with the literal `":`: a fast scan.
_JSON_VALUE = re.compile(rb'":\s*"(' + _TOKEN + rb'{16,})"')
_CREDENTIAL_KEY = re.compile(_CREDENTIAL_WORDS.encode(), re.IGNORECASE)
_MIXED = re.compile(rb"(?=[^a-z]*[a-z])(?=[^A-Z]*[A-Z])(?=[^0-9]*[0-9])")
_LETTER_AND_DIGIT = re.compile(rb"(?=[^A-Za-z]*[A-Za-z])(?=[^0-9]*[0-9])")
# Where the shapes' literals are, in one pass over a text (Aho-Corasick with a SIMD
# prefilter: 30 KB in about 4 us, where a regex of them all or `in` for each took 280-350
# us). A pass reports matches that do not overlap, leftmost first: an occurrence it leaves
# out overlaps one it reports, so the literals that can begin inside a reported one are
# looked for on their own (`_MAY_HIDE`).
_LITERALS = ahocorasick_rs.BytesAhoCorasick(
    [shape.literal for shape in _TOKEN_SHAPES], matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
)
_MAY_HIDE = [
    [
        other
        for other, hidden in enumerate(_TOKEN_SHAPES)
        if other != index
        and any(
            shape.literal[start:] == hidden.literal[: len(shape.literal) - start]
            or hidden.literal in shape.literal[start:]
            for start in range(1, len(shape.literal))
        )
    ]
    for index, shape in enumerate(_TOKEN_SHAPES)
]
_ANY_LITERAL = re.compile(
    "|".join([*(re.escape(shape.literal.decode()) for shape in _TOKEN_SHAPES), '":'])
)


def is_secret_header(name: str) -> bool:
    """Authorization, API-key, cookie, token and other credential headers, by name."""
    return _SECRET_HEADER.search(name) is not None or _holds_credential(name)


@lru_cache(maxsize=1024)
def _logged_name(name: str) -> str | None:
    """A header's name as logged (lower-cased), or None for a secret one.

    Cached because every call repeats the same few dozen names; bounded because
    clients choose them.
    """
    return None if is_secret_header(name) else name.lower()


def safe_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers fit for the log: lower-cased names, credential headers left out, and
    credential-shaped values in any other header redacted."""
    return {
        logged: _logged_value(value)
        for name, value in headers
        if (logged := _logged_name(name)) is not None
    }


@lru_cache(maxsize=4096)
def _logged_value(value: str) -> str:
    """A header value as logged: cached, as most repeat on every call (user agents,
    content types, SDK versions); bounded, as clients choose them."""
    return redact_text(value)


def redact_url(target: str) -> str:
    """A URL or path with user info and the values of credential-named query parameters
    removed, and every part holding something credential-shaped (read percent-decoded:
    `Bearer%20…`) redacted whole."""
    base, mark, query = target.partition("?")
    if not query and "@" not in base and _ANY_LITERAL.search(unquote(base)) is None:
        return target  # a plain path: the common case
    if "://" in base and "@" in (parts := urlsplit(base)).netloc:  # user:password@host
        host = parts.netloc.rsplit("@", 1)[1]
        base = urlunsplit(parts._replace(netloc=f"{REDACTED}@{host}"))
    base = "/".join(_redacted_segment(segment) for segment in base.split("/"))
    if query:
        query = "&".join(_redacted_param(pair) for pair in query.split("&"))
    return base + mark + query


def _redacted_segment(segment: str) -> str:
    return REDACTED if _holds_credential(unquote(segment)) else segment


def _redacted_param(pair: str) -> str:
    name, equals, value = pair.partition("=")
    if _holds_credential(unquote_plus(name)):
        return REDACTED
    if equals and (_SECRET_PARAM.search(unquote(name)) or _holds_credential(unquote_plus(value))):
        return f"{name}={REDACTED}"
    return pair


def _holds_credential(text: str) -> bool:
    return redact_text(text) != text


def redact_text(text: str) -> str:
    """`text` with every credential-shaped token in it redacted (at once when no shape's
    literal is in it: the short texts of every call, header values and paths)."""
    if _ANY_LITERAL.search(text) is None:
        return text
    raw = text.encode("utf-8", "surrogatepass")
    redacted = redact_shapes(raw)
    return text if redacted is raw else redacted.decode("utf-8", "surrogatepass")


def redact_shapes(raw: bytes) -> bytes:
    """`raw` with credential-shaped tokens and credential-named JSON values redacted; the
    same object when there is none (most bodies: each shape's literal is not in them)."""
    return replaced(raw, shape_spans(raw))


def shape_spans(raw: bytes) -> list[Span]:
    """Where credential-shaped tokens and credential-named JSON values are in `raw`."""
    found: list[Span] = []
    for index in _shapes_in(raw):
        found += _token_spans(_TOKEN_SHAPES[index], raw)
    found += _named_value_spans(raw)
    return merged(found)


def _shapes_in(raw: bytes) -> set[int]:
    """The shapes whose literal occurs in `raw`, by their index."""
    reported = {index for index, _, _ in _LITERALS.find_matches_as_indexes(raw)}
    hidden = {
        other
        for index in reported
        for other in _MAY_HIDE[index]
        if other not in reported and _TOKEN_SHAPES[other].literal in raw
    }
    return reported | hidden


def _token_spans(shape: _Shape, raw: bytes) -> Iterator[Span]:
    for match in shape.pattern.finditer(raw):
        start, end = match.span(shape.group)
        at = match.start()
        if at > 0 and raw[at - 1] in WORD_CHARS:
            continue  # inside a longer word
        if shape.mixed_case and _MIXED.match(raw, start, end) is None:
            continue
        yield start, end


def _named_value_spans(raw: bytes) -> Iterator[Span]:
    for match in _JSON_VALUE.finditer(raw):
        at = match.start()
        opening = raw.rfind(b'"', max(0, at - 64), at)  # the field's name
        start, end = match.span(1)
        if (
            opening >= 0
            and _CREDENTIAL_KEY.search(raw, opening + 1, at) is not None
            and _LETTER_AND_DIGIT.match(raw, start, end) is not None
        ):
            yield start, end


def merged(spans: Iterable[Span]) -> list[Span]:
    """`spans` in order, those that overlap or touch made one: what `replaced` takes."""
    out: list[Span] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(end, out[-1][1]))
        else:
            out.append((start, end))
    return out


def replaced(raw: bytes, spans: Iterable[Span]) -> bytes:
    """`raw` with each of `spans` (in order, apart) replaced by `[redacted]`; `raw` itself
    when there is none."""
    pieces, last = [], 0
    for start, end in spans:
        pieces += (raw[last:start], _REDACTED)
        last = end
    return b"".join(pieces) + raw[last:] if pieces else raw


def api_key(headers: Mapping[str, str]) -> str | None:
    """The vendor key a client sent, whichever auth style it used."""
    for name in KEY_HEADERS:
        value = headers.get(name)
        if value:
            return without_bearer(value).strip() or None
    return None


def fingerprint(key: str | None) -> str | None:
    """A short, stable, irreversible name for a key: `key:1a2b3c4d5e6f7a8b`."""
    if not key:
        return None
    raw = key.encode("utf-8", "surrogatepass")  # undecodable bytes kept escaped
    digest = hashlib.blake2b(raw, digest_size=8, person=b"taplog-key").hexdigest()
    return f"key:{digest}"


def secret_values(headers: Mapping[str, str]) -> tuple[bytes, ...]:
    """The secret header values of a request, to scrub wherever they echo back."""
    values = set()
    for name, value in headers.items():
        if _logged_name(name) is None:  # a secret header
            for candidate in (value, without_bearer(value)):
                if len(candidate) >= MIN_SECRET_LEN:  # undecodable bytes kept escaped
                    values.add(candidate.encode("utf-8", "surrogatepass"))
    return tuple(sorted(values, key=len, reverse=True))
