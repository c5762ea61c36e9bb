"""Bodies in the log: readable JSON where possible, exact bytes always.

The invariant is that every byte sent to or received from a vendor can be
rebuilt from the log. A JSON body is stored parsed (so people and SQL can read
it) when orjson's compact form reproduces the bytes exactly, which is what the
official SDKs send; otherwise the exact text rides along in `body_raw`, and a
body that is not UTF-8 is stored as base64. JSON nested too deeply to sit
inside a log line (orjson writes at most 255 levels) is stored as text only.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson

UNPARSED = object()  # a body not parsed yet: `encode_body` parses it
# Nesting levels a log line may add around a body (event, stream entry, …).
HEADROOM = 16


def parse_json(raw: bytes) -> Any:
    """The parsed body, or None when it is empty or not JSON."""
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def encode_body(raw: bytes, parsed: Any = UNPARSED) -> dict[str, Any]:
    """Log fields for a body: `body`, plus `body_raw` or `body_b64` when needed."""
    if not raw:
        return {"body": None}
    if parsed is UNPARSED:
        parsed = parse_json(raw)
    compact = _compact(parsed) if parsed is not None else None
    if compact is not None:
        if compact == raw:
            return {"body": parsed}
        return {"body": parsed, "body_raw": raw.decode("utf-8")}
    try:
        return {"body": None, "body_raw": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"body": None, "body_b64": base64.b64encode(raw).decode("ascii")}


def _compact(parsed: Any) -> bytes | None:
    """orjson's compact form of `parsed`; None when it is too deep for a log line."""
    wrapped = parsed
    for _ in range(HEADROOM):
        wrapped = [wrapped]
    try:
        return orjson.dumps(wrapped)[HEADROOM:-HEADROOM]
    except TypeError:  # orjson.JSONEncodeError: nested too deeply (or a huge integer)
        return None


def decode_body(fields: dict[str, Any]) -> bytes:
    """The exact bytes of a body stored by `encode_body`."""
    if fields.get("body_b64") is not None:
        return base64.b64decode(fields["body_b64"])
    if fields.get("body_raw") is not None:
        return fields["body_raw"].encode("utf-8")
    if fields.get("body") is None:
        return b""
    return orjson.dumps(fields["body"])
