"""Keep secrets out of the log: headers dropped, keys fingerprinted, bodies scrubbed.

A fingerprint lets a user tell calls made with different keys apart without
the log ever holding a key: BLAKE2b with a fixed personalisation, truncated,
so it cannot be reversed for real (high-entropy) API keys.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

_SECRET_HEADER = re.compile(
    r"(^|-)authorization$|(^|-)api[-_]?key$|cookie$|(^|-)(token|secret|password|key)$",
    re.IGNORECASE,
)
_SECRET_QUERY_PARAM = re.compile(r"(?i)(^|&)((?:api[-_]?)?key|token|secret)=[^&]*")
_BEARER = re.compile(r"(?i)^bearer\s+")
_REDACTED = b"[redacted]"
_MIN_SECRET_LEN = 8


def is_secret_header(name: str) -> bool:
    """Authorization, API-key, cookie and token headers, by name."""
    return _SECRET_HEADER.search(name) is not None


@lru_cache(maxsize=1024)
def _logged_name(name: str) -> str | None:
    """A header's name as logged (lower-cased), or None for a secret one.

    Cached because every call repeats the same few dozen names; bounded because
    clients choose them.
    """
    return None if is_secret_header(name) else name.lower()


def safe_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Headers fit for the log: lower-cased names, secrets left out."""
    return {logged: v for k, v in headers if (logged := _logged_name(k)) is not None}


def redact_url(target: str) -> str:
    """A URL or path with the values of key/token query parameters removed."""
    base, mark, query = target.partition("?")
    redacted = _SECRET_QUERY_PARAM.sub(lambda m: f"{m.group(1)}{m.group(2)}=[redacted]", query)
    return base + mark + redacted


def api_key(headers: Mapping[str, str]) -> str | None:
    """The vendor key a client sent, whichever auth style it used."""
    for name in ("x-api-key", "api-key", "authorization"):
        value = headers.get(name)
        if value:
            return _BEARER.sub("", value).strip() or None
    return None


def fingerprint(key: str | None) -> str | None:
    """A short, stable, irreversible name for a key: `key:1a2b3c4d5e6f7a8b`."""
    if not key:
        return None
    digest = hashlib.blake2b(key.encode(), digest_size=8, person=b"taplog-key").hexdigest()
    return f"key:{digest}"


def secret_values(headers: Mapping[str, str]) -> tuple[bytes, ...]:
    """The secret header values of a request, to scrub wherever they echo back."""
    values = set()
    for name, value in headers.items():
        if _logged_name(name) is None:  # a secret header
            for candidate in (value, _BEARER.sub("", value)):
                if len(candidate) >= _MIN_SECRET_LEN:
                    values.add(candidate.encode())
    return tuple(sorted(values, key=len, reverse=True))


def scrub(raw: bytes, secrets: Iterable[bytes]) -> bytes:
    """`raw` with every occurrence of a secret replaced by `[redacted]`."""
    for secret in secrets:
        if secret in raw:
            raw = raw.replace(secret, _REDACTED)
    return raw
