"""Secrets by value: the request's own keys and taplog's, wherever and however they echo back.

Every record of a call comes with its secret values (`Secrets`): the values of the client's
secret headers (`Authorization`'s key, `x-api-key`, its taplog token…) and, for a try
keyed with one, taplog's own fallback key. Each value at least `MIN_SECRET_LEN` long (a
shorter one is no credential, and replacing it would corrupt the text) is replaced by
`[redacted]`

* as it is, where it stands as a whole token (never inside a longer word; a JSON escape
  before it, `\\n`, ends a word): in bodies and stream events (`scrub`), and in the
  headers of any name (names and values), the path and URL (each path segment and query
  parameter read percent-decoded, whatever its name), the error text and the model of a
  request's or answer's event (`scrub_fields`);
* in base64, standard or URL-safe, padded or not, standing alone (`base64(key)`), after a
  prefix (`Basic base64("user:key")`) or anywhere inside a longer encoded text;
* split across a stream's events: `SecretFinder` finds it in the text the pieces build,
  and `recorder.redaction_streams` cuts it out of every event that carries a piece.

Base64 and alignment. Base64 turns each 3 bytes into 4 characters, so how a key looks
encoded depends on its offset in the encoded bytes modulo 3. At offset 0 its first byte
opens a group; at 1 or 2, its first 2 or 1 bytes share a group with the bytes before it;
likewise its last 1 or 2 bytes may share one with the bytes after it. For each of the
three alignments, the key's bytes that fill whole groups by themselves encode to one fixed
text whatever surrounds them: its core (6 bytes or more of an 8-byte key, so 8 characters
or more). The three cores, in both alphabets, are what is searched for, anywhere (an
encoded text has no token edges); a core found is widened over the group before it and
the group after it where the key has bytes there (padding included), never past a
character that is not base64 nor into a JSON escape, so no bit of the key is left. Alone
or embedded, padded or not, only those edge groups differ: the same six texts catch every
case, where searching for every encoding of every prefix would take dozens. Not searched
for: other encodings (hex, base64 wrapped over lines, JSON's `\\/`).

Cost: the forms are computed once per set of secrets (`known`, cached: a client's calls
repeat theirs), and each is looked for with `bytes.find` (memchr-fast); a secret that holds
another as a token (`Bearer KEY` and `KEY`) is looked for through the shorter one only.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from typing import Any
from urllib.parse import unquote, unquote_plus

from taplog.recorder.redaction import each_string
from taplog.recorder.secrets import (
    MIN_SECRET_LEN,
    REDACTED,
    WORD_CHARS,
    Span,
    merged,
    redact_shapes,
    replaced,
    shape_spans,
)

Secrets = tuple[bytes, ...]
_BASE64 = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_")
_PADDED = _BASE64 | {ord("=")}
_URLSAFE = bytes.maketrans(b"+/", b"-_")
_GROUP = 4  # characters of one base64 group
_BACKSLASH = ord("\\")
_ESCAPE_LETTERS = frozenset(b"bfnrt")
_HEX = frozenset(b"0123456789abcdefABCDEF")


@dataclass(frozen=True, slots=True)
class _Encoded:
    """A key's core in base64 at one alignment, and whether the key has bytes in the group
    before it and after it (then widened over them)."""

    core: bytes
    before: bool
    after: bool


@dataclass(frozen=True, slots=True)
class Known:
    """What to look for: the secrets as they are (whole tokens) and their base64 cores."""

    plain: tuple[bytes, ...]
    encoded: tuple[_Encoded, ...]

    def __bool__(self) -> bool:
        return bool(self.plain)

    def appears(self, raw: bytes) -> bool:
        """Whether any form is in `raw` at all: one `find` each, for a first look."""
        return any(s in raw for s in self.plain) or any(e.core in raw for e in self.encoded)

    def spans(self, raw: bytes) -> list[Span]:
        """Where the secrets are in `raw`, in any form: in order, apart."""
        found: list[Span] = []
        for secret in self.plain:
            if secret in raw:
                found += _whole_token_spans(raw, secret)
        for form in self.encoded:
            if form.core in raw:
                found += (_widened(raw, at, form) for at in _every(raw, form.core))
        return merged(found)


@lru_cache(maxsize=256)
def known(secrets: Secrets) -> Known:
    """The forms of `secrets` to look for, computed once per set (a client's calls repeat
    theirs); bounded, as clients choose their keys."""
    plain: list[bytes] = []
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len):
        if not any(next(_whole_token_spans(secret, shorter), None) for shorter in plain):
            plain.append(secret)
    encoded = dict.fromkeys(form for secret in plain for form in _encodings(secret))
    return Known(tuple(plain), tuple(encoded))


def _encodings(secret: bytes) -> Iterator[_Encoded]:
    """The secret's core at each alignment (it starts `skip` bytes into the secret: those
    share a group with what precedes), in the standard and URL-safe alphabets."""
    for skip in range(3):
        whole = (len(secret) - skip) // 3 * 3
        core = base64.b64encode(secret[skip : skip + whole])
        after = skip + whole < len(secret)
        for spelling in dict.fromkeys((core, core.translate(_URLSAFE))):
            yield _Encoded(spelling, skip > 0, after)


def scrub(raw: bytes, secrets: Secrets) -> bytes:
    """`raw` (a body, a stream event) with every secret in it, in any form, and every
    credential-shaped token replaced by `[redacted]`; `raw` itself when there is none."""
    found = known(secrets)
    if found:
        raw = replaced(raw, found.spans(raw))
    return redact_shapes(raw)


def scrub_text(text: str, secrets: Secrets) -> str:
    """`text` with every secret in it, in any form, replaced (by value only)."""
    return _text(text, known(secrets))


def scrub_fields(event: dict[str, Any], secrets: Secrets) -> None:
    """By value, in place, what a request's or answer's event holds beside its body: its
    headers whatever their names, its path and URL, its error text and model."""
    found = known(secrets)
    if not found:
        return
    headers = event.get("headers")
    if headers and found.appears(_bytes("\n".join(chain(headers, headers.values())))):
        event["headers"] = {
            name: _text(value, found)
            for name, value in headers.items()
            if not found.spans(_bytes(name))  # a key as a header's name: left out
        }
    for name in ("path", "upstream_url"):
        if isinstance(event.get(name), str):
            event[name] = _url(event[name], found)
    for name in ("error", "model"):
        if isinstance(event.get(name), str):
            event[name] = _text(event[name], found)


def _text(text: str, found: Known) -> str:
    raw = _bytes(text)
    spans = found.spans(raw) if found else ()
    return replaced(raw, spans).decode("utf-8", "surrogatepass") if spans else text


def _url(target: str, found: Known) -> str:
    """A path or URL with each segment and query parameter holding a secret (read
    percent-decoded) redacted whole, as `redact_url` does a credential-named one."""
    if not (found.appears(_bytes(target)) or found.appears(_bytes(unquote(target)))):
        return target
    base, mark, query = target.partition("?")
    base = "/".join(REDACTED if _holds(found, segment) else segment for segment in base.split("/"))
    pairs = []
    for pair in query.split("&") if query else ():
        name, equals, value = pair.partition("=")
        if _holds(found, name):
            pair = REDACTED
        elif equals and _holds(found, value):
            pair = f"{name}={REDACTED}"
        pairs.append(pair)
    return base + mark + "&".join(pairs)


def _holds(found: Known, part: str) -> bool:
    """Whether a part of a URL holds a secret, as it is or percent-decoded (`+` as a
    space, or as the `+` of standard base64)."""
    return any(found.spans(_bytes(text)) for text in {part, unquote(part), unquote_plus(part)})


class SecretFinder:
    """The by-value and by-shape nets as `recorder.redaction_streams` asks a finder to be:
    a key a stream sends in pieces, each harmless alone, is found in the text the pieces
    build, then cut out of every event that carries one."""

    marker = REDACTED  # each finding's: `spans` gives the finder itself as its rule

    def __init__(self, secrets: Secrets) -> None:
        self.secrets = secrets
        self.known = known(secrets)

    def spans(self, text: str) -> list[tuple[int, int, SecretFinder]]:
        """Where secrets and credential shapes are in `text`, in characters."""
        raw = _bytes(text)
        found = merged([*self.known.spans(raw), *shape_spans(raw)])
        if not found or len(raw) == len(text):  # ASCII: bytes are characters
            return [(start, end, self) for start, end in found]
        chars = [len(raw[:at].decode("utf-8", "surrogatepass")) for span in found for at in span]
        return [(chars[i], chars[i + 1], self) for i in range(0, len(chars), 2)]

    def may_find(self, raw: bytes) -> bool:
        return scrub(raw, self.secrets) is not raw

    def text(self, text: str) -> str:
        raw = _bytes(text)
        clean = scrub(raw, self.secrets)
        return text if clean is raw else clean.decode("utf-8", "surrogatepass")

    def value(self, value: Any) -> Any:
        return each_string(value, self.text)


def _bytes(text: str) -> bytes:
    """A text as bytes, whatever it holds (a header's undecodable bytes, kept escaped)."""
    return text.encode("utf-8", "surrogatepass")


def _every(raw: bytes, part: bytes) -> Iterator[int]:
    at = raw.find(part)
    while at >= 0:
        yield at
        at = raw.find(part, at + len(part))


def _widened(raw: bytes, at: int, form: _Encoded) -> Span:
    """A core's span, with the groups around it that hold bits of the key."""
    start, end = at, at + len(form.core)
    while (
        form.before
        and at - start < _GROUP
        and start > 0
        and raw[start - 1] in _BASE64
        and not _after_escape(raw, start)
    ):
        start -= 1
    limit = end + _GROUP
    while form.after and end < min(limit, len(raw)) and raw[end] in _PADDED:
        end += 1
    return start, end


def _whole_token_spans(raw: bytes, secret: bytes) -> Iterator[Span]:
    """Where `secret` stands in `raw` as a whole token, not inside a longer word."""
    at = raw.find(secret)
    while at >= 0:
        end = at + len(secret)
        whole = _edge(raw, at, before=True) and _edge(raw, end, before=False)
        if whole:
            yield at, end
        at = raw.find(secret, end if whole else at + 1)


def _edge(raw: bytes, at: int, before: bool) -> bool:
    """Whether a token ends at `at`: the text ends, or a letter or digit is not on both
    sides of it (a JSON escape before it, `\\n`, ends a word too)."""
    inside, beside = (at, at - 1) if before else (at - 1, at)
    if not 0 <= beside < len(raw) or raw[inside] not in WORD_CHARS:
        return True
    return raw[beside] not in WORD_CHARS or (before and _after_escape(raw, at))


def _after_escape(raw: bytes, at: int) -> bool:
    """Whether the bytes before `at` end a JSON escape (`\\n`, `\\u00e9`), not text."""
    if at >= 2 and raw[at - 2] == _BACKSLASH and raw[at - 1] in _ESCAPE_LETTERS:
        start = at - 2
    elif at >= 6 and raw[at - 6 : at - 4] == b"\\u" and _HEX.issuperset(raw[at - 4 : at]):
        start = at - 6
    else:
        return False
    run = start
    while run > 0 and raw[run - 1] == _BACKSLASH:
        run -= 1
    return (start - run) % 2 == 0  # an even run before it: this backslash is not escaped
