"""`tool.pre` and `tool.post` events, with the anomalies taplog flags on them.

A `tool.pre` per call an answer asks for; a `tool.post` when the next request carries the
result (its `duration_ms` is the agent's tool time), at once for server-side tools, or
never. The flags: `orphan_result` (a result nobody asked for in this session: an imported
transcript), `unanswered` (calls still open when taplog's idle timer expired the session)
and `finish_mismatch` (an answer that asks for tools but says it simply stopped).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from bench.synth.catalog import MESSAGES
from bench.synth.common import MINUTE, SECOND
from bench.synth.transcript import Result
from taplog.recorder.vendors.tools import ToolCall

if TYPE_CHECKING:
    from bench.synth.session import Session


def tool_post(
    call_id: str,
    name: str | None,
    result: Any,
    is_error: bool | None,
    duration_ms: float | None,
    *,
    server: bool = False,
    flags: list[str],
) -> dict:
    return {
        "call_id": call_id,
        "name": name,
        "result": result,
        "is_error": is_error,
        "duration_ms": duration_ms,
        "server": server,
        "flags": flags,
    }


def post_results(s: Session, exchange: str, api: str, results: Iterable[Result]) -> None:
    """The `tool.post` of each result a request carries for the first time."""
    for result in results:
        orphan = result.asked_us is None
        duration = None if orphan else round((s.now - result.asked_us) / 1000, 3)
        is_error = result.is_error if api == MESSAGES else False
        flags = ["orphan_result"] if orphan else []
        s.emit(
            "tool.post",
            exchange,
            tool_post(result.call_id, result.name, result.content, is_error, duration, flags=flags),
        )
        if orphan:
            s.stats[("flag", "orphan_result")] += 1
        if result.is_error and api == MESSAGES:
            s.stats[("tool", "is_error")] += 1


def announce_calls(
    s: Session, exchange: str, calls: list[ToolCall], model: str, mismatch: bool
) -> None:
    """A `tool.pre` per call the answer asks for (as the recorder extracts them); server-side
    tools ran at the vendor, so their `tool.post` follows at once."""
    flags = ["finish_mismatch"] if mismatch else []
    for call in calls:
        pre = {
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
            "arguments_raw": call.arguments_raw,
            "arguments_error": call.arguments_error,
            "model": model,
            "server": call.server,
            "flags": [] if call.server else flags,
        }
        s.emit("tool.pre", exchange, pre)
        if mismatch and not call.server:
            s.stats[("flag", "finish_mismatch")] += 1
        if call.server:
            post = tool_post(
                call.call_id, call.name, call.result, call.is_error, None, server=True, flags=[]
            )
            s.emit("tool.post", exchange, post)
            s.stats[("tool", "server")] += 1


def expire(s: Session, exchange: str) -> None:
    """The calls still open when the session went idle: `unanswered` (taplog's idle timer)."""
    s.advance(60 * MINUTE + s.rng.randint(1, 30) * SECOND)
    for call in s.pending_calls:
        post = tool_post(call.call_id, call.name, None, None, None, flags=["unanswered"])
        s.emit("tool.post", exchange, post)
        s.stats[("flag", "unanswered")] += 1
