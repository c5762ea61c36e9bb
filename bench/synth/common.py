"""Helpers every part of the generator shares: time units, the seeded draws, JSON and SSE.

Everything random goes through a `Draw` (a `random.Random` with a few named draws), so a
session's bytes depend only on its seed and on the order of the draws: a draw added,
dropped or moved anywhere changes every byte after it.
"""

from __future__ import annotations

import base64
import random
from typing import Any

import orjson

SECOND = 1_000_000  # timestamps are integer microseconds since the epoch
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class Draw(random.Random):
    """A seeded generator with the draws ids, bodies and latencies are made of."""

    def b62(self, n: int) -> str:
        return "".join(self.choices(B62, k=n))

    def hexa(self, n: int) -> str:
        return f"{self.getrandbits(4 * n):0{n}x}"

    def b64(self, n_bytes: int) -> str:
        return base64.b64encode(self.randbytes(n_bytes)).decode()

    def lognorm_ms(self, median_ms: float, sigma: float, cap_ms: float) -> float:
        return min(cap_ms, median_ms * self.lognormvariate(0, sigma))

    def weighted(self, pairs: tuple[tuple[Any, float], ...]) -> Any:
        return self.choices([p[0] for p in pairs], weights=[p[1] for p in pairs])[0]


# ----------------------------------------------------------------------- JSON bodies


def size(content: Any) -> int:
    """Characters a text or JSON value takes in a transcript."""
    if isinstance(content, str):
        return len(content)
    return len(orjson.dumps(content))


def as_text(content: Any) -> str:
    """A tool result as the APIs that want a string carry it."""
    return content if isinstance(content, str) else orjson.dumps(content).decode()


def dumps_as_sent(body: Any, provider: str, local: bool = False) -> bytes:
    """The bytes a vendor sends: OpenAI pretty-prints its JSON, the others do not."""
    if provider == "openai" and not local:
        return orjson.dumps(body, option=orjson.OPT_INDENT_2)
    return orjson.dumps(body)


def body_fields(body: Any, raw: bytes) -> dict[str, Any]:
    """`body`, plus `body_raw` when compact JSON would not give the bytes back (bodies.py)."""
    if orjson.dumps(body) == raw:
        return {"body": body}
    return {"body": body, "body_raw": raw.decode()}


# ----------------------------------------------------------------------- SSE streams


def sse_data(data: Any) -> str:
    """One `data:` block (Chat Completions)."""
    return "data: " + orjson.dumps(data).decode() + "\n\n"


def sse_event(kind: str, data: Any) -> str:
    """One named `event:` block (Messages, Responses)."""
    return f"event: {kind}\ndata: " + orjson.dumps(data).decode() + "\n\n"


def pieces(text: str) -> list[str]:
    """A text as a stream delivers it: whole, or in two deltas when it is long."""
    n = 1 if len(text) <= 160 else 2
    step = -(-len(text) // n) or 1
    return [text[i : i + step] for i in range(0, len(text), step)] or [""]


def timed(raws: list[str], ttfb: float, latency: float) -> list[dict]:
    """The recorded `sse` list: each block with its arrival time, spread from ttfb to the end."""
    span = max(0.0, latency - ttfb)
    n = len(raws)
    times = [round(ttfb + span * i / max(1, n - 1), 3) for i in range(n)]
    return [{"t_ms": t, "raw": raw} for t, raw in zip(times, raws, strict=True)]
